"""End-to-end scenarios against a real kube-apiserver with its controller-manager.

The tests play the kubelet (pod status) and move time only through ``--now``; each
test has its own Release names, hence its own namespaces on the shared server.
"""

import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from convoy_batch.deployers import kubeapi, kubernetes
from convoy_batch.models import Cluster, ObjectKey
from tests.k8s.k8s_scenario import KubeScenario, kube_cluster, presync_job_succeeded
from tests.k8s.testenv import eventually
from tests.support.scenario import FAILURE_POLICY

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.${release}.convoy.test}
spec:
  group: ${release}.convoy.test
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
"""
WIDGET = """\
apiVersion: ${release}.convoy.test/v1
kind: Widget
metadata: {name: gadget}
spec: {size: 3}
"""
WAVED = "  syncPolicy: {waves: {healthStrategy: Healthy, timeout: 5m}}\n"
LATE = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: late\n"
    '  annotations: {convoy.dev/sync-wave: "1"}\ndata: {a: b}\n'
)
HOOK = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations: {convoy.dev/hook: PreSync}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: example/migrate}]
"""


def managers(obj: Any) -> dict[str, str]:
    return {m.manager: str(m.fields_v1) for m in obj.metadata.managed_fields or []}


def succeed(s: KubeScenario, name: str, **kwargs: Any) -> str:
    s.app(name, **kwargs)
    result = s.reconcile(name, minutes=0)
    assert result.code == 0, result.err
    s.ready(name)
    assert s.reconcile(name, minutes=1).code == 0
    status = s.status(name)
    assert status["rollout"]["state"] == "Succeeded", status
    return str(status["rollout"]["renderRef"])


def test_first_rollout_of_deployment_configmap_crd_and_custom_resource_succeeds(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    s.app("first", extra={"crd.yaml": CRD, "widget.yaml": WIDGET})
    result = s.reconcile("first", minutes=0)
    assert result.code == 0, result.err
    status = s.status("first")
    assert status["rollout"]["state"] == "Progressing"
    assert status["lastAttempted"]["reason"] == "Synced"
    ref = status["rollout"]["renderRef"]
    widget = s.kube.custom.get_namespaced_custom_object(
        "first.convoy.test", "v1", "first", "widgets", "gadget"
    )
    assert widget["spec"] == {"size": 3}
    assert widget["metadata"]["annotations"]["convoy.dev/render"] == ref
    assert "convoy-batch" in managers(s.deployment("first"))
    assert s.configmap("first", "first-config").data == {"env": "staging"}

    s.ready("first")
    assert s.reconcile("first", minutes=1).code == 0
    status = s.status("first")
    assert status["rollout"]["state"] == "Succeeded"
    assert status["lastHealthy"]["renderRef"] == ref


def test_a_render_whose_pods_never_turn_ready_rolls_back_to_the_healthy_template(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    good = succeed(s, "back")
    s.app("back", image="2.0")
    assert s.reconcile("back", minutes=2).code == 0
    assert s.deployment_image("back") == "example/back:2.0"
    assert s.reconcile("back", minutes=5).code == 0
    assert s.status("back")["rollout"]["state"] == "Progressing"
    assert s.reconcile("back", minutes=13).code == 0
    status = s.status("back")
    assert status["rollout"]["state"] == "RolledBack"
    assert status["rollout"]["reason"] == "ProgressDeadlineExceeded"
    assert status["lastAttempted"]["renderRef"] == good
    live = s.deployment("back")
    assert live.spec.template.spec.containers[0].image == "example/back:1.0"
    assert live.metadata.annotations["convoy.dev/render"] == good


def test_waves_wait_on_the_real_health_of_the_previous_wave(kscenario: KubeScenario) -> None:
    s = kscenario
    s.app("waves", extra={"late.yaml": LATE}, spec_extra=WAVED + FAILURE_POLICY)
    assert s.reconcile("waves", minutes=0).code == 0
    assert s.status("waves")["lastAttempted"]["reason"] == "WaitingForWaveHealth"
    assert s.configmap("waves", "late") is None
    assert s.reconcile("waves", minutes=1).code == 0
    assert s.configmap("waves", "late") is None
    s.ready("waves")
    assert s.reconcile("waves", minutes=2).code == 0
    assert s.status("waves")["lastAttempted"]["reason"] == "Synced"
    assert s.configmap("waves", "late") is not None


def test_a_presync_hook_job_runs_once_per_render(kscenario: KubeScenario) -> None:
    s = kscenario
    first = presync_job_succeeded(s, "hooked", {"hook.yaml": HOOK})
    assert s.reconcile("hooked", minutes=1).code == 0
    assert s.deployment_image("hooked") == "example/hooked:1.0"
    assert s.reconcile("hooked", minutes=2).code == 0
    same = s.kube.batch.read_namespaced_job("migrate", "hooked")
    assert same.metadata.uid == first.metadata.uid

    s.app("hooked", image="2.0", extra={"hook.yaml": HOOK})
    assert s.reconcile("hooked", minutes=3).code == 0
    again = s.kube.batch.read_namespaced_job("migrate", "hooked")
    assert again.metadata.uid != first.metadata.uid
    assert (
        again.metadata.annotations["convoy.dev/render"]
        == s.status("hooked")["rollout"]["renderRef"]
    )
    assert s.deployment_image("hooked") == "example/hooked:1.0"


def test_prune_deletes_an_object_that_left_the_render(kscenario: KubeScenario) -> None:
    s = kscenario
    extra = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {a: b}\n"
    s.app("pruned", extra={"extra.yaml": extra})
    assert s.reconcile("pruned", minutes=0).code == 0
    assert s.configmap("pruned", "extra") is not None
    s.commit({"apps/pruned/extra.yaml": None})
    assert s.reconcile("pruned", minutes=1).code == 0
    eventually(lambda: s.configmap("pruned", "extra") is None, "the pruned ConfigMap to go")
    s.reconcile("pruned", minutes=2)
    inventory = (s.state / "inventory" / "pruned.json").read_text()
    assert '"extra"' not in inventory


def test_an_invalid_object_is_refused_by_the_dry_run_and_nothing_is_applied(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    succeed(s, "refused")
    bad = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: {'no spaces!': x}\n"
    fresh = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fresh}\ndata: {a: b}\n"
    s.app("refused", image="2.0", extra={"bad.yaml": bad, "fresh.yaml": fresh})
    result = s.reconcile("refused", minutes=2)
    assert result.code == 1
    attempt = s.status("refused")["lastAttempted"]
    assert attempt["reason"] == "DryRunFailed"
    assert "ConfigMap refused/bad" in attempt["message"]
    assert "valid config key" in attempt["message"]
    assert s.configmap("refused", "fresh") is None
    assert s.deployment_image("refused") == "example/refused:1.0"


def test_a_field_owned_by_another_manager_is_taken_over(kscenario: KubeScenario) -> None:
    s = kscenario
    s.kube.core.create_namespace({"metadata": {"name": "taken"}})
    theirs = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "taken-config", "namespace": "taken"},
        "data": {"env": "theirs"},
    }
    s.kube.core.patch_namespaced_config_map(
        "taken-config",
        "taken",
        theirs,
        field_manager="someone-else",
        _content_type="application/apply-patch+yaml",
    )
    s.app("taken")
    result = s.reconcile("taken", minutes=0)
    assert result.code == 0, result.err
    live = s.configmap("taken", "taken-config")
    assert live.data == {"env": "staging"}
    owned = managers(live)
    assert "f:env" in owned["convoy-batch"]
    assert "f:env" not in owned.get("someone-else", "")


