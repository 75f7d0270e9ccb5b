"""Every error reason of a Release, reached through a whole tick (``run_tick``) and through
the CLI, on a real git repository and the directory cluster.

The first table injects the cluster's failures at the tick's deployer seam (a
FailingDeployer around the directory cluster, failing for one Release's namespace) and
reaches the input errors with bad input. Each case follows a healthy rollout of two
Releases: the failing one gets its reason and a one-line message in its committed
status, keeps what it had (its last healthy render, its live objects, its inventory),
the other Release reconciles in the same tick, and the next tick converges once the
cause is gone.

The second part reaches the cluster's failures through the CLI, where nothing can be
injected, with real conditions. Reasons the CLI reaches in other tests: ``DryRunFailed``,
``RenderFailed``, ``SourceFailed``, ``InvalidRelease`` and ``ClusterNotFound`` in
tests/engine/test_malformed_table.py; ``StateFailed`` (and an ``ApplyFailed`` of every Release)
in tests/status/test_state_damage.py; ``ClusterUnavailable`` of an unloadable kubeconfig in
tests/engine/test_bad_input.py and of a stopped API server in tests/k8s; ``Forbidden`` in
tests/k8s/test_k8s_scenarios.py; ``OwnershipConflict`` in tests/engine/test_ownership.py;
``DeletionPending`` (a removed Release's) in tests/engine/test_delete_release.py and
tests/k8s/test_k8s_delete_release.py.
"""

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from convoy_batch.deployers.base import Deployer
from convoy_batch.deployers.factory import make_deployer
from convoy_batch.models import Cluster, ObjectKey
from convoy_batch.reasons import ERROR_REASONS
from convoy_batch.state.caches import ParseCache
from convoy_batch.store import InventoryStore, RenderStore
from convoy_batch.ticks.options import TickReport
from convoy_batch.ticks.runner import run_tick
from convoy_batch.timefmt import format_time
from tests.support.fakes import FailingDeployer
from tests.support.scenario import T0, Result, Scenario, release_yaml

NAMES = ("web", "bad")


BAD_WAVE = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
    "  annotations: {convoy.dev/sync-wave: nope}\n"
)
"""A manifest whose wave annotation is no number: a RenderFailed naming 'nope'."""


def in_bad(key: ObjectKey) -> bool:
    return key.namespace == "bad"


class Injected:
    """A deployer factory for :func:`run_tick`: each Cluster's deployer of the tick is the
    one :func:`make_deployer` builds, wrapped in a FailingDeployer set up by ``arm``."""

    def __init__(self, arm: Callable[[FailingDeployer], None]) -> None:
        self.arm = arm
        self.made: list[FailingDeployer] = []

    def __call__(
        self,
        cluster: Cluster,
        state_dir: Path,
        now: datetime,
        cache: ParseCache,
        releases: Collection[str],
    ) -> Deployer:
        deployer = FailingDeployer(make_deployer(cluster, state_dir, now, cache, releases))
        self.arm(deployer)
        self.made.append(deployer)
        return deployer


def tick(s: Scenario, minutes: float, injected: Injected | None = None) -> TickReport:
    at = T0 + timedelta(minutes=minutes)
    if injected is None:
        return run_tick(s.root, s.state, at, NAMES)
    return run_tick(s.root, s.state, at, NAMES, deployer_factory=injected)


def healthy_rollout(s: Scenario) -> str:
    """Both Releases rolled out and Succeeded; the render of ``bad`` that is healthy."""
    for name in NAMES:
        s.app(name)
    assert not tick(s, 0).errored
    for name in NAMES:
        s.deployment_ready(name)
    assert not tick(s, 1).errored
    status = s.status("bad")
    assert status["rollout"]["state"] == "Succeeded"
    return str(status["lastHealthy"]["renderRef"])


def inventory(s: Scenario, name: str) -> set[str]:
    return {e.key.name for e in InventoryStore(s.state).load(name).entries}


def new_image(s: Scenario) -> None:
    s.app("bad", image="2.0")


def drop_config(s: Scenario) -> None:
    s.app("bad", image="2.0")
    s.commit({"apps/bad/configmap.yaml": None}, "bad: no ConfigMap")


def break_a_manifest(s: Scenario) -> None:
    s.commit({"apps/bad/configmap.yaml": BAD_WAVE})


def lose_the_source(s: Scenario) -> None:
    text = release_yaml("bad").replace("path: apps/bad", "path: apps/gone")
    s.commit({"releases/bad.yaml": text})


def no_fault(_deployer: FailingDeployer) -> None:
    pass


