"""Manifests as real repositories write them, on a real kube-apiserver 1.20: ports
without ``protocol`` (filled before server-side apply, never drift) and
``syncPolicy.createNamespace``. Assertions read the server's objects and its audit log."""

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.k8s.k8s_scenario import KubeScenario
from tests.k8s.test_k8s_scenarios import EXTRA_CONFIG, HOOK, server_writes
from tests.k8s.testenv import KubeEnv, eventually
from tests.support.scenario import FAILURE_POLICY

# As found in the wild: a leading "---", ports without protocol, a named target port.
DEPLOYMENT = """\
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${release}
spec:
  replicas: 1
  selector:
    matchLabels:
      app: ${release}
  template:
    metadata:
      labels:
        app: ${release}
    spec:
      initContainers:
      - name: wait
        image: example/wait:1.0
        ports:
        - containerPort: 9090
      containers:
      - name: app
        image: example/${release}:1.0
        ports:
        - containerPort: 8080
          name: http
"""
SERVICE = """\
---
apiVersion: v1
kind: Service
metadata:
  name: ${release}
spec:
  selector:
    app: ${release}
  ports:
  - port: 80
    targetPort: http
"""
CREATE_NAMESPACE = "  syncPolicy: {createNamespace: true}\n"


def namespace(s: KubeScenario, name: str) -> Any:
    """The live Namespace, or None."""
    try:
        return s.kube.core.read_namespace(name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_the_server_refuses_server_side_apply_of_a_service_port_without_protocol(
    kube: KubeEnv,
) -> None:
    """Why the deployer fills it: without it, this server refuses every such Service."""
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "raw-ports", "namespace": "default"},
        "spec": {"ports": [{"port": 80}]},
    }
    with pytest.raises(ApiException) as refused:
        kube.core.patch_namespaced_service(
            "raw-ports",
            "default",
            body,
            field_manager="test",
            _content_type="application/apply-patch+yaml",
        )
    assert 'omits key field "protocol"' in json.loads(refused.value.body)["message"]


def test_ports_without_protocol_roll_out_and_the_next_quiet_tick_writes_nothing(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    s.app("wildports", extra={"deployment.yaml": DEPLOYMENT, "service.yaml": SERVICE})
    result = s.reconcile("wildports", minutes=0)
    assert result.code == 0, result.err
    status = s.status("wildports")
    assert status["lastAttempted"]["reason"] == "Synced", status
    ref = status["rollout"]["renderRef"]
    service = s.kube.core.read_namespaced_service("wildports", "wildports")
    assert [(p.port, p.protocol, p.target_port) for p in service.spec.ports] == [
        (80, "TCP", "http")
    ]
    assert service.metadata.annotations["convoy.dev/render"] == ref
    pod = s.deployment("wildports").spec.template.spec
    assert [(p.container_port, p.protocol) for p in pod.containers[0].ports] == [(8080, "TCP")]
    assert [(p.container_port, p.protocol) for p in pod.init_containers[0].ports] == [(9090, "TCP")]
    # The render is kept as written: the default is the deployer's, not the render's.
    blob = (s.state / "renders" / f"{ref.partition(':')[2]}.json").read_text()
    assert '"ports"' in blob and '"protocol"' not in blob

    before = server_writes(s, "wildports")
    assert "patch services/wildports" in before, before
    result = s.reconcile("wildports", minutes=1)
    assert result.code == 0, result.err
    assert s.status("wildports")["lastAttempted"]["reason"] == "Synced"
    assert server_writes(s, "wildports") == before


def test_create_namespace_makes_the_namespace_before_the_presync_hook_and_never_prunes_it(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    files = {"hook.yaml": HOOK, "extra.yaml": EXTRA_CONFIG}
    s.app("madens", own_namespace=False, extra=files, spec_extra=CREATE_NAMESPACE + FAILURE_POLICY)
    result = s.reconcile("madens", minutes=0)
    assert result.code == 0, result.err
    created = namespace(s, "madens")
    assert created is not None
    assert created.metadata.labels["convoy.dev/release"] == "madens"
    assert s.status("madens")["lastAttempted"]["reason"] == "WaitingForWaveHealth"
    assert s.kube.batch.read_namespaced_job("migrate", "madens") is not None
    s.kube.job_succeeded("madens", "migrate")
    assert s.reconcile("madens", minutes=1).code == 0
    assert s.deployment_image("madens") == "example/madens:1.0"
    assert s.configmap("madens", "madens-extra") is not None
    inventory = json.loads((s.state / "inventory" / "madens.json").read_text())
    assert "Namespace" not in json.dumps(inventory)

    before = server_writes(s, "madens")
    assert [w for w in before if w.startswith(("create namespaces", "patch namespaces"))] == [
        "patch namespaces/madens"
    ]
    assert s.reconcile("madens", minutes=2).code == 0
    assert server_writes(s, "madens") == before  # a quiet tick: the namespace is not re-sent

    s.commit({"apps/madens/extra.yaml": None})
    assert s.reconcile("madens", minutes=3).code == 0  # the new render's hook runs first
    s.kube.job_succeeded("madens", "migrate")
    assert s.reconcile("madens", minutes=4).code == 0
    eventually(lambda: s.configmap("madens", "madens-extra") is None, "the pruned ConfigMap gone")
    # Never pruned while the Release lives; once it is removed (Delete, the default with
    # prune), its objects go and then the namespace it made, nothing else being in it.
    s.commit({"releases/madens.yaml": None})
    assert s.reconcile(minutes=5).code == 0
    assert not s.has_status("madens")
    assert [w for w in server_writes(s, "madens") if w.startswith("delete namespaces")] == [
        "delete namespaces/madens"
    ]


def test_a_namespace_that_exists_is_left_as_it_is(kscenario: KubeScenario) -> None:
    s = kscenario
    s.kube.core.create_namespace({"metadata": {"name": "theirs", "labels": {"team": "a"}}})
    s.app("theirs", own_namespace=False, spec_extra=CREATE_NAMESPACE)
    result = s.reconcile("theirs", minutes=0)
    assert result.code == 0, result.err
    labels = s.kube.core.read_namespace("theirs").metadata.labels
    assert labels == {"team": "a"}
    assert not [w for w in server_writes(s, "theirs") if w.startswith("patch namespaces")]
    assert s.deployment_image("theirs") == "example/theirs:1.0"


def test_without_create_namespace_a_missing_namespace_fails_the_dry_run(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    s.app("nons", own_namespace=False)
    result = s.reconcile("nons", minutes=0)
    assert result.code == 1
    attempt = s.status("nons")["lastAttempted"]
    assert attempt["reason"] == "DryRunFailed"
    assert 'namespaces "nons" not found' in attempt["message"]
    assert namespace(s, "nons") is None


def test_objects_in_a_created_namespace_get_the_servers_dry_run(kscenario: KubeScenario) -> None:
    """The namespace is made before the dry run, so the server checks every object in it
    and refuses a bad one before anything of the render is applied."""
    s = kscenario
    bad = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: {'no spaces!': x}\n"
    s.app("checked", own_namespace=False, extra={"bad.yaml": bad}, spec_extra=CREATE_NAMESPACE)
    result = s.reconcile("checked", minutes=0)
    assert result.code == 1
    attempt = s.status("checked")["lastAttempted"]
    assert attempt["reason"] == "DryRunFailed"
    assert "valid config key" in attempt["message"]
    assert namespace(s, "checked") is not None
    assert s.configmap("checked", "checked-config") is None