def test_a_steady_tick_writes_nothing(kscenario: KubeScenario) -> None:
    s = kscenario
    s.app("steady")
    assert s.reconcile("steady", minutes=0).code == 0
    before = dict(kubeapi.COUNTS)
    assert s.reconcile("steady", minutes=1).code == 0
    sent = {k: v - before.get(k, 0) for k, v in kubeapi.COUNTS.items() if v != before.get(k, 0)}
    assert set(sent) <= {"GET"}, sent
    # the observer: one LIST per kind (Namespace, ConfigMap, Deployment), plus discovery
    assert sent["GET"] <= 6, sent


def test_a_stopped_api_server_gives_cluster_unavailable_and_the_next_tick_converges(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    good = succeed(s, "outage")
    s.app("outage", image="2.0")
    s.kube.script("stop-apiserver")
    try:
        result = s.reconcile("outage", minutes=2)
    finally:
        s.kube.script("start-apiserver")
    assert result.code == 1
    status = s.status("outage")
    assert status["lastAttempted"]["reason"] == "ClusterUnavailable"
    assert status["lastAttempted"]["applied"] is False
    assert status["lastHealthy"]["renderRef"] == good
    token = (s.kube.folder / "token").read_text().strip()
    seen = result.out + result.err + str(status) + "\n".join(s.status_log())
    assert token not in seen

    result = s.reconcile("outage", minutes=3)
    assert result.code == 0, result.err
    assert s.status("outage")["lastAttempted"]["reason"] == "Synced"
    assert s.deployment_image("outage") == "example/outage:2.0"


def test_an_unconfirmed_delete_stays_in_the_inventory_until_the_object_is_gone(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    held = (
        "apiVersion: v1\nkind: ConfigMap\n"
        "metadata: {name: held, finalizers: [convoy.test/hold]}\ndata: {a: b}\n"
    )
    s.app("holding", extra={"held.yaml": held})
    assert s.reconcile("holding", minutes=0).code == 0
    s.commit({"apps/holding/held.yaml": None})
    assert s.reconcile("holding", minutes=1).code == 0
    inventory = s.state / "inventory" / "holding.json"
    assert '"held"' in inventory.read_text()
    assert s.configmap("holding", "held").metadata.deletion_timestamp is not None

    s.kube.core.patch_namespaced_config_map("held", "holding", {"metadata": {"finalizers": None}})
    eventually(lambda: s.configmap("holding", "held") is None, "the held ConfigMap to go")
    assert s.reconcile("holding", minutes=2).code == 0
    assert '"held"' not in inventory.read_text()


def test_an_api_server_stopped_mid_tick_fails_the_rest_and_the_next_tick_converges(
    kscenario: KubeScenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = kscenario
    names = ("midtick-a", "midtick-b")
    for name in names:
        s.app(name)
    applied = kubernetes.KubernetesDeployer.apply
    first = threading.Lock()
    stopped = threading.Event()

    def apply_then_stop(self: kubernetes.KubernetesDeployer, objects: Any, rules: Any) -> int:
        # Releases may be applied on several threads: whichever comes first is applied,
        # then the server goes away before any other apply starts.
        if first.acquire(blocking=False):
            written = applied(self, objects, rules)
            s.kube.script("stop-apiserver")
            stopped.set()
            return written
        stopped.wait(timeout=60)
        return applied(self, objects, rules)

    monkeypatch.setattr(kubernetes.KubernetesDeployer, "apply", apply_then_stop)
    try:
        result = s.reconcile(*names, minutes=0)
    finally:
        s.kube.script("start-apiserver")
    monkeypatch.undo()
    assert stopped.is_set()
    assert result.code == 1
    reasons = sorted(s.status(name)["lastAttempted"]["reason"] for name in names)
    assert reasons == ["ClusterUnavailable", "Synced"]

    result = s.reconcile(*names, minutes=1)
    assert result.code == 0, result.err
    for name in names:
        assert s.status(name)["lastAttempted"]["reason"] == "Synced"
        assert s.deployment_image(name) == f"example/{name}:1.0"


def test_a_tick_lists_the_objects_of_its_own_releases_only(kscenario: KubeScenario) -> None:
    s = kscenario
    s.app("ownlist")
    assert s.reconcile("ownlist", minutes=0).code == 0
    # Another repository's Release has an object on the same cluster.
    foreign = {"metadata": {"name": "foreign", "labels": {"convoy.dev/release": "elsewhere"}}}
    s.kube.core.create_namespaced_config_map("ownlist", foreign)
    cluster = Cluster.model_validate(yaml.safe_load(kube_cluster(s.kube.kubeconfig)))
    own = ObjectKey(api_version="v1", kind="ConfigMap", namespace="ownlist", name="ownlist-config")
    other = ObjectKey(api_version="v1", kind="ConfigMap", namespace="ownlist", name="foreign")

    found = kubernetes.from_cluster(cluster, s.state, ["ownlist"]).get_many([own, other])
    assert found[own] is not None
    assert found[other] is None
    # Without the Releases' names (or too many of them), every labelled object is listed.
    found = kubernetes.from_cluster(cluster, s.state).get_many([own, other])
    assert found[own] is not None and found[other] is not None


def test_the_release_selector_names_the_releases_while_it_stays_short() -> None:
    assert kubernetes.release_selector(["b", "a"]) == "convoy.dev/release in (a,b)"
    assert kubernetes.release_selector([]) == "convoy.dev/release"
    many = [f"release-{i:05d}" for i in range(1000)]
    assert kubernetes.release_selector(many) == "convoy.dev/release"


def run_out(*command: str) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def kubectl_manifests(name: str) -> dict[str, str]:
    """What ``kubectl create ... --dry-run=client -o yaml`` writes (Debian's kubectl)."""
    root = Path(__file__).resolve().parents[2]
    kubectl = run_out(str(root / "scripts" / "k8s-testenv"), "kubectl").splitlines()[-1]
    commands = {
        "deployment.yaml": ["deployment", name, "--image=example/app:1.0"],
        "service.yaml": ["service", "clusterip", name, "--tcp=80:8080"],
        "configmap.yaml": ["configmap", f"{name}-config", "--from-literal=env=prod"],
        "secret.yaml": ["secret", "generic", f"{name}-secret", "--from-literal=token=t"],
    }
    return {
        file: run_out(kubectl, "create", *args, "--dry-run=client", "-o", "yaml")
        for file, args in commands.items()
    }


def server_writes(s: KubeScenario, namespace: str, dry_runs: bool = False) -> list[str]:
    """Every write the API server received into one namespace (and to the Namespace
    itself), as its audit log names them (``verb resource/name``, ``dry-run verb ...``
    with ``dry_runs``): dry runs (unless asked for) and the controller-manager's own
    writes (status, tokens, its CA ConfigMap) aside."""
    writes = []
    for event in s.kube.writes():
        ref = event.get("objectRef", {})
        ours = ref.get("namespace") == namespace or (
            ref.get("resource") == "namespaces" and ref.get("name") == namespace
        )
        dry = "dryRun" in event["requestURI"]
        if ours and not ref.get("subresource") and (dry_runs or not dry):
            verb = f"dry-run {event['verb']}" if dry else event["verb"]
            writes.append(f"{verb} {ref.get('resource')}/{ref.get('name')}")
    return writes


def test_manifests_as_kubectl_writes_them_give_quiet_ticks_without_writes(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    s.app("kcgen", extra=kubectl_manifests("kcgen"))
    assert s.reconcile("kcgen", minutes=0).code == 0
    assert s.reconcile("kcgen", minutes=1).code == 0
    before, counts = server_writes(s, "kcgen"), dict(kubeapi.COUNTS)
    assert len(before) >= 5, before  # the first ticks' writes are seen: Namespace, four objects
    assert s.reconcile("kcgen", minutes=2).code == 0
    assert server_writes(s, "kcgen") == before
    sent = {k: v - counts.get(k, 0) for k, v in kubeapi.COUNTS.items() if v != counts.get(k, 0)}
    assert set(sent) <= {"GET"}, sent


def test_a_request_the_server_refuses_is_forbidden_naming_verb_kind_and_namespace(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    # The limited user may manage namespaces, and nothing else.
    rbac = client.RbacAuthorizationV1Api(s.kube.api)
    verbs = ["get", "list", "watch", "create", "patch", "update"]
    rule = {"apiGroups": [""], "resources": ["namespaces"], "verbs": verbs}
    rbac.create_cluster_role({"metadata": {"name": "namespaces-only"}, "rules": [rule]})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "limited-namespaces-only"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "namespaces-only",
            },
            "subjects": [{"kind": "User", "name": "limited"}],
        }
    )
    s.commit({"clusters/staging.yaml": kube_cluster(s.kube.limited_kubeconfig())})
    s.app("denied")
    result = s.reconcile("denied", minutes=0)
    assert result.code == 1, result.err
    assert "Traceback" not in result.err
    summary = [ln for ln in result.err.splitlines() if ln.startswith("denied: ")]
    assert len(summary) == 1, result.err
    line = summary[0]
    assert line.startswith("denied: Forbidden: clusters/staging.yaml: "), line
    assert 'User "limited" cannot' in line and 'resource "configmaps"' in line, line
    assert 'in the namespace "denied"' in line, line
    status = s.status("denied")
    assert status["lastAttempted"]["reason"] == "Forbidden"
    assert status["lastAttempted"]["applied"] is False
    # The server's view: no ConfigMap of the Release was created.
    assert s.configmap("denied", "denied-config") is None


SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: ${release}}
spec:
  selector: {app: ${release}}
  ports: [{port: PORT, targetPort: 8080, protocol: TCP}]
"""
EXTRA_CONFIG = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${release}-extra}\ndata: {a: b}\n"


def test_objects_of_a_failed_first_apply_are_in_the_inventory_and_pruned_later(
    kscenario: KubeScenario,
) -> None:
    """A first rollout into a namespace the render creates (so nothing namespaced can be
    dry-run) with a Service the server refuses: what went live before it stays known, the
    kind order holds (no Deployment), and once fixed, what left the render is pruned."""
    s = kscenario
    s.app(
        "orphan", extra={"service.yaml": SERVICE.replace("PORT", "70000"), "x.yaml": EXTRA_CONFIG}
    )
    result = s.reconcile("orphan", minutes=0)
    assert result.code == 1, result.err
    status = s.status("orphan")
    assert status["lastAttempted"]["reason"] == "ApplyFailed"
    assert status["lastAttempted"]["applied"] is True
    # The server's view: ConfigMaps (before Services in the kind order) are live, the
    # Deployment (after them) is not.
    assert s.configmap("orphan", "orphan-extra") is not None
    with pytest.raises(ApiException) as missing:
        s.deployment("orphan")
    assert missing.value.status == 404

    s.commit(
        {"apps/orphan/service.yaml": SERVICE.replace("PORT", "80"), "apps/orphan/x.yaml": None}
    )
    result = s.reconcile("orphan", minutes=1)
    assert result.code == 0, result.err
    assert s.status("orphan")["lastAttempted"]["reason"] == "Synced"
    eventually(lambda: s.configmap("orphan", "orphan-extra") is None, "the pruned ConfigMap gone")
    assert s.deployment("orphan") is not None
