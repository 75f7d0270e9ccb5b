"""A CustomResourceDefinition in wave 0 and a custom resource of it in wave 1, with
``healthStrategy: Healthy``, against a real API server: its apiextensions controllers
accept and establish the CRD, and the custom resource is applied only once the observer
has seen ``Established``; a CRD whose names the server refuses never lets it through."""

import json
from datetime import timedelta
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from convoy_batch.timefmt import format_time
from tests.k8s.k8s_scenario import NAMESPACE, KubeScenario
from tests.k8s.testenv import eventually
from tests.support.scenario import T0, release_yaml

WAVED = "  syncPolicy: {waves: {healthStrategy: Healthy, timeout: 5m}}\n"


def crd(group: str, plural: str, singular: str, kind: str) -> dict[str, Any]:
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": singular, "kind": kind},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def custom(group: str, kind: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/v1",
        "kind": kind,
        "metadata": {"name": "one", "annotations": {"convoy.dev/sync-wave": "1"}},
        "spec": {"size": 3},
    }


def release(s: KubeScenario, name: str, crd_obj: dict[str, Any], kind: str) -> None:
    group = crd_obj["spec"]["group"]
    s.commit(
        {
            f"apps/{name}/namespace.yaml": NAMESPACE,
            f"apps/{name}/crd.json": json.dumps(crd_obj),
            f"apps/{name}/custom.json": json.dumps(custom(group, kind)),
            f"releases/{name}.yaml": release_yaml(name, spec_extra=WAVED),
        }
    )


def applied(s: KubeScenario, name: str, group: str, plural: str) -> bool:
    try:
        s.kube.custom.get_namespaced_custom_object(group, "v1", name, plural, "one")
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def observed(s: KubeScenario, name: str, crd_name: str, minutes: int) -> tuple[str, str]:
    """The CRD's health as ``observe`` sees it at ``minutes``."""
    now = format_time(T0 + timedelta(minutes=minutes))
    result = s.cli("observe", name, "--now", now, "--output", "json")
    label = f"CustomResourceDefinition.apiextensions.k8s.io {crd_name}"
    row = next(r for r in json.loads(result.out) if r["object"] == label)
    return row["state"], row["message"]


def server_conditions(s: KubeScenario, crd_name: str) -> dict[str, str]:
    api = client.ApiextensionsV1Api(s.kube.api)
    found = api.read_custom_resource_definition(crd_name)
    return {c.type: c.status for c in (found.status.conditions or [])}


def test_a_custom_resource_is_applied_once_its_crd_is_established(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    group = "order.convoy.test"
    release(s, "order", crd(group, "widgets", "widget", "Widget"), "Widget")
    assert s.reconcile("order", minutes=0).code == 0
    assert s.status("order")["lastAttempted"]["reason"] == "WaitingForWaveHealth"
    assert not applied(s, "order", group, "widgets")

    name = f"widgets.{group}"
    eventually(lambda: server_conditions(s, name).get("Established") == "True", "Established")
    assert s.reconcile("order", minutes=1).code == 0
    assert s.status("order")["lastAttempted"]["reason"] == "Synced"
    assert applied(s, "order", group, "widgets")
    assert observed(s, "order", name, 2) == ("Current", "CustomResourceDefinition: established")


def test_a_crd_whose_names_the_server_refuses_keeps_its_custom_resource_out(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    group = "refused.convoy.test"
    api = client.ApiextensionsV1Api(s.kube.api)
    api.create_custom_resource_definition(crd(group, "widgets", "widget", "Widget"))
    # Same group, same singular: the server's naming controller refuses the names.
    clash = crd(group, "gadgets", "widget", "Gadget")
    release(s, "refused", clash, "Gadget")
    assert s.reconcile("refused", minutes=0).code == 0

    name = f"gadgets.{group}"
    eventually(lambda: server_conditions(s, name).get("NamesAccepted") == "False", "refused")
    state, message = observed(s, "refused", name, 1)
    assert state == "Failed"
    assert message.startswith("CustomResourceDefinition: names not accepted (")
    for minute in (1, 3, 7):
        s.reconcile("refused", minutes=minute)
        assert not applied(s, "refused", group, "gadgets")
    assert s.status("refused")["lastAttempted"]["reason"] == "WaveTimeout"