@dataclass(frozen=True)
class Case:
    change: Callable[[Scenario], object]
    """The commit that follows the healthy rollout."""
    arm: Callable[[FailingDeployer], None]
    named: str
    """A part of the message that says what failed."""
    applied: bool
    image: str
    """The image the Deployment of ``bad`` runs after the failing tick."""
    fix: Callable[[Scenario], object] = lambda s: None
    """What the next tick needs besides the fault gone (bad input: the input repaired)."""


def arm_dry_run(d: FailingDeployer) -> None:
    d.fail_dry_run = in_bad


def arm_apply(d: FailingDeployer) -> None:
    d.fail_apply = lambda key: in_bad(key) and key.kind == "Deployment"


def arm_delete(d: FailingDeployer) -> None:
    d.fail_delete = in_bad


def arm_unavailable(d: FailingDeployer) -> None:
    d.unavailable = in_bad


def arm_forbidden(d: FailingDeployer) -> None:
    d.forbidden = in_bad


CASES = {
    "DryRunFailed": Case(new_image, arm_dry_run, "dry run refused", False, "1.0"),
    "ApplyFailed": Case(new_image, arm_apply, "apply Deployment.apps bad/bad", True, "1.0"),
    "PruneFailed": Case(drop_config, arm_delete, "delete ConfigMap bad/bad-config", True, "2.0"),
    "ClusterUnavailable": Case(new_image, arm_unavailable, "cluster unavailable", False, "1.0"),
    "Forbidden": Case(new_image, arm_forbidden, "forbidden", False, "1.0"),
    "RenderFailed": Case(break_a_manifest, no_fault, "nope", False, "1.0", new_image),
    "SourceFailed": Case(lose_the_source, no_fault, "apps/gone", False, "1.0", new_image),
}
REACHED_ELSEWHERE = {
    "InvalidRelease": "tests/engine/test_malformed_table.py, tests/engine/test_bad_input.py",
    "ClusterNotFound": "tests/engine/test_malformed_table.py",
    "StateFailed": "tests/status/test_state_damage.py",
    "OwnershipConflict": "tests/engine/test_ownership.py, tests/k8s/test_k8s_ownership.py",
    "DeletionPending": "tests/engine/test_delete_release.py, tests/k8s/test_k8s_delete_release.py",
    "InvalidSyncWindow": "tests/rollout/test_sync_windows.py",
}


def test_every_error_reason_is_reached_by_a_tick() -> None:
    assert set(CASES) | set(REACHED_ELSEWHERE) == ERROR_REASONS


@pytest.mark.parametrize("reason", list(CASES))
def test_an_error_of_one_release_is_its_own_and_loses_nothing(
    scenario: Scenario, reason: str
) -> None:
    s, case = scenario, CASES[reason]
    good = healthy_rollout(s)
    before = inventory(s, "bad")
    case.change(s)
    s.app("web", image="2.0")
    injected = Injected(case.arm)

    report = tick(s, 2, injected)

    assert report.errored
    outcomes = {h.name: h.outcome for h in report.handled}
    assert outcomes["bad"].reason == reason
    assert outcomes["web"].reason == "Synced"
    attempt = s.status("bad")["lastAttempted"]
    assert attempt["reason"] == reason
    assert attempt["message"] == outcomes["bad"].message
    assert "\n" not in attempt["message"] and case.named in attempt["message"], attempt
    assert attempt["applied"] is case.applied
    # Nothing of the healthy rollout is lost: the status's last healthy render and its
    # stored blob, the live Deployment (unless the failure came after the apply), the
    # inventory (a failed prune keeps what it could not delete).
    assert s.status("bad")["lastHealthy"]["renderRef"] == good
    assert RenderStore(s.state).has(good)
    assert s.deployment_image("bad") == f"example/bad:{case.image}"
    assert inventory(s, "bad") == before
    # The other Release reconciled in the same tick, through the same Cluster's deployer
    # (one per Cluster and tick).
    assert s.status("web")["lastAttempted"]["reason"] == "Synced"
    assert s.deployment_image("web") == "example/web:2.0"
    assert len(injected.made) == 1

    case.fix(s)
    report = tick(s, 3)
    assert not report.errored, [(h.name, h.outcome.message) for h in report.handled]
    assert s.status("bad")["lastAttempted"]["reason"] == "Synced"
    assert s.deployment_image("bad") == "example/bad:2.0"
    expected = {"bad"} if reason == "PruneFailed" else before
    assert inventory(s, "bad") == expected
    assert s.object_path("bad", "configmap", "bad-config").exists() is (expected == before)


# --- through the CLI, with real conditions ---------------------------------------------


