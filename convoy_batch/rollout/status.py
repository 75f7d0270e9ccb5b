"""Status assembly of ``sync_handler`` (SPEC 10) and the status commit message.

Pure: builds a new ReleaseStatus from the prior one and the reconcile outcome; never
edits the prior status in place. No I/O, no clock (``now`` is a value).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from convoy_batch.models import (
    HISTORY_LIMIT,
    Attempt,
    Condition,
    ConditionStatus,
    DriftCorrection,
    DriftedObject,
    DriftReport,
    ReleaseStatus,
    RenderRecord,
    Rollout,
    RolloutState,
    WaveStatus,
)
from convoy_batch.reasons import ERROR_REASONS, Reason

CONDITION_ROLLOUT_SUCCEEDED = "RolloutSucceeded"

_CONDITION_STATUS = {
    RolloutState.SUCCEEDED: ConditionStatus.TRUE,
    RolloutState.FAILED: ConditionStatus.FALSE,
    RolloutState.ROLLED_BACK: ConditionStatus.FALSE,
    RolloutState.PROGRESSING: ConditionStatus.UNKNOWN,
}


@dataclass(frozen=True)
class RenderId:
    ref: str
    revision: str | None


@dataclass(frozen=True)
class DriftSeen:
    """What one sync found of its render's objects that drifted (README, "Drift rules")."""

    objects: tuple[DriftedObject, ...]
    report: bool
    """Report mode: left as it is and recorded in ``status.drift``; else corrected."""
    ongoing: bool = False
    """The reconcile before found drift too: the same episode (Correct mode records its
    first correction only)."""


@dataclass(frozen=True)
class Outcome:
    """What one reconcile of one Release did (SPEC 4)."""

    rollout: Rollout | None
    applied: bool
    reason: Reason
    message: str = ""
    render: RenderId | None = None
    waves: tuple[WaveStatus, ...] | None = None
    """The new ``status.waves`` when a sync ran; None leaves them as they were."""
    persisted: RenderId | None = None
    """The render that ``stage_sync`` persisted (a history candidate)."""
    written: int | None = None
    """Objects this reconcile wrote to the cluster (None: it applied nothing it knows
    of). Not part of the status: only what a person reads of this tick."""
    note: str = ""
    """A line the status commit's message carries after its subject (a forced sync past
    a closed sync window names the windows)."""
    drift: DriftSeen | None = None
    """What the sync found drifted; None: drift was not looked at (the status keeps its
    drift fields)."""

    @property
    def is_error(self) -> bool:
        return self.reason in ERROR_REASONS


@dataclass(frozen=True)
class RollBack:
    """A decided rollback to ``status.lastHealthy`` (SPEC 8) and the ``RolledBack``
    outcome it gives: built here only, for the rollback of the plan (rows 3 and 6) and
    the one after a wave timeout (SPEC 7)."""

    rollout: Rollout | None
    render: RenderId
    """R: the attempt when the rollback fails."""
    message: str
    """The outcome's message once the last healthy render is applied."""
    cause: str = ""
    """Put before why a failed rollback failed (nothing: that reason alone)."""
    waves: tuple[WaveStatus, ...] | None = None
    persisted: RenderId | None = None

    def applied(self, back: RenderId) -> Outcome:
        """The last healthy render ``back`` is applied: it is the attempt."""
        return self._outcome(True, self.message, back)

    def failed(self, why: str) -> Outcome:
        """The rollback failed: the attempt stays R, not applied (SPEC 8)."""
        return self._outcome(False, f"{self.cause}; {why}" if self.cause else why, self.render)

    def _outcome(self, applied: bool, message: str, render: RenderId) -> Outcome:
        return Outcome(
            rollout=self.rollout,
            applied=applied,
            reason=Reason.ROLLED_BACK,
            message=message,
            render=render,
            waves=self.waves,
            persisted=self.persisted,
        )


def _record(prior: RenderRecord | None, render: RenderId, now: datetime) -> RenderRecord:
    """A render record whose time changes only when its renderRef or revision changes."""
    if prior is not None and (prior.render_ref, prior.revision) == (render.ref, render.revision):
        return prior
    return RenderRecord(render_ref=render.ref, revision=render.revision, time=now)


