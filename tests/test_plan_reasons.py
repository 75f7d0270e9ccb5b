"""``plan`` speaks the reasons' vocabulary (``convoy_batch/reasons.py``): a removed
Release whose retirement waits is told by the reason its status, its notification and
the README give it, through the CLI on a real git repository and the directory cluster."""

import json

import pytest

from convoy_batch.reasons import Reason
from tests.scenario import Scenario

NOW = "2026-11-29T12:02:00Z"


@pytest.fixture
def s(scenario: Scenario) -> Scenario:
    return scenario


def settled(s: Scenario, *names: str) -> None:
    """Each Release rolled out and Succeeded (its Deployment made ready)."""
    for name in names:
        s.app(name)
    s.reconcile()
    for name in names:
        s.deployment_ready(name)
    s.reconcile(minutes=1)


def test_a_retirement_the_guard_blocks_is_planned_as_deletion_blocked(s: Scenario) -> None:
    settled(s, "web", "api")
    s.commit({"releases/web.yaml": None, "releases/api.yaml": None}, "remove every Release")

    plan = s.cli("plan", "web", "--now", NOW)
    rows = s.cli("plan", "web", "--now", NOW, "--output", "json")

    assert plan.code == 0, plan
    assert plan.out.strip().startswith(
        "web: removed from releases/: DeletionBlocked: mass deletion: 2 of 2 Releases"
    ), plan.out
    row = json.loads(rows.out)[0]
    assert (row["reason"], row["fate"]) == (Reason.DELETION_BLOCKED, "Blocked")
    s.reconcile(minutes=2)  # the tick's status gives the same reason
    assert s.status("web")["lastAttempted"]["reason"] == row["reason"]


def test_a_retirement_that_goes_is_planned_by_its_fate(s: Scenario) -> None:
    settled(s, "web", "api", "db")
    s.commit({"releases/web.yaml": None}, "retire web")

    rows = s.cli("plan", "web", "--now", NOW, "--output", "json")

    row = json.loads(rows.out)[0]
    assert (row["fate"], row["reason"]) == ("Delete", None)
