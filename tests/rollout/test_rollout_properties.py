"""Properties of the rollout decisions (SPEC 5, 6.1) over generated specs, statuses,
inventories and clocks."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from convoy_batch.models import (
    HealthState,
    InventoryEntry,
    ReleaseSpec,
    ReleaseStatus,
    RollbackMode,
    Rollout,
    RolloutState,
)
from convoy_batch.rollout import Verdict, plan_rollout, verdict
from convoy_batch.rollout.plan import ROWS, Plan
from tests.support.rollout_builders import (
    R_HEALTHY,
    R_OLD,
    R,
    at,
    entry,
    record,
    ref,
    spec,
    status,
    wave,
)

REFS = st.sampled_from([R, R_OLD, ref("d")])
TIMES = st.integers(min_value=-600, max_value=600).map(at)
STATES = st.sampled_from(list(RolloutState))
TERMINAL = st.sampled_from([RolloutState.ROLLED_BACK, RolloutState.SUCCEEDED, RolloutState.FAILED])


@st.composite
def inventories(draw: st.DrawFn) -> tuple[InventoryEntry, ...]:
    size = draw(st.integers(min_value=0, max_value=4))
    return tuple(
        entry(
            f"obj{n}",
            draw(st.none() | st.sampled_from(list(HealthState))),
            draw(st.none() | REFS),
            phase=draw(st.sampled_from([0, 1, "PreSync"])),
        )
        for n in range(size)
    )


@st.composite
def specs_with_policy(draw: st.DrawFn) -> ReleaseSpec:
    return spec(
        rollback=draw(st.sampled_from(list(RollbackMode))),
        progress_deadline=timedelta(minutes=draw(st.integers(min_value=0, max_value=30))),
    )


@st.composite
def rollouts(
    draw: st.DrawFn,
    render_ref: st.SearchStrategy[str] = REFS,
    states: st.SearchStrategy[RolloutState] = STATES,
) -> Rollout:
    # Not st.builds: it would infer the camelCase aliases of the signature as well.
    return Rollout(
        state=draw(states),
        render_ref=draw(render_ref),
        started_at=draw(TIMES),
        reason=draw(st.sampled_from(["NewRender", "Healthy", "Unhealthy", "WaveTimeout"])),
    )


@st.composite
def statuses(draw: st.DrawFn, prior: st.SearchStrategy[Rollout | None]) -> ReleaseStatus:
    waves = tuple(wave(n, draw(TIMES), draw(REFS)) for n in range(draw(st.integers(0, 2))))
    return status(
        draw(prior),
        last_healthy=draw(st.none() | st.just(record(R_HEALTHY))),
        waves=waves,
    )


ANY_SPEC = specs_with_policy() | st.just(spec(failure_policy=False))
ANY_STATUS = statuses(st.none() | rollouts())


@dataclass(frozen=True)
class PlanCall:
    """The arguments of one ``plan_rollout`` call."""

    release_spec: ReleaseSpec
    prior: ReleaseStatus
    render_ref: str
    entries: tuple[InventoryEntry, ...]
    now: datetime

    def plan(self) -> Plan:
        """The plan ``plan_rollout`` makes of these arguments."""
        return plan_rollout(self.release_spec, self.prior, self.render_ref, self.entries, self.now)


@st.composite
def plan_calls(
    draw: st.DrawFn,
    release_specs: st.SearchStrategy[ReleaseSpec] = ANY_SPEC,
    priors: st.SearchStrategy[ReleaseStatus] = ANY_STATUS,
    render_refs: st.SearchStrategy[str] = REFS,
) -> PlanCall:
    """A call with a spec, a prior status and a render of the strategies given, any
    inventory and any clock."""
    return PlanCall(
        draw(release_specs), draw(priors), draw(render_refs), draw(inventories()), draw(TIMES)
    )


@given(
    plan_calls(
        specs_with_policy(),
        statuses(st.none() | rollouts(st.sampled_from([R_OLD, ref("d")]))),
        st.just(R),
    )
)
def test_a_new_render_always_opens_progressing_at_now(call: PlanCall) -> None:
    plan = call.plan()

    assert plan.row == 2
    assert plan.rollout is not None
    assert (plan.rollout.state, plan.rollout.render_ref, plan.rollout.started_at) == (
        RolloutState.PROGRESSING,
        R,
        call.now,
    )


@given(plan_calls(specs_with_policy(), statuses(rollouts(st.just(R), TERMINAL)), st.just(R)))
def test_a_finished_rollout_never_changes_without_a_new_render(call: PlanCall) -> None:
    plan = call.plan()

    assert plan.rollout == call.prior.rollout


@given(plan_calls())
def test_plan_rollout_never_mutates_its_inputs(call: PlanCall) -> None:
    def dumped() -> tuple[object, ...]:
        entries = [e.dump() for e in call.entries]
        return (call.release_spec.dump(), call.prior.dump_status(), entries, call.now)

    before = dumped()

    call.plan()

    assert dumped() == before


@given(plan_calls())
def test_plan_rollout_always_matches_a_row_and_follows_r(call: PlanCall) -> None:
    plan = call.plan()

    assert plan.row in {row.number for row in ROWS}
    if call.release_spec.failure_policy is None:
        assert plan.rollout is None
    else:
        assert plan.rollout is not None and plan.rollout.render_ref == call.render_ref


@given(inventories(), TIMES, st.none() | TIMES, st.none() | st.integers(0, 30))
def test_a_verdict_is_never_healthy_while_an_entry_is_unassessed_for_r(
    entries: tuple[InventoryEntry, ...],
    now: datetime,
    start: datetime | None,
    deadline_minutes: int | None,
) -> None:
    deadline = timedelta(minutes=deadline_minutes) if deadline_minutes is not None else None

    result = verdict(entries, R, start, deadline, now)

    unassessed = any(e.health is None or e.health.assessed_render_ref != R for e in entries)
    if unassessed or not entries:
        assert result.verdict != Verdict.HEALTHY
