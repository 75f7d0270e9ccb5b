"""Order between Releases (``spec.dependsOn``), through the CLI on the directory cluster:
a new render waits until its dependencies are Succeeded at their render of this tick, a
dependency that becomes ready lets its dependents go in the same tick, refusals at load
(a name that is no Release, itself, a cycle), a forced sync refused while waiting, and
deletion order."""

import pytest

from convoy_batch.models import Dependency, ReleaseStatus, RenderRecord, Rollout
from convoy_batch.rollout.depends import depth, in_order, missing, refused
from convoy_batch.timefmt import parse_time
from tests.support.scenario import FAILURE_POLICY, Scenario, release_yaml

T = parse_time("2026-11-29T12:00:00Z")


def depends(*names: str) -> str:
    return FAILURE_POLICY + f"  dependsOn: [{', '.join(names)}]\n"


def image(s: Scenario, name: str) -> str | None:
    path = s.object_path(name, "deployment.apps", name)
    if not path.exists():
        return None
    spec = s.live(name, "deployment.apps", name)["spec"]["template"]["spec"]
    return str(spec["containers"][0]["image"])


# --- the pure part ---------------------------------------------------------------------------


def test_refusals_name_the_unknown_name_itself_and_the_whole_cycle() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["d"], "e": ["nope"], "f": ["a"]}

    problems = refused(graph, graph.keys())

    assert problems == {
        "a": "spec.dependsOn: a dependency cycle: a -> b -> c -> a",
        "b": "spec.dependsOn: a dependency cycle: a -> b -> c -> a",
        "c": "spec.dependsOn: a dependency cycle: a -> b -> c -> a",
        "d": "spec.dependsOn: 'd' depends on itself",
        "e": "spec.dependsOn: 'nope' is no Release in releases/",
    }  # f depends on a Release in a cycle: it is valid, and waits


def test_dependencies_come_first_and_layers_go_side_by_side() -> None:
    graph = {"web": ["db", "cache"], "db": ["crds"], "cache": []}
    names = ["web", "cache", "db", "crds", "other"]

    assert in_order(names, graph) == ["crds", "db", "cache", "web", "other"]
    assert depth(names, graph) == {"cache": 0, "crds": 0, "db": 1, "web": 2, "other": 0}


def test_ready_is_succeeded_at_the_current_render() -> None:
    dep = Dependency(name="db")
    both = Dependency(name="db", accepted_states=("Succeeded", "RolledBack"))

    def rollout(state: str, ref: str) -> ReleaseStatus:
        return ReleaseStatus(
            rollout=Rollout(state=state, render_ref=ref, started_at=T, reason="Healthy")
        )

    assert missing(dep, rollout("Succeeded", "sha256:new"), "sha256:new", True) is None
    assert missing(dep, rollout("Succeeded", "sha256:old"), "sha256:new", True) == (
        "db is Succeeded at an older render, not Succeeded at its render new"
    )
    assert missing(dep, rollout("RolledBack", "sha256:new"), "sha256:new", True) == (
        "db is RolledBack at its render new, not Succeeded"
    )
    assert missing(both, rollout("RolledBack", "sha256:new"), "sha256:new", True) is None
    healthy = ReleaseStatus(last_healthy=RenderRecord(render_ref="sha256:new", time=T))
    assert missing(dep, healthy, "sha256:new", False) is None
    assert missing(dep, ReleaseStatus(), "sha256:new", False) == (
        "db is not yet healthy at its render new"
    )


# --- through the CLI -------------------------------------------------------------------------


