"""The transition table of SPEC 5 (``plan_rollout``), one case per row, plus first-match order."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from convoy_batch.models import (
    InventoryEntry,
    ReleaseSpec,
    ReleaseStatus,
    RenderRecord,
    RollbackMode,
)
from convoy_batch.models import RolloutState as S
from convoy_batch.rollout import Action, pinned_plan, plan_rollout, rollback_eligible
from convoy_batch.rollout.plan import ROWS, PlanInput, render_verdict
from tests.support.rollout_builders import (
    CURRENT,
    FAILED,
    IN_PROGRESS,
    R_HEALTHY,
    R_OLD,
    R,
    at,
    entry,
    record,
    rollout,
    spec,
    status,
    wave,
)

HEALTHY_INVENTORY = (entry("web"), entry("db"))
FAILED_INVENTORY = (entry("web", FAILED), entry("db"))
PENDING_INVENTORY = (entry("web", IN_PROGRESS), entry("db"))
LAST_HEALTHY = record(R_HEALTHY)
NOW = at(3)
"""The default clock of a case: three minutes after T0."""


@dataclass(frozen=True)
class Expected:
    state: S
    render_ref: str
    started_at: datetime
    reason: str


@dataclass(frozen=True)
class Case:
    row: int
    spec: ReleaseSpec
    status: ReleaseStatus
    action: Action
    expected: Expected | None
    entries: tuple[InventoryEntry, ...] = field(default=())
    now: datetime = NOW


ROW_CASES: dict[str, Case] = {
    "row1-no-failure-policy-gives-no-rollout": Case(
        1, spec(failure_policy=False), status(), Action.APPLY_SOURCE, None
    ),
    "row2-prior-absent-opens-progressing-at-now": Case(
        2,
        spec(),
        status(),
        Action.APPLY_SOURCE,
        Expected(S.PROGRESSING, R, at(3), "NewRender"),
    ),
    "row2-prior-for-another-render-opens-progressing-at-now": Case(
        2,
        spec(),
        status(rollout(S.SUCCEEDED, R_OLD, at(-60), "Healthy")),
        Action.APPLY_SOURCE,
        Expected(S.PROGRESSING, R, at(3), "NewRender"),
    ),
    "row3-rolled-back-holds-and-applies-last-healthy": Case(
        3,
        spec(),
        status(rollout(S.ROLLED_BACK, R, at(-20), "Unhealthy"), last_healthy=LAST_HEALTHY),
        Action.APPLY_LAST_HEALTHY,
        Expected(S.ROLLED_BACK, R, at(-20), "Unhealthy"),
        HEALTHY_INVENTORY,
    ),
    "row4-succeeded-stays-even-when-unhealthy": Case(
        4,
        spec(),
        status(rollout(S.SUCCEEDED, R, at(-20), "Healthy")),
        Action.APPLY_SOURCE,
        Expected(S.SUCCEEDED, R, at(-20), "Healthy"),
        FAILED_INVENTORY,
    ),
    "row4-failed-stays-even-when-healthy": Case(
        4,
        spec(),
        status(rollout(S.FAILED, R, at(-20), "Unhealthy")),
        Action.APPLY_SOURCE,
        Expected(S.FAILED, R, at(-20), "Unhealthy"),
        HEALTHY_INVENTORY,
    ),
    "row5-progressing-and-healthy-succeeds-keeping-started-at": Case(
        5,
        spec(),
        status(rollout(S.PROGRESSING, R, at(0))),
        Action.APPLY_SOURCE,
        Expected(S.SUCCEEDED, R, at(0), "Healthy"),
        HEALTHY_INVENTORY,
    ),
    "row6-progressing-failed-entry-and-eligible-rolls-back": Case(
        6,
        spec(),
        status(rollout(S.PROGRESSING, R, at(0)), last_healthy=LAST_HEALTHY),
        Action.APPLY_LAST_HEALTHY,
        Expected(S.ROLLED_BACK, R, at(0), "Unhealthy"),
        FAILED_INVENTORY,
    ),
    "row6-progressing-past-deadline-and-eligible-rolls-back": Case(
        6,
        spec(),
        status(rollout(S.PROGRESSING, R, at(0)), last_healthy=LAST_HEALTHY),
        Action.APPLY_LAST_HEALTHY,
        Expected(S.ROLLED_BACK, R, at(0), "ProgressDeadlineExceeded"),
        PENDING_INVENTORY,
        at(11),
    ),
    "row7-progressing-unhealthy-without-last-healthy-fails": Case(
        7,
        spec(),
        status(rollout(S.PROGRESSING, R, at(0))),
        Action.APPLY_SOURCE,
        Expected(S.FAILED, R, at(0), "Unhealthy"),
        FAILED_INVENTORY,
    ),
    "row7-progressing-past-deadline-with-rollback-never-fails": Case(
        7,
        spec(rollback=RollbackMode.NEVER),
        status(rollout(S.PROGRESSING, R, at(0)), last_healthy=LAST_HEALTHY),
        Action.APPLY_SOURCE,
        Expected(S.FAILED, R, at(0), "ProgressDeadlineExceeded"),
        PENDING_INVENTORY,
        at(11),
    ),
    "row8-progressing-and-pending-keeps-prior": Case(
        8,
        spec(),
        status(rollout(S.PROGRESSING, R, at(0))),
        Action.APPLY_SOURCE,
        Expected(S.PROGRESSING, R, at(0), "NewRender"),
        PENDING_INVENTORY,
    ),
}

ORDER_CASES: dict[str, Case] = {
    "row1-wins-over-row3-a-rolled-back-prior-without-failure-policy": Case(
        1,
        spec(failure_policy=False),
        status(rollout(S.ROLLED_BACK, R, at(-20), "Unhealthy"), last_healthy=LAST_HEALTHY),
        Action.APPLY_SOURCE,
        None,
        FAILED_INVENTORY,
    ),
    "row1-wins-over-row7-an-unhealthy-progressing-prior-without-failure-policy": Case(
        1,
        spec(failure_policy=False),
        status(rollout(S.PROGRESSING, R, at(0)), last_healthy=LAST_HEALTHY),
        Action.APPLY_SOURCE,
        None,
        FAILED_INVENTORY,
        at(30),
    ),
    "row2-wins-over-row3-a-new-render-ends-rolled-back": Case(
        2,
        spec(),
        status(rollout(S.ROLLED_BACK, R_OLD, at(-20), "Unhealthy"), last_healthy=LAST_HEALTHY),
        Action.APPLY_SOURCE,
        Expected(S.PROGRESSING, R, at(3), "NewRender"),
    ),
    "row2-a-new-render-ignores-the-earlier-renders-health-no-early-succeeded": Case(
        2,
        spec(),
        status(rollout(S.PROGRESSING, R_OLD, at(0))),
        Action.APPLY_SOURCE,
        Expected(S.PROGRESSING, R, at(3), "NewRender"),
        (entry("web", CURRENT, R_OLD),),
    ),
    "row2-a-new-render-ignores-an-old-failure-past-its-deadline-no-rollback": Case(
        2,
        spec(),
        status(rollout(S.PROGRESSING, R_OLD, at(-60)), last_healthy=LAST_HEALTHY),
        Action.APPLY_SOURCE,
        Expected(S.PROGRESSING, R, at(3), "NewRender"),
        (entry("web", FAILED, R_OLD),),
    ),
    "row6-wins-over-row7-an-eligible-unhealthy-render-rolls-back": ROW_CASES[
        "row6-progressing-failed-entry-and-eligible-rolls-back"
    ],
}
SHADOWED_ROW = {
    "row1-wins-over-row3-a-rolled-back-prior-without-failure-policy": 3,
    "row1-wins-over-row7-an-unhealthy-progressing-prior-without-failure-policy": 7,
    "row2-wins-over-row3-a-new-render-ends-rolled-back": 3,
    "row6-wins-over-row7-an-eligible-unhealthy-render-rolls-back": 7,
}
"""Order cases where a later row's condition holds too, so only the order decides."""


