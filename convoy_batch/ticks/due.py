"""Why a Release is due on a tick (SPEC 13): the facts :func:`convoy_batch.rollout.due.due_reasons`
decides over, read from what the tick read once (:class:`DueFacts`): a dependency's or a
set member's status written since, a sync window opened, a measurement due."""

import logging
from collections.abc import Callable, Collection, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime

from convoy_batch.engine.stages.gates import windows_of
from convoy_batch.engine.stages.verify import next_measurement
from convoy_batch.errors import (
    InvalidRelease,
    InvalidSyncWindow,
)
from convoy_batch.models import (
    Cluster,
    Release,
    ReleaseInventory,
    ReleaseStatus,
    RolloutState,
)
from convoy_batch.reasons import Reason
from convoy_batch.reconcile import pending_force_sync, source_revision
from convoy_batch.renderers.charts import ChartResolver
from convoy_batch.repo.gitops import GitOpsSnapshot, ReleaseEntry
from convoy_batch.repo.source import SourceResolver
from convoy_batch.rollout.due import DueReason, due_reasons, health_snapshot
from convoy_batch.rollout.status import written_at
from convoy_batch.rollout.windows import window_state
from convoy_batch.store import Stores

log = logging.getLogger("convoy_batch")


@dataclass(frozen=True)
class DueFacts:
    """What :func:`is_due` reads, taken once from the tick (a tick's, or the wake-up
    sensor's and the schedule's between ticks)."""

    snapshot: GitOpsSnapshot
    stores: Stores
    """The tick records (``stores.ticks``) and the state directory (measurements)."""
    status_of: Callable[[str], ReleaseStatus]
    """A Release's status: the one the tick committed, else the one it opened."""
    sources: SourceResolver
    charts: ChartResolver
    now: datetime
    forced: Set[str]
    """Releases with a forced sync pending (``--force``, a manual materialization)."""


def is_due(
    facts: DueFacts, entry: ReleaseEntry, inventory: ReleaseInventory | None, full: bool
) -> Sequence[DueReason]:
    release = entry.release
    if release is None:
        return [DueReason.INVALID_RELEASE]
    status = facts.status_of(release.name)
    try:
        forced = release.name in facts.forced
        force = pending_force_sync(release, status, facts.now, forced) is not None
    except InvalidRelease:
        return [DueReason.INVALID_FORCE_SYNC]
    memo = facts.stores.ticks.load(release.name)
    last = memo.last_reconcile_at
    cluster, status_of = facts.snapshot.clusters.get(release.spec.cluster), facts.status_of
    return due_reasons(
        release,
        status,
        memo,
        health=health_snapshot(inventory) if inventory is not None else None,
        release_blob=entry.blob,
        source_revision=source_revision(entry, facts.sources, facts.charts),
        force_pending=force,
        full_resync=full,
        now=facts.now,
        window_opened=window_opened(release, status, cluster, facts.now),
        dependency_changed=dependency_changed(release, status, last, status_of),
        flight_changed=flight_changed(release, status, last, status_of, facts.snapshot),
        measurement_at=next_measurement(facts.stores.state_dir, release, status),
    )


def _written_since(
    names: Collection[str], last: datetime | None, status_of: Callable[[str], ReleaseStatus]
) -> bool:
    """Whether one of these Releases had its status written after ``last`` (None: the
    Release was never reconciled, and any of them counts)."""
    for name in names:
        written = written_at(status_of(name))
        if last is None or (written is not None and written > last):
            return True
    return False


def dependency_changed(
    release: Release,
    status: ReleaseStatus,
    last: datetime | None,
    status_of: Callable[[str], ReleaseStatus],
) -> bool:
    """The Release's render waits for a dependency whose status was written since the
    Release was last reconciled (``last``)."""
    attempt = status.last_attempted
    if attempt is None or attempt.reason != Reason.WAITING_FOR_DEPENDENCY:
        return False
    return _written_since([d.name for d in release.spec.depends_on], last, status_of)


def flight_changed(
    release: Release,
    status: ReleaseStatus,
    last: datetime | None,
    status_of: Callable[[str], ReleaseStatus],
    snapshot: GitOpsSnapshot,
) -> bool:
    """The Release's render waits for ``maxInFlight`` (a ReleaseSet member), and another
    member of its set had its status written since the Release was last reconciled
    (``last``)."""
    attempt = status.last_attempted
    if attempt is None or attempt.reason != Reason.WAITING_FOR_MAX_IN_FLIGHT:
        return False
    entry = snapshot.sets.get(snapshot.set_of(release.name) or "")
    members = entry.members if entry is not None else ()
    return _written_since([m for m in members if m != release.name], last, status_of)


def dependency_graph(releases: Mapping[str, ReleaseEntry]) -> dict[str, list[str]]:
    """Each valid Release's dependencies (only those that have some)."""
    return {
        name: [d.name for d in entry.release.spec.depends_on]
        for name, entry in releases.items()
        if entry.release is not None and entry.release.spec.depends_on
    }


def window_opened(
    release: Release, status: ReleaseStatus, cluster: Cluster | None, now: datetime
) -> bool:
    """A closed sync window held the Release's render and is open now (a window that
    does not parse, or a Cluster that is not there: due, so that its reconcile reports
    it)."""
    attempt = status.last_attempted
    if attempt is None or attempt.reason != Reason.WAITING_FOR_SYNC_WINDOW:
        return False
    if cluster is None:
        return True
    try:
        return window_state(windows_of(release, cluster), now).open
    except InvalidSyncWindow:
        return True


def progressing(status: ReleaseStatus) -> bool:
    """Whether the Release's rollout is Progressing (its health can wake it up)."""
    rollout = status.rollout
    return rollout is not None and rollout.state == RolloutState.PROGRESSING
