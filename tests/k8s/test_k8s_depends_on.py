"""``dependsOn`` on a real API server: a Release of a CustomResourceDefinition, then a
Release of its custom resources that depends on it. The dependent waits (nothing of it is
sent) until the CRD Release is Succeeded at its render, which the server's apiextensions
controllers make happen once they have established the CRD; the same tick then applies
the custom resource."""

import json

from tests.k8s.k8s_scenario import NAMESPACE, KubeScenario
from tests.k8s.test_k8s_crd_order import crd
from tests.k8s.testenv import eventually
from tests.support.scenario import FAILURE_POLICY, release_yaml

GROUP = "deps.example.com"


def test_a_release_of_custom_resources_waits_for_its_crd_release(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    definition = crd(GROUP, "gadgets", "gadget", "Gadget")
    gadget = {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": "one"}}
    s.commit(
        {
            "apps/dep-crds/crd.json": json.dumps(definition),
            "apps/dep-gadgets/namespace.yaml": NAMESPACE,
            "apps/dep-gadgets/gadget.json": json.dumps(gadget),
            "releases/dep-crds.yaml": release_yaml("dep-crds", spec_extra=FAILURE_POLICY),
            "releases/dep-gadgets.yaml": release_yaml(
                "dep-gadgets", spec_extra=FAILURE_POLICY + "  dependsOn: [dep-crds]\n"
            ),
        }
    )

    first = s.reconcile(minutes=0)

    assert first.code == 0, first.err
    attempt = s.status("dep-gadgets")["lastAttempted"]
    assert attempt["reason"] == "WaitingForDependency", attempt
    assert attempt["message"].startswith("waiting for dependencies: dep-crds is ")
    assert attempt["applied"] is False
    assert not any(
        ns.metadata.name == "dep-gadgets" for ns in s.kube.core.list_namespace().items
    )  # nothing of the dependent was sent

    def crd_succeeded() -> bool:
        s.reconcile("dep-crds", minutes=1)
        return s.status("dep-crds")["rollout"]["state"] == "Succeeded"

    eventually(crd_succeeded, "the CRD Release to succeed")
    ready = s.reconcile(minutes=2)

    assert ready.code == 0, ready.err
    assert s.status("dep-gadgets")["lastAttempted"]["reason"] == "Synced"
    found = s.kube.custom.get_namespaced_custom_object(GROUP, "v1", "dep-gadgets", "gadgets", "one")
    assert found["metadata"]["labels"]["convoy.dev/release"] == "dep-gadgets"
