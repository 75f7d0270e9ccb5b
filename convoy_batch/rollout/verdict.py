"""The verdict on a render (SPEC 6.1) and the per-wave health check of the wave gate.

Pure: reads inventory entries and times given as values; no I/O, no clock.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from convoy_batch.models import SYNC_FAIL, HealthState, InventoryEntry, ReleaseStatus
from convoy_batch.reasons import Reason


class Verdict(StrEnum):
    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"
    PENDING = "Pending"


@dataclass(frozen=True)
class VerdictResult:
    verdict: Verdict
    cause: Reason | None = None
    """``Unhealthy`` or ``ProgressDeadlineExceeded`` for an Unhealthy verdict."""
    message: str = ""


def _assessed_for(entry: InventoryEntry, render_ref: str) -> bool:
    return entry.health is not None and entry.health.assessed_render_ref == render_ref


def _state(entry: InventoryEntry) -> HealthState | None:
    return entry.health.state if entry.health is not None else None


def is_current_for(entry: InventoryEntry, render_ref: str) -> bool:
    """The entry was assessed for ``render_ref`` and is Current."""
    return _assessed_for(entry, render_ref) and _state(entry) == HealthState.CURRENT


def entries_healthy(entries: Iterable[InventoryEntry], render_ref: str) -> bool:
    """Every entry is Current for ``render_ref`` (used by the wave gate; true when empty)."""
    return all(is_current_for(e, render_ref) for e in entries)


def deadline_passed(start: datetime, progress_deadline: timedelta, now: datetime) -> bool:
    return now - start > progress_deadline


def deadline_start(status: ReleaseStatus, render_ref: str) -> datetime | None:
    """The later of rollout.startedAt and R's first ``status.waves`` entry (SPEC 6.1)."""
    starts = []
    if status.rollout is not None and status.rollout.render_ref == render_ref:
        starts.append(status.rollout.started_at)
    first_wave = next((w for w in status.waves if w.render_ref == render_ref), None)
    if first_wave is not None:
        starts.append(first_wave.started_at)
    return max(starts) if starts else None


def _describe(entry: InventoryEntry) -> str:
    health = entry.health
    detail = f": {health.message}" if health is not None and health.message else ""
    state = health.state if health is not None else "unassessed"
    return f"{entry.key} is {state}{detail}"


def verdict(
    entries: Sequence[InventoryEntry],
    render_ref: str,
    start: datetime | None,
    progress_deadline: timedelta | None,
    now: datetime,
) -> VerdictResult:
    """Healthy, Unhealthy (cause ``Unhealthy`` or ``ProgressDeadlineExceeded``) or Pending.

    Rules, in order: an entry assessed for R that is Failed is Unhealthy; the deadline
    has passed and an entry assessed for R is not Current is Unhealthy; at least one
    entry and every entry Current for R is Healthy; anything else is Pending. SyncFail
    hooks are not judged: they run because a sync failed.
    """
    entries = [e for e in entries if e.wave != SYNC_FAIL]
    failed = [
        e for e in entries if _assessed_for(e, render_ref) and _state(e) == HealthState.FAILED
    ]
    if failed:
        return VerdictResult(Verdict.UNHEALTHY, Reason.UNHEALTHY, _describe(failed[0]))
    if (
        start is not None
        and progress_deadline is not None
        and deadline_passed(start, progress_deadline, now)
    ):
        late = [
            e for e in entries if _assessed_for(e, render_ref) and not is_current_for(e, render_ref)
        ]
        if late:
            return VerdictResult(
                Verdict.UNHEALTHY, Reason.PROGRESS_DEADLINE_EXCEEDED, _describe(late[0])
            )
    if entries and entries_healthy(entries, render_ref):
        return VerdictResult(Verdict.HEALTHY)
    return VerdictResult(Verdict.PENDING)
