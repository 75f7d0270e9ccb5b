"""The scale-out instance config (deploy/dagster-k8s.yaml) and the single-machine one
(dagster.yaml) load and validate against Dagster's schemas, with the pinned extras."""

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from dagster import DagsterInstance
from dagster._config import process_config
from dagster._core.errors import DagsterInvalidConfigError
from dagster._core.instance.config import dagster_instance_config
from dagster._core.storage.runs import SqliteRunStorage
from dagster_k8s import K8sRunLauncher
from dagster_postgres import DagsterPostgresStorage

PROJECT = Path(__file__).resolve().parents[2]
ENV = {
    "DAGSTER_PG_HOST": "postgres",
    "DAGSTER_PG_USER": "dagster",
    "DAGSTER_PG_PASSWORD": "secret",
    "DAGSTER_PG_DB": "dagster",
    "CONVOY_IMAGE": "registry.example/convoy-batch:0.1.0",
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    shutil.copy(PROJECT / "deploy" / "dagster-k8s.yaml", tmp_path / "dagster-k8s.yaml")
    shutil.copy(PROJECT / "dagster.yaml", tmp_path / "dagster.yaml")
    return tmp_path


def valid(schema: Any, config: Any) -> dict[str, Any]:
    result = process_config(schema, config)
    assert result.success, [e.message for e in result.errors or ()]
    assert isinstance(result.value, dict)
    return result.value


def test_the_scale_out_config_validates(home: Path) -> None:
    config, _ = dagster_instance_config(str(home), "dagster-k8s.yaml")

    launcher = valid(K8sRunLauncher.config_type(), config["run_launcher"]["config"])
    storage = valid(DagsterPostgresStorage.config_type(), config["storage"]["postgres"])

    assert config["run_launcher"]["class"] == "K8sRunLauncher"
    assert launcher["job_image"] == ENV["CONVOY_IMAGE"]
    assert launcher["instance_config_map"] and launcher["service_account_name"]
    assert storage["postgres_db"]["scheme"] == "postgresql+psycopg2"
    assert config["telemetry"]["enabled"] is False


def test_the_local_config_keeps_storage_under_dagster_home_and_limits_concurrency(
    home: Path,
) -> None:
    config, _ = dagster_instance_config(str(home))
    with DagsterInstance.from_config(str(home)) as instance:
        run_storage = instance.run_storage
        dequeue = getattr(instance.run_coordinator, "dequeue_interval_seconds", None)
        queue = instance.get_concurrency_config().run_queue_config

    assert isinstance(run_storage, SqliteRunStorage)
    assert Path(run_storage._conn_string.split("///", 1)[1]).is_relative_to(home)
    assert config["telemetry"]["enabled"] is False
    assert config["concurrency"]["pools"]["default_limit"] == 1
    limits = {
        limit["key"]: limit for limit in config["concurrency"]["runs"]["tag_concurrency_limits"]
    }
    assert limits["dagster/partition"]["value"] == {"applyLimitPerUniqueValue": True}
    assert limits["convoy/tick"]["limit"] == 1
    # `run_queue:` beside `concurrency: runs:` sets the queue's interval and keeps its limits.
    assert dequeue == 1
    assert queue is not None and queue.max_concurrent_runs == 4
    assert len(queue.tag_concurrency_limits) == 2


def test_a_broken_scale_out_config_is_refused(home: Path) -> None:
    config = yaml.safe_load((home / "dagster-k8s.yaml").read_text())
    config["run_launcher"]["config"]["no_such_field"] = True
    config["no_such_section"] = {}
    (home / "broken.yaml").write_text(yaml.safe_dump(config))

    with pytest.raises(DagsterInvalidConfigError):
        dagster_instance_config(str(home), "broken.yaml")
    assert not process_config(
        K8sRunLauncher.config_type(), config["run_launcher"]["config"]
    ).success
