"""The verdict on a render (SPEC 6.1): one case per bullet, plus the deadline start."""

from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest

from convoy_batch.models import InventoryEntry
from convoy_batch.models import RolloutState as S
from convoy_batch.reasons import Reason
from convoy_batch.rollout import Verdict, deadline_start, render_verdict, verdict
from tests.support.rollout_builders import (
    CURRENT,
    FAILED,
    IN_PROGRESS,
    NOT_FOUND,
    R_OLD,
    R,
    at,
    entry,
    rollout,
    spec,
    status,
    wave,
)

DEADLINE = timedelta(minutes=10)
START = at(0)
BEFORE_DEADLINE = at(10)
"""Exactly the deadline: it passes only when ``now - start > progressDeadline``."""
AFTER_DEADLINE = at(10) + timedelta(seconds=1)


@dataclass(frozen=True)
class Case:
    bullet: str
    entries: tuple[InventoryEntry, ...]
    now: datetime
    verdict: Verdict
    cause: Reason | None = None


CASES: dict[str, Case] = {
    "healthy-when-every-entry-is-current-for-r": Case(
        "healthy", (entry("web"), entry("db", phase=1)), BEFORE_DEADLINE, Verdict.HEALTHY
    ),
    "healthy-also-after-the-deadline": Case("healthy", (entry("web"),), at(600), Verdict.HEALTHY),
    "unhealthy-when-an-entry-for-r-failed-before-the-deadline": Case(
        "unhealthy-failed",
        (entry("web", FAILED), entry("db", None)),
        at(1),
        Verdict.UNHEALTHY,
        Reason.UNHEALTHY,
    ),
    "unhealthy-past-the-deadline-with-an-entry-for-r-in-progress": Case(
        "unhealthy-deadline",
        (entry("web", IN_PROGRESS), entry("db")),
        AFTER_DEADLINE,
        Verdict.UNHEALTHY,
        Reason.PROGRESS_DEADLINE_EXCEEDED,
    ),
    "unhealthy-past-the-deadline-with-an-entry-for-r-not-found": Case(
        "unhealthy-deadline",
        (entry("web", NOT_FOUND),),
        AFTER_DEADLINE,
        Verdict.UNHEALTHY,
        Reason.PROGRESS_DEADLINE_EXCEEDED,
    ),
    "pending-before-the-deadline": Case(
        "pending", (entry("web", IN_PROGRESS), entry("db")), BEFORE_DEADLINE, Verdict.PENDING
    ),
    "pending-while-a-later-wave-is-unassessed": Case(
        "pending", (entry("web"), entry("db", None, None, phase=1)), at(1), Verdict.PENDING
    ),
    "empty-inventory-is-pending-even-past-the-deadline": Case(
        "empty", (), at(600), Verdict.PENDING
    ),
    "a-failure-assessed-for-another-render-does-not-count": Case(
        "other-render", (entry("web", FAILED, R_OLD),), BEFORE_DEADLINE, Verdict.PENDING
    ),
    "current-for-another-render-is-not-healthy": Case(
        "other-render", (entry("web", CURRENT, R_OLD),), BEFORE_DEADLINE, Verdict.PENDING
    ),
    "another-renders-entry-past-the-deadline-is-not-unhealthy": Case(
        "other-render",
        (entry("web", IN_PROGRESS, R_OLD), entry("db")),
        at(600),
        Verdict.PENDING,
    ),
    "a-stopped-observer-stays-pending-long-after-the-deadline": Case(
        "stopped-observer", (entry("web", None), entry("db", None)), at(6000), Verdict.PENDING
    ),
    "a-stopped-observer-with-stale-health-stays-pending": Case(
        "stopped-observer",
        (entry("web", IN_PROGRESS, R_OLD), entry("db", CURRENT, R_OLD)),
        at(6000),
        Verdict.PENDING,
    ),
}

BULLETS = {
    "healthy",
    "unhealthy-failed",
    "unhealthy-deadline",
    "pending",
    "empty",
    "other-render",
    "stopped-observer",
}
"""The bullets of SPEC 6.1 and of the brief; ``deadline-start`` has its own tests below."""


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_verdict_follows_the_bullets_of_spec_6_1(case: Case) -> None:
    result = verdict(case.entries, R, START, DEADLINE, case.now)

    assert (result.verdict, result.cause) == (case.verdict, case.cause)


def test_every_bullet_of_the_verdict_has_a_case() -> None:
    assert {case.bullet for case in CASES.values()} == BULLETS


def test_an_unhealthy_verdict_says_which_object() -> None:
    result = verdict((entry("web", FAILED),), R, START, DEADLINE, at(1))

    assert "Deployment.apps web/web is Failed" in result.message


def test_without_a_deadline_a_slow_render_stays_pending() -> None:
    result = verdict((entry("web", IN_PROGRESS),), R, START, None, at(6000))

    assert result.verdict == Verdict.PENDING


@pytest.mark.parametrize(
    ("rollout_started", "first_wave", "expected"),
    [
        pytest.param(at(0), None, at(0), id="rollout-started-at-without-waves"),
        pytest.param(at(0), at(60), at(60), id="a-later-first-wave-wins"),
        pytest.param(at(30), at(5), at(30), id="a-later-rollout-start-wins"),
    ],
)
def test_deadline_start_is_the_later_of_started_at_and_the_first_wave(
    rollout_started: datetime, first_wave: datetime | None, expected: datetime
) -> None:
    waves = (wave("PreSync", first_wave), wave(0, at(90))) if first_wave else ()
    prior = status(rollout(S.PROGRESSING, R, rollout_started), waves=waves)

    assert deadline_start(prior, R) == expected


def test_deadline_start_ignores_the_rollout_and_waves_of_another_render() -> None:
    other = status(rollout(S.PROGRESSING, R_OLD, at(50)), waves=(wave(0, at(70), R_OLD),))
    mixed = status(rollout(S.PROGRESSING, R, at(5)), waves=(wave(0, at(70), R_OLD),))

    assert deadline_start(other, R) is None
    assert deadline_start(mixed, R) == at(5)


def test_time_a_gate_held_the_render_does_not_count_against_its_deadline() -> None:
    held = status(rollout(S.PROGRESSING, R, at(0)), waves=(wave(0, at(60)),))
    slow = (entry("web", IN_PROGRESS),)

    assert render_verdict(spec(), held, R, slow, at(70)).verdict == Verdict.PENDING
    late = render_verdict(spec(), held, R, slow, at(71))
    assert (late.verdict, late.cause) == (Verdict.UNHEALTHY, Reason.PROGRESS_DEADLINE_EXCEEDED)


def test_render_verdict_has_no_deadline_without_a_failure_policy() -> None:
    prior = status(rollout(S.PROGRESSING, R, at(0)))
    slow = (entry("web", IN_PROGRESS),)

    assert render_verdict(spec(failure_policy=False), prior, R, slow, at(600)).verdict == (
        Verdict.PENDING
    )
    assert render_verdict(spec(), prior, R, slow, at(600)).verdict == Verdict.UNHEALTHY


def test_syncfail_hooks_are_not_judged() -> None:
    web = entry("web")
    notify = entry("notify", FAILED, phase="SyncFail")

    assert verdict((web, notify), R, START, DEADLINE, AFTER_DEADLINE).verdict == Verdict.HEALTHY
    assert verdict((notify,), R, START, DEADLINE, BEFORE_DEADLINE).verdict == Verdict.PENDING
