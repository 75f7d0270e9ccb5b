"""The Dagster definitions (``[tool.dagster] module_name``, and ``dg``'s default target of the
project ``[tool.dg]`` names): schedules and sensors over :mod:`convoy_batch.assets` and the
job of :mod:`convoy_batch.defs.sharded`, built by :func:`build_definitions` when Dagster
loads them.

- ``convoy_tick`` schedule (``$CONVOY_TICK_CRON``, default every minute): one run that
  observes and reconciles every due Release (SPEC 13); ``$CONVOY_TICK_JOBS`` worker
  processes, sharded by Cluster (default 1). No run when nothing is due, nothing is
  unfinished or retiring and no notification waits (a skipped tick that says so).
- ``convoy_full_resync`` schedule (hourly): one run over every Release, interval 0 too.
- ``convoy_releases`` sensor: one ``release`` partition per Release file, added and
  removed as the files come and go.
- ``convoy_sharded_tick`` job (launched by hand or by a person's own schedule): a tick
  sharded by Cluster as ops, ``$CONVOY_SHARD_STAGES`` cluster waves as stages of their own
  (default 4), spread by the multiprocess executor, or by the ``k8s_job_executor`` with
  ``$CONVOY_SHARD_EXECUTOR=k8s`` (the ``k8s`` extra; its ops then pass their inputs and
  outputs as files under ``$CONVOY_IO_DIR``, a folder every pod mounts).
- ``convoy_wakeups`` sensor (every ``$CONVOY_WAKEUP_INTERVAL`` seconds, default
  :data:`WAKEUP_INTERVAL_SECONDS`): one run for the Releases woken between ticks (health
  changed, deadline passed, Release file or source changed, new Release).

Schedules and sensors are on by default. Reads the environment only inside
:func:`build_definitions`; the sensors read the repository and state directory.
"""

import hashlib
import json
import os
from typing import Any

import dagster as dg

from convoy_batch.assets import (
    PARTITIONS,
    RELEASES,
    ConvoyResource,
    convoy_resource,
    release,
    tick_job,
    tick_run_config,
)
from convoy_batch.defs.sharded import STAGES, sharded_tick_job, shared_io_manager
from convoy_batch.ticks.wakeups import release_names, wake_keys, woken, woken_tag, work_waiting

DEFAULT_TICK_CRON = "* * * * *"
FULL_RESYNC_CRON = "0 * * * *"
WAKEUP_INTERVAL_SECONDS = 4
"""Below the 5 s loop of Dagster's sensor daemon (1.13), so the sensor is evaluated on every
loop: at 5 it skips a loop now and then (its last evaluation started a little under 5 s
before) and a change waits up to 10 s. With the run queue's 1 s, a wake-up is reconciled
within 10 s (README "How soon a wake-up is acted on", with the idle cost)."""
DISCOVERY_INTERVAL_SECONDS = 30
NOTHING_WAITING = "nothing due, unfinished or removed; no notification to retry or commit to push"
"""The skip reason of a tick schedule's evaluation that launches no run."""
DUE_TAG = "convoy/due"
"""A scheduled tick run's tag: what it was launched for (``web (interval), api (removed)``,
up to 200 characters of whole phrases and then "and N more")."""


def tick_schedule(cron: str = DEFAULT_TICK_CRON, jobs: int = 1) -> dg.ScheduleDefinition:
    return _tick_run_schedule(
        "convoy_tick", cron, "Observe, then reconcile every due Release, in one run.",
        run_key="tick", all_releases=False, jobs=jobs,
    )  # fmt: skip


def full_resync_schedule(jobs: int = 1) -> dg.ScheduleDefinition:
    return _tick_run_schedule(
        "convoy_full_resync", FULL_RESYNC_CRON,
        "Reconcile every Release, interval 0 included (SPEC 13).",
        run_key="resync", all_releases=True, jobs=jobs,
    )  # fmt: skip


def _tick_run_schedule(
    name: str, cron: str, description: str, *, run_key: str, all_releases: bool, jobs: int
) -> dg.ScheduleDefinition:
    """A schedule of ``convoy_tick`` runs, one per scheduled time (its run key). A tick of
    the due Releases launches no run when nothing waits for it (:func:`_waiting`)."""

    @dg.schedule(
        name=name,
        cron_schedule=cron,
        job=tick_job,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=description,
    )
    def schedule(
        context: dg.ScheduleEvaluationContext, convoy: ConvoyResource
    ) -> dg.RunRequest | dg.SkipReason:
        config = tick_run_config(all_releases=all_releases, jobs=jobs)
        key = f"{run_key}-{_when(context)}"
        if all_releases:
            return dg.RunRequest(run_key=key, run_config=config)
        waiting = _waiting(convoy)
        if not waiting:
            return dg.SkipReason(NOTHING_WAITING)
        return dg.RunRequest(run_key=key, run_config=config, tags={DUE_TAG: woken_tag(waiting)})

    return schedule


def _waiting(convoy: ConvoyResource) -> list[str]:
    """The work waiting for a tick (:func:`~convoy_batch.ticks.wakeups.work_waiting`). When
    it cannot be told (the repository or the state directory unreadable, ...), the tick
    runs: it reports the problem where a person reads it, and a tick is never lost."""
    try:
        return work_waiting(convoy.repo_path(), convoy.state_dir(), convoy.clock())
    except Exception as exc:  # any failure: run the tick, which reports it
        return [f"could not tell ({exc})"]


def _when(context: dg.ScheduleEvaluationContext) -> str:
    scheduled = context.scheduled_execution_time
    return scheduled.strftime("%Y%m%dT%H%M%S") if scheduled else "now"


