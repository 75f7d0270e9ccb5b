"""The Dagster layer's assets and jobs: a thin shell over
:func:`~convoy_batch.ticks.runner.run_tick`.

- ``release`` (one dynamic partition per Release): materializing a partition by hand (the
  UI's "Materialize", ``dg launch --assets release --partition NAME``, a backfill) is a
  forced sync of that Release (SPEC 9); a run that a schedule or sensor launched is not.
- ``convoy_tick`` (job, one op): one run reconciles many Releases (the due ones, every
  one, or the named ones) and records an event of ``release`` for each Release whose
  status changed (and was committed), with the outcome, the previous and new state and
  the commit as metadata: a Release's events read like ``git log --
  status/<name>.yaml``. The event is a materialization when the new status is a verdict
  (passed, failed, retired) and an observation while it is pending (Progressing,
  waiting): a partition shows its last verdict, "Missing" before the first
  (:func:`is_verdict`). Releases nothing happened to get one summary line, no event.
- ``release``'s asset check ``state`` (one result per partition): each event is followed
  by the Release's state at a glance (:mod:`convoy_batch.rollout.glance`): passed,
  failed (ERROR severity), or pending (a WARN result that judges no materialization, so
  Dagster counts the partition as neither passed nor failed; none before the first
  verdict, see :func:`state_evaluations`). Drift never changes the
  verdict; a status that records drift (Report mode) says so in the result's and the
  materialization's description (``...; drifted since <time>: <object> <paths>``) and in
  the ``drift`` metadata entry (``lastDriftCorrection`` for Correct mode's last one).
- A run in which a Release errored, rolled back or failed, or whose status commits were
  not written, fails once its events are recorded (``dagster.Failure``): run-failure
  sensors and alerts see it without reading metadata. So does a run that records a new
  status of a Release that is still rolled back, failed or in error.
- The Partitions tab and the Catalog colour a partition by Dagster's own partition
  status: a partition is failed (red) when the latest run that planned to materialize it
  failed without materializing it afterwards. A run that records a Release at a glance
  failed plans its partition after the materialization (:func:`mark_failed`), then
  fails: the partition reads failed until a later run materializes it. The failure is
  one line with no stack trace (:func:`quiet`).

Configuration is the ``convoy`` resource (:class:`ConvoyResource`). No
``from __future__ import annotations`` here: Dagster reads the context annotations.
Does I/O through the library.
"""

import os
import sys
import warnings
import weakref
from collections.abc import Iterator, Mapping, Sequence, Set
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg

from convoy_batch.engine.handler import Handled, describe
from convoy_batch.errors import ConvoyError, unexpected
from convoy_batch.rollout.glance import (
    Glance,
    alarm,
    correction_note,
    drift_note,
    glance,
    headline,
    summary_line,
    verification_note,
)
from convoy_batch.rollout.retire import RETIRED
from convoy_batch.ticks.location import default_state_dir
from convoy_batch.ticks.options import TickOptions, TickReport
from convoy_batch.ticks.runner import run_tick
from convoy_batch.ticks.shards import run_sharded
from convoy_batch.timefmt import parse_time

PARTITIONS = "releases"
RELEASES = dg.DynamicPartitionsDefinition(name=PARTITIONS)
RELEASE_KEY = dg.AssetKey("release")
POOL = "convoy"
"""Dagster concurrency pool of every op that reconciles: limit 1 in dagster.yaml, so no
two runs reconcile or commit at once (the library's file locks hold without Dagster)."""
AUTOMATION_TAGS = ("dagster/schedule_name", "dagster/sensor_name")
STATE_CHECK = "state"


def _state_check() -> dg.AssetCheckSpec:
    # A check with partitions is a preview in dagster 1.13 and warns when the spec is made,
    # on every load of the definitions: said once in the README's decisions instead.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=dg.PreviewWarning)
        return dg.AssetCheckSpec(
            STATE_CHECK,
            asset=RELEASE_KEY,
            partitions_def=RELEASES,
            description="The Release at a glance: passed when Succeeded or in sync, failed "
            "when RolledBack, Failed or in error, pending (a warning) while Progressing "
            "or waiting. A drifted Release's result says what drifted.",
        )


STATE_CHECK_SPEC = _state_check()


class ConvoyResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Where convoy-batch works. Empty ``state``: ``$CONVOY_STATE``, else ``<repo>/.convoy``."""

    repo: str
    state: str = ""
    now: str = ""
    """A fixed clock (RFC 3339, like ``--now``) for tests and replays; empty: the clock."""

    def repo_path(self) -> Path:
        return Path(self.repo).resolve()

    def state_dir(self) -> Path:
        return Path(self.state) if self.state else default_state_dir(self.repo_path())

    def clock(self) -> datetime:
        """Read once per run or evaluation and passed down (never twice in one tick)."""
        if self.now:
            return parse_time(self.now)
        return datetime.now(UTC).replace(microsecond=0)

    def tick(
        self,
        names: Sequence[str] = (),
        *,
        all_releases: bool = False,
        forced: Set[str] = frozenset(),
        jobs: int = 1,
    ) -> TickReport:
        """One tick; with ``jobs`` over 1, sharded by Cluster over that many worker
        processes (:func:`convoy_batch.ticks.shards.run_sharded`, as ``reconcile --jobs``)."""
        repo, state, now = self.repo_path(), self.state_dir(), self.clock()
        try:
            if jobs > 1:
                options = TickOptions(tuple(names), all_releases, frozenset(forced))
                return run_sharded(repo, state, now, jobs, options)
            return run_tick(repo, state, now, names, all_releases=all_releases, forced=forced)
        except (ConvoyError, OSError):
            raise  # one line of their own, as the CLI prints them
        except Exception as exc:  # a bug: one line, never a traceback or a secret
            raise quiet(dg.Failure(unexpected(exc))) from None


def convoy_resource(repo: str | None = None, state: str | None = None) -> ConvoyResource:
    """The resource from arguments, else from ``$CONVOY_REPO`` / ``$CONVOY_STATE``
    (resolved by Dagster where the run or sensor runs)."""
    if state is None and os.environ.get("CONVOY_STATE"):
        return ConvoyResource(
            repo=repo or dg.EnvVar("CONVOY_REPO"), state=dg.EnvVar("CONVOY_STATE")
        )
    return ConvoyResource(repo=repo or dg.EnvVar("CONVOY_REPO"), state=state or "")


def is_forced(tags: Mapping[str, str]) -> bool:
    """A run that no schedule or sensor launched is a person asking: a forced sync."""
    return not any(tag in tags for tag in AUTOMATION_TAGS)


def _state(status: Any) -> str | None:
    return status.rollout.state.value if status.rollout else None


def outcome_metadata(handled: Handled) -> dict[str, Any]:
    """The outcome, the previous and new state and the commit; with ``drift`` (Report
    mode: what drifted, since when), ``lastDriftCorrection`` (Correct mode) and
    ``verification`` (its phase and why) when the status records them, as text: paths,
    never a value."""
    outcome = handled.outcome
    retired = outcome.reason in RETIRED  # its status file removed: Deleted or Orphaned
    drifts = {"drift": drift_note(handled.status)}
    drifts["lastDriftCorrection"] = correction_note(handled.status)
    drifts["verification"] = verification_note(handled.status)
    return {
        "state": outcome.reason.value if retired else _state(handled.status),
        "previousState": _state(handled.prior),
        "reason": outcome.reason.value,
        "message": outcome.message,
        "renderRef": outcome.render.ref if outcome.render else None,
        "revision": outcome.render.revision if outcome.render else None,
        "applied": outcome.applied,
        "commit": handled.commit,
        **{key: note for key, note in drifts.items() if note is not None},
    }


def _one(report: TickReport, name: str) -> Handled:
    for handled in report.handled:
        if handled.name == name:
            return handled
    raise quiet(dg.Failure(f"{name}: not reconciled: {report.skipped.get(name, 'unknown reason')}"))


def _log_outcome(log: Any, handled: Handled) -> None:
    line = f"{handled.name}: {handled.outcome.reason}: {handled.outcome.message}"
    if handled.outcome.is_error:
        log.error(line)
    else:
        log.info(line)


_LIMITS: list[int | None] = []
"""The ``sys.tracebacklimit`` values :func:`quiet` replaced, oldest first (None: unset);
:func:`restore_limit` puts the oldest back."""


def quiet(failure: dg.Failure) -> dg.Failure:
    """``failure``, to be recorded without a stack. Dagster stores a step failure with the
    frames between its own ``except`` and this raise, its machinery, which the UI prints
    under the one-line message and which read as a crash; Python formats no frame while
    ``sys.tracebacklimit`` is 0. The limit stays 0 from this raise until the step's
    failure hook (:func:`restore_tracebacks`), which Dagster runs once the failure is
    recorded, and no longer than the next reconciling op's start (a run that re-raises
    runs no hook)."""
    _LIMITS.append(getattr(sys, "tracebacklimit", None))
    sys.tracebacklimit = 0
    return failure


def restore_limit() -> None:
    """Put back the traceback limit :func:`quiet` replaced, if it replaced one."""
    if not _LIMITS:
        return
    original = _LIMITS[0]
    _LIMITS.clear()
    if original is None:
        del sys.tracebacklimit
    else:
        sys.tracebacklimit = original


@dg.failure_hook(name="restore_tracebacks")
def restore_tracebacks(context: dg.HookContext) -> None:
    """After a failed step of ``release`` or ``convoy_tick``: :func:`restore_limit`."""
    restore_limit()


@dg.multi_asset(
    name="release",
    specs=[
        dg.AssetSpec(
            RELEASE_KEY,
            kinds={"git"},
            description="One Release of the GitOps repository; materializing it by hand "
            "forces a sync.",
        )
    ],
    check_specs=[STATE_CHECK_SPEC],
    hooks={restore_tracebacks},
    # The check's result is logged as an event after the materialization (see
    # ``state_evaluations``), not returned: subsettable outputs are optional.
    can_subset=True,
    partitions_def=RELEASES,
    pool=POOL,
)
def release(
    context: dg.AssetExecutionContext,
    convoy: ConvoyResource,
) -> Iterator[dg.MaterializeResult]:  # type: ignore[type-arg]
    restore_limit()
    name = context.partition_key
    forced = frozenset({name}) if is_forced(context.run.tags) else frozenset()
    report = convoy.tick([name], forced=forced)
    handled = _one(report, name)
    _log_outcome(context.log, handled)
    metadata = {**outcome_metadata(handled), "forced": bool(forced)}
    if is_verdict(handled):
        yield dg.MaterializeResult(asset_key=RELEASE_KEY, metadata=metadata)
    else:  # pending: the run materializes nothing (its output is optional: can_subset)
        context.log_event(status_event(handled, {"forced": bool(forced)}))
    log_checks(context.op_execution_context, [handled])
    mark_failed(context.op_execution_context, [handled])
    if handled.changed:
        context.instance.add_run_tags(context.run.run_id, CHANGED_TAGS)
    fail_on_alarms(report)


class TickConfig(dg.Config):
    """Which Releases one tick reconciles: the due ones (default), every one, or names."""

    names: list[str] = []  # noqa: RUF012 (Dagster config: copied per run)
    all_releases: bool = False
    jobs: int = 1
    """Worker processes: over 1, the tick is sharded by Cluster, cluster wave by cluster
    wave (``reconcile --jobs``)."""


def ensure_partitions(instance: dg.DagsterInstance, names: Sequence[str]) -> None:
    """Partitions must exist before an event names them; the discovery sensor may lag."""
    if not names:
        return
    have = set(instance.get_dynamic_partitions(PARTITIONS))
    missing = sorted(set(names) - have)
    if missing:
        instance.add_dynamic_partitions(PARTITIONS, missing)


HELD_CONNECTION = {"statement_timeout": 60_000, "pool_recycle": 3600, "max_overflow": 4}
"""How a run that records many events holds its database connection (milliseconds, seconds,
connections): what ``dagster-webserver`` asks of the same storage for its own long life."""


_HOLDING: "weakref.WeakSet[dg.DagsterInstance]" = weakref.WeakSet()
"""Instances already told to hold their connection (key: the instance object; each is
told once, since telling it again replaces its engine and strands the open connection)."""


def hold_connection(instance: dg.DagsterInstance) -> None:
    """Store this run's events over one open connection. Dagster's Postgres storage opens a
    connection for every event unless told it serves a long-lived process (a connection
    costs about 10 ms, an insert on an open one 0.1 ms); a run that records a thousand
    events is one. Dagster's sqlite storage has no pool: unchanged."""
    if instance not in _HOLDING:
        instance.optimize_for_webserver(**HELD_CONNECTION)
        _HOLDING.add(instance)


