"""The wave gate (SPEC 7): one case per row of its timeout table, and ``plan_waves``."""

from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest

from convoy_batch.models import (
    HealthStrategy,
    InventoryEntry,
    Phase,
    ReleaseSpec,
    ReleaseStatus,
    RollbackMode,
    Rollout,
    RolloutState,
)
from convoy_batch.models import RolloutState as S
from convoy_batch.reasons import Reason
from convoy_batch.rollout import GateKind, plan_waves, wave_health_gate
from convoy_batch.rollout.waves import WavePlan
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

HEALTHY = HealthStrategy.HEALTHY
NOW = at(1)
ByPhase = dict[Phase, tuple[InventoryEntry, ...]]
LAST_HEALTHY = record(R_HEALTHY)
PROGRESSING = status(rollout(S.PROGRESSING, R, at(-2)))
ELIGIBLE = status(rollout(S.PROGRESSING, R, at(-2)), last_healthy=LAST_HEALTHY)
SLOW_WAVE = (entry("web", IN_PROGRESS), entry("db"))
TIMED_OUT = at(5) + timedelta(seconds=1)
"""A little over the 5m wave timeout after the previous wave started at T0."""


def gate(
    release_spec: ReleaseSpec,
    prior: ReleaseStatus,
    *,
    previous: tuple[InventoryEntry, ...] = SLOW_WAVE,
    now: datetime = TIMED_OUT,
    pinned: bool = False,
) -> "GateResult":
    decision = wave_health_gate(
        0, previous, at(0), spec=release_spec, status=prior, render_ref=R, pinned=pinned, now=now
    )
    state = decision.rollout.state if decision.rollout is not None else None
    started = decision.rollout.started_at if decision.rollout is not None else None
    reason = decision.rollout.reason if decision.rollout is not None else None
    return GateResult(decision.kind, decision.reason, state, started, reason)


@dataclass(frozen=True)
class GateResult:
    kind: GateKind
    reason: Reason | None
    state: RolloutState | None
    started_at: datetime | None
    rollout_reason: str | None


@dataclass(frozen=True)
class TimeoutCase:
    row: str
    spec: ReleaseSpec
    status: ReleaseStatus
    pinned: bool
    expected: GateResult


def _stop(state: RolloutState | None = None) -> GateResult:
    with_rollout = state is not None
    return GateResult(
        GateKind.STOP,
        Reason.WAVE_TIMEOUT,
        state,
        at(-2) if with_rollout else None,
        Reason.WAVE_TIMEOUT if with_rollout else None,
    )


TIMEOUT_CASES: dict[str, TimeoutCase] = {
    "no-failure-policy-stops-without-rollout": TimeoutCase(
        "no-policy-or-pin", spec(failure_policy=False), ELIGIBLE, False, _stop()
    ),
    "a-pin-stops-without-rollout-even-when-eligible": TimeoutCase(
        "no-policy-or-pin", spec(), ELIGIBLE, True, _stop()
    ),
    "rollback-eligible-rolls-back-keeping-started-at": TimeoutCase(
        "rollback-eligible",
        spec(),
        ELIGIBLE,
        False,
        GateResult(
            GateKind.ROLL_BACK, Reason.WAVE_TIMEOUT, S.ROLLED_BACK, at(-2), Reason.WAVE_TIMEOUT
        ),
    ),
    "no-last-healthy-fails": TimeoutCase("otherwise", spec(), PROGRESSING, False, _stop(S.FAILED)),
    "rollback-never-fails": TimeoutCase(
        "otherwise", spec(rollback=RollbackMode.NEVER), ELIGIBLE, False, _stop(S.FAILED)
    ),
}
TABLE_ROWS = {"no-policy-or-pin", "rollback-eligible", "otherwise"}


@pytest.mark.parametrize("case", TIMEOUT_CASES.values(), ids=TIMEOUT_CASES.keys())
def test_a_timed_out_wave_follows_the_table_of_spec_7(case: TimeoutCase) -> None:
    assert gate(case.spec, case.status, pinned=case.pinned) == case.expected


def test_every_row_of_the_wave_timeout_table_has_a_case() -> None:
    assert {case.row for case in TIMEOUT_CASES.values()} == TABLE_ROWS


@pytest.mark.parametrize(
    ("prior", "expected_start"),
    [
        pytest.param(rollout(S.PROGRESSING, R, at(-2)), at(-2), id="prior-for-r-keeps-started-at"),
        pytest.param(rollout(S.SUCCEEDED, R_OLD, at(-90)), TIMED_OUT, id="prior-for-old-is-now"),
        pytest.param(None, TIMED_OUT, id="no-prior-is-now"),
    ],
)
def test_prior_rollout_started_at_is_kept_only_for_the_same_render(
    prior: Rollout | None, expected_start: datetime
) -> None:
    for eligible in (True, False):
        prior_status = status(prior, last_healthy=LAST_HEALTHY if eligible else None)
        assert gate(spec(), prior_status).started_at == expected_start


