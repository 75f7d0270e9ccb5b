"""The scenario harness of ``tests/support/scenario.py`` with a Kubernetes Cluster: the GitOps
repository's Cluster points at the session's real API server. Each test uses its own
Release names, so its own namespaces, on the shared server. The operator's
``kubeconfigs.yaml`` allows the server's folder and :attr:`KubeScenario.operator`."""

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.k8s.testenv import KubeEnv
from tests.support.scenario import Result, Scenario, cluster_yaml

NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata: {name: ${namespace}}\n"


def only_error_line(result: Result, name: str) -> str:
    """The one summary line of a tick that failed (exit 1, no traceback) for Release
    ``name`` alone: every line it printed names the Release."""
    assert result.code == 1, result.err
    assert "Traceback" not in result.err
    lines = result.err.splitlines()
    assert all(name in ln for ln in lines), result.err  # nothing but the Release's error
    summary = [ln for ln in lines if ln.startswith(f"{name}: ")]
    assert len(summary) == 1, result.err
    return summary[0]


def kube_cluster(kubeconfig: Path) -> str:
    return cluster_yaml(vars="{env: staging}", kubernetes=f"{{kubeconfig: '{kubeconfig}'}}")


class KubeScenario(Scenario):
    def __init__(
        self, kube: KubeEnv, tmp_path: Path, capsys: pytest.CaptureFixture[str], test: str
    ) -> None:
        super().__init__(tmp_path, capsys)
        self.kube = kube
        self.test = test
        """The test's id without its parameters (its parameters may share namespaces)."""
        self.operator = tmp_path / "operator"
        """Where a test places kubeconfigs of its own (the operator's: outside the repository)."""
        self.operator.mkdir()
        self.allow_kubeconfigs(kube.folder, self.operator)
        self.commit({"clusters/staging.yaml": kube_cluster(kube.kubeconfig)}, "kubernetes cluster")

    def app(self, name: str = "web", *, own_namespace: bool = True, **kwargs: Any) -> str:
        """``own_namespace``: the render holds its Namespace (else the namespace must
        exist, or the Release creates it)."""
        owner = self.kube.owners.setdefault(name, self.test)
        assert owner == self.test, f"namespace {name!r} is {owner}'s on this server"
        extra = {"namespace.yaml": NAMESPACE} if own_namespace else {}
        return super().app(name, extra={**extra, **kwargs.pop("extra", {})}, **kwargs)

    # --- the live cluster ------------------------------------------------------------

    def deployment(self, name: str) -> Any:
        return self.kube.apps.read_namespaced_deployment(name, name)

    def deployment_image(self, name: str = "web") -> str:
        return str(self.deployment(name).spec.template.spec.containers[0].image)

    def configmap(self, namespace: str, name: str) -> Any | None:
        try:
            return self.kube.core.read_namespaced_config_map(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def ready(self, name: str) -> None:
        self.kube.deployment_ready(name, name)


def presync_job_succeeded(s: KubeScenario, name: str, files: dict[str, str]) -> Any:
    """Release ``name`` with its PreSync Job ``migrate`` (in ``files``): the first tick
    applies the Job alone and waits on its health; the Job then succeeds. The Job as the
    first tick made it."""
    s.app(name, extra=files)
    assert s.reconcile(name, minutes=0).code == 0
    assert s.status(name)["lastAttempted"]["reason"] == "WaitingForWaveHealth"
    first = s.kube.batch.read_namespaced_job("migrate", name)
    assert s.kube.apps.list_namespaced_deployment(name).items == []
    s.kube.job_succeeded(name, "migrate")
    return first


@contextmanager
def cpu_load() -> Iterator[None]:
    """A second process spinning on the CPU while the block runs."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()
