"""Quiet ticks against a real kube-apiserver for manifests written as public charts write
them, which the server stores in another form (``cpu: 2000m`` as ``2``, ``false`` and
``0`` not at all): no write request, not even a dry run, once the server's answer is
remembered; drift at a managed path is still re-applied.

What a tick sends is read twice: from the API server's audit log (``server_writes``) and
from the requests convoy-batch counts (``kubeapi.COUNTS``).
"""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from convoy_batch.deployers import kubeapi
from tests.k8s.k8s_scenario import KubeScenario
from tests.k8s.test_k8s_scenarios import server_writes

CHART_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${release}
  labels: {app.kubernetes.io/name: ${release}}
spec:
  replicas: 2
  minReadySeconds: 0
  revisionHistoryLimit: 10
  selector: {matchLabels: {app: ${release}}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 25%, maxUnavailable: 25%}}
  template:
    metadata: {labels: {app: ${release}}}
    spec:
      hostNetwork: false
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      terminationGracePeriodSeconds: 30
      containers:
      - name: app
        image: example/${release}:IMAGE
        imagePullPolicy: IfNotPresent
        ports: [{name: http, containerPort: 8080, protocol: TCP}]
        env:
        - {name: LOG_LEVEL, value: info}
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        resources:
          limits: {cpu: 2000m, memory: 128Mi}
          requests: {cpu: 1000m, memory: 64Mi}
"""
CHART_SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: ${release}}
spec:
  type: ClusterIP
  selector: {app: ${release}}
  ports: [{name: http, port: 80, targetPort: http, protocol: TCP}]
"""
TOKEN = "plain-token-value"
PASSWORD = "cGFzc3dvcmQtdmFsdWU="  # base64 of password-value
CHART_SECRET = f"""\
apiVersion: v1
kind: Secret
metadata: {{name: ${{release}}-secret}}
type: Opaque
data: {{password: {PASSWORD}}}
stringData: {{token: {TOKEN}}}
"""


def chart(image: str = "1.0") -> dict[str, str]:
    return {
        "deployment.yaml": CHART_DEPLOYMENT.replace("IMAGE", image),
        "service.yaml": CHART_SERVICE,
        "secret.yaml": CHART_SECRET,
    }


def rolled_out(s: KubeScenario, name: str) -> None:
    s.app(name, extra=chart())
    result = s.reconcile(name, minutes=0)
    assert result.code == 0, result.err
    s.ready(name)
    assert s.reconcile(name, minutes=1).code == 0
    assert s.status(name)["rollout"]["state"] == "Succeeded", s.status(name)


@contextmanager
def sent(s: KubeScenario, name: str) -> Iterator[dict[str, Any]]:
    """What the ticks inside send: ``requests`` (method -> count, dry runs apart, as
    convoy-batch counts them) and ``writes`` (the audit log's, dry runs included)."""
    writes, counts = server_writes(s, name, dry_runs=True), dict(kubeapi.COUNTS)
    seen: dict[str, Any] = {}
    yield seen
    seen["writes"] = server_writes(s, name, dry_runs=True)[len(writes) :]
    seen["requests"] = {
        k: v - counts.get(k, 0) for k, v in kubeapi.COUNTS.items() if v != counts.get(k, 0)
    }


def assert_quiet(s: KubeScenario, name: str, minutes: float) -> dict[str, int]:
    """One tick that sends reads only; the requests it sent."""
    with sent(s, name) as seen:
        result = s.reconcile(name, minutes=minutes)
    assert result.code == 0, result.err
    assert seen["writes"] == [], seen
    assert set(seen["requests"]) == {"GET"}, seen
    requests: dict[str, int] = seen["requests"]
    return requests


def cache_file(s: KubeScenario) -> Any:
    return s.state / "cache" / "cluster-staging.json"