def record(context: dg.OpExecutionContext, report: TickReport) -> None:
    """A materialization of ``release`` (its description the one line a person reads) and
    a ``state`` check result for each Release whose status changed; one summary line for
    the tick (an error is also logged on its own every time it is seen)."""
    changed = [h for h in report.handled if h.changed]
    if changed:
        hold_connection(context.instance)
    ensure_partitions(context.instance, [h.name for h in changed])
    for handled in report.handled:
        if handled.outcome.is_error:
            _log_outcome(context.log, handled)
    for handled in changed:
        context.log_event(status_event(handled))
    log_checks(context, changed)
    mark_failed(context, changed)
    for handled in changed:  # retired: its partition goes, its events stay in the log
        if handled.outcome.reason in RETIRED:
            context.instance.delete_dynamic_partition(PARTITIONS, handled.name)
    context.log.info(summary(report, changed))
    if changed:  # the runs that changed something, one filter away in the runs list
        context.instance.add_run_tags(context.run_id, CHANGED_TAGS)
    if report.commit_error:
        context.log.error(report.commit_error)
    if report.push_warning:
        context.log.warning(report.push_warning)


def is_verdict(handled: Handled) -> bool:
    """Whether the new status is a verdict, passed or failed (or the Release's retirement),
    recorded as a materialization of its partition; a pending one (Progressing, waiting)
    is an observation, so the partition keeps the colour of its last verdict (none yet:
    "Missing", grey)."""
    return handled.outcome.reason in RETIRED or glance(handled.status) is not Glance.PENDING


