"""``convoy_sharded_tick`` under the ``k8s_job_executor``: its run config validates, and
the Job the executor makes for each shard op (``dagster_k8s``'s own
``construct_dagster_k8s_job``, with deploy/dagster-k8s.yaml's launcher settings, which the
executor inherits) passes the test API server's dry run (``dryRun=All``)."""

from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster_k8s import k8s_job_executor
from dagster_k8s.job import DagsterK8sJobConfig, construct_dagster_k8s_job, get_k8s_job_name
from kubernetes.client.rest import ApiException

from convoy_batch.definitions import build_definitions
from convoy_batch.defs.sharded import IO_DIR_ENV, JOB, sharded_run_config, sharded_tick_job
from tests.dagster.test_dagster_postgres import _quiet_beta_warnings
from tests.k8s.deploy_env import DAEMON_ENV, launcher_config
from tests.k8s.testenv import KubeEnv

__all__ = ["_quiet_beta_warnings"]  # the fixture: the definitions' sensors warn of beta parameters

EXECUTOR = {"job_namespace": "convoy-batch", "max_concurrent": 4}
STATE_VOLUME = "convoy-state"


def io_dir(launcher: dict[str, Any]) -> str:
    """``$CONVOY_IO_DIR`` as the launcher (and so each step's pod) sets it."""
    [setting] = [e for e in launcher["env_vars"] if e.startswith(f"{IO_DIR_ENV}=")]
    return setting.split("=", 1)[1]


def state_mount(launcher: dict[str, Any]) -> str:
    [mount] = [m for m in launcher["volume_mounts"] if m["name"] == STATE_VOLUME]
    return str(mount["mountPath"])


def test_the_sharded_job_validates_with_the_k8s_executor() -> None:
    job = sharded_tick_job(executor=k8s_job_executor)
    config = sharded_run_config(jobs=4).to_config_dict()  # type: ignore[no-untyped-call]

    valid = dg.validate_run_config(job, {**config, "execution": {"config": EXECUTOR}})

    assert valid["execution"]["k8s"]["job_namespace"] == "convoy-batch"
    broken = {**config, "execution": {"config": {**EXECUTOR, "no_such_field": 1}}}
    with pytest.raises(dg.DagsterInvalidConfigError):
        dg.validate_run_config(job, broken)


def test_under_the_k8s_executor_the_ops_pass_their_outputs_on_the_state_volume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launcher = launcher_config(tmp_path, monkeypatch)
    monkeypatch.setenv(IO_DIR_ENV, io_dir(launcher))  # as in a step's pod
    defs = build_definitions(str(tmp_path / "repo"), str(tmp_path / "state"), shard_executor="k8s")
    job = defs.resolve_job_def(JOB)

    with dg.build_resources({"io_manager": job.resource_defs["io_manager"]}) as resources:
        base_dir = Path(resources.io_manager.base_dir)

    assert job.executor_def.name == "k8s"
    assert base_dir.is_relative_to(state_mount(launcher))
    assert base_dir != Path(launcher_env(launcher)["CONVOY_STATE"])  # beside it, not in it


def launcher_env(launcher: dict[str, Any]) -> dict[str, str]:
    return dict(e.split("=", 1) for e in launcher["env_vars"] if "=" in e)


def test_the_jobs_of_the_shard_ops_pass_the_servers_dry_run(
    kube: KubeEnv, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launcher = launcher_config(tmp_path, monkeypatch)
    fields = (set(DagsterK8sJobConfig.config_type_job()) | {"instance_config_map"}) & set(launcher)
    job_config = DagsterK8sJobConfig(**{k: launcher[k] for k in fields})
    run_id = "0f3c2a5e-9a51-4c4e-8d2b-3f1c6b7d8e90"
    steps = [f"shard_of_wave_{w}[wave{w}_shard{i}]" for w in range(2) for i in range(2)]

    answers = []
    for step in steps:
        name = f"dagster-step-{get_k8s_job_name(run_id, step)}"
        body = construct_dagster_k8s_job(
            job_config=job_config,
            args=["dagster", "api", "execute_step"],
            job_name=name,
            pod_name=name,
            component="step_worker",
            labels={"dagster/job": "convoy_sharded_tick", "dagster/op": step},
            env_vars=[{"name": "DAGSTER_RUN_STEP_KEY", "value": step}],
        )
        answers.append(kube.batch.create_namespaced_job(namespace, body, dry_run="All"))

    assert len({a.metadata.name for a in answers}) == len(steps)
    for answer in answers:
        pod = answer.spec.template.spec
        [container] = pod.containers
        assert container.image == DAEMON_ENV["CONVOY_IMAGE"]
        assert pod.service_account_name == "convoy-batch"
        env = {e.name: e.value for e in container.env}
        assert env["CONVOY_STATE"] == "/var/lib/convoy/state"  # the shared volume
        volumes = {v.name: v for v in pod.volumes}
        assert volumes[STATE_VOLUME].persistent_volume_claim.claim_name == "convoy-state"
        # The ops' inputs and outputs (the IO manager's files) are on that volume too.
        [mount] = [m for m in container.volume_mounts if m.name == STATE_VOLUME]
        assert Path(env[IO_DIR_ENV]).is_relative_to(mount.mount_path)
        with pytest.raises(ApiException):  # a dry run: no Job was made
            kube.batch.read_namespaced_job(answer.metadata.name, namespace)
