"""The simulated Deployment controller of directory clusters (Cluster ``spec.simulate``)."""

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from convoy_batch.deployers.directory import DirectoryDeployer
from convoy_batch.deployers.factory import make_deployer
from convoy_batch.deployers.simulated import (
    ANNOTATION_SIMULATE,
    SimulatedDeployer,
    finished_status,
    started_status,
)
from convoy_batch.health import builtin as health
from convoy_batch.models import Cluster, HealthState, ObjectKey, SimulatedController
from convoy_batch.ticks.runner import run_tick
from tests.support.gitfixtures import commit_files, make_repo
from tests.support.scenario import DEPLOYMENT, T0, release_yaml

SIM = SimulatedController(ready_after=timedelta(seconds=20), fail_after=timedelta(seconds=30))
KEY = ObjectKey(api_version="apps/v1", kind="Deployment", namespace="web", name="web")


def deployment(*, fail: bool = False, image: str = "1.0") -> dict[str, Any]:
    template: dict[str, Any] = {"metadata": {"labels": {"app": "web"}}}
    if fail:
        template["metadata"]["annotations"] = {ANNOTATION_SIMULATE: "fail"}
    template["spec"] = {"containers": [{"name": "web", "image": f"web:{image}"}]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "web"},
        "spec": {"replicas": 2, "template": template},
    }


def simulated(tmp_path: Path, seconds: int) -> SimulatedDeployer:
    return SimulatedDeployer(DirectoryDeployer(tmp_path), SIM, T0 + timedelta(seconds=seconds))


def state_at(tmp_path: Path, seconds: int) -> HealthState:
    now = T0 + timedelta(seconds=seconds)
    return health.compute(simulated(tmp_path, seconds).get(KEY), now)[0]


@pytest.mark.parametrize(
    ("fail", "seconds", "expected"),
    [
        pytest.param(False, 0, HealthState.IN_PROGRESS, id="just-applied-is-in-progress"),
        pytest.param(False, 19, HealthState.IN_PROGRESS, id="before-ready-after"),
        pytest.param(False, 20, HealthState.CURRENT, id="ready-after-passed-is-current"),
        pytest.param(True, 29, HealthState.IN_PROGRESS, id="failing-before-fail-after"),
        pytest.param(True, 30, HealthState.FAILED, id="failing-after-fail-after-is-failed"),
    ],
)
def test_an_applied_deployment_reports_health_by_the_time_since_it_was_applied(
    tmp_path: Path, fail: bool, seconds: int, expected: HealthState
) -> None:
    simulated(tmp_path, 0).apply([deployment(fail=fail)])

    assert state_at(tmp_path, seconds) == expected


def test_reading_never_writes_the_object_file(tmp_path: Path) -> None:
    simulated(tmp_path, 0).apply([deployment()])
    path = DirectoryDeployer(tmp_path).path_of(KEY)
    before = path.read_text()

    simulated(tmp_path, 60).get_many([KEY])

    assert path.read_text() == before
    assert yaml.safe_load(before)["status"]["readyReplicas"] == 0


def test_a_new_generation_restarts_the_clock(tmp_path: Path) -> None:
    simulated(tmp_path, 0).apply([deployment()])
    simulated(tmp_path, 60).apply([deployment(image="2.0")])

    assert state_at(tmp_path, 61) == HealthState.IN_PROGRESS
    assert state_at(tmp_path, 80) == HealthState.CURRENT


def test_reapplying_the_same_generation_keeps_the_clock(tmp_path: Path) -> None:
    simulated(tmp_path, 0).apply([deployment()])
    simulated(tmp_path, 15).apply([deployment()])

    assert state_at(tmp_path, 20) == HealthState.CURRENT


def test_a_status_written_by_hand_is_left_to_the_user() -> None:
    obj = {**deployment(), "metadata": {"name": "web", "generation": 1}}
    obj["status"] = {"observedGeneration": 1, "readyReplicas": 1}

    assert started_status(obj, T0) is None
    assert finished_status(obj, SIM, T0 + timedelta(hours=1)) is None


CRD_KEY = ObjectKey(
    api_version="apiextensions.k8s.io/v1",
    kind="CustomResourceDefinition",
    name="widgets.example.com",
)
NAMES = {"plural": "widgets", "singular": "widget", "kind": "Widget"}


def crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": NAMES},
    }


def conditions_of(obj: dict[str, Any] | None) -> dict[str, str]:
    assert obj is not None
    return {c["type"]: c["status"] for c in obj["status"]["conditions"]}


def test_an_applied_crd_is_accepted_and_established_at_once(tmp_path: Path) -> None:
    simulated(tmp_path, 0).apply([crd()])

    stored = DirectoryDeployer(tmp_path).get(CRD_KEY)
    assert conditions_of(stored) == {"NamesAccepted": "True", "Established": "True"}
    assert stored is not None and stored["status"]["acceptedNames"] == NAMES
    assert health.compute(stored, T0) == (
        HealthState.CURRENT,
        "CustomResourceDefinition: established",
    )


def test_without_simulate_an_applied_crd_waits_until_its_status_says_established(
    tmp_path: Path,
) -> None:
    DirectoryDeployer(tmp_path).apply([crd()])

    stored = DirectoryDeployer(tmp_path).get(CRD_KEY)
    assert stored is not None and "status" not in stored
    assert health.compute(stored, T0)[0] == HealthState.IN_PROGRESS


def test_a_crd_status_written_by_hand_is_left_to_the_user(tmp_path: Path) -> None:
    directory = DirectoryDeployer(tmp_path)
    directory.apply([crd()])
    refused = {"type": "NamesAccepted", "status": "False", "reason": "KindConflict"}
    not_established = {"type": "Established", "status": "False", "reason": "NotAccepted"}
    stored = directory.get(CRD_KEY)
    assert stored is not None
    directory.write(
        directory.path_of(CRD_KEY), {**stored, "status": {"conditions": [refused, not_established]}}
    )

    simulated(tmp_path, 60).apply([crd()])

    again = DirectoryDeployer(tmp_path).get(CRD_KEY)
    assert conditions_of(again) == {"NamesAccepted": "False", "Established": "False"}
    assert health.compute(again, T0)[0] == HealthState.FAILED


CLUSTER = """\
apiVersion: convoy.dev/v1alpha1
kind: Cluster
metadata: {name: staging}
spec:
  simulate: {readyAfter: 20s, failAfter: 20s}
"""


def test_only_a_cluster_that_asks_for_it_gets_the_simulated_controller(tmp_path: Path) -> None:
    plain = Cluster.model_validate(yaml.safe_load(CLUSTER.split("  simulate")[0] + "  wave: 0\n"))
    asking = Cluster.model_validate(yaml.safe_load(CLUSTER))

    assert isinstance(make_deployer(plain, tmp_path, T0), DirectoryDeployer)
    assert isinstance(make_deployer(asking, tmp_path, T0), SimulatedDeployer)


def test_simulate_is_refused_beside_a_kubernetes_target() -> None:
    text = CLUSTER + "  kubernetes: {context: kind}\n"

    with pytest.raises(ValueError, match="simulate is for directory clusters only"):
        Cluster.model_validate(yaml.safe_load(text))


POLICY = "  failurePolicy: {rollback: Auto, progressDeadline: 3m}\n"


def states(tmp_path: Path, seconds: int) -> str | None:
    report = run_tick(tmp_path / "repo", tmp_path / "state", T0 + timedelta(seconds=seconds))
    return next((h.status.rollout.state.value for h in report.handled if h.status.rollout), None)


def test_a_release_on_a_simulated_cluster_succeeds_then_rolls_back_a_failing_render(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {"clusters/staging.yaml": CLUSTER})
    app = DEPLOYMENT.replace("IMAGE", "1.0")
    commit_files(
        repo, {"apps/web/d.yaml": app, "releases/web.yaml": release_yaml(spec_extra=POLICY)}
    )
    assert states(tmp_path, 0) == "Progressing"
    assert states(tmp_path, 30) == "Succeeded"

    annotated = (
        "    metadata: {labels: {app: ${release}}, annotations: {convoy.dev/simulate: fail}}"
    )
    failing = app.replace("    metadata: {labels: {app: ${release}}}", annotated)
    commit_files(repo, {"apps/web/d.yaml": failing.replace(":1.0", ":1.1")})
    assert states(tmp_path, 60) == "Progressing"
    assert states(tmp_path, 90) == "RolledBack"
