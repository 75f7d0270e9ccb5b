"""deploy/ as the tests read it: its folder, its namespace, the daemon's environment, the
run launcher's config of deploy/dagster-k8s.yaml, and a server-side dry run of one object
against the test API server."""

from pathlib import Path
from typing import Any

import pytest
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config
from dagster_k8s import K8sRunLauncher

from convoy_batch.deployers.kubeapi import KubeApi
from tests.k8s.testenv import KubeEnv
from tests.support.scenario import PROJECT

DEPLOY = PROJECT / "deploy"
NAMESPACE = "convoy-batch"
DAEMON_ENV = {  # what the daemon's environment gives the instance config
    "DAGSTER_PG_HOST": "postgres.convoy-batch",
    "DAGSTER_PG_USER": "dagster",
    "DAGSTER_PG_PASSWORD": "secret",
    "DAGSTER_PG_DB": "dagster",
    "CONVOY_IMAGE": "registry.example/convoy-batch:0.1.0",
}


def dry_run_apply(kube: KubeEnv, obj: dict[str, Any]) -> dict[str, Any]:
    """Server-side apply of ``obj`` as a dry run (``kubectl apply --server-side
    --dry-run=server``): the server's answer, or ApiError/Forbidden when it refuses."""
    api = KubeApi(kube.api.configuration, "the test API server")
    resource = api.resources(obj["apiVersion"])[obj["kind"]]
    meta = obj["metadata"]
    path = resource.path(meta.get("namespace"), meta["name"])
    query = {"dryRun": "All", "fieldManager": "convoy-batch-deploy", "force": "true"}
    answer: dict[str, Any] = api.request(
        "PATCH", path, query, obj, content_type="application/apply-patch+yaml"
    )
    return answer


def launcher_config(home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """deploy/dagster-k8s.yaml's run launcher config, validated with the instance file as
    the daemon reads it (its environment set)."""
    for name, value in DAEMON_ENV.items():
        monkeypatch.setenv(name, value)
    (home / "dagster-k8s.yaml").write_text((DEPLOY / "dagster-k8s.yaml").read_text())
    config, _ = dagster_instance_config(str(home), "dagster-k8s.yaml")
    result = process_config(K8sRunLauncher.config_type(), config["run_launcher"]["config"])
    assert result.success, [e.message for e in result.errors or ()]
    assert isinstance(result.value, dict)
    return result.value
