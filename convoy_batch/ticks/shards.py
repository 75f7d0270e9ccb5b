"""A tick run by several processes: one shard per Cluster, cluster wave by cluster wave.

A tick of a fleet is CPU work in Python (parsing, rendering, comparing), which one process
does on one core. A sharded tick splits it by Cluster in three steps, which
:func:`run_sharded` (``reconcile --jobs``) runs in one process and its worker processes,
and the Dagster job ``convoy_sharded_tick`` as ops (:mod:`convoy_batch.defs.sharded`):

- :func:`plan_tick`: the removed Releases retired, what is due found once, and the
  Clusters of each cluster wave dealt into at most ``jobs`` shards (:class:`Plan`, plain
  data);
- :func:`run_part`: one shard, a tick of its own Releases
  (:func:`convoy_batch.ticks.runner.run_with`, its options naming the ``shard``): it holds
  their locks, writes their write-ahead records and commits their statuses under the
  repository lock, as any tick does, so every rule of a single tick holds. The shards of
  a wave run side by side; a wave starts once the lower waves are done and committed, so
  the convoy gate reads finished statuses;
- :func:`finish_sharded`: the reports merged, the ReleaseSets' statuses, the render
  garbage collection and the push, once, after the last wave (:func:`finish_tick`).

A shard that runs apart from its plan (a Dagster op in a process or pod of its own) with
a remote works in a clone of its own and pushes its own commits (:func:`run_apart`).
A shard's report is plain data (:meth:`Handled.settled`), so the CLI and the Dagster ops
report a sharded tick as they report one tick. Does I/O (processes, through the runner).
"""

import logging
import multiprocessing
from collections.abc import Mapping, Sequence, Set
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from convoy_batch.engine.retire import forget_retired, remember_head
from convoy_batch.engine.setstatus import record_sets
from convoy_batch.engine.tick import Tick
from convoy_batch.models import Cluster
from convoy_batch.notify import Notifier
from convoy_batch.repo.gitops import ReleaseEntry
from convoy_batch.status.remote import Clone, push_apart, remote_url, shard_clone, tick_clone
from convoy_batch.ticks.finish import drop_kept_records, finish_run, push_clone
from convoy_batch.ticks.options import TickOptions, TickReport
from convoy_batch.ticks.runner import (
    by_cluster_wave,
    cluster_of,
    collections_paused,
    due_entries,
    notification_facts,
    retirements,
    run_with,
    select,
)

log = logging.getLogger("convoy_batch")


@dataclass(frozen=True)
class Shard:
    """The Releases of some Clusters of one wave (``""``: Releases whose Cluster is
    missing or unknown)."""

    clusters: tuple[str, ...]
    releases: frozenset[str]


def plan_shards(
    clusters: Mapping[str, Cluster], entries: Sequence[ReleaseEntry], jobs: int
) -> list[list[Shard]]:
    """The shards of a tick's ``entries`` (``clusters``: the snapshot's), grouped by
    cluster wave, lowest first: at most ``jobs`` per wave, each a whole number of
    Clusters, as even in Releases as a greedy fill makes them (the largest Cluster into
    the lightest shard). One shard per worker and wave, not one per Cluster: each shard
    opens the tick once (reads the repository's Releases and statuses), which a fleet of
    small Clusters would otherwise pay again and again."""
    waves = []
    for group in by_cluster_wave(clusters, entries):
        clusters_of: dict[str, set[str]] = {}
        for entry in group:
            cluster = cluster_of(clusters, entry)
            clusters_of.setdefault(cluster.name if cluster else "", set()).add(entry.name)
        bins: list[tuple[list[str], set[str]]] = [([], set()) for _ in range(jobs)]
        for name, releases in sorted(clusters_of.items(), key=lambda c: (-len(c[1]), c[0])):
            lightest = min(bins, key=lambda b: len(b[1]))
            lightest[0].append(name)
            lightest[1].update(releases)
        waves.append([Shard(tuple(sorted(c)), frozenset(r)) for c, r in bins if r])
    return waves


@dataclass(frozen=True)
class Part:
    """One shard's tick, as a worker process or a Dagster op runs it (plain data)."""

    repo: Path
    state_dir: Path
    now: datetime
    options: TickOptions
    """Its due Releases by name, its forced syncs, its Releases as ``shard``."""
    wave: int
    """Its place among the tick's waves (0: the lowest)."""
    index: int
    """Its place in its wave."""


@dataclass(frozen=True)
class Plan:
    """A sharded tick before its shards run (plain data, picklable)."""

    repo: Path
    state_dir: Path
    now: datetime
    first: TickReport
    """The removed Releases' retirements and the Releases not due."""
    order: dict[str, int]
    """Each Release's place in the repository's order (the merged report's)."""
    waves: list[list[Part]]
    """The shards, wave by wave, lowest first."""
    with_sets: bool
    """The repository has ReleaseSets (or their statuses): recorded at the end."""
    done: list[TickReport] = field(default_factory=list)
    """The reports of the shards run so far (the Dagster job carries them wave to wave)."""


