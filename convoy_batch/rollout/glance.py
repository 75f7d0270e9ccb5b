"""How a Release reads at a glance: passed, pending or failed, and the one line that says
why. The Dagster layer colours each Release with it (its asset check) and fails a run on
the Releases that :func:`alarm` names.

Drift (README, "Drift rules") never changes the glance: a drifted Release that Succeeded
is still passed, and its line says what drifted (:func:`drift_note`), paths only.

Pure: a function of statuses, no I/O.
"""

from enum import StrEnum

from convoy_batch.models import ReleaseStatus, RolloutState
from convoy_batch.reasons import ERROR_REASONS, Reason
from convoy_batch.rollout.status import drifted_line, short_ref
from convoy_batch.timefmt import format_time


class Glance(StrEnum):
    PASSED = "passed"
    """Succeeded, or in sync."""
    PENDING = "pending"
    """Progressing, or waiting on a gate (a wave's health, a forced sync, a cluster wave)."""
    FAILED = "failed"
    """RolledBack, Failed, or an error."""


STOPPED = frozenset({RolloutState.ROLLED_BACK, RolloutState.FAILED})
WAITING = frozenset(
    {
        Reason.WAITING_FOR_WAVE_HEALTH,
        Reason.WAITING_FOR_MANUAL_SYNC,
        Reason.WAITING_FOR_CLUSTER_WAVE,
        Reason.WAITING_FOR_MAX_IN_FLIGHT,
    }
)
"""Outcome reasons of a gate that holds the sync: the Release waits (a wave timeout is not
waiting: it rolls back or fails)."""


def glance(status: ReleaseStatus) -> Glance:
    """In this order: an error or a stopped rollout is failed; a succeeded rollout that
    waits for nothing is passed; anything else (Progressing, waiting, never rolled out)
    is pending."""
    attempt, rollout = status.last_attempted, status.rollout
    reason = attempt.reason if attempt else None
    if reason in ERROR_REASONS or (rollout is not None and rollout.state in STOPPED):
        return Glance.FAILED
    if rollout is not None and rollout.state is RolloutState.SUCCEEDED and reason not in WAITING:
        return Glance.PASSED
    return Glance.PENDING


def headline(status: ReleaseStatus) -> str:
    """State, reason and message in one line: ``RolledBack (Unhealthy): <message>``, with
    the outcome's reason when it is not the rollout's (``Progressing (NewRender):
    WaitingForManualSync: <message>``)."""
    attempt, rollout = status.last_attempted, status.rollout
    parts = [f"{rollout.state} ({rollout.reason})" if rollout else "never rolled out"]
    if attempt is not None and (rollout is None or attempt.reason != rollout.state):
        parts.append(attempt.reason)
    message = attempt.message if attempt else ""
    if message:
        parts.append(message)
    return ": ".join(parts)


def drift_note(status: ReleaseStatus) -> str | None:
    """``drifted since <time>: <object> <paths>; ...``: what ``status.drift`` (Report mode)
    records, the paths and never a value. None when nothing drifted."""
    drift = status.drift
    if drift is None:
        return None
    return f"drifted since {format_time(drift.since)}: {drifted_line(drift.objects)}"


def verification_note(status: ReleaseStatus) -> str | None:
    """``verification <phase>: <message>`` of the render ``status.verification`` is of
    (README "Verification by metrics"); None without one."""
    block = status.verification
    if block is None:
        return None
    return f"verification {block.phase} ({short_ref(block.render_ref)}): {block.message}"


def correction_note(status: ReleaseStatus) -> str | None:
    """``corrected drift at <time>: <object> <paths>; ...``: the first correction of the
    last drift episode (Correct mode). None when drift was never corrected."""
    correction = status.last_drift_correction
    if correction is None:
        return None
    objects = drifted_line(correction.objects)
    return f"corrected drift at {format_time(correction.time)}: {objects}"


def summary_line(status: ReleaseStatus) -> str:
    """The :func:`headline`, then what drifted when the status records drift: the line of
    the Dagster check and materialization (a drifted Release never reads as a plain pass)."""
    line = headline(status)
    note = drift_note(status)
    return f"{line}; {note}" if note else line


def alarm(prior: ReleaseStatus, status: ReleaseStatus, *, errored: bool) -> str | None:
    """Why a reconcile is a failure its runner should signal: an error (every time one is
    seen, as the command line's exit status), or a rollout it rolled back or failed (only
    in the reconcile that made the transition). None otherwise."""
    if errored:
        return headline(status)
    state = status.rollout.state if status.rollout else None
    before = prior.rollout.state if prior.rollout else None
    if state in STOPPED and state != before:
        return headline(status)
    return None
