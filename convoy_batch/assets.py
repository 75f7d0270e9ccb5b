"""The Dagster layer's assets and jobs: a thin shell over :func:`convoy_batch.runner.run_tick`.

- ``release`` (one dynamic partition per Release): materializing a partition by hand (the
  UI's "Materialize", ``dagster asset materialize --partition NAME``, a backfill) is a
  forced sync of that Release (SPEC 9); a run that a schedule or sensor launched is not.
- ``convoy_tick`` (job, one op): one run reconciles many Releases (the due ones, every
  one, or the named ones) and records a materialization of ``release`` for each Release
  whose status changed (and was committed), with the outcome, the previous and new state
  and the commit as metadata: a Release's events read like ``git log --
  status/<name>.yaml``. Releases nothing happened to get one summary line, no event.

Configuration is the ``convoy`` resource (:class:`ConvoyResource`). No
``from __future__ import annotations`` here: Dagster reads the context annotations.
Does I/O through the library.
"""

import os
from collections.abc import Mapping, Sequence, Set
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg

from convoy_batch.reconcile import Handled
from convoy_batch.runner import TickReport, run_tick
from convoy_batch.tick import default_state_dir
from convoy_batch.timefmt import parse_time

PARTITIONS = "releases"
RELEASES = dg.DynamicPartitionsDefinition(name=PARTITIONS)
RELEASE_KEY = dg.AssetKey("release")
POOL = "convoy"
"""Dagster concurrency pool of every op that reconciles: limit 1 in dagster.yaml, so no
two runs reconcile or commit at once (the library's file locks hold without Dagster)."""
AUTOMATION_TAGS = ("dagster/schedule_name", "dagster/sensor_name")


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
    ) -> TickReport:
        return run_tick(
            self.repo_path(),
            self.state_dir(),
            self.clock(),
            names,
            all_releases=all_releases,
            forced=forced,
        )


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
    outcome = handled.outcome
    return {
        "state": _state(handled.status),
        "previousState": _state(handled.prior),
        "reason": outcome.reason.value,
        "message": outcome.message,
        "renderRef": outcome.render.ref if outcome.render else None,
        "revision": outcome.render.revision if outcome.render else None,
        "applied": outcome.applied,
        "commit": handled.commit,
    }


def _one(report: TickReport, name: str) -> Handled:
    for handled in report.handled:
        if handled.name == name:
            return handled
    raise dg.Failure(f"{name}: not reconciled: {report.skipped.get(name, 'unknown reason')}")


def _log_outcome(log: Any, handled: Handled) -> None:
    line = f"{handled.name}: {handled.outcome.reason}: {handled.outcome.message}"
    if handled.outcome.is_error:
        log.error(line)
    else:
        log.info(line)


@dg.asset(
    key=RELEASE_KEY,
    partitions_def=RELEASES,
    pool=POOL,
    kinds={"git"},
    description="One Release of the GitOps repository; materializing it by hand forces a sync.",
)
def release(context: dg.AssetExecutionContext, convoy: ConvoyResource) -> dg.MaterializeResult:  # type: ignore[type-arg]
    name = context.partition_key
    forced = frozenset({name}) if is_forced(context.run.tags) else frozenset()
    handled = _one(convoy.tick([name], forced=forced), name)
    _log_outcome(context.log, handled)
    return dg.MaterializeResult(metadata={**outcome_metadata(handled), "forced": bool(forced)})


class TickConfig(dg.Config):
    """Which Releases one tick reconciles: the due ones (default), every one, or names."""

    names: list[str] = []  # noqa: RUF012 (Dagster config: copied per run)
    all_releases: bool = False


def ensure_partitions(instance: dg.DagsterInstance, names: Sequence[str]) -> None:
    """Partitions must exist before an event names them; the discovery sensor may lag."""
    have = set(instance.get_dynamic_partitions(PARTITIONS))
    missing = sorted(set(names) - have)
    if missing:
        instance.add_dynamic_partitions(PARTITIONS, missing)


def record(context: dg.OpExecutionContext, report: TickReport) -> None:
    """A materialization of ``release`` for each Release whose status changed; one line
    for those nothing happened to (an error is logged every time it is seen)."""
    changed = [h for h in report.handled if h.changed]
    ensure_partitions(context.instance, [h.name for h in changed])
    for handled in report.handled:
        if handled.changed or handled.outcome.is_error:
            _log_outcome(context.log, handled)
    for handled in changed:
        context.log_event(
            dg.AssetMaterialization(
                asset_key=RELEASE_KEY,
                partition=handled.name,
                metadata=outcome_metadata(handled),
            )
        )
    quiet = len(report.handled) - len(changed)
    if quiet or report.skipped:
        context.log.info(f"unchanged: {quiet} Release(s) reconciled, {len(report.skipped)} not due")
    if report.commit_error:
        context.log.error(report.commit_error)
    if report.push_warning:
        context.log.warning(report.push_warning)


@dg.op(pool=POOL)
def reconcile_tick(
    context: dg.OpExecutionContext, config: TickConfig, convoy: ConvoyResource
) -> None:
    """Observe, then reconcile the Releases the config selects, in this one run."""
    report = convoy.tick(config.names, all_releases=config.all_releases)
    record(context, report)


TICK_TAGS = {"convoy/tick": "true"}


@dg.job(name="convoy_tick", tags=TICK_TAGS, executor_def=dg.in_process_executor)
def tick_job() -> None:
    reconcile_tick()


def tick_run_config(names: Sequence[str] = (), *, all_releases: bool = False) -> dg.RunConfig:
    config = TickConfig(names=list(names), all_releases=all_releases)
    return dg.RunConfig(ops={"reconcile_tick": config})
