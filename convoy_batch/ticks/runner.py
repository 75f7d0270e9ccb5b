"""A tick over many Releases: observe, pick the due ones, reconcile each under its lock,
commit changed statuses, garbage-collect renders once, push once, then notify.

This is the library call that the CLI and the Dagster assets both make. Does I/O.
"""

import gc
import logging
import threading
from collections.abc import Iterator, Sequence, Set
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path

from convoy_batch.engine.handler import Handled, sync_handler
from convoy_batch.engine.retire import (
    RetireOptions,
    forget_retired,
    gone_names,
    remember_head,
    retire_removed,
)
from convoy_batch.engine.setstatus import record_sets
from convoy_batch.engine.stages.gates import windows_of
from convoy_batch.engine.stages.outcome import failed
from convoy_batch.engine.stages.render import resolve_cluster, stage_render
from convoy_batch.engine.stages.verify import next_measurement
from convoy_batch.engine.tick import DeployerFactory, Tick, make_deployer
from convoy_batch.errors import (
    ConvoyError,
    InvalidRelease,
    InvalidSyncWindow,
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
    RolloutState,
)
from convoy_batch.notify import Notifier, ReleaseFacts, TickFacts
from convoy_batch.reasons import Reason
from convoy_batch.reconcile import handle_release, pending_force_sync, source_revision
from convoy_batch.repo.clone import Clone, push_apart, remote_url, tick_clone
from convoy_batch.repo.clone import finish as finish_clone
from convoy_batch.repo.gitops import ReleaseEntry
from convoy_batch.rollout.depends import depth, in_order
from convoy_batch.rollout.due import DueReason, due_reasons, health_snapshot
from convoy_batch.rollout.status import written_at
from convoy_batch.rollout.windows import window_state
from convoy_batch.state.files import os_problem
from convoy_batch.state.locks import LockBusy

log = logging.getLogger("convoy_batch")


@dataclass(frozen=True)
class TickOptions:
    """How a tick runs, passed whole (the command line's and the Dagster op's choices)."""

    names: tuple[str, ...] = ()
    """Reconcile these, due or not; none: the due ones."""
    all_releases: bool = False
    """Every Release (``--all``, the full resync of SPEC 13)."""
    forced: frozenset[str] = frozenset()
    """Releases with a forced sync pending (``--force``, a manual materialization)."""
    observe_first: bool = True
    """Refresh health before deciding (``--no-observe``: left to ``observe``)."""
    shard: frozenset[str] | None = None
    """Only these Releases: one part of a tick run by several processes."""
    orphan: bool = False
    """End the named removed Releases as Orphaned, sending nothing (``--orphan``)."""
    allow_deletions: bool = False
    """Let the mass-deletion guard's deletions through (``--allow-deletions``)."""


@dataclass
class TickReport:
    handled: list[Handled] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """Releases not reconciled, with why (not due, busy)."""
    push_warning: str | None = None
    commit_error: str | None = None
    """Why the status commits of the tick were not written (they are on a later tick)."""
    set_warnings: list[str] = field(default_factory=list)
    """One line per ReleaseSet whose members cannot be told (GenerationFailed) and per
    member refused for a name another Release holds."""
    collectable: bool = True
    """Every render of the tick is stored and its statuses are in git, so the render
    garbage collection may read them (a shard's report says so of its part)."""

    @property
    def errored(self) -> bool:
        return self.commit_error is not None or any(h.outcome.is_error for h in self.handled)


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


def is_due(
    tick: Tick, entry: ReleaseEntry, inventory: ReleaseInventory | None, full: bool
) -> Sequence[DueReason]:
    release = entry.release
    if release is None:
        return [DueReason.INVALID_RELEASE]
    status = tick.status(release.name)
    try:
        force = pending_force_sync(tick, release, status) is not None
    except InvalidRelease:
        return [DueReason.INVALID_FORCE_SYNC]
    return due_reasons(
        release,
        status,
        tick.stores.ticks.load(release.name),
        health=health_snapshot(inventory) if inventory is not None else None,
        release_blob=entry.blob,
        source_revision=source_revision(tick, entry),
        force_pending=force,
        full_resync=full,
        now=tick.now,
        window_opened=window_opened(tick, release, status),
        dependency_changed=dependency_changed(tick, release, status),
        flight_changed=flight_changed(tick, release, status),
        measurement_at=next_measurement(tick, release, status),
    )


