"""A CustomResourceDefinition in wave 0 and a custom resource of it in wave 1, with
``healthStrategy: Healthy``, on a directory cluster: the custom resource is not applied
before the CRD is Established (marked by hand, or by the simulated controller).
The same order against a real API server: ``tests/k8s/test_k8s_crd_order.py``."""

import json
from datetime import timedelta
from typing import Any

from convoy_batch.timefmt import format_time
from tests.support.scenario import CLUSTER, T0, Scenario, release_yaml

GROUP = "web.convoy.test"
CRD = f"""\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: widgets.{GROUP}}}
spec:
  group: {GROUP}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget}}
  versions: [{{name: v1, served: true, storage: true}}]
"""
WIDGET = f"""\
apiVersion: {GROUP}/v1
kind: Widget
metadata:
  name: gadget
  annotations: {{convoy.dev/sync-wave: "1"}}
spec: {{size: 3}}
"""
WAVED = "  syncPolicy: {waves: {healthStrategy: Healthy, timeout: 5m}}\n"
CRD_NAME = f"CustomResourceDefinition.apiextensions.k8s.io widgets.{GROUP}"
CRD_DIR = ("_cluster", "customresourcedefinition.apiextensions.k8s.io", f"widgets.{GROUP}")


def release(s: Scenario, cluster: str = CLUSTER) -> None:
    s.commit(
        {
            "clusters/staging.yaml": cluster,
            "apps/web/crd.yaml": CRD,
            "apps/web/widget.yaml": WIDGET,
            "releases/web.yaml": release_yaml("web", spec_extra=WAVED),
        }
    )


def widget_applied(s: Scenario) -> bool:
    return s.object_path("web", f"widget.{GROUP}", "gadget").exists()


def crd_health(s: Scenario, minutes: int) -> tuple[str, str]:
    """The CRD's state and message as ``observe`` sees them at ``minutes``."""
    now = format_time(T0 + timedelta(minutes=minutes))
    result = s.cli("observe", "web", "--now", now, "--output", "json")
    row = next(r for r in json.loads(result.out) if r["object"] == CRD_NAME)
    return row["state"], row["message"]


def attempt(s: Scenario) -> dict[str, Any]:
    return dict(s.status("web")["lastAttempted"])


def test_a_custom_resource_waits_until_its_crd_is_marked_established_by_hand(
    scenario: Scenario,
) -> None:
    s = scenario
    release(s)
    assert s.reconcile("web", minutes=0).code == 0
    assert s.object_path(*CRD_DIR).exists()
    assert not widget_applied(s)

    assert s.reconcile("web", minutes=1).code == 0
    assert attempt(s)["reason"] == "WaitingForWaveHealth"
    assert CRD_NAME in attempt(s)["message"]
    assert crd_health(s, 1) == ("InProgress", "CustomResourceDefinition: not established yet")
    assert not widget_applied(s)

    # What the README tells a directory cluster's user to write.
    s.set_status(*CRD_DIR, {"conditions": [{"type": "Established", "status": "True"}]})
    assert s.reconcile("web", minutes=2).code == 0
    assert attempt(s)["reason"] == "Synced"
    assert widget_applied(s)


def test_a_crd_whose_names_are_not_accepted_never_lets_its_custom_resource_through(
    scenario: Scenario,
) -> None:
    s = scenario
    release(s)
    assert s.reconcile("web", minutes=0).code == 0
    refused = {"type": "NamesAccepted", "status": "False", "reason": "KindConflict"}
    s.set_status(*CRD_DIR, {"conditions": [refused]})
    assert crd_health(s, 1) == (
        "Failed",
        "CustomResourceDefinition: names not accepted (KindConflict)",
    )

    for minute in (1, 3, 7):
        s.reconcile("web", minutes=minute)
        assert not widget_applied(s)
    assert attempt(s)["reason"] == "WaveTimeout"
    assert CRD_NAME in attempt(s)["message"]


def test_the_simulated_controller_establishes_the_crd_so_the_next_wave_follows(
    scenario: Scenario,
) -> None:
    s = scenario
    release(s, CLUSTER + "  simulate: {readyAfter: 20s}\n")
    assert s.reconcile("web", minutes=0).code == 0
    assert attempt(s)["reason"] == "WaitingForWaveHealth"
    assert not widget_applied(s)

    assert s.reconcile("web", minutes=1).code == 0
    assert attempt(s)["reason"] == "Synced"
    assert widget_applied(s)
    conditions = s.live(*CRD_DIR)["status"]["conditions"]
    assert {c["type"]: c["status"] for c in conditions} == {
        "NamesAccepted": "True",
        "Established": "True",
    }
