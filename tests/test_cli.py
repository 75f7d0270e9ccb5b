"""The read-only commands of the CLI (SPEC 14): status, plan, observe, and exit codes."""

import json
from pathlib import Path

from tests.scenario import Scenario


def test_status_prints_one_line_per_release_with_state_reason_render_and_since(
    scenario: Scenario,
) -> None:
    scenario.app()
    scenario.reconcile("web", minutes=0)
    result = scenario.cli("status")
    assert result.code == 0
    ref = scenario.status()["rollout"]["renderRef"].removeprefix("sha256:")[:12]
    [line] = result.out.splitlines()
    assert line.split() == [
        "web", "Progressing", "Synced", f"render={ref}", "since=2026-11-29T12:00:00Z",
    ]  # fmt: skip


def test_status_as_json_is_for_scripts(scenario: Scenario) -> None:
    scenario.app()
    scenario.reconcile("web", minutes=0)
    rows = json.loads(scenario.cli("--output", "json", "status").out)
    assert rows[0]["name"] == "web"
    assert rows[0]["state"] == "Progressing"
    assert rows[0]["renderRef"] == scenario.status()["rollout"]["renderRef"]


def test_status_of_a_release_never_reconciled_says_so(scenario: Scenario) -> None:
    scenario.app()
    assert "never reconciled" in scenario.cli("status", "web").out


def test_plan_says_what_the_next_tick_would_do_and_changes_nothing(scenario: Scenario) -> None:
    scenario.app()
    head = scenario.head()
    result = scenario.cli("plan", "web", "--now", "2026-11-29T12:00:00Z")
    assert result.code == 0, result.err
    assert "ApplySource none -> Progressing (NewRender)" in result.out
    assert "[row 2]" in result.out
    assert scenario.head() == head
    assert not scenario.object_path("web", "deployment.apps", "web").exists()
    assert not (scenario.state / "inventory" / "web.json").exists()


def test_plan_names_the_gate_that_would_stop_the_sync(scenario: Scenario) -> None:
    scenario.app(spec_extra="  syncPolicy: {mode: Manual}\n")
    result = scenario.cli("plan", "web", "--now", "2026-11-29T12:00:00Z")
    assert "stopped by WaitingForManualSync" in result.out


def test_observe_prints_the_health_of_each_object(scenario: Scenario) -> None:
    scenario.app()
    scenario.reconcile("web", minutes=0)
    scenario.deployment_ready()
    result = scenario.cli("observe", "--now", "2026-11-29T12:01:00Z")
    assert result.code == 0
    assert "web: Deployment.apps web/web: Current" in result.out
    assert "web: ConfigMap web/web-config: Current" in result.out


def test_a_folder_that_is_not_a_repository_is_a_usage_error(
    scenario: Scenario, tmp_path: Path
) -> None:
    from convoy_batch.cli import main

    assert main(["--repo", str(tmp_path / "nowhere"), "status"]) == 2
    assert "not a git repository" in scenario.capsys.readouterr().err


def test_force_without_names_is_a_usage_error(scenario: Scenario) -> None:
    scenario.app()
    assert scenario.reconcile(minutes=0, extra=("--force",)).code == 2
