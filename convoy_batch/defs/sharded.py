"""The Dagster job ``convoy_sharded_tick``: a tick sharded by Cluster as Dagster ops, so
the run's executor spreads the shards (the multiprocess executor over cores, the
``k8s_job_executor`` over pods), where ``reconcile --jobs`` spreads them over the worker
processes of one machine. The same three steps as the CLI's sharded tick
(:mod:`convoy_batch.ticks.shards`):

- ``plan_waves``: retire, find what is due, deal the shards (:func:`start_sharded`); it
  fans out the shards of the lowest wave, one dynamic output each;
- ``run_shard`` (mapped over a wave's shards): one shard's tick (:func:`run_apart`; with
  a remote, in a clone of its own, pushing its own commits);
- ``wave_1`` ... ``wave_{stages-1}``: each waits for the previous wave's shards (their
  collected reports) and fans out the next wave, so the waves run in order;
- ``finish_waves``: the waves beyond the job's stages (run there on worker processes, as
  ``reconcile --jobs``), the ReleaseSets, the garbage collection, the push, the
  notifications (:func:`end_sharded`), then the Releases' events recorded as
  ``convoy_tick`` records them (:func:`~convoy_batch.assets.record`), once each.

The ops pass plain dataclasses (:class:`Plan`, :class:`Part`, ``TickReport``) through the
run's IO manager. No ``from __future__ import annotations``: Dagster reads the context
annotations. Does I/O through the library.
"""

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

import dagster as dg

from convoy_batch.assets import (
    POOL,
    TICK_TAGS,
    ConvoyResource,
    fail_on_alarms,
    quiet,
    record,
    restore_limit,
    restore_tracebacks,
)
from convoy_batch.ticks.options import TickOptions, TickReport
from convoy_batch.ticks.shards import Part, Plan, end_sharded, run_apart, start_sharded

JOB = "convoy_sharded_tick"
STAGES = 4
"""Cluster waves run as ops of their own by default; a tick with more runs the rest in
its last op, on worker processes."""
SHARDS = "shards"
IO_DIR_ENV = "CONVOY_IO_DIR"
"""Where the ops of a run whose ops run in pods of their own pass their inputs and
outputs (deploy/: a folder on the state volume, which every pod mounts)."""


class ShardedTickConfig(dg.Config):
    """Which Releases the tick reconciles, and into how many shards a wave is dealt."""

    names: list[str] = []  # noqa: RUF012 (Dagster config: copied per run)
    all_releases: bool = False
    jobs: int = 4
    """Shards per cluster wave at most (each a whole number of Clusters)."""


def _fan_out(plan: Plan, wave: int) -> Iterator[dg.DynamicOutput[Part]]:
    """One dynamic output per shard of ``wave`` (none when the tick has no such wave)."""
    for part in plan.waves[wave] if wave < len(plan.waves) else ():
        key = f"wave{wave}_shard{part.index}"
        yield dg.DynamicOutput(part, mapping_key=key, output_name=SHARDS)


@dg.op(out={"plan": dg.Out(), SHARDS: dg.DynamicOut()}, pool=POOL)
def plan_waves(
    context: dg.OpExecutionContext, config: ShardedTickConfig, convoy: ConvoyResource
) -> Iterator[dg.Output[Plan] | dg.DynamicOutput[Part]]:
    """The tick's plan (its clock read here, once), and the lowest wave's shards."""
    restore_limit()
    if config.jobs < 1:
        raise quiet(dg.Failure(f"jobs must be at least 1, not {config.jobs}"))
    options = TickOptions(tuple(config.names), config.all_releases)
    repo, state, now = convoy.repo_path(), convoy.state_dir(), convoy.clock()
    plan = start_sharded(repo, state, now, config.jobs, options)
    context.log.info(f"{len(plan.waves)} cluster wave(s): {[len(w) for w in plan.waves]} shard(s)")
    if plan.first.push_warning:
        context.log.warning(plan.first.push_warning)
    yield dg.Output(plan, "plan")
    yield from _fan_out(plan, 0)


@dg.op
def run_shard(part: Part) -> TickReport:
    """One shard's tick (its Releases' locks, records and status commits)."""
    return run_apart(part)


def _next_wave(wave: int) -> dg.OpDefinition:
    """The op that waits for wave ``wave - 1``'s shards and fans out wave ``wave``'s."""

    @dg.op(name=f"wave_{wave}", out={"plan": dg.Out(), SHARDS: dg.DynamicOut()})
    def next_wave(
        plan: Plan, reports: list[TickReport]
    ) -> Iterator[dg.Output[Plan] | dg.DynamicOutput[Part]]:
        yield dg.Output(replace(plan, done=[*plan.done, *reports]), "plan")
        yield from _fan_out(plan, wave)

    return next_wave


def _finish(stages: int) -> dg.OpDefinition:
    @dg.op(name="finish_waves", pool=POOL)
    def finish_waves(context: dg.OpExecutionContext, plan: Plan, reports: list[TickReport]) -> None:
        """The end of the tick, then one event per Release whose status changed; the run
        fails (after recording) as ``convoy_tick``'s does."""
        restore_limit()
        jobs = max((len(w) for w in plan.waves), default=1)
        report = end_sharded(plan, reports, stages, jobs)
        record(context, report)
        fail_on_alarms(report)

    return finish_waves


def shared_io_manager() -> dg.FilesystemIOManager:
    """Files under ``$CONVOY_IO_DIR``, read by each op's process when it runs: the IO
    manager of a run whose ops run in pods of their own (the instance's default keeps
    them under ``DAGSTER_HOME``, which is each pod's own)."""
    return dg.FilesystemIOManager(base_dir=dg.EnvVar(IO_DIR_ENV))


def sharded_tick_job(
    stages: int = STAGES,
    executor: dg.ExecutorDefinition = dg.multiprocess_executor,
    resources: Mapping[str, Any] | None = None,
) -> dg.JobDefinition:
    """``convoy_sharded_tick`` with ``stages`` cluster waves as ops of their own (at
    least 1), run by ``executor``. ``resources``: the job's own, all it needs (``convoy``
    and an ``io_manager`` such as :func:`shared_io_manager`); None: the definitions'
    ``convoy`` and the instance's IO manager."""
    if stages < 1:
        raise dg.DagsterInvalidDefinitionError(f"stages must be at least 1, not {stages}")
    waves = [_next_wave(w) for w in range(1, stages)]
    finish = _finish(stages)

    @dg.job(
        name=JOB,
        tags=TICK_TAGS,
        executor_def=executor,
        hooks={restore_tracebacks},
        resource_defs=resources,
    )
    def convoy_sharded_tick() -> None:
        plan, shards = plan_waves()
        for w, wave in enumerate(waves):
            reports = shards.map(run_shard.alias(f"shard_of_wave_{w}")).collect()
            plan, shards = wave(plan, reports)
        last = shards.map(run_shard.alias(f"shard_of_wave_{len(waves)}")).collect()
        finish(plan, last)

    return convoy_sharded_tick


def sharded_run_config(
    names: list[str] | None = None, *, all_releases: bool = False, jobs: int = 4
) -> dg.RunConfig:
    config = ShardedTickConfig(names=names or [], all_releases=all_releases, jobs=jobs)
    return dg.RunConfig(ops={"plan_waves": config})