def test_a_new_render_waits_for_its_dependency_and_goes_in_the_tick_it_is_ready(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app("api", spec_extra=depends("db"))  # api comes first in repository order
    s.app("db")

    first = s.reconcile(minutes=0)

    assert first.code == 0, first.err
    assert image(s, "db") == "example/db:1.0" and image(s, "api") is None
    attempt = s.status("api")["lastAttempted"]
    assert attempt["reason"] == "WaitingForDependency"
    assert attempt["message"].startswith("waiting for dependencies: db is Progressing at its ")
    head = s.head()
    assert s.reconcile(minutes=1).code == 0  # nothing changed: no commit
    assert s.head() == head

    s.deployment_ready("db")
    ready = s.reconcile(minutes=2)  # db turns Succeeded, then api goes, in the same tick

    assert ready.code == 0, ready.err
    assert s.status("db")["rollout"]["state"] == "Succeeded"
    assert image(s, "api") == "example/api:1.0"
    assert s.status("api")["lastAttempted"]["reason"] == "Synced"


def test_a_dependent_in_sync_keeps_its_status_when_the_dependency_changes(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app("db")
    s.app("web", spec_extra=depends("db"))
    s.reconcile(minutes=0)
    s.deployment_ready("db")
    s.reconcile(minutes=1)
    s.deployment_ready("web")
    s.reconcile(minutes=2)
    web = s.status("web")

    s.app("db", image="2.0")
    s.reconcile(minutes=3, extra=("--all",))

    assert s.status("web") == web  # nothing new of its own: not held, not changed
    assert image(s, "db") == "example/db:2.0"


def test_refusals_at_load_are_invalid_releases_and_the_others_sync(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app("a", spec_extra=depends("b"))
    s.app("b", spec_extra=depends("a"))
    s.app("lost", spec_extra=depends("nowhere"))
    s.app("after", spec_extra=depends("a"))
    s.app("free")

    result = s.reconcile(minutes=0)

    assert result.code == 1
    errors = sorted(result.err.splitlines())
    assert errors == [
        "a: InvalidRelease: releases/a.yaml: spec.dependsOn: a dependency cycle: a -> b -> a",
        "b: InvalidRelease: releases/b.yaml: spec.dependsOn: a dependency cycle: a -> b -> a",
        "lost: InvalidRelease: releases/lost.yaml: spec.dependsOn: 'nowhere' is no Release "
        "in releases/",
    ]
    assert s.status("after")["lastAttempted"]["message"] == (
        "waiting for dependencies: a is not a valid Release"
    )
    assert image(s, "free") == "example/free:1.0"


def test_a_forced_sync_passes_the_manual_gate_only(scenario: Scenario) -> None:
    s = scenario
    manual = depends("db") + "  syncPolicy: {mode: Manual}\n"
    s.app("db")
    s.app("web", spec_extra=manual)
    s.reconcile(minutes=0)

    refused_once = s.reconcile("web", minutes=1, extra=("--force",))

    assert refused_once.code == 0
    assert s.status("web")["lastAttempted"]["reason"] == "WaitingForDependency"
    assert s.status("web")["lastHandledForceSyncAt"] is None  # to be asked again
    s.deployment_ready("db")
    s.reconcile("db", minutes=2)
    assert s.reconcile("web", minutes=3, extra=("--force",)).code == 0
    assert image(s, "web") == "example/web:1.0"


def test_rolled_back_is_ready_only_when_accepted(scenario: Scenario) -> None:
    s = scenario
    accepted = FAILURE_POLICY + (
        "  dependsOn: [{name: db, acceptedStates: [Succeeded, RolledBack]}]\n"
    )
    s.app("db")
    s.reconcile("db", minutes=0)
    s.deployment_ready("db")
    s.reconcile("db", minutes=1)
    s.app("db", image="2.0")
    s.reconcile("db", minutes=2)
    s.deployment_failed("db")
    s.reconcile("db", minutes=3)
    assert s.status("db")["rollout"]["state"] == "RolledBack"
    s.app("strict", spec_extra=depends("db"))
    s.app("lenient", spec_extra=accepted)

    s.reconcile("strict", "lenient", minutes=4)

    assert image(s, "strict") is None and image(s, "lenient") == "example/lenient:1.0"


def test_dependents_are_deleted_before_their_dependencies(scenario: Scenario) -> None:
    s = scenario
    for name in ("db", "web", "other", "more"):
        s.app(name, spec_extra=depends("db") if name == "web" else FAILURE_POLICY)
    s.reconcile(minutes=0)
    s.deployment_ready("db")
    s.reconcile(minutes=1)
    s.commit(
        {"releases/db.yaml": None, "releases/web.yaml": None},
        "retire both\n\nConvoy-Allow-Delete: all\n",
    )

    s.reconcile(minutes=2)

    retired = [c for c in s.status_log() if "-> Deleted" in c]
    assert [c.split(":")[0] for c in retired] == ["db", "web"]  # newest first: web went first


@pytest.mark.parametrize("text", ["[db]", "[{name: db}]"])
def test_depends_on_takes_a_name_or_a_mapping(scenario: Scenario, text: str) -> None:
    s = scenario
    s.app("db")
    s.commit({"releases/web.yaml": release_yaml("web", spec_extra=f"  dependsOn: {text}\n")})
    s.app("web", release=release_yaml("web", spec_extra=f"  dependsOn: {text}\n"))

    s.reconcile(minutes=0)

    assert s.status("web")["lastAttempted"]["reason"] == "WaitingForDependency"


def test_time_spent_waiting_does_not_count_against_the_deadline(scenario: Scenario) -> None:
    s = scenario
    s.app("api", spec_extra=depends("db"))  # progressDeadline 10m
    s.app("db", spec_extra="")  # no failurePolicy: ready once its render is healthy
    s.reconcile(minutes=0)
    assert s.reconcile(minutes=30).code == 0  # half an hour of waiting
    assert s.status("api")["rollout"]["state"] == "Progressing"

    s.deployment_ready("db")
    s.reconcile("db", minutes=31)  # db healthy at its render
    s.reconcile(minutes=32)  # api, due since db's status changed, applied now
    assert image(s, "api") == "example/api:1.0"
    s.reconcile(minutes=40)  # 8 minutes after the apply: within the deadline

    assert s.status("api")["rollout"]["state"] == "Progressing"
    assert s.status("api")["lastAttempted"]["reason"] == "Synced"
