"""A chart's ``.Capabilities`` are the server's alone: ingress-nginx's chart, unmodified,
picks its HorizontalPodAutoscaler's API version with ``.Capabilities.APIVersions.Has
"autoscaling/v2"`` and its PodDisruptionBudget's with ``.Capabilities.KubeVersion``; on
the 1.20 test server (autoscaling/v2beta2, policy/v1beta1, no autoscaling/v2) it renders
what the server serves and the Release syncs. ``helm template`` alone would add Helm's
built-in API versions (autoscaling/v2 among them) and the dry run would refuse it."""

from pathlib import Path

import pytest
from kubernetes import client

from tests.k8s.k8s_scenario import KubeScenario
from tests.support.realworld import INGRESS_NGINX, commit_apps
from tests.support.renderer_tools import Tools, real_helm

VALUES = (
    "{controller: {autoscaling: {enabled: true, minReplicas: 2, maxReplicas: 3},"
    " admissionWebhooks: {enabled: false}}}"
)
"""The chart's HPA and PDB on; its admission webhook off (with no pod behind it, it
would refuse the Ingresses of later tests of the session)."""


def test_a_public_chart_renders_the_autoscaling_version_the_server_serves_and_syncs(
    kscenario: KubeScenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = Tools(tmp_path / "bin", monkeypatch)
    (tools.bin / "helm").symlink_to(real_helm())
    commit_apps(kscenario, [INGRESS_NGINX], {INGRESS_NGINX.name: VALUES})
    result = kscenario.reconcile(INGRESS_NGINX.name, minutes=0)
    assert result.code == 0, result.err
    live = client.CustomObjectsApi(kscenario.kube.api)
    name, namespace = "ingress-nginx-controller", INGRESS_NGINX.name
    hpa = ("autoscaling", "v2beta2", namespace, "horizontalpodautoscalers", name)
    pdb = ("policy", "v1beta1", namespace, "poddisruptionbudgets", name)
    try:
        assert live.get_namespaced_custom_object(*hpa)["spec"]["minReplicas"] == 2
        assert live.get_namespaced_custom_object(*pdb)["metadata"]["name"] == name
    finally:  # the realworld tests roll ingress-nginx out in this namespace of the server
        live.delete_namespaced_custom_object(*hpa)  # else it scales their Deployment to 2
        live.delete_namespaced_custom_object(*pdb)
