"""A tick over many Releases: observe, pick the due ones (:mod:`.due`), reconcile each
under its lock, then commit changed statuses, garbage-collect renders once and push once
(:mod:`.finish`), and notify.

This is the library call that the CLI and the Dagster assets both make. Of
:mod:`convoy_batch.ticks`, only it and :mod:`.shards` open the tick
(:class:`~convoy_batch.engine.tick.Tick`); the other modules are given what they read of
it. Does I/O.
"""

import gc
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence, Set
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from datetime import datetime
from functools import partial
from pathlib import Path

from convoy_batch.deployers.factory import DeployerFactory, make_deployer
from convoy_batch.engine.handler import Handled
from convoy_batch.engine.removed import gone_names
from convoy_batch.engine.retire import (
    RetireOptions,
    forget_retired,
    remember_head,
    retire_removed,
)
from convoy_batch.engine.setstatus import record_sets
from convoy_batch.engine.stages.outcome import failed
from convoy_batch.engine.stages.render import resolve_cluster, stage_render
from convoy_batch.engine.tick import Tick
from convoy_batch.errors import (
    ConvoyError,
    StateFailed,
    UsageError,
)
from convoy_batch.health.cel import rules_for
from convoy_batch.health.observer import observe
from convoy_batch.models import (
    Cluster,
    Release,
    ReleaseInventory,
    ReleaseStatus,
)
from convoy_batch.notify import Notifier, ReleaseFacts, TickFacts
from convoy_batch.reasons import Reason
from convoy_batch.reconcile import handle_release
from convoy_batch.repo.gitops import ReleaseEntry
from convoy_batch.rollout.depends import depth, in_order
from convoy_batch.state.locks import LockBusy
from convoy_batch.status.remote import Clone, remote_url, tick_clone
from convoy_batch.store import Inventories
from convoy_batch.ticks.due import DueFacts, dependency_graph, is_due, progressing
from convoy_batch.ticks.finish import any_unstored, finish_run, set_warnings
from convoy_batch.ticks.options import TickOptions, TickReport

log = logging.getLogger("convoy_batch")


def observe_release(
    tick: Tick, entry: ReleaseEntry, *, save: bool = True, recall: bool = True
) -> ReleaseInventory | None:
    """Refresh the health of one Release's inventory; None when it cannot be observed.
    ``save=False`` leaves the write to the caller (:meth:`Tick.save_inventory`).
    ``recall=False``: its objects are read whatever the observer's memo holds, and
    what is seen is remembered (a Release about to be reconciled: its sync reads them
    again, from the deployer's memory of the files it read last)."""
    release = entry.release
    if release is None:
        return None
    try:
        inventory = tick.inventory(release.name)
    except StateFailed:
        return None  # the reconcile reports it, as the Release's error
    if not inventory.entries:
        return inventory
    try:
        cluster = resolve_cluster(tick, release)
        rules = rules_for(release, cluster, tick.programs, tick.health_memo(cluster))
        memo = tick.observed_memo(cluster)
        deployer = tick.deployer(cluster)
        observed = observe(inventory, deployer, tick.now, rules, memo, recall=recall)
        tick.note_inventory(observed)
        if save:
            tick.save_inventory(release.name)
    except ConvoyError as exc:
        log.warning("%s: not observed: %s", release.name, exc)
        return inventory
    return observed


def select(tick: Tick, names: Sequence[str]) -> list[ReleaseEntry]:
    """The entries of the named Releases (none: every one); a removed Release that still
    has its status file is accepted by name and has no entry (see :func:`retirements`)."""
    releases = tick.snapshot.releases
    unknown = [n for n in names if n not in releases and n not in tick.opened]
    if unknown:
        raise UsageError(f"not a Release in releases/: {', '.join(unknown)}")
    if not names:
        return [releases[n] for n in sorted(releases)]
    return [releases[n] for n in names if n in releases]


