"""What a tick does once its Releases are handled: the ReleaseSets' warnings, the
background writes reported, the render GC and the push (with a clone's bundle). Each step
takes the stores and statuses it reads; a sharded tick opens the tick again for them,
once every shard is done (:mod:`convoy_batch.ticks.shards`). Does I/O."""

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from pathlib import Path

from convoy_batch.models import (
    ReleaseStatus,
)
from convoy_batch.repo.gitops import SetEntry
from convoy_batch.state.files import os_problem
from convoy_batch.state.intents import IntentStore
from convoy_batch.status.remote import Clone
from convoy_batch.status.remote import finish as finish_clone
from convoy_batch.status.store import StatusStore
from convoy_batch.store import Stores
from convoy_batch.ticks.options import TickReport

log = logging.getLogger("convoy_batch")


def set_warnings(sets: Mapping[str, SetEntry]) -> list[str]:
    """The lines of the snapshot's ReleaseSets (see :attr:`TickReport.set_warnings`)."""
    lines = []
    for name, entry in sets.items():
        if entry.failed is not None:
            line = f"{name}: GenerationFailed: {entry.failed}; no member is removed"
            if entry.frozen_at is not None:
                line += (
                    f", those it cannot generate now sync as {entry.frozen_at[:12]} generated them"
                )
            lines.append(line)
        lines.extend(entry.refused)
    return lines


def any_unstored(failed: Sequence[tuple[Path, OSError]]) -> bool:
    """Report the background writes that failed and no Release settled (each Release
    settles its own render: none should be left); whether there were any."""
    for path, exc in failed:
        log.warning("not stored (made again when needed): %s", os_problem(path, exc))
    return bool(failed)


def finish_run(
    status_store: StatusStore,
    stores: Stores,
    statuses: Callable[[], Mapping[str, ReleaseStatus]],
    report: TickReport,
    clone: Clone | None = None,
) -> str | None:
    """The end of a tick (of one process, or of every shard once all are done), once its
    statuses are committed: the render garbage collection (when a render was stored and
    the report is collectable) and the push (when a status was committed; in a clone,
    when it holds commits the remote lacks); the push's warning. ``statuses``: every
    Release's status as the tick knows it, read only for the garbage collection."""
    handled = {h.name for h in report.handled}
    persisted = report.collectable and any(h.outcome.persisted for h in report.handled)
    committed = any(h.commit for h in report.handled)
    # A status file that could not be read may refer to renders nobody else knows of
    # (its last healthy one): no garbage collection until it is readable or rewritten.
    unknown = status_store.unreadable - handled
    if persisted and not unknown:
        stores.renders.gc(referenced_renders(statuses().values(), stores.intents))
    if clone is None:
        return status_store.push().warning if committed else None
    return push_clone(status_store, stores.intents, clone)


def push_clone(status_store: StatusStore, intents: IntentStore, clone: Clone) -> str | None:
    """Push what the clone holds that the remote lacks (kept in the state directory when
    the push fails), then drop the records of what is kept; the push's warning."""
    warning, kept = finish_clone(status_store.pusher, clone)
    if kept:
        drop_kept_records(status_store, intents)
    return warning


def drop_kept_records(
    status_store: StatusStore, intents: IntentStore, only: Set[str] | None = None
) -> None:
    """Remove the write-ahead records whose status HEAD holds, once a clone's commits are
    kept (pushed, or in the state directory's bundle): the clone itself may not outlive
    the run. ``only``: these Releases' records (a shard's, while other shards run)."""
    for name in intents.names():
        if only is not None and name not in only:
            continue
        intent = intents.load(name)
        if intent is not None and status_store.load(name) == intent.status:
            intents.clear(name)


def referenced_renders(statuses: Iterable[ReleaseStatus], intents: IntentStore) -> set[str]:
    """Every renderRef a status (every Release's, as the tick knows them) or a write-ahead
    record refers to (rollout, attempts, history; the record's step)."""
    every = list(statuses)
    refs: set[str] = set()
    for name in intents.names():
        intent = intents.load(name)
        if intent is not None:
            every.append(intent.status)
            refs.add(intent.step.render_ref)
    for status in every:
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