def test_before_the_timeout_the_gate_holds_without_a_rollout() -> None:
    for now in (at(1), at(5)):
        result = gate(spec(), ELIGIBLE, now=now)

        assert result == GateResult(GateKind.HOLD, Reason.WAITING_FOR_WAVE_HEALTH, None, None, None)


def test_the_gate_proceeds_when_the_previous_wave_is_current_for_r() -> None:
    assert gate(spec(), ELIGIBLE, previous=(entry("web"), entry("db"))).kind == GateKind.PROCEED


def test_a_previous_wave_current_for_another_render_does_not_open_the_gate() -> None:
    result = gate(spec(), ELIGIBLE, previous=(entry("web", CURRENT, R_OLD),), now=at(1))

    assert result.kind == GateKind.HOLD


# --- plan_waves ----------------------------------------------------------------------


def waves_plan(
    phases: tuple[Phase, ...],
    prior: ReleaseStatus,
    *,
    strategy: HealthStrategy = HEALTHY,
    entries: ByPhase | None = None,
    now: datetime = NOW,
) -> WavePlan:
    return plan_waves(
        phases,
        entries or {},
        spec=spec(strategy=strategy),
        status=prior,
        render_ref=R,
        pinned=False,
        now=now,
    )


def started(plan: WavePlan) -> list[tuple[Phase, datetime]]:
    return [(w.wave, w.started_at) for w in plan.waves if w.render_ref == R]


def test_strategy_none_applies_every_wave_in_one_pass() -> None:
    plan = waves_plan((0, 1, 2), PROGRESSING, strategy=HealthStrategy.NONE)

    assert (plan.apply, plan.gate, plan.complete) == ((0, 1, 2), None, True)
    assert started(plan) == [(0, at(1)), (1, at(1)), (2, at(1))]


def test_strategy_healthy_applies_wave_zero_then_holds() -> None:
    plan = waves_plan((0, 1, 2), PROGRESSING, entries={0: SLOW_WAVE})

    assert plan.apply == (0,)
    assert plan.gate is not None
    assert (plan.gate.kind, plan.gate.reason) == (GateKind.HOLD, Reason.WAITING_FOR_WAVE_HEALTH)
    assert started(plan) == [(0, at(1))]


def test_strategy_healthy_starts_the_next_wave_once_the_previous_is_current() -> None:
    prior = status(rollout(S.PROGRESSING), waves=(wave(0, at(1)),))
    plan = waves_plan((0, 1, 2), prior, entries={0: (entry("web"),)}, now=at(3))

    assert plan.apply == (0, 1)
    assert started(plan) == [(0, at(1)), (1, at(3))]
    assert plan.gate is not None and plan.gate.kind == GateKind.HOLD


def test_once_every_wave_started_each_tick_reapplies_all_without_waiting() -> None:
    prior = status(rollout(S.PROGRESSING), waves=(wave(0, at(0)), wave(1, at(2))))
    drifted: ByPhase = {0: (entry("web", FAILED),), 1: (entry("db", IN_PROGRESS, phase=1),)}
    plan = waves_plan((0, 1), prior, entries=drifted, now=at(60))

    assert (plan.apply, plan.gate) == ((0, 1), None)
    assert started(plan) == [(0, at(0)), (1, at(2))]


def test_the_waves_list_restarts_with_a_new_render() -> None:
    prior = status(rollout(S.PROGRESSING), waves=(wave(0, at(-30), R_OLD), wave(1, at(-20), R_OLD)))
    plan = waves_plan((0, 1), prior, strategy=HealthStrategy.NONE, now=at(1))

    assert [(w.wave, w.render_ref, w.started_at) for w in plan.waves] == [
        (0, R, at(1)),
        (1, R, at(1)),
    ]


def test_pre_sync_gates_the_first_wave_even_with_strategy_none() -> None:
    first = waves_plan(("PreSync", 0, 1), PROGRESSING, strategy=HealthStrategy.NONE)

    assert first.apply == ("PreSync",)
    assert first.gate is not None
    assert (first.gate.kind, first.gate.reason) == (GateKind.HOLD, Reason.WAITING_FOR_WAVE_HEALTH)


def test_a_complete_pre_sync_hook_opens_all_waves_and_is_not_reapplied() -> None:
    prior = status(rollout(S.PROGRESSING), waves=(wave("PreSync", at(0)),))
    hooks_done: ByPhase = {"PreSync": (entry("migrate", phase="PreSync"),)}
    plan = waves_plan(
        ("PreSync", 0, 1), prior, strategy=HealthStrategy.NONE, entries=hooks_done, now=at(2)
    )

    assert (plan.apply, plan.gate) == ((0, 1), None)
    assert started(plan) == [("PreSync", at(0)), (0, at(2)), (1, at(2))]


