"""Every render a status names is in the render store (README, "A render is durable before
anything names it"), whether or not it was applied: through the CLI on a real git
repository and the directory cluster, a render that a failed dry run, a dependency or an
unreachable cluster stopped has its blob stored before its status names it, and
``history`` shows no render the store lacks. A render that cannot be stored is the
Release's ``StateFailed``, and its status then names no render the store lacks
(tests/crash/test_fault_points.py fails the blob's system calls; here the store's folder).
"""

import json
from typing import Any

from convoy_batch.store import RenderStore
from tests.support.scenario import FAILURE_POLICY, Result, Scenario, release_yaml

BAD_NAME = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Not_Valid}\n"
"""An object the cluster refuses at its dry run (no Kubernetes name)."""


def named(status: dict[str, Any]) -> set[str]:
    """Every renderRef a status file names (what the garbage collection keeps)."""
    records = [status.get("lastSuccessful"), status.get("lastHealthy"), status.get("rollout")]
    records += [status.get("lastAttempted"), *(status.get("history") or [])]
    records += status.get("waves") or []
    return {r["renderRef"] for r in records if isinstance(r, dict) and r.get("renderRef")}


def missing(s: Scenario, name: str) -> set[str]:
    """The renders the Release's status names that the store has no valid blob of."""
    store = RenderStore(s.state)
    return {ref for ref in named(s.status(name)) if store.get(ref) is None}


def history_missing(s: Scenario, name: str) -> set[str]:
    """The renders ``history`` shows for the Release that the store has no blob of."""
    result = s.cli("history", name, "--output", "json")
    assert result.code == 0, result.err
    refs = {row["renderRef"] for row in json.loads(result.out) if row["renderRef"]}
    assert refs, result.out
    return {ref for ref in refs if not RenderStore(s.state).has(ref)}


def rolled_out_web(s: Scenario) -> None:
    """Release ``web`` rolled out and healthy (ticks at minutes 0 and 1)."""
    s.app("web")
    s.reconcile(minutes=0)
    s.deployment_ready("web")
    s.reconcile(minutes=1)


def api_waiting_for_db(s: Scenario) -> None:
    """Commits Release ``api``, which depends on Release ``db``, and ``db``."""
    s.app("api", spec_extra=FAILURE_POLICY + "  dependsOn: [db]\n")
    s.app("db")


def attempted(s: Scenario, name: str, result: Result, code: int, reason: str) -> dict[str, Any]:
    """The Release's status, once the tick exited ``code`` and its last attempt says
    ``reason``."""
    assert result.code == code, result.err
    status = s.status(name)
    assert status["lastAttempted"]["reason"] == reason, status
    return status


def assert_every_render_stored(s: Scenario, name: str) -> None:
    """The store holds every render the Release's status and ``history`` name."""
    assert missing(s, name) == set()
    assert history_missing(s, name) == set()


def test_a_render_whose_dry_run_failed_is_stored_before_its_status_names_it(
    scenario: Scenario,
) -> None:
    s = scenario
    rolled_out_web(s)
    s.app("web", image="2.0", extra={"bad.yaml": BAD_NAME})

    result = s.reconcile(minutes=2)

    status = attempted(s, "web", result, 1, "DryRunFailed")
    assert status["rollout"]["renderRef"] == status["lastAttempted"]["renderRef"]
    assert status["rollout"]["renderRef"] != status["lastHealthy"]["renderRef"]
    assert_every_render_stored(s, "web")


def test_a_render_waiting_for_its_dependency_is_stored_before_its_status_names_it(
    scenario: Scenario,
) -> None:
    s = scenario
    api_waiting_for_db(s)

    result = s.reconcile(minutes=0)

    status = attempted(s, "api", result, 0, "WaitingForDependency")
    assert status["rollout"]["renderRef"] == status["lastAttempted"]["renderRef"]
    assert_every_render_stored(s, "api")


def test_a_render_for_an_unreachable_cluster_is_stored_before_its_status_names_it(
    scenario: Scenario,
) -> None:
    s = scenario
    s.unreachable_cluster("prod")
    text = release_yaml("web", spec_extra=FAILURE_POLICY)
    s.app("web", release=text.replace("cluster: staging", "cluster: prod"))

    result = s.reconcile(minutes=0)

    status = attempted(s, "web", result, 1, "ClusterUnavailable")
    assert status["lastAttempted"]["renderRef"] is not None
    assert_every_render_stored(s, "web")


def test_a_render_the_store_cannot_hold_is_state_failed_and_named_by_no_status(
    scenario: Scenario,
) -> None:
    s = scenario
    rolled_out_web(s)
    before = s.status("web")
    renders = s.state / "renders"
    renders.rename(s.state / "renders-kept")
    renders.write_text("a file where the render store belongs\n")
    s.app("web", image="2.0")

    result = s.reconcile(minutes=2)

    status = attempted(s, "web", result, 1, "StateFailed")
    assert status["lastAttempted"].get("renderRef") is None
    assert status["rollout"] == before["rollout"]  # the prior rollout, kept
    assert status["history"] == before["history"]
    renders.unlink()
    (s.state / "renders-kept").rename(renders)
    assert missing(s, "web") == set()

    again = s.reconcile("web", minutes=3)  # the store usable again: the new render goes
    assert again.code == 0, again.err
    assert s.status("web")["lastAttempted"]["reason"] == "Synced"
    assert s.deployment_image("web") == "example/web:2.0"
    assert missing(s, "web") == set()


def test_the_renders_of_statuses_survive_the_garbage_collection(scenario: Scenario) -> None:
    s = scenario
    api_waiting_for_db(s)
    s.reconcile(minutes=0)
    s.app("db", image="2.0")  # db's new render: a tick that persists and collects

    s.reconcile(minutes=1)

    assert s.status("api")["lastAttempted"]["reason"] == "WaitingForDependency"
    assert missing(s, "api") == set()
    assert missing(s, "db") == set()
