"""The defaults the Kubernetes deployer sends a manifest with: ``with_defaults`` (pure; no
server). The real server's side is in ``test_k8s_defaults_and_namespaces.py``."""

import copy
from typing import Any

import pytest

from convoy_batch.deployers.kubediff import POD_SPECS, settled, with_defaults

RENDER = {"convoy.dev/render": "sha256:1"}
API_VERSIONS = {"": "v1", "apps": "apps/v1", "batch": "batch/v1"}


def pod_spec() -> dict[str, Any]:
    return {
        "initContainers": [{"name": "init", "image": "i", "ports": [{"containerPort": 81}]}],
        "containers": [
            {"name": "app", "image": "a", "ports": [{"containerPort": 80, "name": "http"}]},
            {"name": "sidecar", "image": "s"},
        ],
        "ephemeralContainers": [{"name": "debug", "image": "d", "ports": [{"containerPort": 82}]}],
    }


def nest(path: tuple[str, ...], value: Any) -> Any:
    for part in reversed(path):
        value = {part: value}
    return value


def manifest(group: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": "x", "namespace": "n", "annotations": dict(RENDER)}
    return {"apiVersion": API_VERSIONS[group], "kind": kind, "metadata": meta, **body}


def service(*ports: dict[str, Any]) -> dict[str, Any]:
    return manifest("", "Service", {"spec": {"selector": {"app": "x"}, "ports": list(ports)}})


def dig(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        obj = obj[part]
    return obj


@pytest.mark.parametrize(
    ("group", "kind"), sorted(POD_SPECS), ids=[f"{k}" for _, k in sorted(POD_SPECS)]
)
def test_every_container_port_of_a_pod_template_gets_tcp(group: str, kind: str) -> None:
    path = POD_SPECS[(group, kind)]
    written = manifest(group, kind, nest(path, pod_spec()))

    sent = with_defaults(written)

    spec = dig(sent, path)
    assert spec["initContainers"][0]["ports"] == [{"containerPort": 81, "protocol": "TCP"}]
    assert spec["containers"][0]["ports"] == [
        {"containerPort": 80, "name": "http", "protocol": "TCP"}
    ]
    assert spec["containers"][1] == {"name": "sidecar", "image": "s"}
    assert spec["ephemeralContainers"][0]["ports"] == [{"containerPort": 82, "protocol": "TCP"}]
    assert dig(written, path) == pod_spec()  # the render as written


def test_the_pod_spec_paths_are_those_of_the_built_in_workload_kinds() -> None:
    kinds = {kind for _, kind in POD_SPECS}
    assert kinds == {
        "Pod",
        "PodTemplate",
        "ReplicationController",
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "ReplicaSet",
        "Job",
        "CronJob",
    }
    assert POD_SPECS[("batch", "CronJob")] == ("spec", "jobTemplate", "spec", "template", "spec")


def test_a_service_port_without_protocol_gets_tcp_and_a_written_one_is_kept() -> None:
    written = service(
        {"port": 80, "targetPort": 8080},
        {"port": 53, "protocol": "UDP"},
        {"port": 443, "protocol": None},
    )

    sent = with_defaults(written)

    assert sent["spec"]["ports"] == [
        {"port": 80, "targetPort": 8080, "protocol": "TCP"},
        {"port": 53, "protocol": "UDP"},
        {"port": 443, "protocol": "TCP"},
    ]
    assert sent["spec"]["selector"] is written["spec"]["selector"]  # shared, not copied


def test_the_written_manifest_is_never_changed() -> None:
    written = manifest("apps", "Deployment", {"spec": {"template": {"spec": pod_spec()}}})
    before = copy.deepcopy(written)

    sent = with_defaults(written)

    assert written == before
    assert sent != written


@pytest.mark.parametrize(
    "written",
    [
        pytest.param(service({"port": 80, "protocol": "TCP"}), id="service-with-protocols"),
        pytest.param(manifest("", "Service", {"spec": {"type": "ExternalName"}}), id="no-ports"),
        pytest.param(manifest("", "ConfigMap", {"data": {"ports": "80"}}), id="other-kind"),
        pytest.param(
            {"apiVersion": "shop.example/v1", "kind": "Deployment", "spec": {"ports": [{}]}},
            id="custom-kind-of-a-built-in-name",
        ),
        pytest.param(manifest("apps", "Deployment", {"spec": {"template": None}}), id="no-pod"),
        pytest.param(
            manifest("", "Pod", {"spec": {"containers": [{"name": "a", "ports": "80"}]}}),
            id="ports-not-a-list",
        ),
        pytest.param(manifest("", "Pod", {"spec": {"containers": "a"}}), id="not-a-list"),
        pytest.param(manifest("", "Service", {"spec": {"ports": [80]}}), id="port-not-a-map"),
    ],
)
def test_a_manifest_missing_nothing_is_sent_as_it_is(written: dict[str, Any]) -> None:
    assert with_defaults(written) is written


def test_a_filled_manifest_is_settled_against_what_the_server_stores() -> None:
    written = service({"port": 80, "targetPort": 8080})
    stored = copy.deepcopy(written)
    stored["spec"].update(clusterIP="10.0.0.1", type="ClusterIP", sessionAffinity="None")
    stored["spec"]["ports"] = [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]

    assert settled(with_defaults(written), stored)
    other = copy.deepcopy(stored)
    other["spec"]["ports"][0]["protocol"] = "UDP"  # drift: someone changed it
    assert not settled(with_defaults(written), other)