def test_a_pre_sync_hook_times_out_from_its_own_waves_entry() -> None:
    prior = status(rollout(S.PROGRESSING), waves=(wave("PreSync", at(0)),))
    stuck: ByPhase = {"PreSync": (entry("migrate", IN_PROGRESS, phase="PreSync"),)}
    plan = waves_plan(
        ("PreSync", 0), prior, strategy=HealthStrategy.NONE, entries=stuck, now=TIMED_OUT
    )

    assert plan.apply == ()
    assert plan.gate is not None and plan.gate.rollout is not None
    assert (plan.gate.kind, plan.gate.rollout.state) == (GateKind.STOP, S.FAILED)


def test_hooks_are_not_reapplied_for_the_same_render() -> None:
    prior = status(
        rollout(S.PROGRESSING),
        waves=(wave("PreSync", at(0)), wave(0, at(1)), wave("PostSync", at(2))),
    )
    plan = waves_plan(("PreSync", 0, "PostSync"), prior, now=at(30))

    assert (plan.apply, plan.gate) == ((0,), None)


def test_post_sync_follows_the_last_wave_at_once_with_strategy_none() -> None:
    plan = waves_plan((0, "PostSync"), PROGRESSING, strategy=HealthStrategy.NONE)

    assert plan.apply == (0, "PostSync")


def test_post_sync_waits_for_a_healthy_last_wave_with_strategy_healthy() -> None:
    prior = status(rollout(S.PROGRESSING), waves=(wave(0, at(0)),))
    waiting = waves_plan((0, "PostSync"), prior, entries={0: SLOW_WAVE}, now=at(1))
    ready = waves_plan((0, "PostSync"), prior, entries={0: (entry("web"),)}, now=at(1))

    assert waiting.apply == (0,)
    assert ready.apply == (0, "PostSync")


def test_a_roll_back_decision_applies_nothing_of_r() -> None:
    prior = status(
        rollout(S.PROGRESSING, R, at(-2)), last_healthy=LAST_HEALTHY, waves=(wave(0, at(0)),)
    )
    plan = waves_plan((0, 1), prior, entries={0: SLOW_WAVE}, now=TIMED_OUT)

    assert plan.apply == ()
    assert plan.gate is not None and plan.gate.rollout is not None
    assert (plan.gate.kind, plan.gate.rollout.state) == (GateKind.ROLL_BACK, S.ROLLED_BACK)
    assert started(plan) == [(0, at(0))]


def test_a_wave_timeout_stop_keeps_the_started_waves_but_not_later_ones() -> None:
    prior = status(rollout(S.PROGRESSING, R, at(-2)), waves=(wave(0, at(0)),))
    plan = waves_plan((0, 1, 2), prior, entries={0: SLOW_WAVE}, now=TIMED_OUT)

    assert plan.apply == (0,)
    assert plan.gate is not None and plan.gate.rollout is not None
    assert (plan.gate.kind, plan.gate.reason) == (GateKind.STOP, Reason.WAVE_TIMEOUT)
    assert plan.gate.rollout.state == S.FAILED


def test_an_empty_previous_wave_is_unknown_not_healthy() -> None:
    assert gate(spec(), PROGRESSING, previous=(), now=at(1)).kind == GateKind.HOLD
    assert gate(spec(), PROGRESSING, previous=()).state == S.FAILED


def test_a_wave_timeout_message_names_the_wave_the_object_and_the_timeout() -> None:
    decision = wave_health_gate(
        1,
        SLOW_WAVE,
        at(0),
        spec=spec(),
        status=PROGRESSING,
        render_ref=R,
        pinned=False,
        now=TIMED_OUT,
    )

    assert decision.message == "wave 1 not healthy within 5m: Deployment.apps web/web"


def test_sync_hooks_follow_current_presync_hooks_and_the_first_wave_follows_at_once() -> None:
    prior = status(rollout(S.PROGRESSING), waves=(wave("PreSync", at(0)),))
    done = {"PreSync": (entry("migrate", phase="PreSync"),)}
    plan = waves_plan(("PreSync", "Sync", 0), prior, strategy=HealthStrategy.NONE, entries=done)

    assert (plan.apply, plan.gate) == (("Sync", 0), None)


def test_the_first_wave_waits_for_sync_hooks_with_strategy_healthy() -> None:
    prior = status(rollout(S.PROGRESSING), waves=(wave("Sync", at(0)),))
    running = {"Sync": (entry("seed", IN_PROGRESS, phase="Sync"),)}
    plan = waves_plan(("Sync", 0), prior, entries=running)

    assert plan.apply == ()
    assert plan.gate is not None and plan.gate.message == (
        "waiting for Sync hooks: Deployment.apps web/seed"
    )


def test_sync_hooks_are_not_reapplied_for_the_same_render() -> None:
    prior = status(rollout(S.PROGRESSING), waves=(wave("Sync", at(0)), wave(0, at(0))))
    plan = waves_plan(("Sync", 0), prior, entries={"Sync": (entry("seed", phase="Sync"),)})

    assert (plan.apply, plan.gate) == ((0,), None)
