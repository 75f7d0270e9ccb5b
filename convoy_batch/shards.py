"""A tick run by several processes: one shard per Cluster, cluster wave by cluster wave.

A tick of a fleet is CPU work in Python (parsing, rendering, comparing), which one process
does on one core. :func:`run_sharded` splits it by Cluster: the Clusters of one cluster
wave are dealt into at most ``jobs`` shards that run side by side in worker processes, and
a wave starts once the lower waves are done and committed, so the convoy gate reads
finished statuses. Each shard is a
tick of its own Releases (:func:`convoy_batch.runner.run_tick` with ``shard``): it holds
their locks, writes their write-ahead records and commits their statuses under the
repository lock, as any tick does, so every rule of a single tick holds. The render
garbage collection and the push run once, after the last wave (:func:`finish_tick`).

Also :class:`Summary`: a tick's report as plain data, what crosses the process boundary
and what the CLI prints. Does I/O (processes, through the runner).
"""

import logging
import multiprocessing
from collections.abc import Sequence, Set
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from convoy_batch.notify.notifier import Notifier
from convoy_batch.reconcile import describe
from convoy_batch.runner import (
    TickReport,
    by_cluster_wave,
    cluster_of,
    finish_tick,
    run_tick,
    select,
)
from convoy_batch.tick import Tick

log = logging.getLogger("convoy_batch")


@dataclass(frozen=True)
class Summary:
    """What a tick did, as plain data: one row and one line per reconciled Release."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    """Per reconciled Release: name, state, reason, message, applied, renderRef,
    revision, commit."""
    described: dict[str, str] = field(default_factory=dict)
    """Reconciled Release -> its line (``describe``)."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Release not reconciled -> why."""
    problems: list[str] = field(default_factory=list)
    """Lines for stderr: each Release's error, a commit error, a push warning."""
    errored: bool = False
    committed: bool = False
    """A status was committed (a push is due)."""
    persisted: bool = False
    """A render was stored (a garbage collection is due)."""

    @property
    def lines(self) -> list[str]:
        """One line per reconciled Release, then one per skipped one."""
        skipped = [f"{name}: skipped ({why})" for name, why in self.skipped.items()]
        return [*self.described.values(), *skipped]

    @classmethod
    def of(cls, report: TickReport) -> "Summary":
        problems = [
            f"{h.name}: {h.outcome.reason}: {h.outcome.message}"
            for h in report.handled
            if h.outcome.is_error
        ]
        if report.commit_error:
            problems.append(f"convoy-batch: {report.commit_error}")
        if report.push_warning:
            problems.append(f"warning: {report.push_warning}")
        return cls(
            rows=[_row(h) for h in report.handled],
            described={h.name: describe(h) for h in report.handled},
            skipped=dict(report.skipped),
            problems=problems,
            errored=report.errored,
            committed=any(h.commit for h in report.handled),
            persisted=any(h.outcome.persisted for h in report.handled),
        )


def _row(h: Any) -> dict[str, Any]:
    o = h.outcome
    return {
        "name": h.name,
        "state": h.status.rollout.state.value if h.status.rollout else None,
        "reason": o.reason.value,
        "message": o.message,
        "applied": o.applied,
        "renderRef": o.render.ref if o.render else None,
        "revision": o.render.revision if o.render else None,
        "commit": h.commit,
    }


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
    names: tuple[str, ...]
    all_releases: bool
    forced: frozenset[str]
    observe_first: bool
    releases: frozenset[str]


def _run_part(part: _Part) -> Summary:
    report = run_tick(
        part.repo,
        part.state_dir,
        part.now,
        part.names,
        all_releases=part.all_releases,
        forced=part.forced,
        observe_first=part.observe_first,
        shard=part.releases,
    )
    return Summary.of(report)


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
) -> Summary:
    """One tick, its shards on up to ``jobs`` worker processes (see module doc); the
    Releases in the order a single tick reports them."""
    tick = Tick.open(repo, state_dir, now)
    try:
        # Opened before the shards commit, so that their commits are its events.
        notifier = Notifier.open(tick)
        summary = _run_waves(tick, jobs, names, all_releases, forced, observe_first)
        handled = {row["name"] for row in summary.rows}
        warning = finish_tick(repo, state_dir, now, handled, summary.persisted, summary.committed)
        if warning:
            summary.problems.append(f"warning: {warning}")
        if notifier is not None:
            notifier.deliver()
        return summary
    finally:
        tick.close()


def _run_waves(
    tick: Tick,
    jobs: int,
    names: Sequence[str],
    all_releases: bool,
    forced: Set[str],
    observe_first: bool,
) -> Summary:
    waves = plan_shards(tick, jobs, names)
    order = {e.name: i for i, e in enumerate(select(tick, names))}
    repo, state_dir, now = tick.repo.path, tick.stores.state_dir, tick.now
    parts: list[Summary] = []
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
                    tuple(n for n in names if n in shard.releases),
                    all_releases,
                    frozenset(forced & shard.releases),
                    observe_first,
                    shard.releases,
                )
                for shard in wave
            ]
            parts.extend(pool.map(_run_part, work))
    return _merge(parts, order)


def _merge(parts: Sequence[Summary], order: dict[str, int]) -> Summary:
    """The parts as one summary, each Release where a single tick would report it."""

    def ordered(items: Any) -> list[Any]:
        return sorted(items, key=lambda item: order[item[0]])

    rows = [r for p in parts for r in p.rows]
    return Summary(
        rows=sorted(rows, key=lambda r: order[r["name"]]),
        described=dict(ordered(x for p in parts for x in p.described.items())),
        skipped=dict(ordered(x for p in parts for x in p.skipped.items())),
        problems=[line for p in parts for line in p.problems],
        errored=any(p.errored for p in parts),
        committed=any(p.committed for p in parts),
        persisted=any(p.persisted for p in parts),
    )