def _attempt(prior: Attempt | None, outcome: Outcome, now: datetime, forced: bool) -> Attempt:
    render = outcome.render
    attempt = Attempt(
        render_ref=render.ref if render else None,
        revision=render.revision if render else None,
        time=now,
        applied=outcome.applied,
        reason=outcome.reason,
        message=outcome.message,
    )
    # lastAttempted.time is the first tick that made this attempt; a forced sync is an
    # attempt of its own (a person asked for it now), even when it repeats the last one.
    if forced or prior is None or not attempt.same_attempt(prior):
        return attempt
    return prior


def _history(
    prior: tuple[RenderRecord, ...], persisted: RenderId | None, now: datetime
) -> tuple[RenderRecord, ...]:
    if persisted is None or (prior and prior[0].render_ref == persisted.ref):
        return prior
    entry = RenderRecord(render_ref=persisted.ref, revision=persisted.revision, time=now)
    return (entry, *prior)[:HISTORY_LIMIT]


def _drift(
    prior: ReleaseStatus, seen: DriftSeen | None, now: datetime
) -> tuple[DriftReport | None, DriftCorrection | None]:
    """``status.drift`` (Report mode: what drifted, since the tick that first found drift)
    and ``status.lastDriftCorrection`` (Correct mode: the first correction of an episode)."""
    correction = prior.last_drift_correction
    if seen is None:
        return prior.drift, correction
    if seen.report:
        if not seen.objects:
            return None, correction
        since = prior.drift.since if prior.drift is not None else now
        return DriftReport(objects=seen.objects, since=since), correction
    if seen.objects and not seen.ongoing:
        correction = DriftCorrection(time=now, objects=seen.objects)
    return None, correction


def _conditions(
    prior: tuple[Condition, ...], rollout: Rollout | None, now: datetime
) -> tuple[Condition, ...]:
    if rollout is None:
        return prior
    old = next((c for c in prior if c.type == CONDITION_ROLLOUT_SUCCEEDED), None)
    status = _CONDITION_STATUS[rollout.state]
    since = old.last_transition_time if old is not None and old.status == status else now
    new = Condition(
        type=CONDITION_ROLLOUT_SUCCEEDED,
        status=status,
        reason=rollout.reason,
        message=rollout.message,
        last_transition_time=since,
    )
    others = tuple(c for c in prior if c.type != CONDITION_ROLLOUT_SUCCEEDED)
    return (new, *others)


def assemble_status(
    prior: ReleaseStatus,
    outcome: Outcome,
    *,
    failure_policy_set: bool,
    attempt_healthy: bool,
    force_sync_at: datetime | None,
    now: datetime,
) -> ReleaseStatus:
    """The new status after a reconcile (every bullet of SPEC 10).

    ``attempt_healthy``: verdict(attempt's render) is Healthy. ``force_sync_at``: the
    time of the pending forced sync that this reconcile handled, if any.
    """
    render = outcome.render
    rollout: Rollout | None
    if outcome.rollout is not None:
        rollout = outcome.rollout
    elif failure_policy_set:
        rollout = prior.rollout
    else:
        rollout = None
    last_successful = prior.last_successful
    if outcome.applied and render is not None:
        last_successful = _record(prior.last_successful, render, now)
    last_healthy = prior.last_healthy
    if attempt_healthy and render is not None:
        last_healthy = _record(prior.last_healthy, render, now)
    drift, correction = _drift(prior, outcome.drift, now)
    return ReleaseStatus(
        rollout=rollout,
        last_attempted=_attempt(prior.last_attempted, outcome, now, force_sync_at is not None),
        last_successful=last_successful,
        last_healthy=last_healthy,
        waves=outcome.waves if outcome.waves is not None else prior.waves,
        history=_history(prior.history, outcome.persisted, now),
        conditions=_conditions(prior.conditions, outcome.rollout, now),
        last_handled_force_sync_at=(
            force_sync_at if force_sync_at is not None else prior.last_handled_force_sync_at
        ),
        drift=drift,
        last_drift_correction=correction,
        verification=prior.verification,
    )


# --- A status as text: the one spelling of each state, ref and transition ---------------

NO_STATE = "none"
"""A Release without a rollout (SPEC 10's commit messages) or without a status file."""
NO_VALUE = "-"
"""An empty cell of a table or a one-line report: no rollout in a status, no render."""


def state_name(rollout: Rollout | None) -> str:
    """The rollout's state; ``none`` without one (commit messages, ``plan``)."""
    return rollout.state.value if rollout is not None else NO_STATE


def state_of(status: ReleaseStatus | None) -> str:
    """A status's state in a table (``history``, a tick's report): ``none`` without a
    status file, ``-`` for a status without a rollout."""
    if status is None:
        return NO_STATE
    return status.rollout.state.value if status.rollout is not None else NO_VALUE