def test_chart_manifests_in_another_form_than_the_servers_give_quiet_ticks_without_writes(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    rolled_out(s, "chart")
    live = s.deployment("chart").spec.template.spec
    assert live.containers[0].resources.limits["cpu"] == "2"  # the server's form, not ours
    assert live.host_network is None

    requests = assert_quiet(s, "chart", minutes=2)
    assert requests["GET"] <= 8, requests  # one LIST per kind, discovery
    assert_quiet(s, "chart", minutes=3)


def test_without_the_cache_one_dry_run_finds_the_object_in_sync_and_nothing_is_applied(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    rolled_out(s, "nocache")
    cache_file(s).unlink()

    with sent(s, "nocache") as seen:
        assert s.reconcile("nocache", minutes=2).code == 0
    # The Deployment alone is in another form than the server's (the Service, Secret,
    # ConfigMap and Namespace are covered by their text).
    assert seen["writes"] == ["dry-run patch deployments/nocache"], seen
    assert seen["requests"].get("PATCH") is None, seen
    assert seen["requests"]["dry-run PATCH"] == 1, seen
    assert cache_file(s).exists()

    assert_quiet(s, "nocache", minutes=3)


def patch_deployment(s: KubeScenario, name: str, body: dict[str, Any]) -> None:
    """Another writer's change (a strategic merge patch, field manager someone-else)."""
    s.kube.apps.patch_namespaced_deployment(name, name, body, field_manager="someone-else")


def pod_spec(**fields: Any) -> dict[str, Any]:
    return {"spec": {"template": {"spec": fields}}}


DRIFTS = [
    ({"spec": {"replicas": 5}}, lambda d: d.spec.replicas == 2),
    (
        pod_spec(containers=[{"name": "app", "resources": {"limits": {"cpu": "3"}}}]),
        lambda d: d.spec.template.spec.containers[0].resources.limits["cpu"] == "2",
    ),
    (pod_spec(hostNetwork=True), lambda d: not d.spec.template.spec.host_network),
    ({"spec": {"minReadySeconds": 7}}, lambda d: not d.spec.min_ready_seconds),
]


def test_drift_at_a_managed_path_is_reapplied_then_ticks_are_quiet_again(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    rolled_out(s, "drift")
    minutes = 2
    for change, restored in DRIFTS:
        patch_deployment(s, "drift", change)
        assert not restored(s.deployment("drift")), change

        with sent(s, "drift") as seen:
            assert s.reconcile("drift", minutes=minutes).code == 0
        assert seen["requests"].get("PATCH") == 1, (change, seen)
        assert "patch deployments/drift" in seen["writes"], (change, seen)
        assert restored(s.deployment("drift")), change
        assert_quiet(s, "drift", minutes=minutes + 1)
        minutes += 2


def test_a_new_render_is_applied(kscenario: KubeScenario) -> None:
    s = kscenario
    rolled_out(s, "rerender")
    s.app("rerender", extra=chart(image="2.0"))

    with sent(s, "rerender") as seen:
        assert s.reconcile("rerender", minutes=2).code == 0

    assert "patch deployments/rerender" in seen["writes"], seen
    assert s.deployment_image("rerender") == "example/rerender:2.0"
    ref = s.status("rerender")["lastAttempted"]["renderRef"]
    assert s.deployment("rerender").metadata.annotations["convoy.dev/render"] == ref


def test_the_cache_file_holds_no_secret_value(kscenario: KubeScenario) -> None:
    s = kscenario
    rolled_out(s, "secretive")
    secret = s.kube.core.read_namespaced_secret("secretive-secret", "secretive")
    assert set(secret.data) == {"password", "token"}  # both live, as the server keeps them

    text = cache_file(s).read_text()
    entries = json.loads(text)["entries"]
    assert any(key.startswith("k8s:/Secret/secretive/") for key in entries), entries
    for value in (TOKEN, PASSWORD, "password-value", *secret.data.values()):
        assert value not in text
