"""Hooks of several phases against a real kube-apiserver with its controller-manager
(issue 23): a hook that names PreSync and PostSync is applied in each and deleted by its
policy only once its PostSync phase is over, so the PostSync Job that needs it finds it.
ingress-nginx's chart, unmodified and rendered by the official helm, is the real case:
its admission webhook's ServiceAccount and RBAC are hooks of both phases, its
``admission-patch`` Job a PostSync hook that runs as that ServiceAccount.

The audit log tells what the server received and when; the tests play the kubelet."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.k8s.k8s_scenario import KubeScenario
from tests.k8s.testenv import eventually
from tests.realworld import realworld
from tests.renderer_tools import Tools, real_helm
from tests.scenario import FAILURE_POLICY
from tests.test_renderers import release

CHART = "kubernetes-ingress-nginx/charts/ingress-nginx"
"""ingress-nginx's chart as published, in the public content (``tests/realworld.py``)."""
WAVED = "  syncPolicy: {waves: {healthStrategy: Healthy, timeout: 5m}}\n"


def audit(s: KubeScenario, name: str) -> Iterator[tuple[str, str, str]]:
    """(time, verb, resource) of every write to objects called ``name`` (any namespace,
    cluster-scoped ones too), dry runs and subresources aside, in the order received."""
    for line in (s.kube.folder / "audit.log").read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef", {})
        if (
            ref.get("name") == name
            and event["verb"] in ("create", "patch", "update", "delete")
            and not ref.get("subresource")
            and "dryRun" not in event["requestURI"]
            and not event.get("userAgent", "").startswith("kube-controller-manager")
        ):
            yield event["requestReceivedTimestamp"], event["verb"], ref["resource"]


def writes(s: KubeScenario, name: str, resource: str) -> list[tuple[str, str]]:
    return [(when, verb) for when, verb, res in audit(s, name) if res == resource]


def read_or_none(read: Any, *args: str) -> Any | None:
    try:
        return read(*args)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


# --- Argo CD PreSync,PostSync ----------------------------------------------------------

SETTINGS = """\
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  annotations:
    argocd.argoproj.io/hook: PreSync,PostSync
    argocd.argoproj.io/hook-delete-policy: HookSucceeded
data: {a: b}
"""


def job(name: str, phase: str) -> str:
    return f"""\
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  annotations:
    argocd.argoproj.io/hook: {phase}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: {name}
        image: example/{name}:1.0
        resources: {{requests: {{cpu: 10m, memory: 16Mi}}}}
"""


