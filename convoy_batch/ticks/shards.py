"""A tick run by several processes: one shard per Cluster, cluster wave by cluster wave.

A tick of a fleet is CPU work in Python (parsing, rendering, comparing), which one process
does on one core. :func:`run_sharded` splits it by Cluster: the Clusters of one cluster
wave are dealt into at most ``jobs`` shards that run side by side in worker processes, and
a wave starts once the lower waves are done and committed, so the convoy gate reads
finished statuses. Each shard is a tick of its own Releases
(:func:`convoy_batch.ticks.runner.run_with`, its options naming the ``shard``): it holds
their locks, writes their write-ahead records and commits their statuses under the
repository lock, as any tick does, so every rule of a single tick holds. The render
garbage collection, the push and the notifications run once, after the last wave
(:func:`finish_tick`).

A shard's report comes back to the parent as plain data (:meth:`Handled.settled`), so the
CLI and the Dagster op report a sharded tick as they report one tick. Does I/O
(processes, through the runner).
"""

import logging
import multiprocessing
from collections.abc import Sequence, Set
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from convoy_batch.engine.retire import forget_retired, remember_head
from convoy_batch.engine.setstatus import record_sets
from convoy_batch.engine.tick import Tick
from convoy_batch.notify import Notifier
from convoy_batch.repo.clone import remote_url, tick_clone
from convoy_batch.ticks.runner import (
    TickOptions,
    TickReport,
    by_cluster_wave,
    cluster_of,
    due_entries,
    fewer_collections,
    finish_tick,
    keep_opened,
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


def plan_shards(tick: Tick, jobs: int, names: Sequence[str] = ()) -> list[list[Shard]]:
    """The shards of a tick, grouped by cluster wave, lowest first: at most ``jobs`` per
    wave, each a whole number of Clusters, as even in Releases as a greedy fill makes
    them (the largest Cluster into the lightest shard). One shard per worker and wave,
    not one per Cluster: each shard opens the tick once (reads the repository's Releases
    and statuses), which a fleet of small Clusters would otherwise pay again and again."""
    waves = []
    for group in by_cluster_wave(tick, select(tick, names)):
        clusters: dict[str, set[str]] = {}
        for entry in group:
            cluster = cluster_of(tick, entry)
            clusters.setdefault(cluster.name if cluster else "", set()).add(entry.name)
        bins: list[tuple[list[str], set[str]]] = [([], set()) for _ in range(jobs)]
        for name, releases in sorted(clusters.items(), key=lambda c: (-len(c[1]), c[0])):
            lightest = min(bins, key=lambda b: len(b[1]))
            lightest[0].append(name)
            lightest[1].update(releases)
        waves.append([Shard(tuple(sorted(c)), frozenset(r)) for c, r in bins if r])
    return waves


@dataclass(frozen=True)
class _Part:
    """One shard's tick, as a worker process runs it."""

    repo: Path
    state_dir: Path
    now: datetime
    options: TickOptions
    """Its due Releases by name, its forced syncs, its Releases as ``shard``."""


def _run_part(part: _Part) -> TickReport:
    report = run_with(part.repo, part.state_dir, part.now, part.options)
    report.handled = [h.settled() for h in report.handled]  # sent back to the parent
    return report


def _log_like(level: int) -> None:
    """A worker logs as the CLI does (it is a fresh interpreter)."""
    logging.basicConfig(level=level, format="%(levelname)s %(message)s")


def run_sharded(
    repo: Path,
    state_dir: Path,
    now: datetime,
    jobs: int,
    names: Sequence[str] = (),
    *,
    all_releases: bool = False,
    forced: Set[str] = frozenset(),
    observe_first: bool = True,
    orphan: bool = False,
    allow_deletions: bool = False,
) -> TickReport:
    """One tick, its shards on up to ``jobs`` worker processes (see module doc): the
    report of a single tick, the Releases in the order it gives them. A clone of the
    remote is brought up to date once, here, and its shards work in it."""
    with tick_clone(repo, state_dir) as clone, fewer_collections():
        tick = Tick.open(repo, state_dir, now)
        keep_opened()
        try:
            # Opened before the shards commit, so that their commits are its events.
            notifier = Notifier.open(notification_facts(tick))
            options = TickOptions(
                tuple(names),
                all_releases,
                frozenset(forced),
                observe_first,
                orphan=orphan,
                allow_deletions=allow_deletions,
            )
            report = _run_waves(tick, jobs, options)
            if tick.snapshot.sets or tick.status_store.set_statuses:
                _record_sets(repo, state_dir, now, report)
            if report.handled or clone is not None:
                report.push_warning = finish_tick(repo, state_dir, now, report, clone)
            if notifier is not None:
                notifier.deliver()
            return report
        finally:
            tick.close()


def _record_sets(repo: Path, state_dir: Path, now: datetime, report: TickReport) -> None:
    """The ReleaseSets' status files, from the statuses the shards committed (HEAD read
    again), in a batch of their own."""
    tick = Tick.open(repo, state_dir, now)
    try:
        with tick.status_store.batch():
            record_sets(tick)
        if tick.status_store.error is not None and report.commit_error is None:
            report.commit_error = tick.status_store.error
    finally:
        tick.close()


def _run_waves(tick: Tick, jobs: int, options: TickOptions) -> TickReport:
    entries = select(tick, options.names)
    order = {e.name: i for i, e in enumerate(entries)}
    # What is due is found here, once: a quiet tick starts no worker, and each shard is
    # given its due Releases by name. Named Releases and --all are every one of them.
    chosen = TickReport()
    with tick.status_store.batch():  # the removed Releases, once, before the shards
        retirements(tick, options, chosen)
    chosen.commit_error = tick.status_store.error
    if tick.status_store.error is None or tick.status_store.landed:
        forget_retired(tick, chosen.handled if remote_url() is None else ())
    if not options.names:
        remember_head(tick)
    if options.names or options.all_releases:
        due = [e.name for e in entries]
    else:
        due = [e.name for e in due_entries(tick, entries, options, chosen)]
    if not due:
        return chosen
    waves = plan_shards(tick, jobs, due)
    repo, state_dir, now = tick.repo.path, tick.stores.state_dir, tick.now
    parts: list[TickReport] = [chosen]
    widest = max((len(w) for w in waves), default=1)
    context = multiprocessing.get_context("spawn")  # no fork of a process with threads
    level = logging.getLogger().getEffectiveLevel()
    with ProcessPoolExecutor(
        min(jobs, widest), mp_context=context, initializer=_log_like, initargs=(level,)
    ) as pool:
        for wave in waves:
            work = [
                _Part(
                    repo,
                    state_dir,
                    now,
                    replace(
                        options,
                        names=tuple(n for n in due if n in shard.releases),
                        forced=options.forced & shard.releases,
                        shard=shard.releases,
                    ),
                )
                for shard in wave
            ]
            parts.extend(pool.map(_run_part, work))
    return _merge(parts, order)


def _merge(parts: Sequence[TickReport], order: dict[str, int]) -> TickReport:
    """The parts as one report, each Release where a single tick would report it."""
    # A removed Release (retired before the shards) comes first, as in one tick.
    skipped = sorted(
        (x for p in parts for x in p.skipped.items()), key=lambda x: order.get(x[0], -1)
    )
    errors = [p.commit_error for p in parts if p.commit_error]
    return TickReport(
        handled=sorted((h for p in parts for h in p.handled), key=lambda h: order.get(h.name, -1)),
        skipped=dict(skipped),
        commit_error="; ".join(errors) if errors else None,
        collectable=all(p.collectable for p in parts),
    )
