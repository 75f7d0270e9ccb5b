"""Status assembly of SPEC 10 (``assemble_status``), one test per bullet, and commit messages."""

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

import pytest

from convoy_batch.models import (
    HISTORY_LIMIT,
    Attempt,
    Condition,
    ConditionStatus,
    ReleaseStatus,
    RenderRecord,
    Rollout,
)
from convoy_batch.models import RolloutState as S
from convoy_batch.rollout import Outcome, RenderId, assemble_status, commit_message
from convoy_batch.rollout.status import CONDITION_ROLLOUT_SUCCEEDED
from tests.support.rollout_builders import (
    R_HEALTHY,
    R_OLD,
    T0,
    R,
    at,
    record,
    ref,
    rollout,
    status,
    wave,
)

NOW = at(30)
LATER = at(45)
BULLETS = {
    "last-attempted-is-the-outcomes-attempt",
    "last-successful-changes-only-when-applied",
    "record-times-change-only-with-render-or-revision",
    "last-healthy-set-when-the-attempt-is-healthy",
    "last-healthy-kept-otherwise",
    "last-healthy-never-cleared-by-a-failure",
    "last-healthy-also-without-failure-policy",
    "outcome-rollout-written",
    "no-outcome-rollout-with-failure-policy-keeps-status-rollout",
    "no-failure-policy-removes-status-rollout",
    "condition-follows-the-rollout-state",
    "condition-unchanged-without-a-rollout",
    "condition-transition-time-changes-only-with-its-status",
    "force-sync-time-written-also-on-failure",
    "history-newest-first-deduped-at-most-ten",
    "an-equal-later-tick-changes-nothing",
}
"""The bullets of SPEC 10 status assembly (and its paragraph on meaningful changes)."""
COVERED: set[str] = set()
F = TypeVar("F", bound=Callable[..., None])


def covers(*bullets: str) -> Callable[[F], F]:
    """Mark a test as the case of a bullet; an unknown bullet id fails the import."""
    assert set(bullets) <= BULLETS, set(bullets) - BULLETS
    COVERED.update(bullets)
    return lambda test: test


def outcome(
    prior_rollout: Rollout | None = None,
    *,
    applied: bool = True,
    reason: str = "Synced",
    render: RenderId | None = RenderId(R, "rev1"),  # noqa: B008 - frozen value
    persisted: RenderId | None = None,
    message: str = "",
) -> Outcome:
    return Outcome(
        rollout=prior_rollout,
        applied=applied,
        reason=reason,
        message=message,
        render=render,
        persisted=persisted,
    )


def error(reason: str = "RenderFailed") -> Outcome:
    return outcome(applied=False, reason=reason, render=None, message="apps/web/x.yaml: bad")


def assemble(
    prior: ReleaseStatus,
    result: Outcome,
    *,
    policy: bool = True,
    healthy: bool = False,
    force_sync_at: datetime | None = None,
    now: datetime = NOW,
) -> ReleaseStatus:
    return assemble_status(
        prior,
        result,
        failure_policy_set=policy,
        attempt_healthy=healthy,
        force_sync_at=force_sync_at,
        now=now,
    )


def condition(value: ConditionStatus, since: datetime = T0, reason: str = "x") -> Condition:
    return Condition(
        type=CONDITION_ROLLOUT_SUCCEEDED, status=value, reason=reason, last_transition_time=since
    )


@covers("last-attempted-is-the-outcomes-attempt")
def test_last_attempted_is_the_attempt_of_the_outcome() -> None:
    synced = assemble(status(), outcome(message="all waves"))
    failed = assemble(synced, error(), now=LATER)

    assert synced.last_attempted == Attempt(
        render_ref=R, revision="rev1", time=NOW, applied=True, reason="Synced", message="all waves"
    )
    assert failed.last_attempted == Attempt(
        time=LATER, applied=False, reason="RenderFailed", message="apps/web/x.yaml: bad"
    )