def dependency_changed(tick: Tick, release: Release, status: ReleaseStatus) -> bool:
    """The Release's render waits for a dependency whose status was written since the
    Release was last reconciled."""
    attempt = status.last_attempted
    if attempt is None or attempt.reason != Reason.WAITING_FOR_DEPENDENCY:
        return False
    last = tick.stores.ticks.load(release.name).last_reconcile_at
    for dependency in release.spec.depends_on:
        written = written_at(tick.status(dependency.name))
        if last is None or (written is not None and written > last):
            return True
    return False


def flight_changed(tick: Tick, release: Release, status: ReleaseStatus) -> bool:
    """The Release's render waits for ``maxInFlight`` (a ReleaseSet member), and another
    member of its set had its status written since the Release was last reconciled."""
    attempt = status.last_attempted
    if attempt is None or attempt.reason != Reason.WAITING_FOR_MAX_IN_FLIGHT:
        return False
    entry = tick.snapshot.sets.get(tick.snapshot.set_of(release.name) or "")
    last = tick.stores.ticks.load(release.name).last_reconcile_at
    for member in entry.members if entry is not None else ():
        written = written_at(tick.status(member))
        if member != release.name and (last is None or (written and written > last)):
            return True
    return False


def dependency_graph(tick: Tick) -> dict[str, list[str]]:
    """Each valid Release's dependencies (only those that have some)."""
    return {
        name: [d.name for d in entry.release.spec.depends_on]
        for name, entry in tick.snapshot.releases.items()
        if entry.release is not None and entry.release.spec.depends_on
    }


def window_opened(tick: Tick, release: Release, status: ReleaseStatus) -> bool:
    """A closed sync window held the Release's render and is open now (a window that
    does not parse: due, so that its reconcile reports it)."""
    attempt = status.last_attempted
    if attempt is None or attempt.reason != Reason.WAITING_FOR_SYNC_WINDOW:
        return False
    cluster = tick.snapshot.clusters.get(release.spec.cluster)
    if cluster is None:
        return True
    try:
        return window_state(windows_of(release, cluster), tick.now).open
    except InvalidSyncWindow:
        return True


def progressing(tick: Tick, entry: ReleaseEntry) -> bool:
    """Whether the Release's rollout is Progressing (its health can wake it up)."""
    rollout = tick.status(entry.name).rollout
    return rollout is not None and rollout.state == RolloutState.PROGRESSING


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


def due_entries(
    tick: Tick, entries: Sequence[ReleaseEntry], options: TickOptions, report: TickReport
) -> tuple[list[ReleaseEntry], set[str]]:
    """The entries to reconcile (named ones, else the due ones and those a killed tick
    left a record for), and those of them whose health is to be observed just before each
    is reconciled (:func:`observe_due`); the others go to ``report.skipped`` with the
    health seen of them written."""
    due = []
    later: set[str] = set()
    unfinished = tick.stores.intents.names()  # a killed tick's decisions: completed first
    every = bool(options.names or options.all_releases)  # each one is reconciled
    for entry in entries:
        # Health is read where it matters: a Progressing Release (its wake-ups depend on
        # it) and every Release about to be reconciled (the verdict and lastHealthy).
        inventory = None
        if options.observe_first and not every and progressing(tick, entry):
            inventory = observe_release(tick, entry, save=False)
        if not options.names and entry.name not in unfinished:
            if not is_due(tick, entry, inventory, options.all_releases):
                report.skipped[entry.name] = "not due"
                if inventory is not None:
                    _save_observed(tick, entry)
                continue
            if options.observe_first and inventory is None:
                later.add(entry.name)
        elif options.observe_first and every:
            later.add(entry.name)
        due.append(entry)
    return _with_dependents(tick, entries, due, options, report, later), later


