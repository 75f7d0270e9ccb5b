"""Health rules in CEL against a real kube-apiserver: a custom resource (its CRD created
first, with a status subresource that the test writes as the resource's controller
would) whose rule drives the rollout to Succeeded, to RolledBack when its ``failed``
expression holds, and a broken expression that gives a clear status and no transition."""

import json
from typing import Any

from kubernetes import client

from tests.engine.test_health_rule_scenarios import health_checks, ready, widget_files
from tests.k8s.k8s_scenario import KubeScenario, kube_cluster
from tests.k8s.testenv import KubeEnv, eventually
from tests.support.scenario import FAILURE_POLICY


def create_widget_crd(kube: KubeEnv, group: str) -> None:
    """The Widget kind of ``group``, served once the server says it is Established."""
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }
    extensions = client.ApiextensionsV1Api(kube.api)
    extensions.create_custom_resource_definition(body)

    def established() -> bool:
        crd = extensions.read_custom_resource_definition(f"widgets.{group}")
        conditions = crd.status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    eventually(established, f"CRD widgets.{group} established")


def set_widget_status(s: KubeScenario, name: str, status: dict[str, Any]) -> None:
    group = f"{name}.convoy.test"
    body = {"status": status}
    s.kube.custom.patch_namespaced_custom_object_status(
        group, "v1", name, "widgets", "gadget", body
    )


def widget_spec(s: KubeScenario, name: str) -> Any:
    group = f"{name}.convoy.test"
    obj = s.kube.custom.get_namespaced_custom_object(group, "v1", name, "widgets", "gadget")
    return obj["spec"]


def test_a_clusters_rule_holds_a_custom_resource_until_its_current_expression_holds(
    kscenario: KubeScenario,
) -> None:
    s, name = kscenario, "cel-ok"
    create_widget_crd(s.kube, f"{name}.convoy.test")
    rules = health_checks(f"{name}.convoy.test")
    s.commit({"clusters/staging.yaml": kube_cluster(s.kube.kubeconfig) + rules})
    s.app(name, extra=widget_files())
    result = s.reconcile(name, minutes=0)
    assert result.code == 0, result.err
    assert s.status(name)["rollout"]["state"] == "Progressing"

    s.ready(name)
    assert s.reconcile(name, minutes=1).code == 0
    assert s.status(name)["rollout"]["state"] == "Progressing"  # the widget has no status

    set_widget_status(s, name, ready("True"))
    assert s.reconcile(name, minutes=2).code == 0
    status = s.status(name)
    assert status["rollout"]["state"] == "Succeeded"
    assert status["lastHealthy"]["renderRef"] == status["rollout"]["renderRef"]
    # What the server returns is plain data: the result is remembered for the next tick.
    memo = json.loads((s.state / "cache" / "health-staging.json").read_text())["entries"]
    assert json.loads(memo[f"{name}.convoy.test/Widget/{name}/gadget"][1]) == [
        "Current",
        "Widget: current is true (clusters/staging.yaml spec.healthChecks[0])",
    ]


def test_the_releases_failed_expression_rolls_back_on_the_server(kscenario: KubeScenario) -> None:
    s, name = kscenario, "cel-back"
    create_widget_crd(s.kube, f"{name}.convoy.test")
    spec = FAILURE_POLICY + health_checks(f"{name}.convoy.test")
    s.app(name, extra=widget_files(3), spec_extra=spec)
    assert s.reconcile(name, minutes=0).code == 0
    s.ready(name)
    set_widget_status(s, name, ready("True"))
    assert s.reconcile(name, minutes=1).code == 0
    good = s.status(name)["rollout"]["renderRef"]
    assert s.status(name)["rollout"]["state"] == "Succeeded"

    s.app(name, extra=widget_files(4), spec_extra=spec)
    assert s.reconcile(name, minutes=2).code == 0
    assert widget_spec(s, name) == {"size": 4}
    set_widget_status(s, name, ready("False", "OutOfGadgets"))
    assert s.reconcile(name, minutes=3).code == 0

    status = s.status(name)
    assert status["rollout"]["state"] == "RolledBack"
    assert status["rollout"]["reason"] == "Unhealthy"
    assert (
        "Widget: failed is true (releases/cel-back.yaml spec.healthChecks[0])"
        in (status["rollout"]["message"])
    )
    assert status["lastAttempted"]["renderRef"] == good
    assert widget_spec(s, name) == {"size": 3}


def test_a_broken_expression_gives_a_clear_status_and_no_transition_on_the_server(
    kscenario: KubeScenario,
) -> None:
    s, name = kscenario, "cel-broken"
    create_widget_crd(s.kube, f"{name}.convoy.test")
    spec = FAILURE_POLICY + health_checks(f"{name}.convoy.test", current="status.nope == 1")
    s.app(name, extra=widget_files(), spec_extra=spec)
    assert s.reconcile(name, minutes=0).code == 0
    s.ready(name)
    set_widget_status(s, name, ready("True"))
    before = s.status(name)["rollout"]

    assert s.reconcile(name, minutes=1).code == 0
    status = s.status(name)
    assert status["rollout"] == before
    assert status["rollout"]["state"] == "Progressing"
    assert status["lastAttempted"]["message"].endswith(
        f"Widget.{name}.convoy.test {name}/gadget is Unknown: Widget: health rule "
        f"releases/{name}.yaml spec.healthChecks[0].current: no such key: 'nope'"
    )
