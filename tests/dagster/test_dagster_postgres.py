"""The Dagster instance on a real PostgreSQL (``scripts/pg-testenv``, one server per session,
one database per test): the ``convoy_tick`` job's runs, events and materializations are
stored there, and two ticks racing on one instance and one state directory never reconcile
one Release twice at once nor lose a status.

The instance's ``dagster.yaml`` names Postgres storage and nothing else: no run queue,
no pool limits, so the two racing runs are held apart by the library's per-Release locks
alone (under the example's dagster.yaml the pool ``convoy`` would run them one by one).
"""

import itertools
import os
import subprocess
import sys
import warnings
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage

from convoy_batch import assets
from convoy_batch.assets import RELEASE_KEY, ConvoyResource, tick_job, tick_run_config
from convoy_batch.ticks import shards
from convoy_batch.ticks.options import TickReport
from convoy_batch.timefmt import format_time
from tests.engine.test_shards import fleet
from tests.support.gitfixtures import status_commits
from tests.support.pg import PgServer
from tests.support.scenario import DEPLOYMENT, FAILURE_POLICY, PROJECT, T0, Scenario, release_yaml

RACERS = 40


@pytest.fixture(autouse=True)
def _quiet_beta_warnings() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        yield


@pytest.fixture
def database(postgres: PgServer) -> PgServer:
    """A new database of the session's server: one Dagster instance's."""
    return postgres.new_database()


@pytest.fixture
def home(database: PgServer, tmp_path: Path) -> Path:
    """A DAGSTER_HOME whose dagster.yaml stores everything in ``database``."""
    return database.dagster_home(tmp_path / "dagster")


def add_releases(scenario: Scenario, names: list[str]) -> None:
    files: dict[str, str | None] = {}
    for name in names:
        files[f"apps/{name}/deployment.yaml"] = DEPLOYMENT.replace("IMAGE", "1.0")
        files[f"releases/{name}.yaml"] = release_yaml(name, spec_extra=FAILURE_POLICY)
    scenario.commit(files, f"{len(names)} Releases")


def run_tick_job(instance: dg.DagsterInstance, scenario: Scenario, minutes: int) -> str:
    now = format_time(T0 + timedelta(minutes=minutes))
    resource = ConvoyResource(repo=str(scenario.root), state=str(scenario.state), now=now)
    result = tick_job.execute_in_process(
        run_config=tick_run_config(), instance=instance, resources={"convoy": resource}
    )
    assert result.success
    return result.run_id


def status_events(instance: dg.DagsterInstance, run_ids: set[str]) -> Counter[str]:
    """How many new statuses of each ``release`` partition the runs stored: verdicts as
    materializations, pending statuses as observations."""
    records = [
        *instance.fetch_materializations(RELEASE_KEY, limit=10_000).records,
        *instance.fetch_observations(RELEASE_KEY, limit=10_000).records,
    ]
    return Counter(r.partition_key or "" for r in records if r.run_id in run_ids)


