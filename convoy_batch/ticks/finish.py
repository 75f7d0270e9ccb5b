"""What a tick does once its Releases are handled: the ReleaseSets' warnings, the batch
of status commits, the render GC, the push (with a clone's bundle) and the
notifications; and the same for a shard and for the push a run kept. Does I/O."""

import logging
from collections.abc import Sequence, Set
from datetime import datetime
from pathlib import Path

from convoy_batch.engine.retire import (
    gone_names,
)
from convoy_batch.engine.tick import Tick
from convoy_batch.models import (
    ReleaseStatus,
)
from convoy_batch.notify import ReleaseFacts, TickFacts
from convoy_batch.state.files import os_problem
from convoy_batch.status.remote import Clone, push_apart
from convoy_batch.status.remote import finish as finish_clone
from convoy_batch.ticks.options import TickReport

log = logging.getLogger("convoy_batch")


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


def any_unstored(failed: Sequence[tuple[Path, OSError]]) -> bool:
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


def finish_run(tick: Tick, report: TickReport, clone: Clone | None = None) -> str | None:
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
        return finish_run(tick, report, clone)
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
    the state directory kept (:func:`convoy_batch.status.remote.push_apart`), and the
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
