"""The wave gate (SPEC 7) and the pure "which phases next" decision of a sync.

A render's phases are, in order: ``PreSync`` and ``Sync`` (when it has such hooks), its
sorted distinct sync waves, then ``PostSync``. ``SyncFail`` hooks are no phase of a sync:
they are applied when a sync fails. Pure: no I/O, no clock.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from convoy_batch.models import (
    PRE_SYNC,
    HealthStrategy,
    InventoryEntry,
    Phase,
    ReleaseSpec,
    ReleaseStatus,
    Rollout,
    RolloutState,
    WaveStatus,
    is_hook_phase,
    phase_label,
)
from convoy_batch.reasons import Reason
from convoy_batch.rollout.plan import rollback_eligible
from convoy_batch.rollout.verdict import entries_healthy, is_current_for
from convoy_batch.timefmt import format_duration


class GateKind(StrEnum):
    PROCEED = "Proceed"
    HOLD = "Hold"
    STOP = "Stop"
    ROLL_BACK = "RollBack"


@dataclass(frozen=True)
class GateDecision:
    kind: GateKind
    rollout: Rollout | None = None
    reason: Reason | None = None
    """Why the sync holds or stops (None: it proceeds)."""
    message: str = ""
    applied: bool = False
    """R is already applied though the gate stops (a Manual Release in sync: SPEC 4)."""


def wave_health_gate(
    previous_phase: Phase,
    previous: Sequence[InventoryEntry],
    previous_started_at: datetime,
    *,
    spec: ReleaseSpec,
    status: ReleaseStatus,
    render_ref: str,
    pinned: bool,
    now: datetime,
) -> GateDecision:
    """Proceed when the previous phase is Current for R; hold until its timeout; then
    the SPEC 7 table: no failurePolicy or a pin -> stop; rollback_eligible -> RolledBack;
    otherwise -> Failed (both with ``priorRolloutStartedAt`` and reason WaveTimeout)."""
    # Every phase of R has objects, so an empty one is unknown, not vacuously healthy.
    if previous and entries_healthy(previous, render_ref):
        return GateDecision(GateKind.PROCEED)
    waiting = [e for e in previous if not is_current_for(e, render_ref)]
    what = str(waiting[0].key) if waiting else "no objects in the inventory"
    label = phase_label(previous_phase)
    timeout: timedelta = spec.sync_policy.waves.timeout
    if now - previous_started_at <= timeout:
        return GateDecision(
            GateKind.HOLD, None, Reason.WAITING_FOR_WAVE_HEALTH, f"waiting for {label}: {what}"
        )
    message = f"{label} not healthy within {format_duration(timeout)}: {what}"
    if spec.failure_policy is None or pinned:
        return GateDecision(GateKind.STOP, None, Reason.WAVE_TIMEOUT, message)
    prior = status.rollout
    started = prior.started_at if prior is not None and prior.render_ref == render_ref else now
    state, kind = (
        (RolloutState.ROLLED_BACK, GateKind.ROLL_BACK)
        if rollback_eligible(spec, status)
        else (RolloutState.FAILED, GateKind.STOP)
    )
    rollout = Rollout(
        state=state,
        render_ref=render_ref,
        started_at=started,
        reason=Reason.WAVE_TIMEOUT,
        message=message,
    )
    return GateDecision(kind, rollout, Reason.WAVE_TIMEOUT, message)


@dataclass(frozen=True)
class WavePlan:
    apply: tuple[Phase, ...]
    """Phases of R to apply this tick, in order (nothing when the gate rolls back)."""
    waves: tuple[WaveStatus, ...]
    """The new ``status.waves``: R's phases with the time each was first applied."""
    gate: GateDecision | None
    """The decision that stopped the pass; None when every phase of R is applied."""

    @property
    def complete(self) -> bool:
        return self.gate is None


def plan_waves(
    phases: Sequence[Phase],
    entries_by_phase: Mapping[Phase, Sequence[InventoryEntry]],
    *,
    spec: ReleaseSpec,
    status: ReleaseStatus,
    render_ref: str,
    pinned: bool,
    now: datetime,
) -> WavePlan:
    """Walk R's phases: re-apply those already started (hooks are not re-run), and gate
    the first one not started yet. A phase is gated when the one before it is PreSync,
    or when ``healthStrategy`` is Healthy."""
    strategy = spec.sync_policy.waves.health_strategy
    waves = [w for w in status.waves if w.render_ref == render_ref]
    started = {w.wave: w.started_at for w in waves}
    earlier = set(started)

    def gate(previous: Phase) -> GateDecision:
        if previous not in earlier:
            # Applied in this very pass: the observer cannot have assessed it for R yet,
            # whatever stale entries the caller passed.
            return _hold_just_applied(previous)
        entries = entries_by_phase.get(previous, ())
        return wave_health_gate(
            previous,
            entries,
            started[previous],
            spec=spec,
            status=status,
            render_ref=render_ref,
            pinned=pinned,
            now=now,
        )

    apply: list[Phase] = []
    for index, phase in enumerate(phases):
        if phase in started:
            if not is_hook_phase(phase):
                apply.append(phase)
            continue
        previous = phases[index - 1] if index > 0 else None
        if previous is not None and (previous == PRE_SYNC or strategy == HealthStrategy.HEALTHY):
            decision = gate(previous)
            if decision.kind != GateKind.PROCEED:
                kept = () if decision.kind == GateKind.ROLL_BACK else tuple(apply)
                return WavePlan(kept, tuple(waves), decision)
        apply.append(phase)
        started[phase] = now
        waves.append(WaveStatus(wave=phase, render_ref=render_ref, started_at=now))
    return WavePlan(tuple(apply), tuple(waves), None)


def _hold_just_applied(previous: Phase) -> GateDecision:
    message = f"waiting for {phase_label(previous)}: just applied"
    return GateDecision(GateKind.HOLD, None, Reason.WAITING_FOR_WAVE_HEALTH, message)