def fsck(scenario: Scenario) -> None:
    done = subprocess.run(
        ["git", "-C", str(scenario.root), "fsck", "--strict", "--no-progress"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_two_ticks_on_a_postgres_instance_commit_statuses_and_store_runs_and_events_there(
    scenario: Scenario, database: PgServer, home: Path
) -> None:
    add_releases(scenario, ["api", "web"])
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        first = run_tick_job(instance, scenario, minutes=0)
        scenario.deployment_ready("api")
        scenario.deployment_ready("web")
        second = run_tick_job(instance, scenario, minutes=1)

    assert scenario.status("api")["rollout"]["state"] == "Succeeded"
    assert scenario.status("web")["rollout"]["state"] == "Succeeded"
    assert status_commits(scenario.repo) == {"api": 2, "web": 2}
    # A new instance over the same database reads back what the runs stored.
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = {run.run_id: run for run in instance.get_runs()}
        assert set(runs) == {first, second}
        assert all(run.status == dg.DagsterRunStatus.SUCCESS for run in runs.values())
        assert all(run.job_name == "convoy_tick" for run in runs.values())
        verdicts = instance.fetch_materializations(RELEASE_KEY, limit=100).records
        pending = instance.fetch_observations(RELEASE_KEY, limit=100).records
        states = {}
        for r in [*verdicts, *pending]:
            entry = r.event_log_entry
            event = entry.asset_materialization or entry.asset_observation
            assert event is not None
            states[(r.run_id, r.partition_key, entry.dagster_event_type)] = event.metadata[
                "state"
            ].value
        observed, materialized = "ASSET_OBSERVATION", "ASSET_MATERIALIZATION"
        assert states == {
            (first, "api", observed): "Progressing",
            (first, "web", observed): "Progressing",
            (second, "api", materialized): "Succeeded",
            (second, "web", materialized): "Succeeded",
        }
        logs = instance.all_logs(second)
        kinds = {e.dagster_event_type for e in logs}
        stored = {"RUN_SUCCESS", "ASSET_MATERIALIZATION", "ASSET_CHECK_EVALUATION"}
        assert {dg.DagsterEventType[kind] for kind in stored} <= kinds
        lines = [e.user_message for e in logs if not e.is_dagster_event]
        assert any(
            line.startswith("changed: ") and "web" in line.split(";")[0] for line in lines
        ), lines
        assert sorted(instance.get_dynamic_partitions("releases")) == ["api", "web"]
    # ... and they are Postgres rows, not files under DAGSTER_HOME.
    assert not list(home.glob("**/*.db"))
    assert {row[0] for row in database.query("SELECT run_id FROM runs")} == {first, second}
    status_rows = database.query(
        "SELECT run_id, count(*) FROM event_logs WHERE dagster_event_type IN"
        " ('ASSET_MATERIALIZATION', 'ASSET_OBSERVATION') GROUP BY run_id"
    )
    assert dict(status_rows) == {first: 2, second: 2}


def start_racer(
    scenario: Scenario, home: Path, spans: Path, kind: str, names: list[str]
) -> subprocess.Popen[str]:
    now = format_time(T0)
    args = [str(scenario.root), str(scenario.state), now, str(spans), kind, *names]
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(PROJECT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.dagster_tick_process", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=PROJECT,
    )


def overlapping(spans: list[tuple[int, str, int, int]]) -> list[str]:
    """Releases with two reconciles whose time spans overlap."""
    by_name: dict[str, list[tuple[int, int]]] = {}
    for _, name, start, end in spans:
        by_name.setdefault(name, []).append((start, end))
    found = []
    for name, times in by_name.items():
        times.sort()
        if any(later[0] < earlier[1] for earlier, later in itertools.pairwise(times)):
            found.append(name)
    return found


def test_a_schedule_tick_racing_a_wakeup_never_reconciles_a_release_twice_at_once(
    scenario: Scenario, home: Path, tmp_path: Path
) -> None:
    names = [f"app-{i:02d}" for i in range(RACERS)]
    add_releases(scenario, names)
    dg.DagsterInstance.from_config(str(home)).dispose()  # the schema, made once
    spans = tmp_path / "spans"
    racers = [
        start_racer(scenario, home, spans, "schedule", []),
        start_racer(scenario, home, spans, "wakeup", names),
    ]
    for racer in racers:
        assert racer.stdout is not None and racer.stdin is not None
        assert racer.stdout.readline().strip() == "ready", racer.communicate()[1][-3000:]
    for racer in racers:  # both at once
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()
    results = [racer.communicate(timeout=240) for racer in racers]
    for racer, (out, err) in zip(racers, results, strict=True):
        assert racer.returncode == 0, out + err[-3000:]
    run_ids = {out.split()[0] for out, _ in results}

    recorded = [(int(p), n, int(s), int(e)) for p, n, s, e in map(str.split, spans.open())]
    windows: dict[int, tuple[int, int]] = {}
    for pid, _, start, end in recorded:
        low, high = windows.get(pid, (start, end))
        windows[pid] = (min(low, start), max(high, end))
    assert len(windows) == 2, "both runs reconciled"
    (a_start, a_end), (b_start, b_end) = windows.values()
    assert a_start < b_end and b_start < a_end, "the two ticks ran at the same time"
    assert overlapping(recorded) == []
    # Nothing lost: every Release's first rollout committed once, whoever reconciled it.
    assert status_commits(scenario.repo) == dict.fromkeys(names, 1)
    for name in names:
        assert scenario.status(name)["rollout"]["state"] == "Progressing"
    fsck(scenario)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        assert {run.run_id for run in runs} == run_ids
        assert all(run.status == dg.DagsterRunStatus.SUCCESS for run in runs)
        assert status_events(instance, run_ids) == dict.fromkeys(names, 1)


def test_a_sharded_tick_on_a_postgres_instance_records_every_release_as_one_tick_does(
    scenario: Scenario, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet(scenario)  # web and api on staging (wave 0), shop and blog in wave 1, ghost lost
    sharded: list[int] = []

    def run_sharded(*args: Any, **kwargs: Any) -> TickReport:
        sharded.append(args[3])  # jobs
        return shards.run_sharded(*args, **kwargs)

    monkeypatch.setattr(assets, "run_sharded", run_sharded)
    resource = ConvoyResource(
        repo=str(scenario.root), state=str(scenario.state), now=format_time(T0)
    )
    with dg.DagsterInstance.from_config(str(home)) as instance:
        result = tick_job.execute_in_process(
            run_config=tick_run_config(jobs=3),
            instance=instance,
            resources={"convoy": resource},
            raise_on_error=False,
        )
        # ghost's ClusterNotFound fails the run, once every event is recorded.
        assert not result.success
        recorded = status_events(instance, {result.run_id})
        logs = instance.all_logs(result.run_id)
    assert sharded == [3]
    assert recorded == dict.fromkeys(["web", "api", "shop", "blog", "ghost"], 1)
    assert status_commits(scenario.repo) == recorded
    kinds = Counter(e.dagster_event_type for e in logs if e.is_dagster_event)
    # A check result for each verdict: ghost's error (the others roll out, no verdict yet).
    assert kinds[dg.DagsterEventType.ASSET_CHECK_EVALUATION] == 1
    lines = [e.user_message for e in logs if not e.is_dagster_event]
    assert any(line.startswith("ghost: ClusterNotFound") for line in lines), lines
    fsck(scenario)