def status_event(
    handled: Handled, extra: Mapping[str, Any] | None = None
) -> dg.AssetMaterialization | dg.AssetObservation:
    """The event of a Release's new status: a materialization when it is a verdict
    (:func:`is_verdict`), else an observation; the description, also the console's line
    of the event, names the Release."""
    description = (
        describe(handled)
        if handled.outcome.reason in RETIRED
        else f"{handled.name}: {summary_line(handled.status)}"
    )
    event = dg.AssetMaterialization if is_verdict(handled) else dg.AssetObservation
    return event(
        asset_key=RELEASE_KEY,
        partition=handled.name,
        metadata={**outcome_metadata(handled), **(extra or {})},
        description=description,
    )


def summary(report: TickReport, changed: Sequence[Handled]) -> str:
    """The tick in one line: ``changed: api, web; unchanged: 1 Release(s) reconciled, 0
    not due`` (each changed Release's own line is its materialization's description)."""
    quiet = len(report.handled) - len(changed)
    line = f"unchanged: {quiet} Release(s) reconciled, {len(report.skipped)} not due"
    if changed:
        line = f"changed: {', '.join(h.name for h in changed)}; {line}"
    return line


def log_checks(context: dg.OpExecutionContext, changed: Sequence[Handled]) -> None:
    """Log the ``state`` check results of ``changed`` (after their materializations)."""
    for evaluation in state_evaluations(context.instance, changed):
        # log_event takes a check result (its type hint lags behind its body in 1.13).
        context.log_event(evaluation)  # type: ignore[arg-type]


def state_evaluations(
    instance: dg.DagsterInstance, changed: Sequence[Handled]
) -> list[dg.AssetCheckEvaluation]:
    """The ``state`` check result of each Release in ``changed``, to log after its status
    event. Passed and failed judge the materialization just recorded (read back in one
    query: the latest of each partition, which no other run writes meanwhile: pool
    ``convoy``). Pending judges none: Dagster counts a result only when it targets the
    partition's latest materialization, so the partition's check reads as not evaluated,
    neither passed nor failed, while its latest result (the warning) says why. A Release
    pending with no verdict yet gets no result: with no materialization to miss, Dagster
    would count the warning as a failure (its observation says why)."""
    judged = [h.name for h in changed if glance(h.status) is not Glance.PENDING]
    targets: dict[str, Any] = {}
    if judged:
        found = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=RELEASE_KEY, asset_partitions=judged),
            limit=len(judged),
        )
        for rec in found.records:
            if rec.partition_key is not None and rec.partition_key not in targets:
                targets[rec.partition_key] = judged_materialization(rec)
    verdicts: set[str] = set()
    if len(judged) < len(changed):
        verdicts = set(instance.get_materialized_partitions(RELEASE_KEY))
    return [
        _evaluation(h, targets.get(h.name))
        for h in changed
        if h.name in targets or h.name in verdicts
    ]


