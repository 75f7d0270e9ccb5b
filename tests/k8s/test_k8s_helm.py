"""Helm on a Kubernetes Cluster is told the server's version and API versions, read from
the real API server once per tick, and its render is keyed on them; the official ``helm``
(``scripts/k8s-testenv helm``) renders a chart that reads them."""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from kubernetes import client

from convoy_batch.deployers import kubeapi
from convoy_batch.deployers.base import Capabilities
from convoy_batch.engine.stages.render import capabilities, render_key, resolve_cluster
from convoy_batch.engine.tick import Tick
from convoy_batch.models import Cluster, Release
from convoy_batch.renderers import render_inputs
from tests.k8s.k8s_scenario import KubeScenario
from tests.renderers.test_helm import chart_repo
from tests.support.renderer_tools import Tools, real_helm
from tests.support.scenario import FAILURE_POLICY, T0

CREATE_NAMESPACE = "  syncPolicy: {createNamespace: true}\n" + FAILURE_POLICY


def _release(tick: Tick, name: str) -> Release:
    entry = tick.snapshot.releases[name]
    assert entry.release is not None
    return entry.release


@contextmanager
def told_in_a_tick(
    s: KubeScenario, name: str
) -> Iterator[tuple[Tick, Release, Cluster, Capabilities | None]]:
    """The chart Release ``name`` committed and a tick opened on it (closed after): the
    tick, the Release, its Cluster and what helm is told of the server."""
    chart_repo(s, name)
    tick = Tick.open(s.root, s.state, T0)
    try:
        release = _release(tick, name)
        cluster = resolve_cluster(tick, release)
        yield tick, release, cluster, capabilities(tick, release, cluster)
    finally:
        tick.close()


def test_a_chart_on_a_kubernetes_cluster_is_told_the_servers_version_and_api_versions(
    kscenario: KubeScenario,
) -> None:
    with told_in_a_tick(kscenario, "told") as (tick, release, cluster, server):
        asked = kubeapi.COUNTS["GET"]
        assert capabilities(tick, release, cluster) is server  # once per Cluster per tick
        assert kubeapi.COUNTS["GET"] == asked
    assert server is not None
    api = kscenario.kube.api
    assert server.kube_version == client.VersionApi(api).get_code().git_version
    told = set(server.api_versions)
    groups = client.ApisApi(api).get_api_versions().groups
    served = {v.group_version for g in groups for v in g.versions}
    served |= set(client.CoreApi(api).get_api_versions().versions)
    assert served <= told
    apps = client.AppsV1Api(api).get_api_resources().resources
    assert {f"apps/v1/{r.kind}" for r in apps if "/" not in r.name} <= told
    assert {"apps/v1/Deployment", "v1/ConfigMap"} <= told
    assert all(v in served or v.rsplit("/", 1)[0] in served for v in told)


def test_the_render_key_changes_with_the_servers_version_and_api_versions(
    kscenario: KubeScenario,
) -> None:
    with told_in_a_tick(kscenario, "keyed") as (tick, release, cluster, server):
        assert server is not None

        def key(told: Capabilities | None) -> str:
            inputs = render_inputs(release, tick.sources, tick.stores.state_dir, told)
            return render_key(inputs, release, cluster)

        assert key(server) == key(replace(server))
        assert key(replace(server, kube_version=server.kube_version + "-upgraded")) != key(server)
        assert key(replace(server, api_versions=server.api_versions[1:])) != key(server)
        assert key(None) != key(server)


def test_a_chart_sees_the_servers_version_and_kinds_in_its_capabilities(
    kscenario: KubeScenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = Tools(tmp_path / "bin", monkeypatch)
    (tools.bin / "helm").symlink_to(real_helm())
    chart_repo(kscenario, "capable", CREATE_NAMESPACE)
    result = kscenario.reconcile("capable", minutes=0)
    assert result.code == 0, result.err
    found = kscenario.configmap("capable", "capable-capabilities")  # a PreSync hook
    assert found is not None
    version = client.VersionApi(kscenario.kube.api).get_code().git_version
    assert found.data == {"kubeVersion": version, "deployments": "true"}