@pytest.mark.parametrize(
    "case", [*ROW_CASES.values(), *ORDER_CASES.values()], ids=[*ROW_CASES, *ORDER_CASES]
)
def test_plan_rollout_takes_the_first_matching_row(case: Case) -> None:
    plan = plan_rollout(case.spec, case.status, R, case.entries, case.now)

    assert (plan.row, plan.action) == (case.row, case.action)
    if case.expected is None:
        assert plan.rollout is None
    else:
        assert plan.rollout is not None
        got = (plan.rollout.state, plan.rollout.render_ref, plan.rollout.started_at)
        assert got == (case.expected.state, case.expected.render_ref, case.expected.started_at)
        assert plan.rollout.reason == case.expected.reason


def _matching_rows(case: Case) -> list[int]:
    """Every row whose condition holds, with the verdict computed as plan_rollout does."""
    prior = case.status.rollout
    progressing_for_r = prior is not None and prior.state == S.PROGRESSING and prior.render_ref == R
    result = (
        render_verdict(case.spec, case.status, R, case.entries, case.now)
        if progressing_for_r
        else None
    )
    i = PlanInput(spec=case.spec, status=case.status, render_ref=R, now=case.now, verdict=result)
    return [row.number for row in ROWS if row.matches(i)]


@pytest.mark.parametrize("case_id", SHADOWED_ROW)
def test_an_earlier_row_wins_over_a_later_row_that_also_matches(case_id: str) -> None:
    case = ORDER_CASES[case_id]
    matching = _matching_rows(case)

    assert SHADOWED_ROW[case_id] in matching
    assert matching[0] == case.row
    assert plan_rollout(case.spec, case.status, R, case.entries, case.now).row == case.row