def judged_materialization(record: dg.EventLogRecord) -> Any:
    """What a check result logged from an op names as the materialization it judges
    (Dagster counts a partition's check only when its result targets the partition's
    latest materialization). The project's one import of Dagster's private API: dagster
    1.13 does not export the type; ``tests/dagster/test_dagster_definitions.py`` fails when
    it moves or changes."""
    from dagster._core.definitions.asset_checks.asset_check_evaluation import (
        AssetCheckEvaluationTargetMaterializationData,
    )

    return AssetCheckEvaluationTargetMaterializationData(
        run_id=record.run_id, storage_id=record.storage_id, timestamp=record.timestamp
    )


def _evaluation(handled: Handled, target: Any) -> dg.AssetCheckEvaluation:
    verdict = glance(handled.status)
    pending = verdict is Glance.PENDING
    return dg.AssetCheckEvaluation(
        asset_key=RELEASE_KEY,
        check_name=STATE_CHECK,
        partition=handled.name,
        passed=verdict is Glance.PASSED,
        severity=dg.AssetCheckSeverity.WARN if pending else dg.AssetCheckSeverity.ERROR,
        description=summary_line(handled.status),
        metadata={"glance": verdict.value, **outcome_metadata(handled)},
        target_materialization_data=None if pending else target,
    )


def mark_failed(context: dg.OpExecutionContext, changed: Sequence[Handled]) -> None:
    """Plan, in this run and after its materialization, the partition of each Release in
    ``changed`` that is at a glance failed: with the run failing (:func:`fail_on_alarms`),
    Dagster counts the partition failed (see module doc). The planned event is Dagster's
    private API (1.13 exports no way for an op to say an asset partition failed);
    ``tests/dagster/test_dagster_ui.py`` reads the partition statuses it gives."""
    failed = [h.name for h in changed if glance(h.status) is Glance.FAILED]
    if not failed:
        return
    from dagster._core.events import AssetMaterializationPlannedData, DagsterEvent

    step = str(context.op_handle)  # the step key of an op outside a graph
    for name in failed:
        planned = AssetMaterializationPlannedData(RELEASE_KEY, partition=name)
        event = DagsterEvent.build_asset_materialization_planned_event(
            context.job_name, step, planned
        )
        context.instance.report_dagster_event(event, run_id=context.run_id)


def fail_on_alarms(report: TickReport) -> None:
    """Fail the step (and so the run) when a Release errored, rolled back or failed in
    it, a new status of a Release still rolled back, failed or in error was recorded, or
    the status commits were not written; called once every event is recorded."""
    alarms = {
        h.name: why
        for h in report.handled
        if (why := alarm(h.prior, h.status, errored=h.outcome.is_error))
    }
    alarms.update(
        (h.name, headline(h.status))
        for h in report.handled
        if h.changed and h.name not in alarms and glance(h.status) is Glance.FAILED
    )
    lines = [f"{name}: {why}" for name, why in alarms.items()]
    if report.commit_error:
        lines.append(report.commit_error)
    if lines:
        failure = dg.Failure(description="; ".join(lines), metadata={"releases": sorted(alarms)})
        raise quiet(failure)


@dg.op(pool=POOL)
def reconcile_tick(
    context: dg.OpExecutionContext, config: TickConfig, convoy: ConvoyResource
) -> None:
    """Observe, then reconcile the Releases the config selects, in this one run; the run
    fails (after recording) when a Release errored or rolled back in it."""
    restore_limit()
    if config.jobs < 1:
        raise quiet(dg.Failure(f"jobs must be at least 1, not {config.jobs}"))
    report = convoy.tick(config.names, all_releases=config.all_releases, jobs=config.jobs)
    record(context, report)
    fail_on_alarms(report)


TICK_TAGS = {"convoy/tick": "true"}
CHANGED_TAGS = {"convoy/changed": "true"}
"""Added to a tick run that recorded a status change: the runs list filtered by it
(``tag:convoy/changed=true``) shows the runs at the rate of change, not one per tick."""


@dg.job(
    name="convoy_tick",
    tags=TICK_TAGS,
    executor_def=dg.in_process_executor,
    hooks={restore_tracebacks},
)
def tick_job() -> None:
    reconcile_tick()


def tick_run_config(
    names: Sequence[str] = (), *, all_releases: bool = False, jobs: int = 1
) -> dg.RunConfig:
    config = TickConfig(names=list(names), all_releases=all_releases, jobs=jobs)
    return dg.RunConfig(ops={"reconcile_tick": config})
