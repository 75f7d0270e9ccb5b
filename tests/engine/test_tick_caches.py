"""What a quiet tick does not redo: render, status and Release parsing are reused while
their inputs are unchanged, and a change of any input is still seen."""

from typing import Any

import pytest

import convoy_batch.engine.stages.render as stage
import convoy_batch.status.store as status_store
from convoy_batch.engine.tick import Tick
from convoy_batch.models import Release
from convoy_batch.renderers.pipeline import Render
from convoy_batch.ticks import runner
from tests.support.scenario import CLUSTER, FAILURE_POLICY, T0, Scenario


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


def test_a_tick_lets_go_of_a_handled_release_s_render_and_inventory(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tick of a large fleet does not hold every render and inventory until it ends:
    each is let go once its Release is handled, but the render of a Release another one
    depends on, which the dependent's gate reads later in the tick. Asked again, a render
    let go is reloaded from the render store, not made again."""
    s = scenario
    s.app("api", spec_extra=FAILURE_POLICY + "  dependsOn: [db]\n")
    s.app("db")
    s.app("web")
    made: list[str] = []
    real = stage.render_release

    def counted(release: Release, *args: Any, **kwargs: Any) -> Render:
        made.append(release.name)
        return real(release, *args, **kwargs)

    monkeypatch.setattr(stage, "render_release", counted)
    tick = Tick.open(s.root, s.state, T0)
    report = runner.TickReport()
    with tick.status_store.batch():
        entries = runner.select(tick, [])
        runner._reconcile_due(tick, entries, runner.TickOptions(), report)

    assert [h.name for h in report.handled] == ["api", "db", "web"]
    assert s.status("api")["lastAttempted"]["reason"] == "WaitingForDependency"
    assert made == ["db", "api", "web"]  # db first (api depends on it), each rendered once
    assert set(tick.rendered) == {"db"} and tick.inventories.known == {}
    web = tick.snapshot.releases["web"].release
    assert web is not None
    again = stage.stage_render(tick, web)  # from the store: the render its status names
    assert made == ["db", "api", "web"]
    assert again.render.ref == s.status("web")["rollout"]["renderRef"]
    assert {e.key.name for e in tick.inventory("db").entries} == {"db", "db-config"}  # read again
    tick.close()


def test_a_tick_observes_each_release_just_before_it_reconciles_it(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tick of every Release (``--all``) observes each one just before its reconcile,
    not the whole fleet first: while a Release is reconciled, the tick holds its
    inventory alone (the ownership index reads the others' without keeping them). An
    unchanged status is the one the tick opened, not a second copy of it."""
    s = scenario
    for name in ("api", "db", "web"):
        s.app(name)
    assert s.reconcile(minutes=0).code == 0
    events: list[str] = []
    held: dict[str, set[str]] = {}
    observe, handle = runner.observe_release, runner.handle_release

    def observed(tick: Tick, entry: runner.ReleaseEntry, **kwargs: Any) -> Any:
        events.append(f"observe {entry.name}")
        return observe(tick, entry, **kwargs)

    def handled(tick: Tick, entry: runner.ReleaseEntry) -> Any:
        events.append(f"reconcile {entry.name}")
        found = handle(tick, entry)
        held[entry.name] = set(tick.inventories.known)
        return found

    monkeypatch.setattr(runner, "observe_release", observed)
    monkeypatch.setattr(runner, "handle_release", handled)
    tick = Tick.open(s.root, s.state, T0)
    report = runner.TickReport()
    with tick.status_store.batch():
        entries = runner.select(tick, [])
        runner._reconcile_due(tick, entries, runner.TickOptions(all_releases=True), report)

    steps = ("observe", "reconcile")
    assert events == [f"{step} {name}" for name in ("api", "db", "web") for step in steps]
    assert held == {"api": {"api"}, "db": {"db"}, "web": {"web"}}
    assert [h.name for h in report.handled] == ["api", "db", "web"]
    assert all(h.commit is None and h.status is tick.opened[h.name] for h in report.handled)
    tick.close()
