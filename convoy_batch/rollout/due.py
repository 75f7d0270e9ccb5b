"""What makes a Release due on a tick (SPEC 13), and why (:class:`DueReason`, also the
wake-up causes of :mod:`convoy_batch.ticks.wakeups`). Pure: compares values the tick read.

Health is remembered as a snapshot of (object, state, assessedRenderRef) per entry,
the same comparison as ``observer.health_changed``.
"""

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum

from convoy_batch.models import (
    Release,
    ReleaseInventory,
    ReleaseStatus,
    RolloutState,
    TickRecord,
)
from convoy_batch.rollout.verdict import deadline_passed, deadline_start

HealthSnapshot = tuple[tuple[str, str, str | None], ...]


class DueReason(StrEnum):
    """Why a Release is due (its value is the text logs and wake-up keys show)."""

    FULL_RESYNC = "full resync"
    NEVER_RECONCILED = "never reconciled"
    INTERVAL = "interval"
    HEALTH_CHANGED = "health changed"
    DEADLINE_PASSED = "deadline passed"
    FORCED_SYNC = "forced sync"
    RELEASE_CHANGED = "release changed"
    SOURCE_CHANGED = "source changed"
    WINDOW_OPENED = "sync window opened"
    """A render a closed sync window held, now that the window is open."""
    DEPENDENCY_CHANGED = "dependency changed"
    """A render that waits for a dependency whose status changed since."""
    FLIGHT_CHANGED = "member in flight changed"
    """A ReleaseSet member's render that waits for ``maxInFlight``, and another member of
    its set whose status changed since."""
    MEASUREMENT_DUE = "measurement due"
    """A render under verification whose next measurement is due (README, "Verification
    by metrics")."""
    INVALID_RELEASE = "invalid release file"
    """Always due: the reconcile reports the error."""
    INVALID_FORCE_SYNC = "invalid force-sync annotation"
    """Always due: the reconcile reports the error."""


def health_snapshot(inventory: ReleaseInventory) -> HealthSnapshot:
    rows = []
    for entry in inventory.entries:
        health = entry.health
        state = health.state.value if health is not None else ""
        ref = health.assessed_render_ref if health is not None else None
        rows.append(("/".join(entry.key.identity()), state, ref))
    return tuple(sorted(rows, key=lambda r: r[0]))


def due_reasons(
    release: Release,
    status: ReleaseStatus,
    memory: TickRecord,
    *,
    health: HealthSnapshot | None,
    release_blob: str,
    source_revision: str | None,
    force_pending: bool,
    full_resync: bool,
    now: datetime,
    window_opened: bool = False,
    dependency_changed: bool = False,
    flight_changed: bool = False,
    measurement_at: datetime | None = None,
) -> Sequence[DueReason]:
    """Why the Release is due now (empty: not due). Items 1-4 of SPEC 13; item 2 only
    when ``health`` (this tick's observation) is given. ``window_opened``: a closed sync
    window held its render and is open now. ``measurement_at``: when the next measurement
    of the render under verification is due."""
    reasons: list[DueReason] = []
    interval = release.spec.interval
    last = memory.last_reconcile_at
    if full_resync:
        reasons.append(DueReason.FULL_RESYNC)
    elif last is None:
        reasons.append(DueReason.NEVER_RECONCILED)
    elif interval.total_seconds() > 0 and now - last >= interval:
        reasons.append(DueReason.INTERVAL)
    rollout = status.rollout
    if rollout is not None and rollout.state == RolloutState.PROGRESSING:
        if health is not None and health != memory.health:
            reasons.append(DueReason.HEALTH_CHANGED)
        start = deadline_start(status, rollout.render_ref)
        policy = release.spec.failure_policy
        if (
            start is not None
            and policy is not None
            and deadline_passed(start, policy.progress_deadline, now)
        ):
            reasons.append(DueReason.DEADLINE_PASSED)
    if force_pending:
        reasons.append(DueReason.FORCED_SYNC)
    if window_opened:
        reasons.append(DueReason.WINDOW_OPENED)
    if dependency_changed:
        reasons.append(DueReason.DEPENDENCY_CHANGED)
    if flight_changed:
        reasons.append(DueReason.FLIGHT_CHANGED)
    if measurement_at is not None and now >= measurement_at:
        reasons.append(DueReason.MEASUREMENT_DUE)
    if memory.release_blob is not None and release_blob != memory.release_blob:
        reasons.append(DueReason.RELEASE_CHANGED)
    if memory.source_revision is not None and source_revision != memory.source_revision:
        reasons.append(DueReason.SOURCE_CHANGED)
    return reasons