def observe_due(tick: Tick, entry: ReleaseEntry, later: Set[str]) -> None:
    """Observe a due Release just before it is reconciled, when its health decided
    nothing yet (``later``, :func:`due_entries`): each inventory is then held from its
    observation until its Release is handled, not the fleet's from the tick's start
    (10,000 Releases: 120 MiB). Its objects are read whatever the observer's memo holds;
    its sync reads them again from the deployer's memory of them."""
    if entry.name in later:
        observe_release(tick, entry, save=False, recall=False)


def _with_dependents(
    tick: Tick,
    entries: Sequence[ReleaseEntry],
    due: list[ReleaseEntry],
    options: TickOptions,
    report: TickReport,
    later: set[str],
) -> list[ReleaseEntry]:
    """``due`` and the Releases waiting for a dependency that is due in this tick (it may
    become ready in it: they go after it, in the same tick), in the entries' order (those
    added are observed later, as ``later`` says)."""
    graph = dependency_graph(tick)
    if not graph or options.names:
        return due
    chosen = {e.name for e in due}
    by_name = {e.name: e for e in entries}
    for name in in_order(list(by_name), graph):
        if name in chosen or not any(d in chosen for d in graph.get(name, ())):
            continue
        attempt = tick.status(name).last_attempted
        if attempt is not None and attempt.reason == Reason.WAITING_FOR_DEPENDENCY:
            chosen.add(name)
            report.skipped.pop(name, None)
            if options.observe_first:
                later.add(name)
    return [e for e in entries if e.name in chosen]


def _reconcile_due(
    tick: Tick, entries: Sequence[ReleaseEntry], options: TickOptions, report: TickReport
) -> None:
    """Reconcile, each under its lock, the named Releases or the due ones."""
    due, later = due_entries(tick, entries, options, report)
    tick.stores.locks.make_release_locks([e.name for e in due])
    results: dict[str, Handled | str] = {}
    graph = dependency_graph(tick)
    for group in by_cluster_wave(tick, due):
        # The cluster wave gate reads only lower waves, which are done by then; a
        # dependency goes before its dependents (they read the status it gives).
        by_name = {e.name: e for e in group}
        group = [by_name[n] for n in in_order(list(by_name), graph)]
        remote = [e for e in group if _on_kubernetes(tick, e)]
        for entry in group:
            if entry not in remote:
                observe_due(tick, entry, later)
                results[entry.name] = _handle_locked(tick, entry)
        for entry in remote:  # one by one, here, before they are reconciled side by side
            observe_due(tick, entry, later)
        _render_in_order(tick, remote)
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


def _render_in_order(tick: Tick, entries: Sequence[ReleaseEntry]) -> None:
    """Render the Releases one by one in repository order before they are reconciled side
    by side, so which Release owns an object shared by two renders does not depend on
    which thread comes first (rendering is CPU-bound: nothing is lost). A render that
    fails fails again, and is reported, when its Release is reconciled."""
    for entry in entries:
        if entry.release is not None:
            try:
                stage_render(tick, entry.release)
            except ConvoyError:
                continue


def _save_observed(tick: Tick, entry: ReleaseEntry) -> None:
    """Write the health observed of a Release that is not reconciled (when it is, its
    inventory is written once, after the reconcile)."""
    try:
        tick.save_inventory(entry.name)
    except StateFailed as exc:
        log.warning("%s: health not recorded: %s", entry.name, exc)


RACED = "another tick committed its status after this one read it; the next tick goes on"
"""Why a Release is skipped whose status another tick committed while this one ran: its
decision would be made from the status this tick read, which is no longer HEAD's."""


def _handle_locked(tick: Tick, entry: ReleaseEntry) -> "Handled | str":
    try:
        with tick.stores.locks.release(entry.name):
            with tick.lock:  # the status store's repository is not shared across threads
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
        return sync_handler(tick, entry.name, entry.release, outcome, empty, None)


def cluster_of(tick: Tick, entry: ReleaseEntry) -> Cluster | None:
    return tick.snapshot.clusters.get(entry.release.spec.cluster) if entry.release else None


