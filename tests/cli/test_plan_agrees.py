"""``plan`` runs the reconcile's own decision without acting on it: for each rollout
situation it predicts what the next ``reconcile`` does (rollout state and reason,
outcome reason and message), and it writes nothing (no commit, no state file, no
change of the cluster, which is a folder of the state directory)."""

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from convoy_batch.timefmt import format_time
from tests.engine.test_scenarios import (
    WAVE1_CONFIG,
    WAVED,
    roll_back_a_second_render,
    succeed_first_render,
)
from tests.support.scenario import FAILURE_POLICY, T0, Scenario, release_yaml

MANUAL = "  syncPolicy: {mode: Manual}\n" + FAILURE_POLICY


def first_render(s: Scenario) -> float:
    s.app()
    return 0


def new_render(s: Scenario) -> float:
    succeed_first_render(s)
    s.app(image="2.0")
    return 2


def healthy(s: Scenario) -> float:
    s.app()
    s.reconcile("web", minutes=0)
    s.deployment_ready()
    return 1


def rollback_due(s: Scenario) -> float:
    succeed_first_render(s)
    s.app(image="2.0")
    s.reconcile("web", minutes=2)
    s.deployment_failed()
    return 3


def holding_the_rollback(s: Scenario) -> float:
    roll_back_a_second_render(s)
    return 4


def pinned_after_a_rollout(s: Scenario) -> float:
    succeed_first_render(s)
    s.repo.create_tag("v1", ref=s.head())
    s.app(image="2.0", release=release_yaml("web", spec_extra="  pin: v1\n" + FAILURE_POLICY))
    return 2


def manual_wait(s: Scenario) -> float:
    s.app(spec_extra=MANUAL)
    return 0


def wave_hold(s: Scenario) -> float:
    s.app(extra={"late.yaml": WAVE1_CONFIG}, spec_extra=WAVED + FAILURE_POLICY)
    s.reconcile("web", minutes=0)
    return 1


def wave_timeout_rolls_back(s: Scenario) -> float:
    spec = WAVED + FAILURE_POLICY
    s.app(extra={"late.yaml": WAVE1_CONFIG}, spec_extra=spec)
    s.reconcile("web", minutes=0)
    s.deployment_ready()
    s.reconcile("web", minutes=1)
    s.reconcile("web", minutes=2)
    s.app(image="2.0", extra={"late.yaml": WAVE1_CONFIG}, spec_extra=spec)
    s.reconcile("web", minutes=3)
    return 10


@dataclass(frozen=True)
class Situation:
    setup: Callable[[Scenario], float]
    """Builds the situation; returns the minute of the next tick."""
    action: str
    to: str
    rollout_reason: str
    outcome: str


SITUATIONS = {
    "first-render": Situation(first_render, "ApplySource", "Progressing", "NewRender", "Synced"),
    "new-render": Situation(new_render, "ApplySource", "Progressing", "NewRender", "Synced"),
    "healthy": Situation(healthy, "ApplySource", "Succeeded", "Healthy", "Synced"),
    "rollback-due": Situation(
        rollback_due, "ApplyLastHealthy", "RolledBack", "Unhealthy", "RolledBack"
    ),
    "holding-a-rollback": Situation(
        holding_the_rollback, "ApplyLastHealthy", "RolledBack", "Unhealthy", "RolledBack"
    ),
    "pinned-keeps-the-last-rollout": Situation(
        pinned_after_a_rollout, "ApplySource", "Succeeded", "Healthy", "Synced"
    ),
    "manual-wait": Situation(
        manual_wait, "ApplySource", "Progressing", "NewRender", "WaitingForManualSync"
    ),
    "wave-hold": Situation(
        wave_hold, "ApplySource", "Progressing", "NewRender", "WaitingForWaveHealth"
    ),
    "wave-timeout-rolls-back": Situation(
        wave_timeout_rolls_back, "ApplySource", "RolledBack", "WaveTimeout", "RolledBack"
    ),
}


def written(s: Scenario) -> dict[str, Any]:
    """Everything a tick may change: every file of the state directory (the directory
    cluster included), git's refs and HEAD, the work tree. Empty lock files are left out:
    opening a tick creates the one it locks the repository with, holding nothing."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=s.root, capture_output=True, text=True, check=True
        ).stdout

    state: dict[str, bytes] = {}
    if s.state.exists():
        state = {
            str(p.relative_to(s.state)): p.read_bytes()
            for p in sorted(s.state.rglob("*"))
            if p.is_file()
            and not p.is_symlink()
            and not (p.parent.name == "locks" and p.stat().st_size == 0)
        }
    return {
        "state": state,
        "refs": git("for-each-ref", "--format=%(refname) %(objectname)"),
        "head": git("rev-parse", "HEAD"),
        "worktree": git("status", "--porcelain", "--ignored"),
    }


def cli_json(s: Scenario, *args: str) -> Any:
    result = s.cli("--output", "json", *args)
    assert result.code == 0, result.err
    return json.loads(result.out)


@pytest.mark.parametrize("situation", SITUATIONS.values(), ids=SITUATIONS.keys())
def test_plan_predicts_the_reconcile_and_writes_nothing(
    scenario: Scenario, situation: Situation
) -> None:
    now = format_time(T0 + timedelta(minutes=situation.setup(scenario)))
    before = written(scenario)

    [plan] = cli_json(scenario, "plan", "web", "--now", now)

    assert written(scenario) == before
    [done] = cli_json(scenario, "reconcile", "web", "--now", now)
    rollout = scenario.status()["rollout"]
    assert (plan["action"], plan["to"], plan["reason"], plan["outcome"]) == (
        situation.action,
        situation.to,
        situation.rollout_reason,
        situation.outcome,
    )
    assert (plan["to"], plan["reason"]) == (rollout["state"], rollout["reason"])
    assert (plan["outcome"], plan["message"]) == (done["reason"], done["message"])


def test_plan_reports_a_render_error_as_the_reconcile_does(scenario: Scenario) -> None:
    scenario.app(extra={"broken.yaml": "kind: [unclosed\n"})
    result = scenario.cli("plan", "web", "--now", format_time(T0))
    assert result.code == 1
    assert result.out.startswith("web: RenderFailed: ")
    reconciled = scenario.reconcile("web", minutes=0)
    assert reconciled.code == 1
    assert scenario.status()["lastAttempted"]["message"] in result.out
