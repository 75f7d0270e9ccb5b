"""The job ``convoy_sharded_tick`` with the multiprocess executor on a Postgres instance:
each shard an op in a process of its own, the cluster waves in order, every Release
recorded once, ``git fsck`` clean, and the same outcome as one process's tick of a copy
of the repository. A run of the job is a few processes of Dagster each (about 20 s here)."""

import subprocess
from datetime import timedelta
from pathlib import Path

import dagster as dg
import pytest

from convoy_batch.assets import ConvoyResource
from convoy_batch.defs.sharded import JOB, sharded_run_config, sharded_tick_job, shared_io_manager
from convoy_batch.timefmt import format_time
from tests.dagster.test_dagster_postgres import (
    _quiet_beta_warnings,
    fsck,
    status_events,
)
from tests.engine.test_shards import fleet, outcome, two
from tests.support.gitfixtures import status_commits
from tests.support.pg import PgServer
from tests.support.scenario import PROJECT, T0, Scenario

__all__ = ["_quiet_beta_warnings", "two"]  # the fixtures, shared with the other tests of shards

WAVES = [{"ghost"}, {"web", "api"}, {"shop", "blog"}]
"""fleet()'s cluster waves, lowest first: no Cluster, staging (0), east and west (1)."""


def job_of(stages: int, *, shared_io: bool = False) -> dg.JobDefinition:
    """The job as each process of the run rebuilds it (``dg.reconstructable``): the
    repository, state directory and clock from the test's environment; with
    ``shared_io``, its ops' outputs as files under ``$CONVOY_IO_DIR``, as on Kubernetes."""
    resource = ConvoyResource(
        repo=dg.EnvVar("CONVOY_REPO"),
        state=dg.EnvVar("CONVOY_STATE"),
        now=dg.EnvVar("CONVOY_TEST_NOW"),
    )
    if shared_io:
        own = {"convoy": resource, "io_manager": shared_io_manager()}
        return sharded_tick_job(stages, resources=own)
    job = sharded_tick_job(stages)
    return dg.Definitions(jobs=[job], resources={"convoy": resource}).resolve_job_def(JOB)


def four_stages() -> dg.JobDefinition:
    return job_of(4)


def four_stages_on_shared_io() -> dg.JobDefinition:
    return job_of(4, shared_io=True)


def one_stage() -> dg.JobDefinition:
    """A process caches the job of a reconstructable function: one function per shape."""
    return job_of(1)


def run_job(
    instance: dg.DagsterInstance,
    scenario: Scenario,
    monkeypatch: pytest.MonkeyPatch,
    *,
    minutes: int,
    stages: int,
    all_releases: bool = False,
    repo: Path | None = None,
    shared_io: bool = False,
) -> dg.JobExecutionResult:
    """A run of the job on ``scenario``'s repository (or its clone ``repo``, with a
    remote) and state directory (``shared_io``: four stages, :func:`shared_io_manager`)."""
    job = four_stages_on_shared_io if shared_io else four_stages if stages == 4 else one_stage
    for name, value in {
        "CONVOY_REPO": str(repo or scenario.root),
        "CONVOY_STATE": str(scenario.state),
        "CONVOY_TEST_NOW": format_time(T0 + timedelta(minutes=minutes)),
        "PYTHONPATH": str(PROJECT),
    }.items():
        monkeypatch.setenv(name, value)
    config = sharded_run_config(all_releases=all_releases, jobs=3)
    return dg.execute_job(
        dg.reconstructable(job),
        instance=instance,
        run_config=config.to_config_dict(),  # type: ignore[no-untyped-call]
        raise_on_error=False,
    )


def commit_order(scenario: Scenario) -> list[str]:
    """The Releases of the status commits, oldest first."""
    subjects = scenario.repo.git.log("--reverse", "--format=%s", "--", "status/")
    return [line.split(":")[0].removeprefix("convoy-batch ") for line in subjects.splitlines()]


def in_wave_order(order: list[str]) -> bool:
    wave = {name: i for i, names in enumerate(WAVES) for name in names}
    places = [wave[name] for name in order]
    return places == sorted(places)


def test_a_sharded_job_on_the_multiprocess_executor_reaches_what_one_process_reaches(
    two: tuple[Scenario, Scenario],
    postgres: PgServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one, sharded = two
    for s in two:
        fleet(s)
    home = postgres.new_database().dagster_home(tmp_path / "dagster")
    run_ids = []
    with dg.DagsterInstance.from_config(str(home)) as instance:
        # Every wave an op of its own; then one op for all three (the rest in the last).
        for minutes, stages, extra in ((0, 4, ()), (1, 1, ("--all",))):
            expected = one.reconcile(minutes=minutes, extra=extra)
            assert expected.code == 1  # ghost: ClusterNotFound
            result = run_job(
                instance, sharded, monkeypatch, minutes=minutes, stages=stages,
                all_releases=bool(extra),
            )  # fmt: skip
            assert not result.success  # ghost's error fails the run, once all is recorded
            run_ids.append(result.run_id)
            assert outcome(one) == outcome(sharded)
            recorded = status_events(instance, {result.run_id})
            changed = len(commit_order(sharded)) - sum(status_commits(sharded.repo).values())
            assert changed == 0  # one Release per status commit
            steps = {e.step_key for e in instance.all_logs(result.run_id) if e.step_key}
            shard_steps = {s for s in steps if s.startswith("shard_of_wave_")}
            if stages == 4:  # each wave's shards were ops: 1 + 1 + 2 (jobs=3, two Clusters)
                assert len(shard_steps) == 4, steps
                assert recorded == dict.fromkeys(["web", "api", "shop", "blog", "ghost"], 1)
            else:
                assert len(shard_steps) == 1, steps
        logs = instance.all_logs(run_ids[0])
        failed = [
            e.step_key for e in logs if e.dagster_event_type == dg.DagsterEventType.STEP_FAILURE
        ]
        assert failed == ["finish_waves"]  # the run fails once every event is recorded
        lines = [e.user_message for e in logs if not e.is_dagster_event]
        assert any(line.startswith("ghost: ClusterNotFound") for line in lines), lines
    assert status_commits(sharded.repo) == status_commits(one.repo)
    assert in_wave_order(commit_order(sharded)[:5])  # the first tick's commits, wave by wave
    fsck(sharded)
    git = ["git", "-C", str(sharded.root), "status", "--porcelain", "--", "status/"]
    assert subprocess.run(git, capture_output=True, text=True).stdout == ""