@covers("last-successful-changes-only-when-applied")
def test_last_successful_changes_only_when_the_outcome_applied() -> None:
    prior = status(last_successful=record(R_OLD, "rev0"))

    waiting = assemble(prior, outcome(applied=False, reason="WaitingForManualSync"))
    applied = assemble(prior, outcome())

    assert waiting.last_successful == record(R_OLD, "rev0")
    assert applied.last_successful == RenderRecord(render_ref=R, revision="rev1", time=NOW)


@covers("record-times-change-only-with-render-or-revision")
@pytest.mark.parametrize(
    ("render", "expected_time"),
    [
        pytest.param(RenderId(R, "rev1"), at(0), id="same-render-and-revision-keeps-time"),
        pytest.param(RenderId(R, "rev2"), NOW, id="new-revision-new-time"),
        pytest.param(RenderId(R_OLD, "rev1"), NOW, id="new-render-new-time"),
    ],
)
def test_record_times_change_only_with_their_render_or_revision(
    render: RenderId, expected_time: datetime
) -> None:
    prior = status(last_successful=record(R, "rev1", at(0)), last_healthy=record(R, "rev1", at(0)))

    new = assemble(prior, outcome(render=render), healthy=True)

    assert new.last_successful is not None and new.last_healthy is not None
    assert new.last_successful.time == new.last_healthy.time == expected_time
    assert (new.last_healthy.render_ref, new.last_healthy.revision) == (render.ref, render.revision)


@covers("last-healthy-set-when-the-attempt-is-healthy")
def test_last_healthy_becomes_the_attempts_render_when_healthy() -> None:
    new = assemble(status(last_healthy=record(R_HEALTHY)), outcome(), healthy=True)

    assert new.last_healthy == RenderRecord(render_ref=R, revision="rev1", time=NOW)


@covers("last-healthy-kept-otherwise")
def test_last_healthy_keeps_its_value_when_the_attempt_is_not_healthy() -> None:
    new = assemble(status(last_healthy=record(R_HEALTHY)), outcome(), healthy=False)

    assert new.last_healthy == record(R_HEALTHY)


@covers("last-healthy-never-cleared-by-a-failure")
@pytest.mark.parametrize("healthy", [False, True], ids=["unhealthy", "healthy-flag-without-render"])
def test_a_failure_never_clears_last_healthy(healthy: bool) -> None:
    new = assemble(status(last_healthy=record(R_HEALTHY)), error("SourceFailed"), healthy=healthy)

    assert new.last_healthy == record(R_HEALTHY)


@covers("last-healthy-also-without-failure-policy")
def test_last_healthy_is_tracked_without_a_failure_policy() -> None:
    new = assemble(status(), outcome(), policy=False, healthy=True)

    assert new.last_healthy == RenderRecord(render_ref=R, revision="rev1", time=NOW)


@covers("outcome-rollout-written")
def test_the_outcome_rollout_is_written_to_status_rollout() -> None:
    opened = rollout(S.PROGRESSING, R, NOW)

    new = assemble(status(rollout(S.SUCCEEDED, R_OLD, at(-60), "Healthy")), outcome(opened))

    assert new.rollout == opened


@covers("no-outcome-rollout-with-failure-policy-keeps-status-rollout")
@pytest.mark.parametrize("state", [S.ROLLED_BACK, S.SUCCEEDED], ids=["rolled-back", "succeeded"])
def test_a_rollout_survives_a_render_error(state: S) -> None:
    prior = rollout(state, R, at(0), "Unhealthy")

    new = assemble(status(prior), error("RenderFailed"), policy=True)

    assert new.rollout == prior


@covers("no-failure-policy-removes-status-rollout")
@pytest.mark.parametrize("result", [outcome(), error()], ids=["synced", "error"])
def test_without_failure_policy_status_rollout_is_removed(result: Outcome) -> None:
    new = assemble(status(rollout(S.SUCCEEDED, R, at(0), "Healthy")), result, policy=False)

    assert new.rollout is None