def test_every_row_of_the_transition_table_has_a_case() -> None:
    covered = {case.row for case in ROW_CASES.values()}

    assert covered == {row.number for row in ROWS}
    assert [row.number for row in ROWS] == list(range(1, 9))


def test_a_verdict_rollback_carries_the_verdict_message() -> None:
    plan = plan_rollout(
        spec(),
        status(rollout(S.PROGRESSING), last_healthy=LAST_HEALTHY),
        R,
        FAILED_INVENTORY,
        at(1),
    )

    assert plan.rollout is not None
    assert "Deployment.apps web/web" in plan.rollout.message


@pytest.mark.parametrize(
    ("release_spec", "last_healthy", "eligible"),
    [
        pytest.param(spec(), LAST_HEALTHY, True, id="policy-auto-and-last-healthy-is-eligible"),
        pytest.param(spec(failure_policy=False), LAST_HEALTHY, False, id="no-failure-policy"),
        pytest.param(spec(rollback=RollbackMode.NEVER), LAST_HEALTHY, False, id="rollback-never"),
        pytest.param(spec(), None, False, id="no-last-healthy"),
    ],
)
def test_rollback_eligible_needs_policy_rollback_and_last_healthy(
    release_spec: ReleaseSpec, last_healthy: RenderRecord | None, eligible: bool
) -> None:
    prior = status(last_healthy=last_healthy)

    assert rollback_eligible(release_spec, prior) is eligible


def test_pinned_plan_applies_the_source_without_a_rollout() -> None:
    plan = pinned_plan()

    assert (plan.rollout, plan.action, plan.row) == (None, Action.APPLY_SOURCE, 0)


def test_the_deadline_counts_from_the_first_wave_when_a_gate_held_the_render() -> None:
    # A Manual Release force-synced an hour after the render arrived (SPEC 6.1).
    held = status(rollout(S.PROGRESSING, R, at(0)), waves=(wave(0, at(60)),))

    before = plan_rollout(spec(), held, R, PENDING_INVENTORY, at(69))
    after = plan_rollout(spec(), held, R, PENDING_INVENTORY, at(70) + timedelta(seconds=1))

    assert before.row == 8
    assert (after.row, after.rollout and after.rollout.reason) == (7, "ProgressDeadlineExceeded")