def short_ref(ref: str | None) -> str:
    """A renderRef's first 12 hex digits (``-`` for none), as commit messages show it."""
    return ref.removeprefix("sha256:")[:12] if ref else NO_VALUE


def transition(before: ReleaseStatus | None, after: ReleaseStatus | None) -> tuple[str, str, str]:
    """(old state, new state, reason) of one status change: a transition (a new state,
    or a new render, as in the commit message) is told by the rollout's reason, anything
    else by the attempt's."""
    old, new = state_of(before), state_of(after)
    rollout = after.rollout if after is not None else None
    prior = before.rollout if before is not None else None
    if rollout is not None and (prior is None or _moved(prior, rollout)):
        return old, new, rollout.reason
    attempt = after.last_attempted if after is not None else None
    if after is not None and (drift := _drift_only(before, after)) is not None:
        return old, new, drift
    return old, new, attempt.reason if attempt else NO_VALUE


def _drift_only(before: ReleaseStatus | None, after: ReleaseStatus) -> Reason | None:
    """The drift change of a status change whose attempt kept its reason (None: not one)."""
    old = before.last_attempted if before is not None else None
    new = after.last_attempted
    same = (old.reason if old else None) == (new.reason if new else None)
    return drift_change(before, after) if same else None


def drift_change(before: ReleaseStatus | None, after: ReleaseStatus) -> Reason | None:
    """What a status change did to the drift fields: a new correction, a drift found or
    changed, a drift cleared; None when they did not change."""
    old_correction = before.last_drift_correction if before is not None else None
    old_drift = before.drift if before is not None else None
    if after.last_drift_correction is not None and after.last_drift_correction != old_correction:
        return Reason.DRIFT_CORRECTED
    if after.drift is not None and after.drift != old_drift:
        return Reason.DRIFTED
    if after.drift is None and old_drift is not None:
        return Reason.DRIFT_RESOLVED
    return None


def drift_lines(status: ReleaseStatus, reason: Reason) -> list[str]:
    """The drifted objects a drift change names, one line each (paths only)."""
    if reason == Reason.DRIFT_CORRECTED and status.last_drift_correction is not None:
        return [o.describe() for o in status.last_drift_correction.objects]
    if reason == Reason.DRIFTED and status.drift is not None:
        return [o.describe() for o in status.drift.objects]
    return []


def drifted_line(objects: Sequence[DriftedObject]) -> str:
    """Drifted objects on one line: ``ConfigMap web/web-config /data/env; ...``."""
    return "; ".join(o.describe() for o in objects)


def _moved(prior: Rollout, rollout: Rollout) -> bool:
    return prior.state != rollout.state or prior.render_ref != rollout.render_ref


def written_at(status: ReleaseStatus | None) -> datetime | None:
    """The tick that wrote ``status``: its latest time (attempt, transition, rollout)."""
    if status is None:
        return None
    times = [c.last_transition_time for c in status.conditions]
    if status.last_attempted is not None:
        times.append(status.last_attempted.time)
    if status.rollout is not None:
        times.append(status.rollout.started_at)
    if status.drift is not None:
        times.append(status.drift.since)
    if status.last_drift_correction is not None:
        times.append(status.last_drift_correction.time)
    return max(times, default=None)


def with_note(message: str, note: str) -> str:
    """A commit message with ``note`` as its body (none: unchanged)."""
    return f"{message}\n\n{note}" if note else message


def commit_message(release: str, old: ReleaseStatus, new: ReleaseStatus) -> str:
    """``<release>: <old> -> <new> (<reason>) <ref12>`` on a transition, else
    ``<release>: <outcome reason>``. A new render counts as a transition."""
    before, after = old.rollout, new.rollout
    changed = (before is None) != (after is None) or (
        before is not None
        and after is not None
        and (before.state, before.render_ref) != (after.state, after.render_ref)
    )
    if changed:
        if after is None:
            reason = new.last_attempted.reason if new.last_attempted else ""
            return f"{release}: {state_name(before)} -> {NO_STATE} ({reason})"
        ref = short_ref(after.render_ref)
        return f"{release}: {state_name(before)} -> {state_name(after)} ({after.reason}) {ref}"
    if (drift := _drift_only(old, new)) is not None:
        return with_note(f"{release}: {drift}", "\n".join(drift_lines(new, drift)))
    reason = new.last_attempted.reason if new.last_attempted else "status"
    return f"{release}: {reason}"
