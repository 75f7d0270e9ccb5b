"""An overlay written for kustomize v5 (``components``, ``replacements``, ``labels``,
``patches`` with targets, a directory in ``resources``) rendered by the official kubectl's
kustomize v5 and applied to the real API server, as on the directory cluster."""

import pytest
from kubernetes import client

from tests.k8s.k8s_scenario import KubeScenario
from tests.renderers.test_renderers import check_kustomize_v5_render, kustomize_v5_repo
from tests.support.renderer_tools import Tools, kustomize_kubectl
from tests.support.scenario import FAILURE_POLICY


def test_an_overlay_written_for_kustomize_v5_rolls_out_on_a_real_server(
    kscenario: KubeScenario,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = kscenario
    Tools(tmp_path_factory.mktemp("kustomize") / "bin", monkeypatch)
    monkeypatch.setenv("CONVOY_KUBECTL", kustomize_kubectl())
    name = "kustomize-v5"
    kustomize_v5_repo(s, name, FAILURE_POLICY + "  syncPolicy: {createNamespace: true}\n")

    result = s.reconcile(name, minutes=0)

    assert result.code == 0, result.err
    api = client.ApiClient()
    deployment = api.sanitize_for_serialization(s.kube.apps.read_namespaced_deployment("web", name))
    configmap = api.sanitize_for_serialization(
        s.kube.core.read_namespaced_config_map("web-config", name)
    )
    check_kustomize_v5_render(deployment, configmap)
