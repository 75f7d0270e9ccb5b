"""What a quiet tick does not redo: render, status and Release parsing are reused while
their inputs are unchanged, and a change of any input is still seen."""

import pytest

import convoy_batch.engine.stages.render as stage
import convoy_batch.status.store as status_store
from tests.scenario import CLUSTER, FAILURE_POLICY, Scenario


def _refuse(*args: object, **kwargs: object) -> None:
    raise AssertionError("parsed again although nothing changed")


def test_a_quiet_tick_reloads_the_render_from_the_store(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario.app()
    scenario.reconcile("web", minutes=0)
    ref = scenario.status()["rollout"]["renderRef"]
    monkeypatch.setattr(stage, "render_release", _refuse)
    assert scenario.reconcile("web", minutes=1).code == 0
    assert scenario.status()["lastAttempted"]["renderRef"] == ref


@pytest.mark.parametrize("change", ["manifest", "cluster-vars", "release-vars"])
def test_any_changed_input_renders_again(scenario: Scenario, change: str) -> None:
    scenario.app()
    scenario.reconcile("web", minutes=0)
    before = scenario.status()["rollout"]["renderRef"]
    if change == "manifest":
        scenario.app(image="2.0")
    elif change == "cluster-vars":
        scenario.commit({"clusters/staging.yaml": CLUSTER.replace("env: staging", "env: qa")})
    else:
        scenario.app(spec_extra="  vars: {env: dev}\n" + FAILURE_POLICY)
    assert scenario.reconcile("web", minutes=1).code == 0
    assert scenario.status()["rollout"]["renderRef"] != before


def test_a_missing_render_blob_is_rendered_again_not_lost(scenario: Scenario) -> None:
    scenario.app()
    scenario.reconcile("web", minutes=0)
    ref = scenario.status()["rollout"]["renderRef"]
    (scenario.state / "renders" / f"{ref.removeprefix('sha256:')}.json").unlink()
    assert scenario.reconcile("web", minutes=1).code == 0
    assert scenario.status()["lastAttempted"]["renderRef"] == ref


def test_status_files_are_parsed_once_per_blob(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario.app()
    scenario.reconcile("web", minutes=0)
    scenario.reconcile("web", minutes=1)
    monkeypatch.setattr(status_store, "parse_status", _refuse)
    assert scenario.reconcile("web", minutes=2).code == 0
    assert scenario.cli("status").code == 0


def test_a_status_this_process_committed_is_not_parsed_by_the_next_tick(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario.app()
    scenario.reconcile("web", minutes=0)  # commits web's first status
    monkeypatch.setattr(status_store, "parse_status", _refuse)
    assert scenario.reconcile("web", minutes=1).code == 0
    assert scenario.status()["rollout"]["state"] == "Progressing"


def test_a_hand_edit_of_a_live_object_is_seen_despite_the_cache(scenario: Scenario) -> None:
    scenario.app()
    scenario.reconcile("web", minutes=0)
    scenario.reconcile("web", minutes=1)
    scenario.deployment_ready()
    scenario.reconcile("web", minutes=2)
    assert scenario.status()["rollout"]["state"] == "Succeeded"