def retirements(tick: Tick, options: TickOptions, report: TickReport) -> None:
    """The removed Releases' retirement (``engine/retire.py``), before the others are
    reconciled (an adopter then finds the inventory it takes over): every removed Release,
    or the named ones. Inside the tick's batch of status commits."""
    if options.shard is not None:
        return  # the tick that deals the shards retires them, once
    if options.orphan:
        if not options.names:
            raise UsageError("--orphan needs the names of the removed Releases to orphan")
        present = [n for n in options.names if n in tick.snapshot.releases]
        if present:
            named = ", ".join(present)
            raise UsageError(f"--orphan takes removed Releases only; in releases/: {named}")
    retire_options = RetireOptions(options.names, options.orphan, options.allow_deletions)
    handled, waiting = retire_removed(tick, retire_options)
    report.handled.extend(handled)
    report.skipped.update(waiting)


class _Collections:
    """Python's cycle collector is off while at least one tick of this process runs, and
    back as the host had it once the last one ends. A tick makes a few hundred thousand
    objects that live until it ends (models, parsed manifests, inventories) and almost no
    reference cycles: a first, second, steady and quiet tick of 1,000 Releases each left
    104-130 objects for the collector (``gc.collect()`` after a tick run with it off),
    while with it on it walked the live ones again and again, even with thresholds 70
    times above the default and what the tick opened with frozen out of its sight:
    10-13% of a tick of 10,000 (bench/fleet.py's state, copies taking turns: quiet tick
    3.1 -> 2.8 s, steady tick 15.8 -> 13.9 s, the same peak memory). The few cycles a
    tick leaves are the host's collector's once it ends."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.host_enabled = True

    @contextmanager
    def paused(self) -> Iterator[None]:
        with self.lock:
            if self.running == 0:
                self.host_enabled = gc.isenabled()
                gc.disable()
            self.running += 1
        try:
            yield
        finally:
            with self.lock:
                self.running -= 1
                if self.running == 0 and self.host_enabled:
                    gc.enable()


collections_paused = _Collections().paused


PARALLEL_RELEASES = 32
"""Releases of one cluster wave on Kubernetes reconciled at once: their time is mostly
waiting for the API server."""


def due_facts(tick: Tick) -> DueFacts:
    """What :func:`~convoy_batch.ticks.due.is_due` reads of the tick."""
    return DueFacts(
        snapshot=tick.snapshot,
        stores=tick.stores,
        status_of=tick.status,
        sources=tick.sources,
        charts=tick.charts,
        now=tick.now,
        forced=tick.forced,
    )


def open_between(repo: Path, state_dir: Path, now: datetime) -> tuple[Tick, DueFacts, list[str]]:
    """A tick opened for a reader between ticks (the wake-up sensor and the tick schedule:
    :mod:`convoy_batch.ticks.wakeups`): the tick, to observe Releases with
    (:func:`observe_release`), what is due read of it (:func:`due_facts`), and the
    removed Releases whose status file HEAD still holds."""
    tick = Tick.open(repo, state_dir, now)
    return tick, due_facts(tick), gone_names(tick.snapshot, tick.opened)


def notification_facts(tick: Tick) -> TickFacts:
    """What the tick's notifications read of it (the Alerts' selectors: each Release's
    Cluster and labels at the commit the tick starts from; a removed Release's from its
    last committed version)."""
    releases = {
        name: ReleaseFacts(name, entry.release.spec.cluster, entry.release.metadata.labels)
        for name, entry in tick.snapshot.releases.items()
        if entry.release is not None
    }
    # A removed Release, as its last committed version said.
    for name in gone_names(tick.snapshot, tick.opened):
        version = tick.repo.last_version(name, tick.snapshot.commit)
        if version is not None and version.release is not None:
            spec, meta = version.release.spec, version.release.metadata
            releases[name] = ReleaseFacts(name, spec.cluster, meta.labels)
    return TickFacts(
        repo=tick.repo.repo,
        start=tick.snapshot.commit,
        state_dir=tick.stores.state_dir,
        locks=tick.stores.locks,
        now=tick.now,
        releases=releases,
        cache=tick.cache("repo"),
    )


def due_entries(
    tick: Tick, entries: Sequence[ReleaseEntry], options: TickOptions, report: TickReport
) -> tuple[list[ReleaseEntry], set[str]]:
    """The entries to reconcile (named ones, else the due ones and those a killed tick
    left a record for), and those of them whose health is to be observed just before each
    is reconciled (``later``: see :func:`_reconcile_due`); the others go to
    ``report.skipped`` with the health seen of them written."""
    facts = due_facts(tick)
    due = []
    later: set[str] = set()
    unfinished = tick.stores.intents.names()  # a killed tick's decisions: completed first
    every = bool(options.names or options.all_releases)  # each one is reconciled
    for entry in entries:
        # Health is read where it matters: a Progressing Release (its wake-ups depend on
        # it) and every Release about to be reconciled (the verdict and lastHealthy).
        inventory = None
        if options.observe_first and not every and progressing(facts.status_of(entry.name)):
            inventory = observe_release(tick, entry, save=False)
        if not options.names and entry.name not in unfinished:
            if not is_due(facts, entry, inventory, options.all_releases):
                report.skipped[entry.name] = "not due"
                if inventory is not None:
                    _save_observed(tick.inventories, entry.name)
                continue
            if options.observe_first and inventory is None:
                later.add(entry.name)
        elif options.observe_first and every:
            later.add(entry.name)
        due.append(entry)
    if options.names:  # the named ones, and none other
        return due, later
    graph = dependency_graph(tick.snapshot.releases)
    chosen, added = _with_dependents(due, entries, graph, facts.status_of)
    for name in added:
        report.skipped.pop(name, None)
        if options.observe_first:
            later.add(name)
    return chosen, later


def _with_dependents(
    due: list[ReleaseEntry],
    entries: Sequence[ReleaseEntry],
    graph: Mapping[str, Sequence[str]],
    status_of: Callable[[str], ReleaseStatus],
) -> tuple[list[ReleaseEntry], list[str]]:
    """``due`` and the Releases waiting for a dependency that is due in this tick (it may
    become ready in it: they go after it, in the same tick), in the entries' order; and
    the names of those added (observed later, as due ones are)."""
    if not graph:
        return due, []
    chosen = {e.name for e in due}
    added = []
    for name in in_order([e.name for e in entries], graph):
        if name in chosen or not any(d in chosen for d in graph.get(name, ())):
            continue
        attempt = status_of(name).last_attempted
        if attempt is not None and attempt.reason == Reason.WAITING_FOR_DEPENDENCY:
            chosen.add(name)
            added.append(name)
    return [e for e in entries if e.name in chosen], added


def _reconcile_due(
    tick: Tick, entries: Sequence[ReleaseEntry], options: TickOptions, report: TickReport
) -> None:
    """Reconcile, each under its lock, the named Releases or the due ones."""
    due, later = due_entries(tick, entries, options, report)
    tick.stores.locks.make_release_locks([e.name for e in due])
    results: dict[str, Handled | str] = {}
    graph = dependency_graph(tick.snapshot.releases)
    clusters = tick.snapshot.clusters
    # A due Release whose health decided nothing yet (``later``) is observed just before
    # it is reconciled: each inventory is then held from its observation until its
    # Release is handled, not the fleet's from the tick's start (10,000 Releases:
    # 120 MiB). Its objects are read whatever the observer's memo holds; its sync reads
    # them again from the deployer's memory of them.
    observe = partial(observe_release, tick, save=False, recall=False)
    for group in by_cluster_wave(clusters, due):
        # The cluster wave gate reads only lower waves, which are done by then; a
        # dependency goes before its dependents (they read the status it gives).
        by_name = {e.name: e for e in group}
        group = [by_name[n] for n in in_order(list(by_name), graph)]
        remote = [e for e in group if _on_kubernetes(clusters, e)]
        for entry in group:
            if entry not in remote:
                if entry.name in later:
                    observe(entry)
                results[entry.name] = _handle_locked(tick, entry)
        for entry in remote:  # one by one, here, before they are reconciled side by side
            if entry.name in later:
                observe(entry)
        _render_in_order(partial(stage_render, tick), remote)
        layers = depth([e.name for e in remote], graph)
        with ThreadPoolExecutor(PARALLEL_RELEASES, thread_name_prefix="convoy") as pool:
            for layer in sorted(set(layers.values())):
                side_by_side = [e for e in remote if layers[e.name] == layer]
                for entry, result in zip(
                    side_by_side,
                    pool.map(partial(_handle_locked, tick), side_by_side),
                    strict=True,
                ):
                    results[entry.name] = result
    for entry in due:  # reported in the repository's order, whatever finished first
        result = results[entry.name]
        if isinstance(result, str):
            report.skipped[entry.name] = result
        else:
            report.handled.append(result)


def _render_in_order(render: Callable[[Release], object], entries: Sequence[ReleaseEntry]) -> None:
    """Render (``render``: the tick's :func:`stage_render`) the Releases one by one in
    repository order before they are reconciled side by side, so which Release owns an
    object shared by two renders does not depend on which thread comes first (rendering
    is CPU-bound: nothing is lost). A render that fails fails again, and is reported,
    when its Release is reconciled."""
    for entry in entries:
        if entry.release is not None:
            try:
                render(entry.release)
            except ConvoyError:
                continue


def _save_observed(inventories: Inventories, name: str) -> None:
    """Write the health observed of a Release that is not reconciled (when it is, its
    inventory is written once, after the reconcile)."""
    try:
        inventories.save(name)
    except StateFailed as exc:
        log.warning("%s: health not recorded: %s", name, exc)


RACED = "another tick committed its status after this one read it; the next tick goes on"
"""Why a Release is skipped whose status another tick committed while this one ran: its
decision would be made from the status this tick read, which is no longer HEAD's."""


def _handle_locked(tick: Tick, entry: ReleaseEntry) -> "Handled | str":
    try:
        with tick.stores.locks.release(entry.name):
            with tick.shared.lock:  # the status store's repository is not shared across threads
                raced = tick.status_store.committed_since_opened(entry.name)
            if raced:
                return RACED
            handled = handle_release(tick, entry)
            tick.let_go(entry.name)  # a tick of 10,000 would hold every render till it ends
            return handled
    except LockBusy:
        return "another reconcile holds its lock"
    except StateFailed as exc:  # its lock file cannot be used
        outcome = failed(exc)
        empty = ReleaseInventory(release=entry.name)
        return tick.desk.sync_handler(entry.name, entry.release, outcome, empty, None)


def cluster_of(clusters: Mapping[str, Cluster], entry: ReleaseEntry) -> Cluster | None:
    return clusters.get(entry.release.spec.cluster) if entry.release else None


def _on_kubernetes(clusters: Mapping[str, Cluster], entry: ReleaseEntry) -> bool:
    cluster = cluster_of(clusters, entry)
    return cluster is not None and cluster.spec.kubernetes is not None


def by_cluster_wave(
    clusters: Mapping[str, Cluster], entries: Sequence[ReleaseEntry]
) -> list[list[ReleaseEntry]]:
    """Entries grouped by their Cluster's wave, lowest first (no Cluster: first)."""
    groups: dict[int, list[ReleaseEntry]] = {}
    for entry in entries:
        cluster = cluster_of(clusters, entry)
        groups.setdefault(cluster.spec.wave if cluster else -(2**31), []).append(entry)
    return [groups[wave] for wave in sorted(groups)]


def run_tick(
    repo: Path,
    state_dir: Path,
    now: datetime,
    names: Sequence[str] = (),
    *,
    all_releases: bool = False,
    forced: Set[str] = frozenset(),
    observe_first: bool = True,
    deployer_factory: DeployerFactory = make_deployer,
    shard: Set[str] | None = None,
    orphan: bool = False,
    allow_deletions: bool = False,
) -> TickReport:
    """One tick: named Releases are reconciled whether due or not; otherwise the due ones
    (every one with ``all_releases``, which is also the full resync of SPEC 13).
    ``deployer_factory`` builds each Cluster's deployer (tests inject failures there).
    ``shard``: only these Releases, one part of a tick run by several processes
    (:mod:`convoy_batch.ticks.shards`); the render garbage collection and the push are left to
    the caller, once every part is done (:func:`~convoy_batch.ticks.shards.finish_tick`).
    ``orphan`` and ``allow_deletions``: see :class:`TickOptions`."""
    options = TickOptions(
        tuple(names),
        all_releases,
        frozenset(forced),
        observe_first,
        None if shard is None else frozenset(shard),
        orphan,
        allow_deletions,
    )
    return run_with(repo, state_dir, now, options, deployer_factory)


def run_with(
    repo: Path,
    state_dir: Path,
    now: datetime,
    options: TickOptions,
    deployer_factory: DeployerFactory = make_deployer,
) -> TickReport:
    """:func:`run_tick` with its options as one value (a shard's worker is given them).
    The remote's URL (:func:`~convoy_batch.status.remote.remote_url`) is read here, once,
    and passed down beside the options, never in them (a shard's are stored)."""
    remote = remote_url()
    # A shard works in its parent's clone, which the parent brought up to date.
    clones = tick_clone(repo, state_dir) if options.shard is None else nullcontext(None)
    with collections_paused(), clones as clone:
        tick = Tick.open(
            repo, state_dir, now, forced=options.forced, deployer_factory=deployer_factory
        )
        return _run_tick(tick, options, clone, remote)


def _run_tick(
    tick: Tick, options: TickOptions, clone: Clone | None, remote: str | None
) -> TickReport:
    """The tick, once opened (:func:`run_tick`), in ``clone`` when it works in one of its
    own; ``remote``: the remote's URL when the repository is a clone of one (a shard's
    too: it works in its parent's), else None."""
    entries = select(tick, options.names)
    if options.shard is not None:
        entries = [e for e in entries if e.name in options.shard]
    # The events of this tick's status commits (a shard's are its caller's to deliver).
    notifier = Notifier.open(notification_facts(tick)) if options.shard is None else None
    report = TickReport()
    if options.shard is None:
        report.set_warnings = set_warnings(tick.snapshot.sets)
    with tick.status_store.batch():
        retirements(tick, options, report)
        _reconcile_due(tick, entries, options, report)
        if options.shard is None:  # a sharded tick's parent records them once shards end
            record_sets(tick.desk, tick.snapshot, tick.retired.removed)
    report.commit_error = tick.status_store.error
    # Statuses of this tick that HEAD lacks (commits not written) must not steer the GC.
    in_git = tick.status_store.error is None or tick.status_store.landed
    # The decisions are in git: their records can go (from a clone, once they are kept
    # on the remote or in the state directory: see finish.push_clone).
    if in_git and remote is None:
        for handled in report.handled:
            tick.stores.intents.clear(handled.name)
    if in_git:  # from a clone, a retirement's record goes once HEAD lacks its status
        forget_retired(tick, report.handled if remote is None else ())
    if options.shard is None and not options.names:
        remember_head(tick)
    unstored = any_unstored(tick.stores.writer.drain())  # renders on disk before the GC looks
    report.collectable = in_git and not unstored
    if options.shard is None:
        report.push_warning = finish_run(
            tick.status_store, tick.stores, tick.statuses, report, clone
        )
    if notifier is not None:  # the events of the status commits, now they have landed
        notifier.deliver()
    tick.close()
    return report