def _on_kubernetes(tick: Tick, entry: ReleaseEntry) -> bool:
    cluster = cluster_of(tick, entry)
    return cluster is not None and cluster.spec.kubernetes is not None


def by_cluster_wave(tick: Tick, entries: Sequence[ReleaseEntry]) -> list[list[ReleaseEntry]]:
    """Entries grouped by their Cluster's wave, lowest first (no Cluster: first)."""
    groups: dict[int, list[ReleaseEntry]] = {}
    for entry in entries:
        cluster = cluster_of(tick, entry)
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
    the caller, once every part is done (:func:`finish_tick`). ``orphan`` and
    ``allow_deletions``: see :class:`TickOptions`."""
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
    """:func:`run_tick` with its options as one value (a shard's worker is given them)."""
    # A shard works in its parent's clone, which the parent brought up to date.
    clones = tick_clone(repo, state_dir) if options.shard is None else nullcontext(None)
    with collections_paused(), clones as clone:
        return _run_tick(repo, state_dir, now, options, deployer_factory, clone)


def _run_tick(
    repo: Path,
    state_dir: Path,
    now: datetime,
    options: TickOptions,
    deployer_factory: DeployerFactory,
    clone: Clone | None,
) -> TickReport:
    tick = Tick.open(repo, state_dir, now, forced=options.forced, deployer_factory=deployer_factory)
    entries = select(tick, options.names)
    if options.shard is not None:
        entries = [e for e in entries if e.name in options.shard]
    # The events of this tick's status commits (a shard's are its caller's to deliver).
    notifier = Notifier.open(notification_facts(tick)) if options.shard is None else None
    report = TickReport()
    if options.shard is None:
        report.set_warnings = set_warnings(tick)
    with tick.status_store.batch():
        retirements(tick, options, report)
        _reconcile_due(tick, entries, options, report)
        if options.shard is None:  # a sharded tick's parent records them once shards end
            record_sets(tick)
    report.commit_error = tick.status_store.error
    # Statuses of this tick that HEAD lacks (commits not written) must not steer the GC.
    in_git = tick.status_store.error is None or tick.status_store.landed
    # The decisions are in git: their records can go (from a clone, once they are kept
    # on the remote or in the state directory: see _finish).
    if in_git and remote_url() is None:
        for handled in report.handled:
            tick.stores.intents.clear(handled.name)
    if in_git:  # from a clone, a retirement's record goes once HEAD lacks its status
        forget_retired(tick, report.handled if remote_url() is None else ())
    if options.shard is None and not options.names:
        remember_head(tick)
    unstored = _unstored(tick.stores.writer.drain())  # renders on disk before the GC looks
    report.collectable = in_git and not unstored
    if options.shard is None:
        report.push_warning = _finish(tick, report, clone)
    if notifier is not None:  # the events of the status commits, now they have landed
        notifier.deliver()
    tick.close()
    return report


def set_warnings(tick: Tick) -> list[str]:
    """The ReleaseSet lines of the tick's snapshot (see :attr:`TickReport.set_warnings`)."""
    lines = []
    for name, entry in tick.snapshot.sets.items():
        if entry.failed is not None:
            line = f"{name}: GenerationFailed: {entry.failed}; no member is removed"
            if entry.frozen_at is not None:
                line += (
                    f", those it cannot generate now sync as {entry.frozen_at[:12]} generated them"
                )
            lines.append(line)
        lines.extend(entry.refused)
    return lines


def _unstored(failed: Sequence[tuple[Path, OSError]]) -> bool:
    """Report the background writes that failed and no Release settled (each Release
    settles its own render: none should be left); whether there were any."""
    for path, exc in failed:
        log.warning("not stored (made again when needed): %s", os_problem(path, exc))
    return bool(failed)


def notification_facts(tick: Tick) -> TickFacts:
    """What the tick's notifications read of it (the Alerts' selectors: each Release's
    Cluster and labels at the commit the tick starts from; a removed Release's from its
    last committed version)."""
    releases = {
        name: ReleaseFacts(name, entry.release.spec.cluster, entry.release.metadata.labels)
        for name, entry in tick.snapshot.releases.items()
        if entry.release is not None
    }
    for name in gone_names(tick):  # a removed Release, as its last committed version said
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


def _finish(tick: Tick, report: TickReport, clone: Clone | None = None) -> str | None:
    """The end of a tick (of one process, or of every shard once all are done), once its
    statuses are committed: the render garbage collection (when a render was stored and
    the report is collectable) and the push (when a status was committed; in a clone,
    when it holds commits the remote lacks); the push's warning."""
    handled = {h.name for h in report.handled}
    persisted = report.collectable and any(h.outcome.persisted for h in report.handled)
    committed = any(h.commit for h in report.handled)
    # A status file that could not be read may refer to renders nobody else knows of
    # (its last healthy one): no garbage collection until it is readable or rewritten.
    unknown = tick.status_store.unreadable - handled
    if persisted and not unknown:
        tick.stores.renders.gc(referenced_renders(tick))
    if clone is None:
        return tick.status_store.push().warning if committed else None
    return _push_clone(tick, clone)


def _push_clone(tick: Tick, clone: Clone) -> str | None:
    """Push what the clone holds that the remote lacks (kept in the state directory when
    the push fails), then drop the records of what is kept; the push's warning."""
    warning, kept = finish_clone(tick.status_store.pusher, clone)
    if kept:
        _drop_kept_records(tick)
    return warning


def _drop_kept_records(tick: Tick, only: Set[str] | None = None) -> None:
    """Remove the write-ahead records whose status HEAD holds, once a clone's commits are
    kept (pushed, or in the state directory's bundle): the clone itself may not outlive
    the run. ``only``: these Releases' records (a shard's, while other shards run)."""
    intents = tick.stores.intents
    for name in intents.names():
        if only is not None and name not in only:
            continue
        intent = intents.load(name)
        if intent is not None and tick.status_store.load(name) == intent.status:
            intents.clear(name)


def finish_tick(
    repo: Path, state_dir: Path, now: datetime, report: TickReport, clone: Clone | None = None
) -> str | None:
    """:func:`_finish` for a tick whose parts ran as shards, once all are done (the
    statuses read again: the shards committed them)."""
    tick = Tick.open(repo, state_dir, now)
    try:
        return _finish(tick, report, clone)
    finally:
        tick.close()


def push_kept(repo: Path, state_dir: Path, now: datetime, clone: Clone) -> str | None:
    """Push what a clone holds that the remote lacks, keeping it when the push fails, with
    no garbage collection (the start of a tick whose shards run apart, before they fetch);
    the push's warning."""
    tick = Tick.open(repo, state_dir, now)
    try:
        return _push_clone(tick, clone)
    finally:
        tick.close()


def finish_shard(
    repo: Path, state_dir: Path, now: datetime, names: Set[str], clone: Clone
) -> str | None:
    """The end of a shard run apart in a clone of its own: its commits pushed with those
    the state directory kept (:func:`convoy_batch.repo.clone.push_apart`), and the
    records of its Releases (``names``) dropped once they are kept; the push's warning."""
    tick = Tick.open(repo, state_dir, now)
    try:
        warning, kept = push_apart(tick.status_store.pusher, clone)
        if kept:
            _drop_kept_records(tick, names)
        return warning
    finally:
        tick.close()


def referenced_renders(tick: Tick) -> set[str]:
    """Every renderRef a status file or a write-ahead record refers to (rollout,
    attempts, history; the record's step)."""
    statuses = list(tick.statuses().values())
    refs: set[str] = set()
    for name in tick.stores.intents.names():
        intent = tick.stores.intents.load(name)
        if intent is not None:
            statuses.append(intent.status)
            refs.add(intent.step.render_ref)
    for status in statuses:
        refs.update(status_renders(status))
    return refs


def status_renders(status: ReleaseStatus) -> set[str]:
    """The renderRefs one status refers to."""
    records = [status.last_successful, status.last_healthy, *status.history]
    refs = {r.render_ref for r in records if r is not None}
    if status.rollout is not None:
        refs.add(status.rollout.render_ref)
    if status.last_attempted is not None and status.last_attempted.render_ref:
        refs.add(status.last_attempted.render_ref)
    return refs