@dg.sensor(
    name="convoy_releases",
    minimum_interval_seconds=DISCOVERY_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Keep one release partition per Release file in the repository.",
)
def discover_releases(
    context: dg.SensorEvaluationContext, convoy: ConvoyResource
) -> dg.SensorResult | dg.SkipReason:
    wanted = set(release_names(convoy.repo_path()))
    have = set(context.instance.get_dynamic_partitions(PARTITIONS))
    requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
    if wanted - have:
        requests.append(RELEASES.build_add_request(sorted(wanted - have)))
    if have - wanted:
        requests.append(RELEASES.build_delete_request(sorted(have - wanted)))
    if not requests:
        return dg.SkipReason("partitions match the Release files")
    return dg.SensorResult(dynamic_partitions_requests=requests)


def wakeup_sensor(interval: int = WAKEUP_INTERVAL_SECONDS) -> dg.SensorDefinition:
    """The ``convoy_wakeups`` sensor, evaluated at most every ``interval`` seconds."""

    # The job by its name: given the job itself, Dagster 1.13 re-creates the sensor when it
    # binds the job's resources (SensorDefinition.with_updated_jobs passes ``owners=[]``)
    # and warns, on every load and run, that ``owners`` is a beta parameter.
    @dg.sensor(
        name="convoy_wakeups",
        job_name=tick_job.name,
        minimum_interval_seconds=interval,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Reconcile promptly the Releases woken between ticks (SPEC 13).",
    )
    def convoy_wakeups(
        context: dg.SensorEvaluationContext, convoy: ConvoyResource
    ) -> dg.SensorResult:
        return _wakeups(context, convoy)

    return convoy_wakeups


def _wakeups(context: dg.SensorEvaluationContext, convoy: ConvoyResource) -> dg.SensorResult:
    current = wake_keys(convoy.repo_path(), convoy.state_dir(), convoy.clock())
    seen: dict[str, list[str]] = json.loads(context.cursor) if context.cursor else {}
    names = woken(current, seen)
    # The cursor remembers each Release's causes already acted on, so one cause starts one
    # run; a busy Release (absent from ``current``) keeps what it had.
    merged = {**seen, **{name: sorted(keys) for name, keys in current.items()}}
    cursor = json.dumps({n: k for n, k in sorted(merged.items()) if k})
    if not names:
        return dg.SensorResult(skip_reason="nothing woke up", cursor=cursor)
    key = hashlib.sha256(json.dumps({n: merged[n] for n in names}).encode()).hexdigest()[:16]
    request = dg.RunRequest(
        run_key=f"wakeup-{key}",
        run_config=tick_run_config(names),
        tags={"convoy/woken": woken_tag(names)},
    )
    return dg.SensorResult(run_requests=[request], cursor=cursor)


wakeups = wakeup_sensor()


def build_definitions(
    repo: str | None = None,
    state: str | None = None,
    tick_cron: str | None = None,
    tick_jobs: int | None = None,
    shard_executor: str | None = None,
) -> dg.Definitions:
    """Everything Dagster loads; arguments override ``$CONVOY_REPO``, ``$CONVOY_STATE``,
    ``$CONVOY_TICK_CRON`` and ``$CONVOY_TICK_JOBS`` (worker processes of a scheduled
    tick, sharded by Cluster; default 1); ``shard_executor`` overrides
    ``$CONVOY_SHARD_EXECUTOR`` (the executor of ``convoy_sharded_tick``)."""
    convoy = convoy_resource(repo, state)
    executor, io_manager = _shard_execution(shard_executor)
    own = None if io_manager is None else {"convoy": convoy, "io_manager": io_manager}
    sharded = sharded_tick_job(_positive("CONVOY_SHARD_STAGES", STAGES), executor, own)
    cron = tick_cron or os.environ.get("CONVOY_TICK_CRON") or DEFAULT_TICK_CRON
    jobs = tick_jobs or _positive("CONVOY_TICK_JOBS")
    return dg.Definitions(
        assets=[release],
        jobs=[tick_job, sharded],
        schedules=[tick_schedule(cron, jobs), full_resync_schedule(jobs)],
        sensors=[
            discover_releases,
            wakeup_sensor(_positive("CONVOY_WAKEUP_INTERVAL", WAKEUP_INTERVAL_SECONDS)),
        ],
        resources={"convoy": convoy},
        executor=dg.in_process_executor,
    )


def _shard_execution(
    name: str | None,
) -> tuple[dg.ExecutorDefinition, dg.ConfigurableIOManagerFactory[Any] | None]:
    """The executor ``name`` (else ``$CONVOY_SHARD_EXECUTOR``): ``multiprocess`` (default)
    or ``k8s``, and the IO manager its ops share: the instance's on one machine, files
    under ``$CONVOY_IO_DIR`` for pods (:func:`shared_io_manager`)."""
    name = name or os.environ.get("CONVOY_SHARD_EXECUTOR") or "multiprocess"
    if name == "multiprocess":
        return dg.multiprocess_executor, None
    if name == "k8s":
        from dagster_k8s import k8s_job_executor  # the k8s extra, only when asked for

        return k8s_job_executor, shared_io_manager()
    raise dg.DagsterInvalidDefinitionError(
        f"$CONVOY_SHARD_EXECUTOR must be multiprocess or k8s: {name!r}"
    )


def _positive(variable: str, default: int = 1) -> int:
    """A whole number of at least 1 from the environment (unset: ``default``)."""
    text = os.environ.get(variable) or str(default)
    if not text.isdigit() or int(text) < 1:
        raise dg.DagsterInvalidDefinitionError(f"${variable} must be a whole number >= 1: {text!r}")
    return int(text)


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions()
