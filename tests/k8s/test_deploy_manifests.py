"""deploy/ on a real API server: every object that ``kubectl apply -k deploy/`` makes, and
the Job the K8sRunLauncher makes for a ``convoy_tick`` run with deploy/dagster-k8s.yaml,
each dry-run by the test API server (``dryRun=All``). A refusal fails the test."""

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from dagster import DagsterInstance
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.launcher import LaunchRunContext
from dagster_k8s import K8sRunLauncher
from dagster_k8s.client import DagsterK8sUnrecoverableAPIError
from kubernetes import client
from kubernetes.client.rest import ApiException

from convoy_batch.assets import tick_job
from tests.k8s.deploy_env import DAEMON_ENV, DEPLOY, dry_run_apply, launcher_config
from tests.k8s.testenv import KubeEnv
from tests.support.renderer_tools import kustomize_kubectl


def shipped_objects() -> list[dict[str, Any]]:
    """What ``kubectl apply -k deploy/`` sends, as Debian's kubectl builds it."""
    done = subprocess.run(
        [kustomize_kubectl(), "kustomize", str(DEPLOY)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def test_every_object_deploy_ships_passes_the_servers_dry_run(
    kube: KubeEnv, namespace: str
) -> None:
    objects = shipped_objects()

    answers = {f"{o['kind']}/{o['metadata']['name']}": dry_run_apply(kube, o) for o in objects}

    assert sorted(answers) == [
        "ConfigMap/convoy-batch-dagster-instance",
        "Namespace/convoy-batch",
        "PersistentVolumeClaim/convoy-state",
        "Role/convoy-batch-run-launcher",
        "RoleBinding/convoy-batch-run-launcher",
        "ServiceAccount/convoy-batch",
    ]
    instance = answers["ConfigMap/convoy-batch-dagster-instance"]["data"]["dagster.yaml"]
    assert instance == (DEPLOY / "dagster-k8s.yaml").read_text()
    claim = answers["PersistentVolumeClaim/convoy-state"]["spec"]
    assert claim["accessModes"] == ["ReadWriteMany"]
    made = kube.core.list_namespaced_config_map(namespace).items
    assert "convoy-batch-dagster-instance" not in {c.metadata.name for c in made}  # dry runs


class DryRunJobs(client.BatchV1Api):
    """The real client, its Job creations sent as dry runs; keeps the server's answers."""

    def __init__(self, api_client: client.ApiClient) -> None:
        super().__init__(api_client)
        self.answers: list[client.V1Job] = []

    def create_namespaced_job(self, namespace: str, body: Any, **kwargs: Any) -> Any:
        answer = super().create_namespaced_job(namespace, body, dry_run="All", **kwargs)
        self.answers.append(answer)
        return answer


def launch_tick_run(kube: KubeEnv, home: Path, config: dict[str, Any]) -> tuple[DryRunJobs, str]:
    """A ``convoy_tick`` run of the project's code location, launched by a K8sRunLauncher
    made of ``config`` that talks to the test API server; the jobs client and the run id."""
    jobs = DryRunJobs(kube.api)
    launcher = K8sRunLauncher(
        **{**config, "load_incluster_config": False, "kubeconfig_file": str(kube.kubeconfig)},
        k8s_client_batch_api=jobs,
    )
    (home / "dagster.yaml").write_text("telemetry: {enabled: false}\n")
    origin = ReconstructableRepository.for_module("convoy_batch.definitions", "defs")
    with DagsterInstance.from_config(str(home)) as instance:
        run = instance.create_run_for_job(
            tick_job,
            job_code_origin=origin.get_reconstructable_job("convoy_tick").get_python_origin(),
        )
        launcher.register_instance(instance)
        launcher.launch_run(LaunchRunContext(dagster_run=run, workspace=None))
    return jobs, run.run_id


def test_the_run_launchers_job_for_a_tick_run_passes_the_servers_dry_run(
    kube: KubeEnv, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = launcher_config(tmp_path, monkeypatch)

    jobs, run_id = launch_tick_run(kube, tmp_path, config)

    [job] = jobs.answers  # the server's dry-run answer, defaults filled in
    assert job.metadata.name == f"dagster-run-{run_id}"
    assert job.metadata.namespace == namespace
    pod = job.spec.template.spec
    [container] = pod.containers
    assert pod.service_account_name == "convoy-batch"
    assert container.image == DAEMON_ENV["CONVOY_IMAGE"]
    assert container.args[:3] == ["dagster", "api", "execute_run"]
    assert "convoy_tick" in container.args[3]
    env = {e.name: e.value for e in container.env}
    assert env["CONVOY_REPO"] == "/var/cache/convoy/repo"
    assert env["CONVOY_STATE"] == "/var/lib/convoy/state"
    assert env["DAGSTER_PG_HOST"] == DAEMON_ENV["DAGSTER_PG_HOST"]
    assert [e.secret_ref.name for e in container.env_from] == [
        "convoy-batch-postgres",
        "convoy-batch-git",
    ]
    volumes = {v.name: v for v in pod.volumes}
    assert volumes["convoy-state"].persistent_volume_claim.claim_name == "convoy-state"
    assert volumes["convoy-clone"].empty_dir is not None
    mounts = {m.mount_path: m.name for m in container.volume_mounts}
    assert mounts == {"/var/lib/convoy": "convoy-state", "/var/cache/convoy": "convoy-clone"}
    with pytest.raises(ApiException):  # a dry run: no Job was made
        kube.batch.read_namespaced_job(job.metadata.name, namespace)


def test_a_job_the_server_refuses_fails_the_launch(
    kube: KubeEnv, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = launcher_config(tmp_path, monkeypatch)
    broken = {**config, "volume_mounts": [{"name": "nowhere", "mountPath": "/x"}]}

    with pytest.raises(DagsterK8sUnrecoverableAPIError) as refused:
        launch_tick_run(kube, tmp_path, broken)

    assert "nowhere" in str(refused.value.k8s_api_exception.body)