@covers("condition-follows-the-rollout-state")
@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (S.SUCCEEDED, ConditionStatus.TRUE),
        (S.FAILED, ConditionStatus.FALSE),
        (S.ROLLED_BACK, ConditionStatus.FALSE),
        (S.PROGRESSING, ConditionStatus.UNKNOWN),
    ],
    ids=["succeeded-true", "failed-false", "rolled-back-false", "progressing-unknown"],
)
def test_rollout_succeeded_condition_follows_the_rollout_state(
    state: S, expected: ConditionStatus
) -> None:
    new = assemble(status(), outcome(rollout(state, R, at(0), "Because", "said so")))

    assert new.conditions == (
        Condition(
            type=CONDITION_ROLLOUT_SUCCEEDED,
            status=expected,
            reason="Because",
            message="said so",
            last_transition_time=NOW,
        ),
    )


@covers("condition-unchanged-without-a-rollout")
@pytest.mark.parametrize("policy", [True, False], ids=["failure-policy", "no-failure-policy"])
def test_the_condition_is_unchanged_without_an_outcome_rollout(policy: bool) -> None:
    prior = status(
        rollout(S.SUCCEEDED, R, at(0), "Healthy"),
        conditions=(condition(ConditionStatus.TRUE, at(5), "Healthy"),),
    )

    new = assemble(prior, error(), policy=policy)

    assert new.conditions == prior.conditions


@covers("condition-transition-time-changes-only-with-its-status")
@pytest.mark.parametrize(
    ("prior_status", "state", "expected_since"),
    [
        pytest.param(ConditionStatus.UNKNOWN, S.PROGRESSING, at(5), id="same-status-keeps-time"),
        pytest.param(ConditionStatus.FALSE, S.ROLLED_BACK, at(5), id="failed-to-rolled-back"),
        pytest.param(ConditionStatus.UNKNOWN, S.SUCCEEDED, NOW, id="new-status-new-time"),
    ],
)
def test_the_condition_transition_time_changes_only_with_its_status(
    prior_status: ConditionStatus, state: S, expected_since: datetime
) -> None:
    prior = status(conditions=(condition(prior_status, at(5), "Old"),))

    new = assemble(prior, outcome(rollout(state, R, at(0), "New")))

    assert [(c.last_transition_time, c.reason) for c in new.conditions] == [(expected_since, "New")]


@covers("force-sync-time-written-also-on-failure")
@pytest.mark.parametrize("result", [outcome(), error()], ids=["synced", "error"])
def test_a_handled_forced_sync_is_written_also_when_the_reconcile_fails(result: Outcome) -> None:
    prior = status(last_handled_force_sync_at=at(-100))

    handled = assemble(prior, result, force_sync_at=at(20))
    none_pending = assemble(prior, result, force_sync_at=None)

    assert handled.last_handled_force_sync_at == at(20)
    assert none_pending.last_handled_force_sync_at == at(-100)


@covers("history-newest-first-deduped-at-most-ten")
def test_history_is_newest_first_deduped_against_the_newest_and_bounded() -> None:
    older = tuple(record(ref(f"{n:x}"), f"rev{n}", at(-n)) for n in range(1, HISTORY_LIMIT + 1))
    prior = status(history=older)

    added = assemble(prior, outcome(persisted=RenderId(R, "rev1")))
    again = assemble(added, outcome(persisted=RenderId(R, "rev1")), now=LATER)
    not_persisted = assemble(prior, outcome(persisted=None))

    assert added.history[0] == RenderRecord(render_ref=R, revision="rev1", time=NOW)
    assert added.history[1:] == older[: HISTORY_LIMIT - 1]
    assert len(added.history) == HISTORY_LIMIT
    assert again.history == added.history
    assert not_persisted.history == older