def plan_tick(tick: Tick, jobs: int, options: TickOptions, remote: str | None) -> Plan:
    """Retire the removed Releases (committed in a batch of their own, before the shards),
    find what is due once (a quiet tick starts no shard: no wave) and deal the due
    Releases into shards. Named Releases and ``--all`` are every one of them. ``remote``:
    the remote's URL when the repository is a clone of one, else None."""
    entries = select(tick, options.names)
    chosen = TickReport()
    with tick.status_store.batch():
        retirements(tick, options, chosen)
    chosen.commit_error = tick.status_store.error
    if tick.status_store.error is None or tick.status_store.landed:
        forget_retired(tick, chosen.handled if remote is None else ())
    if not options.names:
        remember_head(tick)
    if options.names or options.all_releases:
        due = list(entries)
    else:
        due = due_entries(tick, entries, options, chosen)[0]
    chosen.handled = [h.settled() for h in chosen.handled]
    with_sets = bool(tick.snapshot.sets or tick.status_store.set_statuses)
    order = {e.name: i for i, e in enumerate(entries)}
    waves = plan_shards(tick.snapshot.clusters, due, jobs) if due else []
    names = [e.name for e in due]
    repo, state_dir, now = tick.repo.path, tick.stores.state_dir, tick.now
    parts = [
        [
            Part(repo, state_dir, now, _shard_options(options, names, shard.releases), w, i)
            for i, shard in enumerate(wave)
        ]
        for w, wave in enumerate(waves)
    ]
    return Plan(repo, state_dir, now, chosen, order, parts, with_sets)


def _shard_options(
    options: TickOptions, due: Sequence[str], releases: frozenset[str]
) -> TickOptions:
    return replace(
        options,
        names=tuple(n for n in due if n in releases),
        forced=options.forced & releases,
        shard=releases,
    )


def run_part(part: Part) -> TickReport:
    """One shard's tick in the repository its plan was made in; its report, settled."""
    report = run_with(part.repo, part.state_dir, part.now, part.options)
    report.handled = [h.settled() for h in report.handled]  # sent back as plain data
    return report


def run_apart(part: Part) -> TickReport:
    """One shard in a process or pod of its own (a Dagster op): :func:`run_part`; with a
    remote, in a clone of its own (:func:`apart_folder`) brought to the remote's branch
    first, its status commits pushed after it (fetched, rebased and retried; kept in
    the state directory when they cannot be pushed)."""
    if remote_url() is None:
        return run_part(part)
    folder = apart_folder(part)
    own = replace(part, repo=folder)
    with shard_clone(folder, part.state_dir) as clone:
        report = run_part(own)
        if clone is not None:
            names = part.options.shard or frozenset()
            report.push_warning = finish_shard(folder, part.state_dir, part.now, names, clone)
    return report


def apart_folder(part: Part) -> Path:
    """The clone a shard run apart works in: one per place in the wave, beside the
    tick's (the shards of a wave on one machine never share one; on Kubernetes each pod
    has its own anyway)."""
    return part.repo.with_name(f"{part.repo.name}-shard{part.index}")


def _log_like(level: int) -> None:
    """A worker logs as the CLI does (it is a fresh interpreter)."""
    logging.basicConfig(level=level, format="%(levelname)s %(message)s")


def run_waves(waves: Sequence[Sequence[Part]], jobs: int) -> list[TickReport]:
    """The shards on up to ``jobs`` worker processes, wave after wave; their reports.
    No wave: no worker."""
    if not waves:
        return []
    reports: list[TickReport] = []
    widest = max(len(w) for w in waves)
    context = multiprocessing.get_context("spawn")  # no fork of a process with threads
    level = logging.getLogger().getEffectiveLevel()
    with ProcessPoolExecutor(
        min(jobs, widest), mp_context=context, initializer=_log_like, initargs=(level,)
    ) as pool:
        for wave in waves:
            reports.extend(pool.map(run_part, wave))
    return reports


def run_sharded(
    repo: Path, state_dir: Path, now: datetime, jobs: int, options: TickOptions
) -> TickReport:
    """One tick, its shards on up to ``jobs`` worker processes (see module doc): the
    report of a single tick, the Releases in the order it gives them. A clone of the
    remote is brought up to date once, here, and its shards work in it. ``options`` as
    :func:`~convoy_batch.ticks.runner.run_with` takes them (no ``shard``: the plan deals
    them); the remote's URL is read here, once."""
    remote = remote_url()
    with tick_clone(repo, state_dir) as clone, collections_paused():
        tick = Tick.open(repo, state_dir, now)
        try:
            # Opened before the shards commit, so that their commits are its events.
            notifier = Notifier.open(notification_facts(tick))
            plan = plan_tick(tick, jobs, options, remote)
            report = finish_sharded(plan, run_waves(plan.waves, jobs), clone)
            if notifier is not None:
                notifier.deliver()
            return report
        finally:
            tick.close()