def one_line_of(result: Result, name: str, reason: str) -> str:
    """The summary line of the Release's error: exit 1, no traceback, one line."""
    assert result.code == 1, result.err
    assert "Traceback" not in result.err
    lines = [ln for ln in result.err.splitlines() if ln.startswith(f"{name}: ")]
    assert len(lines) == 1, result.err
    assert lines[0].startswith(f"{name}: {reason}: "), lines[0]
    return lines[0]


def reconcile_process(s: Scenario, minutes: float) -> Result:
    return s.cli_process("reconcile", *NAMES, "--now", format_time(T0 + timedelta(minutes=minutes)))


EXTRA = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad-extra}\ndata: {a: b}\n"


def test_an_object_file_the_cluster_cannot_write_is_apply_failed(scenario: Scenario) -> None:
    """A folder where the directory cluster keeps an object's file: the dry run passes
    (it reads no file), the apply stops at that object, before the Deployment."""
    s = scenario
    good = healthy_rollout(s)
    s.app("bad", image="2.0", extra={"extra.yaml": EXTRA})
    s.app("web", image="2.0")
    blocker = s.object_path("bad", "configmap", "bad-extra")
    blocker.mkdir(parents=True)

    line = one_line_of(reconcile_process(s, 2), "bad", "ApplyFailed")

    assert "ConfigMap bad/bad-extra" in line and shown(blocker, s) in line, line
    assert str(s.state) not in line  # a file of the state directory, never where it is
    attempt = s.status("bad")["lastAttempted"]
    assert (attempt["reason"], attempt["applied"]) == ("ApplyFailed", True)
    assert attempt["message"] in line
    assert s.status("bad")["lastHealthy"]["renderRef"] == good
    assert s.deployment_image("bad") == "example/bad:1.0"
    assert "bad-extra" in inventory(s, "bad")  # sent: known before the request
    assert s.status("web")["lastAttempted"]["reason"] == "Synced"
    assert s.deployment_image("web") == "example/web:2.0"

    blocker.rmdir()
    assert s.reconcile(*NAMES, minutes=3).code == 0
    assert s.status("bad")["lastAttempted"]["reason"] == "Synced"
    assert s.live("bad", "configmap", "bad-extra")["data"] == {"a": "b"}


def test_an_object_file_the_cluster_cannot_delete_is_prune_failed(scenario: Scenario) -> None:
    """A folder where the directory cluster keeps the file of an object that left the
    render: it cannot be unlinked (not even by root). The object stays in the inventory
    until a later tick deletes it."""
    s = scenario
    good = healthy_rollout(s)
    drop_config(s)
    s.app("web", image="2.0")
    stuck = s.object_path("bad", "configmap", "bad-config")
    stuck.unlink()
    stuck.mkdir()

    line = one_line_of(reconcile_process(s, 2), "bad", "PruneFailed")

    assert "ConfigMap bad/bad-config" in line and shown(stuck, s) in line, line
    assert str(s.state) not in line
    attempt = s.status("bad")["lastAttempted"]
    assert (attempt["reason"], attempt["applied"]) == ("PruneFailed", True)
    assert attempt["message"] in line
    assert s.status("bad")["lastHealthy"]["renderRef"] == good
    assert s.deployment_image("bad") == "example/bad:2.0"
    assert "bad-config" in inventory(s, "bad")
    assert s.status("web")["lastAttempted"]["reason"] == "Synced"

    stuck.rmdir()
    assert s.reconcile(*NAMES, minutes=3).code == 0
    assert s.status("bad")["lastAttempted"]["reason"] == "Synced"
    assert inventory(s, "bad") == {"bad"}


def shown(path: Path, s: Scenario) -> str:
    """A file of the state directory as a message names it: ``<state>/...``."""
    return f"<state>/{path.relative_to(s.state).as_posix()}"


def test_a_kubernetes_cluster_nobody_answers_for_is_cluster_unavailable(
    scenario: Scenario,
) -> None:
    s = scenario
    s.unreachable_cluster("prod", token="s3cr3t-t0ken")
    s.app("web")
    s.app("bad", release=release_yaml("bad").replace("cluster: staging", "cluster: prod"))

    result = reconcile_process(s, 0)

    line = one_line_of(result, "bad", "ClusterUnavailable")
    assert line.startswith("bad: ClusterUnavailable: clusters/prod.yaml: https://127.0.0.1:")
    assert "s3cr3t" not in result.err
    attempt = s.status("bad")["lastAttempted"]
    assert (attempt["reason"], attempt["applied"]) == ("ClusterUnavailable", False)
    assert s.status("web")["lastAttempted"]["reason"] == "Synced"