def test_an_argo_hook_of_presync_and_postsync_lives_until_its_postsync_phase_is_over(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    extra = {"settings.yaml": SETTINGS, "pre.yaml": job("pre", "PreSync")}
    extra["post.yaml"] = job("post", "PostSync")
    s.app("phased", extra=extra, spec_extra=WAVED + FAILURE_POLICY)  # PostSync waits
    assert s.reconcile("phased", minutes=0).code == 0
    assert s.configmap("phased", "settings") is not None
    s.kube.job_succeeded("phased", "pre")
    result = s.reconcile("phased", minutes=1)
    assert result.code == 0, result.err
    assert s.configmap("phased", "settings") is not None  # its PostSync is still to come
    s.kube.core.delete_namespaced_config_map("settings", "phased")  # someone deletes it

    s.ready("phased")
    result = s.reconcile("phased", minutes=2)
    assert result.code == 0, result.err
    assert s.status("phased")["lastAttempted"]["reason"] == "Synced"
    assert s.configmap("phased", "settings") is not None  # created again for PostSync
    assert s.kube.batch.read_namespaced_job("post", "phased") is not None
    assert s.reconcile("phased", minutes=3).code == 0  # the PostSync Job runs
    assert s.configmap("phased", "settings") is not None
    assert [verb for _, verb in writes(s, "settings", "configmaps")] == ["patch", "delete", "patch"]

    s.kube.job_succeeded("phased", "post")
    assert s.reconcile("phased", minutes=4).code == 0
    eventually(lambda: s.configmap("phased", "settings") is None, "the hook deleted")
    assert s.reconcile("phased", minutes=5).code == 0
    assert s.status("phased")["rollout"]["state"] == "Succeeded"
    assert s.configmap("phased", "settings") is None  # not created again for this render


# --- ingress-nginx, its chart as published ----------------------------------------------

RELEASE = "ingress-nginx"
ADMISSION = f"{RELEASE}-admission"
# What the test server needs (no cloud, no kubelet): a Service without a load balancer,
# and the admission webhook limited to objects nobody else makes, since the server is
# shared with other tests and no controller pod ever answers it.
VALUES = (
    "{controller: {service: {type: ClusterIP}, admissionWebhooks: {objectSelector: "
    "{matchLabels: {convoy.test/admitted: ingress-nginx}}}}}"
)
SPEC = "  syncPolicy: {createNamespace: true}\n" + FAILURE_POLICY
RBAC = ("serviceaccounts", "roles", "rolebindings", "clusterroles", "clusterrolebindings")


def chart_files() -> dict[str, str | None]:
    """The chart's files as the repository holds them, under ``apps/<Release>`` (skips
    without the chart)."""
    chart = realworld() / CHART
    return {
        f"apps/{RELEASE}/{path.relative_to(chart)}": path.read_text()
        for path in sorted(chart.rglob("*"))
        if path.is_file()
    }


def controller_ready(s: KubeScenario) -> None:
    """Play the kubelet for the controller's pods until its Deployment is available."""
    name = f"{RELEASE}-controller"
    selector = "app.kubernetes.io/component=controller"

    def available() -> bool:
        s.kube.run_pods(RELEASE, selector)
        status = s.kube.apps.read_namespaced_deployment(name, RELEASE).status
        return bool(status.available_replicas) and not status.unavailable_replicas

    eventually(available, f"Deployment {name} available")


def test_ingress_nginx_admission_rbac_outlives_the_admission_patch_job(
    kscenario: KubeScenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = kscenario
    tools = Tools(tmp_path / "bin", monkeypatch)
    (tools.bin / "helm").symlink_to(real_helm())
    render = "{type: Helm, values: " + VALUES + "}"
    files = chart_files()
    files[f"releases/{RELEASE}.yaml"] = release(RELEASE, f"apps/{RELEASE}", render, SPEC)
    s.commit(files, "ingress-nginx, its chart as published")
    result = s.reconcile(RELEASE, minutes=0)
    assert result.code == 0, result.err
    assert s.status(RELEASE)["lastAttempted"]["reason"] == "WaitingForWaveHealth"
    assert s.kube.core.read_namespaced_service_account(ADMISSION, RELEASE) is not None

    s.kube.job_succeeded(RELEASE, f"{ADMISSION}-create")
    result = s.reconcile(RELEASE, minutes=1)
    assert result.code == 0, result.err
    # PostSync is applied with the waves: the patch Job is made, its RBAC is still there.
    patch_job = s.kube.batch.read_namespaced_job(f"{ADMISSION}-patch", RELEASE)
    assert patch_job.spec.template.spec.service_account_name == ADMISSION
    assert s.reconcile(RELEASE, minutes=2).code == 0
    # The Job controller makes the patch Job's pod only as a ServiceAccount that exists.
    s.kube.job_succeeded(RELEASE, f"{ADMISSION}-patch")

    (created, _), *_ = writes(s, f"{ADMISSION}-patch", "jobs")
    for resource in RBAC:
        seen = writes(s, ADMISSION, resource)
        assert [verb for _, verb in seen] == ["patch"], (resource, seen)  # sent once
        assert seen[0][0] < created, resource
    result = s.reconcile(RELEASE, minutes=3)
    assert result.code == 0, result.err
    rbac = client.RbacAuthorizationV1Api(s.kube.api)
    reads = {
        "serviceaccounts": (s.kube.core.read_namespaced_service_account, ADMISSION, RELEASE),
        "roles": (rbac.read_namespaced_role, ADMISSION, RELEASE),
        "rolebindings": (rbac.read_namespaced_role_binding, ADMISSION, RELEASE),
        "clusterroles": (rbac.read_cluster_role, ADMISSION),
        "clusterrolebindings": (rbac.read_cluster_role_binding, ADMISSION),
    }

    def gone() -> bool:
        return all(read_or_none(read, *args) is None for read, *args in reads.values())

    eventually(gone, f"the admission webhook's RBAC deleted: {sorted(reads)}")
    for resource in RBAC:
        verbs = [verb for _, verb in writes(s, ADMISSION, resource)]
        assert verbs == ["patch", "delete"], (resource, verbs)
        deleted = writes(s, ADMISSION, resource)[-1][0]
        assert deleted > created, resource

    controller_ready(s)
    assert s.reconcile(RELEASE, minutes=4).code == 0
    assert s.status(RELEASE)["rollout"]["state"] == "Succeeded"