def start_sharded(
    repo: Path, state_dir: Path, now: datetime, jobs: int, options: TickOptions
) -> Plan:
    """The plan of a tick whose shards run apart (the Dagster job's first op): the
    notifications' cursor started where the tick starts, and, with a remote, the clone
    brought up to date and the retirements' commits pushed before the shards fetch. The
    remote's URL is read here, once, and never kept in the plan (the job's IO manager
    stores it)."""
    remote = remote_url()
    with tick_clone(repo, state_dir) as clone, collections_paused():
        tick = Tick.open(repo, state_dir, now)
        try:
            Notifier.open(notification_facts(tick))  # its cursor, at the tick's start
            plan = plan_tick(tick, jobs, options, remote)
        finally:
            tick.close()
        if clone is not None:
            plan.first.push_warning = push_kept(repo, state_dir, now, clone)
    return plan


def end_sharded(plan: Plan, reports: Sequence[TickReport], stages: int, jobs: int) -> TickReport:
    """The end of a tick whose shards ran apart (the Dagster job's last op): the waves
    beyond the job's ``stages`` run here on worker processes, then
    :func:`finish_sharded` and the notifications; with a remote, in the tick's clone
    brought up to date (the shards' pushes fetched)."""
    repo, state_dir, now = plan.repo, plan.state_dir, plan.now
    with tick_clone(repo, state_dir) as clone, collections_paused():
        tick = Tick.open(repo, state_dir, now)
        try:
            notifier = Notifier.open(notification_facts(tick))
            rest = run_waves(plan.waves[stages:], jobs)
            report = finish_sharded(plan, [*reports, *rest], clone)
            if notifier is not None:
                notifier.deliver()
            return report
        finally:
            tick.close()


def finish_sharded(plan: Plan, reports: Sequence[TickReport], clone: Clone | None) -> TickReport:
    """The shards' reports merged with the plan's, the ReleaseSets' statuses recorded
    and the tick finished (:func:`finish_tick`: garbage collection, push)."""
    report = _merge([plan.first, *plan.done, *reports], plan.order)
    repo, state_dir, now = plan.repo, plan.state_dir, plan.now
    if plan.with_sets:
        _record_sets(repo, state_dir, now, report)
    if report.handled or clone is not None:
        last = finish_tick(repo, state_dir, now, report, clone)
        warnings = [w for w in (report.push_warning, last) if w]
        report.push_warning = "; ".join(warnings) if warnings else None
    return report


def _record_sets(repo: Path, state_dir: Path, now: datetime, report: TickReport) -> None:
    """The ReleaseSets' status files, from the statuses the shards committed (HEAD read
    again), in a batch of their own."""
    tick = Tick.open(repo, state_dir, now)
    try:
        with tick.status_store.batch():
            record_sets(tick.desk, tick.snapshot, tick.retired.removed)
        if tick.status_store.error is not None and report.commit_error is None:
            report.commit_error = tick.status_store.error
    finally:
        tick.close()


def finish_tick(
    repo: Path, state_dir: Path, now: datetime, report: TickReport, clone: Clone | None = None
) -> str | None:
    """:func:`~convoy_batch.ticks.finish.finish_run` for a tick whose parts ran as
    shards, once all are done (the statuses read again: the shards committed them)."""
    tick = Tick.open(repo, state_dir, now)
    try:
        return finish_run(tick.status_store, tick.stores, tick.statuses, report, clone)
    finally:
        tick.close()


def push_kept(repo: Path, state_dir: Path, now: datetime, clone: Clone) -> str | None:
    """Push what a clone holds that the remote lacks, keeping it when the push fails, with
    no garbage collection (the start of a tick whose shards run apart, before they fetch);
    the push's warning."""
    tick = Tick.open(repo, state_dir, now)
    try:
        return push_clone(tick.status_store, tick.stores.intents, clone)
    finally:
        tick.close()


def finish_shard(
    repo: Path, state_dir: Path, now: datetime, names: Set[str], clone: Clone
) -> str | None:
    """The end of a shard run apart in a clone of its own: its commits pushed with those
    the state directory kept (:func:`convoy_batch.status.remote.push_apart`), and the
    records of its Releases (``names``) dropped once they are kept; the push's warning."""
    tick = Tick.open(repo, state_dir, now)
    try:
        warning, kept = push_apart(tick.status_store.pusher, clone)
        if kept:
            drop_kept_records(tick.status_store, tick.stores.intents, names)
        return warning
    finally:
        tick.close()


def _merge(parts: Sequence[TickReport], order: dict[str, int]) -> TickReport:
    """The parts as one report, each Release where a single tick would report it."""
    # A removed Release (retired before the shards) comes first, as in one tick.
    skipped = sorted(
        (x for p in parts for x in p.skipped.items()), key=lambda x: order.get(x[0], -1)
    )
    errors = [p.commit_error for p in parts if p.commit_error]
    warnings = [p.push_warning for p in parts if p.push_warning]
    return TickReport(
        handled=sorted((h for p in parts for h in p.handled), key=lambda h: order.get(h.name, -1)),
        skipped=dict(skipped),
        commit_error="; ".join(errors) if errors else None,
        push_warning="; ".join(warnings) if warnings else None,
        collectable=all(p.collectable for p in parts),
    )