def test_history_dedupes_only_against_the_newest_entry() -> None:
    prior = status(history=(record(R_OLD, "rev2", at(-1)), record(R, "rev1", at(-2))))

    new = assemble(prior, outcome(persisted=RenderId(R, "rev1")))

    assert [h.render_ref for h in new.history] == [R, R_OLD, R]


@covers("an-equal-later-tick-changes-nothing")
@pytest.mark.parametrize(
    "result",
    [
        outcome(rollout(S.PROGRESSING, R, at(0)), persisted=RenderId(R, "rev1")),
        outcome(rollout(S.SUCCEEDED, R, at(0), "Healthy")),
        error(),
    ],
    ids=["progressing-synced", "succeeded", "render-error"],
)
def test_a_later_tick_with_an_equal_outcome_gives_an_equal_status(result: Outcome) -> None:
    first = assemble(status(last_healthy=record(R_HEALTHY)), result, healthy=True)
    second = assemble(first, result, healthy=True, now=LATER)

    assert second == first
    assert second.last_attempted is not None and second.last_attempted.time == NOW


def test_status_waves_are_replaced_by_a_sync_and_kept_otherwise() -> None:
    prior = status(waves=(wave(0, at(0), R_OLD),))
    synced = Outcome(rollout=None, applied=True, reason="Synced", waves=(wave(0, NOW),))

    assert assemble(prior, synced).waves == (wave(0, NOW),)
    assert assemble(prior, error()).waves == prior.waves


def test_every_bullet_of_status_assembly_has_a_test() -> None:
    assert COVERED == BULLETS


# --- commit messages -----------------------------------------------------------------

HEX12 = "a" * 12


def attempted(reason: str) -> Attempt:
    return Attempt(render_ref=R, time=NOW, reason=reason)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        pytest.param(
            status(),
            status(rollout(S.PROGRESSING, R, NOW), last_attempted=attempted("Synced")),
            f"web: none -> Progressing (NewRender) {HEX12}",
            id="none-as-old-state",
        ),
        pytest.param(
            status(rollout(S.PROGRESSING, R, at(0))),
            status(rollout(S.ROLLED_BACK, R, at(0), "Unhealthy"), last_attempted=attempted("X")),
            f"web: Progressing -> RolledBack (Unhealthy) {HEX12}",
            id="state-change-with-the-rollouts-reason",
        ),
        pytest.param(
            status(rollout(S.SUCCEEDED, R_OLD, at(0), "Healthy")),
            status(rollout(S.PROGRESSING, R, NOW), last_attempted=attempted("Synced")),
            f"web: Succeeded -> Progressing (NewRender) {HEX12}",
            id="a-new-render-is-a-state-change",
        ),
        pytest.param(
            status(rollout(S.PROGRESSING, R_OLD, at(0))),
            status(rollout(S.PROGRESSING, R, NOW), last_attempted=attempted("Synced")),
            f"web: Progressing -> Progressing (NewRender) {HEX12}",
            id="progressing-for-a-newer-render-is-a-state-change",
        ),
        pytest.param(
            status(rollout(S.PROGRESSING, R, at(0))),
            status(rollout(S.PROGRESSING, R, at(0)), last_attempted=attempted("Synced")),
            "web: Synced",
            id="no-state-change-gives-the-outcome-reason",
        ),
        pytest.param(
            status(rollout(S.SUCCEEDED, R, at(0), "Healthy")),
            status(rollout(S.SUCCEEDED, R, at(0), "Healthy"), last_attempted=attempted("Bad")),
            "web: Bad",
            id="an-error-without-state-change",
        ),
        pytest.param(
            status(rollout(S.SUCCEEDED, R, at(0), "Healthy")),
            status(last_attempted=attempted("Synced")),
            "web: Succeeded -> none (Synced)",
            id="failure-policy-removed",
        ),
    ],
)
def test_commit_message_formats(old: ReleaseStatus, new: ReleaseStatus, message: str) -> None:
    assert commit_message("web", old, new) == message
