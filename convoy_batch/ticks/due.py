"""Why a Release is due on a tick (SPEC 13): the facts :func:`convoy_batch.rollout.due.due_reasons`
decides over, read from the tick: a dependency's or a set member's status written since,
a sync window opened, a measurement due. Reads only what the tick holds."""

import logging
from collections.abc import Sequence

from convoy_batch.engine.stages.gates import windows_of
from convoy_batch.engine.stages.verify import next_measurement
from convoy_batch.engine.tick import Tick
from convoy_batch.errors import (
    InvalidRelease,
    InvalidSyncWindow,
)
from convoy_batch.models import (
    Release,
    ReleaseInventory,
    ReleaseStatus,
    RolloutState,
)
from convoy_batch.reasons import Reason
from convoy_batch.reconcile import pending_force_sync, source_revision
from convoy_batch.repo.gitops import ReleaseEntry
from convoy_batch.rollout.due import DueReason, due_reasons, health_snapshot
from convoy_batch.rollout.status import written_at
from convoy_batch.rollout.windows import window_state

log = logging.getLogger("convoy_batch")


def is_due(
    tick: Tick, entry: ReleaseEntry, inventory: ReleaseInventory | None, full: bool
) -> Sequence[DueReason]:
    release = entry.release
    if release is None:
        return [DueReason.INVALID_RELEASE]
    status = tick.status(release.name)
    try:
        force = (
            pending_force_sync(release, status, tick.now, release.name in tick.forced) is not None
        )
    except InvalidRelease:
        return [DueReason.INVALID_FORCE_SYNC]
    return due_reasons(
        release,
        status,
        tick.stores.ticks.load(release.name),
        health=health_snapshot(inventory) if inventory is not None else None,
        release_blob=entry.blob,
        source_revision=source_revision(entry, tick.sources, tick.charts),
        force_pending=force,
        full_resync=full,
        now=tick.now,
        window_opened=window_opened(tick, release, status),
        dependency_changed=dependency_changed(tick, release, status),
        flight_changed=flight_changed(tick, release, status),
        measurement_at=next_measurement(tick.stores.state_dir, release, status),
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
