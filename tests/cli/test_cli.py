"""The read-only commands of the CLI (SPEC 14): status, plan, observe, and exit codes."""

import json
from pathlib import Path

from tests.support.scenario import Scenario


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


def test_status_as_json_carries_what_the_dagster_ui_shows(scenario: Scenario) -> None:
    from convoy_batch.assets import outcome_metadata
    from convoy_batch.ticks.runner import run_tick
    from tests.support.scenario import T0

    scenario.app()
    scenario.app("api")
    report = run_tick(scenario.root, scenario.state, T0)
    rows = {r["name"]: r for r in json.loads(scenario.cli("status", "--output", "json").out)}
    for handled in report.handled:
        shown = outcome_metadata(handled)
        row = rows[handled.name]
        for field in ("state", "reason", "message", "renderRef", "revision", "applied", "commit"):
            assert row[field] == shown[field], (handled.name, field)
    assert rows["web"]["commit"] == next(
        c.hexsha for c in scenario.repo.iter_commits(paths="status/web.yaml")
    )


def test_status_of_a_release_never_reconciled_says_so(scenario: Scenario) -> None:
    scenario.app()
    assert "never reconciled" in scenario.cli("status", "web").out


def test_plan_says_what_the_next_tick_would_do_and_changes_nothing(scenario: Scenario) -> None:
    scenario.app()
    head = scenario.head()
    result = scenario.cli("plan", "web", "--now", "2026-11-29T12:00:00Z")
    assert result.code == 0, result.err
    assert "ApplySource none -> Progressing (NewRender)" in result.out
    assert ", because prior absent, or prior.renderRef != R (row 2)" in result.out
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


def test_output_is_taken_after_the_command_too(scenario: Scenario) -> None:
    scenario.app()
    scenario.reconcile(minutes=0)
    before = json.loads(scenario.cli("--output", "json", "status").out)
    after = json.loads(scenario.cli("status", "--output", "json").out)
    assert before == after and after[0]["name"] == "web"
    # After the command it wins over the one before it.
    assert json.loads(scenario.cli("--output", "yaml", "status", "--output", "json").out) == after


def test_every_option_has_help_and_no_spec_section_numbers(scenario: Scenario) -> None:
    from convoy_batch.cli import _parser

    parser = _parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name, sub in [("convoy-batch", parser), *commands.items()]:
        text = sub.format_help()
        assert "SPEC" not in text, name
        for action in sub._actions:
            if action.dest not in ("help", "command"):
                assert action.help, f"{name}: {action.dest} has no help"


def test_history_prints_a_releases_status_log_as_a_table(scenario: Scenario) -> None:
    scenario.app()
    scenario.reconcile(minutes=0)
    scenario.deployment_ready()
    scenario.reconcile(minutes=1)
    scenario.app(image="2.0")
    scenario.reconcile(minutes=2)
    result = scenario.cli("history", "web")
    assert result.code == 0
    header, *rows = result.out.splitlines()
    assert header.split() == ["TIME", "STATE", "REASON", "RENDER", "REVISION", "COMMIT"]
    assert [r.split()[:5] for r in rows] == [
        ["2026-11-29T12:00:00Z", "none", "->", "Progressing", "NewRender"],
        ["2026-11-29T12:01:00Z", "Progressing", "->", "Succeeded", "Healthy"],
        ["2026-11-29T12:02:00Z", "Succeeded", "->", "Progressing", "NewRender"],
    ]
    commits = [c.hexsha[:12] for c in scenario.repo.iter_commits(paths="status/web.yaml")]
    assert [r.split()[-1] for r in rows] == commits[::-1]
    as_json = json.loads(scenario.cli("history", "web", "--output", "json").out)
    assert [(r["from"], r["to"]) for r in as_json] == [
        ("none", "Progressing"),
        ("Progressing", "Succeeded"),
        ("Succeeded", "Progressing"),
    ]
    assert scenario.cli("history", "nothing").code == 2


def test_a_quiet_tick_says_in_sync_and_an_apply_what_it_applied(scenario: Scenario) -> None:
    scenario.app()
    first = scenario.reconcile(minutes=0)
    assert "(2 objects applied)" in first.out
    quiet = scenario.reconcile("--all", minutes=1)
    assert quiet.out.rstrip().endswith("(in sync)"), quiet.out
    # A drifted object is written again: the tick says what it applied.
    scenario.set_status("web", "deployment.apps", "web", {"replicas": 1})
    path = scenario.object_path("web", "deployment.apps", "web")
    path.write_text(path.read_text().replace("replicas: 2", "replicas: 5"))
    drifted = scenario.reconcile("--all", minutes=2)
    corrected = "(2 objects applied; corrected drift: Deployment web/web /spec/replicas)"
    assert corrected in drifted.out, drifted.out
    assert scenario.live("web", "deployment.apps", "web")["spec"]["replicas"] == 2


def test_plan_of_a_rolled_back_release_shows_the_render_it_applies(scenario: Scenario) -> None:
    scenario.app(image="1.0")
    scenario.reconcile(minutes=0)
    scenario.deployment_ready()
    scenario.reconcile(minutes=1)
    scenario.app(image="2.0")
    scenario.reconcile(minutes=2)
    scenario.deployment_failed()
    scenario.reconcile(minutes=13)
    status = scenario.status()
    assert status["rollout"]["state"] == "RolledBack"
    healthy, failed = status["lastHealthy"]["renderRef"], status["rollout"]["renderRef"]
    short = {ref: ref.removeprefix("sha256:")[:12] for ref in (healthy, failed)}
    result = scenario.cli("plan", "web", "--now", "2026-11-29T12:14:00Z")
    assert result.code == 0, result.err
    assert f"render={short[healthy]} (instead of {short[failed]})" in result.out
    assert "because prior RolledBack (row 3)" in result.out
    row = json.loads(scenario.cli("plan", "web", "--output", "json").out)[0]
    assert (row["applies"], row["renderRef"], row["row"]) == (healthy, failed, 3)
