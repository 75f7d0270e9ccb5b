"""``plan_rollout``: the transition table of SPEC 5 as ordered, first-match rows.

Pure: a function of the spec, the persisted status, the render ref R, the inventory
and ``now``; it returns a frozen plan and never mutates its inputs.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from convoy_batch.models import (
    InventoryEntry,
    ReleaseSpec,
    ReleaseStatus,
    RollbackMode,
    Rollout,
    RolloutState,
)
from convoy_batch.reasons import Reason
from convoy_batch.rollout.analysis import Verified, judge
from convoy_batch.rollout.verdict import (
    Verdict,
    VerdictResult,
    deadline_passed,
    deadline_start,
    verdict,
)


class Action(StrEnum):
    APPLY_SOURCE = "ApplySource"
    APPLY_LAST_HEALTHY = "ApplyLastHealthy"


@dataclass(frozen=True)
class Plan:
    rollout: Rollout | None
    action: Action
    row: int
    """The number of the SPEC 5 row that matched (0 for a pinned Release)."""
    condition: str = "pinned: no rollout"
    """The matched row's condition, in words."""
    verdict: VerdictResult | None = None
    """verdict(R) when the rows looked at it (prior Progressing for R)."""


@dataclass(frozen=True)
class PlanInput:
    """Everything a row may look at, computed once."""

    spec: ReleaseSpec
    status: ReleaseStatus
    render_ref: str
    now: datetime
    verdict: VerdictResult | None
    """verdict(R), only when prior is Progressing for R (rows 5-8)."""

    @property
    def prior(self) -> Rollout | None:
        return self.status.rollout


def rollback_eligible(spec: ReleaseSpec, status: ReleaseStatus) -> bool:
    """failurePolicy set, rollback not Never, lastHealthy set (render store not checked)."""
    policy = spec.failure_policy
    return (
        policy is not None
        and policy.rollback != RollbackMode.NEVER
        and status.last_healthy is not None
    )


def _state(i: PlanInput) -> RolloutState | None:
    return i.prior.state if i.prior is not None else None


def _transition(i: PlanInput, state: RolloutState, reason: Reason, message: str = "") -> Rollout:
    assert i.prior is not None
    return Rollout(
        state=state,
        render_ref=i.render_ref,
        started_at=i.prior.started_at,
        reason=reason,
        message=message,
    )


def _cause(i: PlanInput) -> tuple[Reason, str]:
    assert i.verdict is not None and i.verdict.cause is not None
    return i.verdict.cause, i.verdict.message


def _is_verdict(expected: Verdict) -> Callable[[PlanInput], bool]:
    return lambda i: (
        _state(i) == RolloutState.PROGRESSING
        and i.verdict is not None
        and i.verdict.verdict == expected
    )


@dataclass(frozen=True)
class Row:
    number: int
    condition: str
    matches: Callable[[PlanInput], bool]
    next_rollout: Callable[[PlanInput], Rollout | None]
    action: Action


ROWS: Sequence[Row] = (
    Row(
        1,
        "spec.failurePolicy not set",
        lambda i: i.spec.failure_policy is None,
        lambda i: None,
        Action.APPLY_SOURCE,
    ),
    Row(
        2,
        "prior absent, or prior.renderRef != R",
        lambda i: i.prior is None or i.prior.render_ref != i.render_ref,
        lambda i: Rollout(
            state=RolloutState.PROGRESSING,
            render_ref=i.render_ref,
            started_at=i.now,
            reason=Reason.NEW_RENDER,
        ),
        Action.APPLY_SOURCE,
    ),
    Row(
        3,
        "prior RolledBack",
        lambda i: _state(i) == RolloutState.ROLLED_BACK,
        lambda i: i.prior,
        Action.APPLY_LAST_HEALTHY,
    ),
    Row(
        4,
        "prior Succeeded or Failed",
        lambda i: _state(i) in (RolloutState.SUCCEEDED, RolloutState.FAILED),
        lambda i: i.prior,
        Action.APPLY_SOURCE,
    ),
    Row(
        5,
        "prior Progressing, verdict(R) Healthy",
        _is_verdict(Verdict.HEALTHY),
        lambda i: _transition(
            i, RolloutState.SUCCEEDED, Reason.HEALTHY, i.verdict.message if i.verdict else ""
        ),
        Action.APPLY_SOURCE,
    ),
    Row(
        6,
        "prior Progressing, verdict(R) Unhealthy, rollback_eligible",
        lambda i: _is_verdict(Verdict.UNHEALTHY)(i) and rollback_eligible(i.spec, i.status),
        lambda i: _transition(i, RolloutState.ROLLED_BACK, *_cause(i)),
        Action.APPLY_LAST_HEALTHY,
    ),
    Row(
        7,
        "prior Progressing, verdict(R) Unhealthy",
        _is_verdict(Verdict.UNHEALTHY),
        lambda i: _transition(i, RolloutState.FAILED, *_cause(i)),
        Action.APPLY_SOURCE,
    ),
    Row(
        8,
        "prior Progressing, verdict(R) Pending",
        _is_verdict(Verdict.PENDING),
        lambda i: i.prior,
        Action.APPLY_SOURCE,
    ),
)


def render_verdict(
    spec: ReleaseSpec,
    status: ReleaseStatus,
    render_ref: str,
    entries: Sequence[InventoryEntry],
    now: datetime,
    verified: Verified | None = None,
) -> VerdictResult:
    """verdict(R) with the Release's deadline (SPEC 6.1; no deadline without
    failurePolicy), then its verification (``verified``: what the state directory holds
    of it; README "Verification")."""
    policy = spec.failure_policy
    start = deadline_start(status, render_ref)
    deadline = policy.progress_deadline if policy is not None else None
    result = verdict(entries, render_ref, start, deadline, now)
    # Time while the latest measurement was an error does not count (an observer outage).
    held = verified.error_time if verified is not None else timedelta(0)
    passed = (
        start is not None and deadline is not None and deadline_passed(start, deadline + held, now)
    )
    return judge(result, spec.verification, verified, passed)


def plan_rollout(
    spec: ReleaseSpec,
    status: ReleaseStatus,
    render_ref: str,
    entries: Sequence[InventoryEntry],
    now: datetime,
    verified: Verified | None = None,
) -> Plan:
    """The first matching row of SPEC 5 gives the next rollout and the action."""
    prior = status.rollout
    progressing_for_r = (
        prior is not None
        and prior.state == RolloutState.PROGRESSING
        and prior.render_ref == render_ref
    )
    result = (
        render_verdict(spec, status, render_ref, entries, now, verified)
        if progressing_for_r
        else None
    )
    i = PlanInput(spec=spec, status=status, render_ref=render_ref, now=now, verdict=result)
    for row in ROWS:
        if row.matches(i):
            return Plan(row.next_rollout(i), row.action, row.number, row.condition, result)
    raise AssertionError("the transition table is not exhaustive")  # pragma: no cover


def pinned_plan() -> Plan:
    """With a pin there is no rollout: apply the pinned source (SPEC 4 step 2)."""
    return Plan(rollout=None, action=Action.APPLY_SOURCE, row=0)
