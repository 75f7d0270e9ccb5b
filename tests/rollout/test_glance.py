"""A Release at a glance (passed, pending, failed), its one line, and which reconciles are
alarms: one case per rollout state and outcome reason that matters."""

import dagster as dg
import pytest

from convoy_batch.assets import fail_on_alarms
from convoy_batch.engine.handler import Committed, Handled
from convoy_batch.models import Attempt, ReleaseStatus, Rollout, RolloutState
from convoy_batch.reasons import ERROR_REASONS, Reason
from convoy_batch.rollout.glance import Glance, alarm, glance, headline
from convoy_batch.rollout.status import Outcome
from convoy_batch.ticks.options import TickReport
from tests.support.scenario import T0


def status(state: RolloutState | None, reason: Reason | None, message: str = "") -> ReleaseStatus:
    rollout = None
    if state is not None:
        rollout = Rollout(state=state, render_ref="sha256:aa", started_at=T0, reason="Healthy")
    attempt = Attempt(time=T0, reason=reason, message=message) if reason else None
    return ReleaseStatus(rollout=rollout, last_attempted=attempt)


S = RolloutState


@pytest.mark.parametrize(
    ("state", "reason", "expected"),
    [
        (S.SUCCEEDED, Reason.SYNCED, Glance.PASSED),
        (S.ROLLED_BACK, Reason.ROLLED_BACK, Glance.FAILED),
        (S.ROLLED_BACK, Reason.SYNCED, Glance.FAILED),
        (S.FAILED, Reason.WAVE_TIMEOUT, Glance.FAILED),
        (S.PROGRESSING, Reason.SYNCED, Glance.PENDING),
        (S.PROGRESSING, Reason.WAITING_FOR_WAVE_HEALTH, Glance.PENDING),
        (S.PROGRESSING, Reason.WAITING_FOR_MANUAL_SYNC, Glance.PENDING),
        (S.SUCCEEDED, Reason.WAITING_FOR_MANUAL_SYNC, Glance.PENDING),
        (S.SUCCEEDED, Reason.WAITING_FOR_CLUSTER_WAVE, Glance.PENDING),
        (S.SUCCEEDED, Reason.APPLY_FAILED, Glance.FAILED),
        (None, Reason.CLUSTER_NOT_FOUND, Glance.FAILED),
        (None, Reason.WAITING_FOR_CLUSTER_WAVE, Glance.PENDING),
        (None, None, Glance.PENDING),
    ],
    ids=lambda v: str(v),
)
def test_a_release_reads_at_a_glance(
    state: RolloutState | None, reason: Reason | None, expected: Glance
) -> None:
    assert glance(status(state, reason)) is expected


@pytest.mark.parametrize("reason", sorted(ERROR_REASONS))
def test_every_error_reads_as_failed(reason: Reason) -> None:
    assert glance(status(S.SUCCEEDED, reason)) is Glance.FAILED


@pytest.mark.parametrize(
    ("state", "reason", "message", "line"),
    [
        (S.ROLLED_BACK, Reason.ROLLED_BACK, "holding R1", "RolledBack (Healthy): holding R1"),
        (S.SUCCEEDED, Reason.SYNCED, "", "Succeeded (Healthy): Synced"),
        (
            S.PROGRESSING,
            Reason.WAITING_FOR_MANUAL_SYNC,
            "waiting",
            "Progressing (Healthy): WaitingForManualSync: waiting",
        ),
        (None, Reason.RENDER_FAILED, "bad", "never rolled out: RenderFailed: bad"),
        (None, None, "", "never rolled out"),
    ],
)
def test_the_headline_says_state_reason_and_message(
    state: RolloutState | None, reason: Reason | None, message: str, line: str
) -> None:
    assert headline(status(state, reason, message)) == line


@pytest.mark.parametrize(
    ("before", "after", "errored", "alarmed"),
    [
        (S.PROGRESSING, S.ROLLED_BACK, False, True),
        (S.PROGRESSING, S.FAILED, False, True),
        (None, S.FAILED, False, True),
        (S.ROLLED_BACK, S.ROLLED_BACK, False, False),
        (S.PROGRESSING, S.SUCCEEDED, False, False),
        (S.SUCCEEDED, S.PROGRESSING, False, False),
        (S.SUCCEEDED, S.SUCCEEDED, True, True),
        (S.ROLLED_BACK, S.ROLLED_BACK, True, True),
    ],
    ids=lambda v: str(v),
)
def test_an_alarm_is_an_error_or_a_rollout_stopped_in_this_reconcile(
    before: RolloutState | None, after: RolloutState, errored: bool, alarmed: bool
) -> None:
    prior, new = status(before, Reason.SYNCED), status(after, Reason.SYNCED, "why")
    why = alarm(prior, new, errored=errored)

    assert (why is not None) == alarmed
    if alarmed:
        assert why == headline(new)


def handled(prior: ReleaseStatus, new: ReleaseStatus, changed: bool) -> Handled:
    outcome = Outcome(new.rollout, True, Reason.ROLLED_BACK, "held")
    return Handled("api", outcome, new, Committed("c0ffee") if changed else None, prior)


def test_a_run_that_records_a_release_still_failed_fails_and_a_quiet_one_does_not() -> None:
    """A new status of a Release that stays rolled back fails the run (its partition
    stays red: the run plans it after the materialization); no new status, no failure."""
    before = status(S.ROLLED_BACK, Reason.ROLLED_BACK, "holding")
    after = status(S.ROLLED_BACK, Reason.ROLLED_BACK, "holding, forced")

    with pytest.raises(dg.Failure) as failed:
        fail_on_alarms(TickReport(handled=[handled(before, after, changed=True)]))
    fail_on_alarms(TickReport(handled=[handled(before, before, changed=False)]))

    assert failed.value.description == f"api: {headline(after)}"
