"""Fixtures for the tests against a real kube-apiserver: one control plane per session.

The server is 1.20.2, the newest these machines build from their distribution's sources;
convoy-batch supports 1.20.6 and newer (docs/guides/kubernetes.md, "Supported Kubernetes
versions"): 1.20.2 panics on a server-side apply of an APIService (kubernetes#89264), so
no test here applies one."""

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.k8s.faultproxy import FaultProxy
from tests.k8s.k8s_scenario import KubeScenario
from tests.k8s.testenv import KubeEnv, start, stop


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeEnv]:
    env = start(tmp_path_factory.mktemp("k8s"))
    try:
        yield env
    finally:
        stop(env)


@pytest.fixture
def proxy(kube: KubeEnv) -> Iterator[FaultProxy]:
    """A fault proxy in front of the session's server (TLS with its certificate)."""
    server = yaml.safe_load(kube.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    with FaultProxy(server, kube.folder / "certs" / "apiserver.crt") as running:
        yield running


@pytest.fixture
def kscenario(
    kube: KubeEnv,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> KubeScenario:
    return KubeScenario(kube, tmp_path, capsys, request.node.nodeid.split("[")[0])


@pytest.fixture(scope="session")
def namespace(kube: KubeEnv) -> str:
    """The namespace of deploy/, made for real once its own dry run passed (the server
    dry-runs nothing in a namespace that does not exist). Once per session and never
    deleted: the test API server runs no namespace controller, so a deleted namespace
    stays terminating, and the server goes with the session."""
    from tests.k8s.deploy_env import DEPLOY, NAMESPACE, dry_run_apply  # dagster: when asked

    manifest = yaml.safe_load((DEPLOY / "namespace.yaml").read_text())
    dry_run_apply(kube, manifest)
    kube.core.create_namespace(manifest)
    return NAMESPACE
