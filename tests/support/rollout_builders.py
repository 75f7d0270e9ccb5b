"""Builders of specs, statuses and inventories for the tests of the pure rollout core.

No I/O. Times are values around a fixed ``T0``; render refs are fake but well formed.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

from convoy_batch.models import (
    FailurePolicy,
    Health,
    HealthState,
    HealthStrategy,
    InventoryEntry,
    ObjectKey,
    Phase,
    ReleaseSpec,
    ReleaseStatus,
    RenderRecord,
    RollbackMode,
    Rollout,
    RolloutState,
    Source,
    SyncPolicy,
    WavesPolicy,
    WaveStatus,
)

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def at(minutes: float = 0) -> datetime:
    """``T0`` plus ``minutes``."""
    return T0 + timedelta(minutes=minutes)


def ref(char: str) -> str:
    """A well-formed renderRef made of one repeated hex digit."""
    return "sha256:" + char * 64


R = ref("a")
"""The render of the reconcile under test."""
R_OLD = ref("b")
"""An earlier render."""
R_HEALTHY = ref("c")
"""The last healthy render."""


def spec(
    *,
    failure_policy: bool = True,
    rollback: RollbackMode = RollbackMode.AUTO,
    progress_deadline: timedelta = timedelta(minutes=10),
    strategy: HealthStrategy = HealthStrategy.NONE,
    wave_timeout: timedelta = timedelta(minutes=5),
) -> ReleaseSpec:
    policy = (
        FailurePolicy(rollback=rollback, progress_deadline=progress_deadline)
        if failure_policy
        else None
    )
    return ReleaseSpec(
        cluster="staging",
        source=Source(path="apps/web"),
        sync_policy=SyncPolicy(waves=WavesPolicy(health_strategy=strategy, timeout=wave_timeout)),
        failure_policy=policy,
    )


def rollout(
    state: RolloutState,
    render_ref: str = R,
    started_at: datetime = T0,
    reason: str = "NewRender",
    message: str = "",
) -> Rollout:
    return Rollout(
        state=state, render_ref=render_ref, started_at=started_at, reason=reason, message=message
    )


def record(
    render_ref: str = R_HEALTHY, revision: str | None = "c0ffee", when: datetime = T0
) -> RenderRecord:
    return RenderRecord(render_ref=render_ref, revision=revision, time=when)


def status(
    prior: Rollout | None = None,
    *,
    last_healthy: RenderRecord | None = None,
    waves: tuple[WaveStatus, ...] = (),
    **fields: Any,
) -> ReleaseStatus:
    return ReleaseStatus(rollout=prior, last_healthy=last_healthy, waves=waves, **fields)


def wave(phase: Phase, started_at: datetime = T0, render_ref: str = R) -> WaveStatus:
    return WaveStatus(wave=phase, render_ref=render_ref, started_at=started_at)


def entry(
    name: str,
    state: HealthState | None = HealthState.CURRENT,
    assessed: str | None = R,
    *,
    phase: Phase = 0,
    observed_at: datetime = T0,
) -> InventoryEntry:
    """An inventory entry of a Deployment; ``state=None``: never assessed by the observer."""
    health = (
        None
        if state is None
        else Health(state=state, assessed_render_ref=assessed, observed_at=observed_at)
    )
    return InventoryEntry(
        key=ObjectKey(api_version="apps/v1", kind="Deployment", namespace="web", name=name),
        wave=phase,
        applied_render_ref=R,
        health=health,
    )


CURRENT = HealthState.CURRENT
IN_PROGRESS = HealthState.IN_PROGRESS
FAILED = HealthState.FAILED
NOT_FOUND = HealthState.NOT_FOUND
