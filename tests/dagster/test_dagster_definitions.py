"""The Dagster layer with Dagster's own testing APIs and an ephemeral instance: definitions,
the tick schedule, the discovery and wake-up sensors, forced syncs.

A real GitOps repository in tmp_path and a plain directory cluster (the tests play the
Deployment controller by writing ``status``); the clock is the resource's ``now``.
"""

import json
import subprocess
import sys
import warnings
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import git
import pytest
import yaml

from convoy_batch.assets import (
    RELEASE_KEY,
    ConvoyResource,
    judged_materialization,
    release,
    tick_job,
    tick_run_config,
)
from convoy_batch.definitions import (
    DUE_TAG,
    NOTHING_WAITING,
    WAKEUP_INTERVAL_SECONDS,
    build_definitions,
    defs,
    discover_releases,
    tick_schedule,
    wakeups,
)
from convoy_batch.deployers.directory import DirectoryDeployer
from convoy_batch.models import ObjectKey
from convoy_batch.ticks import runner
from convoy_batch.ticks import wakeups as wakeup_keys
from convoy_batch.ticks.runner import run_tick
from convoy_batch.timefmt import format_time
from tests.support.gitfixtures import commit_files, make_repo, remove_files
from tests.support.scenario import CLUSTER, DEPLOYMENT, PROJECT, T0, release_yaml

POLICY = "  failurePolicy: {rollback: Auto, progressDeadline: 10m}\n"
MANUAL = "  syncPolicy: {mode: Manual}\n" + POLICY


@pytest.fixture(autouse=True)
def _quiet_beta_warnings() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        yield


class Example:
    """A GitOps repository with Releases web, api (Auto) and reports (Manual)."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "repo"
        self.state = tmp_path / "state"
        files = {"clusters/staging.yaml": CLUSTER}
        for name, extra in (("web", POLICY), ("api", POLICY), ("reports", MANUAL)):
            files[f"apps/{name}/deployment.yaml"] = DEPLOYMENT.replace("IMAGE", "1.0")
            files[f"releases/{name}.yaml"] = release_yaml(name, spec_extra=extra)
        self.repo: git.Repo = make_repo(self.root, files)
        self.instance = dg.DagsterInstance.ephemeral()

    def resource(self, at: datetime = T0) -> ConvoyResource:
        return ConvoyResource(repo=str(self.root), state=str(self.state), now=format_time(at))

    def tick(self, at: datetime) -> None:
        run_tick(self.root, self.state, at)

    def status_commits(self) -> list[str]:
        return [c.message.strip() for c in self.repo.iter_commits(paths="status/")]

    def play_controller(self, name: str) -> None:
        """Write the status a Deployment controller would once every replica is ready."""
        deployer = DirectoryDeployer(self.state / "clusters" / "staging")
        key = ObjectKey(api_version="apps/v1", kind="Deployment", namespace=name, name=name)
        path = deployer.path_of(key)
        obj: dict[str, Any] = yaml.safe_load(path.read_text())
        n = obj["spec"]["replicas"]
        counts = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
        obj["status"] = {"observedGeneration": obj["metadata"]["generation"]}
        obj["status"].update(dict.fromkeys(counts, n))
        path.write_text(yaml.safe_dump(obj))

    def materialize(
        self, partition: str, at: datetime = T0, **options: Any
    ) -> dg.ExecuteInProcessResult:
        """Materialize the release asset's ``partition`` in the instance with the clock at
        ``at``: a forced sync, as from the UI. ``options`` go to ``dg.materialize``."""
        return dg.materialize(
            [release],
            partition_key=partition,
            instance=self.instance,
            resources={"convoy": self.resource(at)},
            **options,
        )

    def wakeup(self, at: datetime, cursor: str | None) -> dg.SensorResult:
        context = dg.build_sensor_context(
            instance=self.instance, cursor=cursor, resources={"convoy": self.resource(at)}
        )
        result = wakeups(context)
        assert isinstance(result, dg.SensorResult)
        return result


@pytest.fixture
def example(tmp_path: Path) -> Example:
    return Example(tmp_path)


def by_partition(events: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Materializations or observations: partition -> metadata values."""
    found = {}
    for event in events:
        assert event.partition is not None
        found[event.partition] = {k: v.value for k, v in event.metadata.items()}
    return found


def materializations(result: dg.ExecuteInProcessResult) -> dict[str, dict[str, Any]]:
    """The verdicts a run recorded (passed or failed): partition -> metadata."""
    events = result.get_asset_materialization_events()
    return by_partition(e.step_materialization_data.materialization for e in events)


def observations(result: dg.ExecuteInProcessResult) -> dict[str, dict[str, Any]]:
    """The pending statuses a run recorded (Progressing, waiting): partition -> metadata."""
    events = result.get_asset_observation_events()
    return by_partition(e.asset_observation_data.asset_observation for e in events)


def status_events(result: dg.ExecuteInProcessResult) -> dict[str, dict[str, Any]]:
    """Every new status a run recorded, verdict or pending: partition -> metadata."""
    return {**observations(result), **materializations(result)}


def test_the_definitions_load_from_the_module_and_from_the_builder(example: Example) -> None:
    built = build_definitions(repo=str(example.root), state=str(example.state))
    dg.Definitions.validate_loadable(built)

    repository = built.get_repository_def()
    assert {s.name for s in repository.schedule_defs} == {"convoy_tick", "convoy_full_resync"}
    assert {s.name for s in repository.sensor_defs} == {"convoy_releases", "convoy_wakeups"}
    assert repository.has_job("convoy_tick")
    assert isinstance(defs(), dg.Definitions)


def test_the_tick_cron_is_configurable(example: Example) -> None:
    assert tick_schedule("*/5 * * * *").cron_schedule == "*/5 * * * *"
    built = build_definitions(repo=str(example.root), tick_cron="*/2 * * * *")
    schedule = built.get_repository_def().get_schedule_def("convoy_tick")
    assert schedule.cron_schedule == "*/2 * * * *"


def test_the_wakeup_interval_is_configurable(
    example: Example, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interval() -> int | None:
        built = build_definitions(repo=str(example.root))
        return built.get_repository_def().get_sensor_def("convoy_wakeups").minimum_interval_seconds

    # Under the 5 s loop of Dagster's sensor daemon: evaluated on every loop.
    assert interval() == WAKEUP_INTERVAL_SECONDS < 5
    assert wakeups.minimum_interval_seconds == WAKEUP_INTERVAL_SECONDS
    monkeypatch.setenv("CONVOY_WAKEUP_INTERVAL", "30")
    assert interval() == 30
    monkeypatch.setenv("CONVOY_WAKEUP_INTERVAL", "0")
    with pytest.raises(dg.DagsterInvalidDefinitionError, match="CONVOY_WAKEUP_INTERVAL"):
        build_definitions(repo=str(example.root))


@pytest.mark.parametrize("schedule", ["convoy_tick", "convoy_full_resync"])
def test_scheduled_ticks_run_sharded_with_convoy_tick_jobs(
    example: Example, monkeypatch: pytest.MonkeyPatch, schedule: str
) -> None:
    def jobs_of(built: dg.Definitions) -> int:
        definition = built.get_repository_def().get_schedule_def(schedule)
        data = definition.evaluate_tick(
            dg.build_schedule_context(
                instance=example.instance,
                scheduled_execution_time=T0,
                resources={"convoy": example.resource()},
            )
        )
        assert data.run_requests is not None
        return int(data.run_requests[0].run_config["ops"]["reconcile_tick"]["config"]["jobs"])

    assert jobs_of(build_definitions(repo=str(example.root))) == 1
    monkeypatch.setenv("CONVOY_TICK_JOBS", "4")
    assert jobs_of(build_definitions(repo=str(example.root))) == 4
    assert jobs_of(build_definitions(repo=str(example.root), tick_jobs=2)) == 2
    monkeypatch.setenv("CONVOY_TICK_JOBS", "zero")
    with pytest.raises(dg.DagsterInvalidDefinitionError, match="CONVOY_TICK_JOBS"):
        build_definitions(repo=str(example.root))


def test_a_tick_with_jobs_under_one_fails_its_run(example: Example) -> None:
    run = tick_job.execute_in_process(
        run_config=tick_run_config(jobs=0),
        instance=example.instance,
        resources={"convoy": example.resource(T0)},
        raise_on_error=False,
    )
    assert not run.success
    assert "jobs must be at least 1" in str(
        run.get_step_failure_events()[0].step_failure_data.error
    )


def evaluate_tick_schedule(example: Example, at: datetime, repo: Path | None = None) -> Any:
    """The ``convoy_tick`` schedule's evaluation at ``at``: its run request or skip reason."""
    schedule = tick_schedule()
    resource = ConvoyResource(
        repo=str(repo or example.root), state=str(example.state), now=format_time(at)
    )
    data = schedule.evaluate_tick(
        dg.build_schedule_context(
            instance=example.instance, scheduled_execution_time=at, resources={"convoy": resource}
        )
    )
    if data.skip_message is not None:
        return data.skip_message
    assert data.run_requests is not None
    (request,) = data.run_requests
    return request


def test_the_tick_schedule_launches_no_run_when_nothing_waits_for_it(example: Example) -> None:
    example.tick(T0)  # every Release reconciled; interval 5m (the default)

    assert evaluate_tick_schedule(example, T0 + timedelta(minutes=1)) == NOTHING_WAITING
    due = evaluate_tick_schedule(example, T0 + timedelta(minutes=5))
    assert due.tags[DUE_TAG] == "api (interval),reports (interval),web (interval)"
    # Run, the schedule's tick launches that run; the Releases are not due again till 10m.
    tick_job.execute_in_process(
        run_config=due.run_config,
        instance=example.instance,
        resources={"convoy": example.resource(T0 + timedelta(minutes=5))},
        tags=due.tags,
    )
    assert evaluate_tick_schedule(example, T0 + timedelta(minutes=6)) == NOTHING_WAITING

    remove_files(example.repo, ["releases/api.yaml"])
    commit_files(example.repo, {"releases/db.yaml": release_yaml("db")})
    waiting = evaluate_tick_schedule(example, T0 + timedelta(minutes=6))
    assert waiting.tags[DUE_TAG] == "db (never reconciled),api (removed)"


def test_the_tick_schedule_runs_the_tick_when_it_cannot_tell(
    example: Example, tmp_path: Path
) -> None:
    """An unreadable repository: the tick runs and reports it, no tick is lost."""
    request = evaluate_tick_schedule(example, T0, repo=tmp_path / "not-a-repository")
    assert request.tags[DUE_TAG].startswith("could not tell (")


def test_one_scheduled_run_reconciles_every_due_release(example: Example) -> None:
    built = build_definitions(repo=str(example.root), state=str(example.state))
    repository = built.get_repository_def()
    schedule = repository.get_schedule_def("convoy_tick")
    context = dg.build_schedule_context(
        instance=example.instance,
        scheduled_execution_time=T0,
        repository_def=repository,
        resources={"convoy": example.resource()},
    )

    data = schedule.evaluate_tick(context)
    assert data.run_requests is not None and len(data.run_requests) == 1
    request = data.run_requests[0]
    result = tick_job.execute_in_process(
        run_config=request.run_config,
        instance=example.instance,
        resources={"convoy": example.resource()},
        tags={"dagster/schedule_name": "convoy_tick"},
    )

    found = status_events(result)
    assert sorted(found) == ["api", "reports", "web"]
    assert found["web"]["state"] == "Progressing"
    assert found["web"]["applied"] is True
    assert example.repo.commit(found["web"]["commit"]).message.startswith("web: none -> ")
    assert found["reports"]["reason"] == "WaitingForManualSync"
    assert set(found["api"]) >= {"state", "reason", "renderRef", "revision", "applied", "commit"}
    # Each is pending (Progressing, waiting): observed, no verdict materialized yet.
    assert sorted(observations(result)) == ["api", "reports", "web"]
    assert example.instance.get_materialized_partitions(RELEASE_KEY) == set()


def test_the_full_resync_reconciles_releases_that_are_not_due_and_records_no_event(
    example: Example,
) -> None:
    example.tick(T0)
    built = build_definitions(repo=str(example.root), state=str(example.state))
    data = (
        built.get_repository_def()
        .get_schedule_def("convoy_full_resync")
        .evaluate_tick(
            dg.build_schedule_context(
                instance=example.instance,
                scheduled_execution_time=T0,
                resources={"convoy": example.resource()},
            )
        )
    )
    assert data.run_requests is not None
    at = T0 + timedelta(seconds=10)
    run = tick_job.execute_in_process(
        run_config=data.run_requests[0].run_config,
        instance=example.instance,
        resources={"convoy": example.resource(at)},
    )

    # Every Release reconciled, none changed: no per-Release event, one summary line.
    assert status_events(run) == {}
    logs = [e.user_message for e in example.instance.all_logs(run.run_id)]
    assert "unchanged: 3 Release(s) reconciled, 0 not due" in logs


def test_a_release_s_events_are_its_status_changes(example: Example) -> None:
    def tick(at: datetime) -> dict[str, dict[str, Any]]:
        run = tick_job.execute_in_process(
            run_config=tick_run_config(all_releases=True),
            instance=example.instance,
            resources={"convoy": example.resource(at)},
        )
        return status_events(run)

    first = tick(T0)
    assert sorted(first) == ["api", "reports", "web"]
    assert (first["web"]["previousState"], first["web"]["state"]) == (None, "Progressing")
    run = example.instance.get_runs(limit=1)[0]
    lines = [
        e.user_message for e in example.instance.all_logs(run.run_id) if not e.is_dagster_event
    ]
    # One line for the tick; each changed Release's own line is its materialization's.
    assert lines == ["changed: api, reports, web; unchanged: 0 Release(s) reconciled, 0 not due"]
    for minutes in (1, 2, 3):  # quiet ticks: nothing new
        assert tick(T0 + timedelta(seconds=minutes)) == {}
    events = example.instance.fetch_observations(RELEASE_KEY, limit=100).records
    assert len(events) == 3


def discover(example: Example) -> list[tuple[str, list[str]]]:
    context = dg.build_sensor_context(
        instance=example.instance, resources={"convoy": example.resource()}
    )
    result = discover_releases(context)
    if isinstance(result, dg.SkipReason):
        return []
    assert isinstance(result, dg.SensorResult)
    requests = []
    for request in result.dynamic_partitions_requests or ():
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            example.instance.add_dynamic_partitions("releases", list(request.partition_keys))
            requests.append(("add", list(request.partition_keys)))
        else:
            for key in request.partition_keys:
                example.instance.delete_dynamic_partition("releases", key)
            requests.append(("delete", list(request.partition_keys)))
    return requests


def test_the_discovery_sensor_adds_and_removes_partitions_with_the_files(
    example: Example,
) -> None:
    assert discover(example) == [("add", ["api", "reports", "web"])]
    assert discover(example) == []

    remove_files(example.repo, ["releases/api.yaml"])
    commit_files(example.repo, {"releases/db.yaml": release_yaml("db")})

    assert discover(example) == [("add", ["db"]), ("delete", ["api"])]
    assert sorted(example.instance.get_dynamic_partitions("releases")) == ["db", "reports", "web"]


def test_a_release_set_s_members_are_partitions(example: Example) -> None:
    assert discover(example) == [("add", ["api", "reports", "web"])]
    release_set = (
        "apiVersion: convoy.dev/v1alpha1\nkind: ReleaseSet\nmetadata: {name: edge}\n"
        "spec:\n  generators: [{list: {elements: [{cluster: staging}]}}]\n"
        "  template: {source: {path: apps/web}}\n"
    )
    commit_files(example.repo, {"releases/edge.yaml": release_set})

    # The member, not the set: each member has its own status, events and forced sync.
    assert discover(example) == [("add", ["edge-staging"])]


def test_a_retired_release_s_partition_goes_once_its_status_file_is_removed(
    example: Example,
) -> None:
    example.tick(T0)
    discover(example)
    remove_files(example.repo, ["releases/web.yaml"])
    assert discover(example) == []  # its status is there: its retirement has a partition

    run = tick_job.execute_in_process(
        run_config=tick_run_config(),
        instance=example.instance,
        resources={"convoy": example.resource(T0 + timedelta(minutes=1))},
    )

    found = materializations(run)
    assert (found["web"]["previousState"], found["web"]["state"]) == ("Progressing", "Deleted")
    assert found["web"]["reason"] == "Deleted"
    assert sorted(example.instance.get_dynamic_partitions("releases")) == ["api", "reports"]
    kept = example.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=RELEASE_KEY, asset_partitions=["web"]), limit=10
    ).records
    assert [r.event_log_entry.message for r in kept] == [
        "web: Progressing -> Deleted (1 objects deleted, 0 kept)"
    ]  # the partition is gone, its materialization stays in the event log
    assert discover(example) == []


def settled(example: Example) -> str | None:
    """Two ticks (the second after the observer's first look), then the sensor's cursor."""
    example.tick(T0)
    example.tick(T0 + timedelta(minutes=1))
    return example.wakeup(T0 + timedelta(minutes=1), None).cursor


def woken(result: dg.SensorResult) -> list[str]:
    names: list[str] = []
    for request in result.run_requests or ():
        assert request.run_key
        names += request.run_config["ops"]["reconcile_tick"]["config"]["names"]
    return names


def test_the_wakeup_sensor_stays_quiet_when_nothing_changed(example: Example) -> None:
    cursor = settled(example)

    assert woken(example.wakeup(T0 + timedelta(minutes=2), cursor)) == []


def test_the_wakeup_sensor_fires_once_on_a_health_change(example: Example) -> None:
    cursor = settled(example)
    example.play_controller("web")

    first = example.wakeup(T0 + timedelta(minutes=2), cursor)
    again = example.wakeup(T0 + timedelta(minutes=2, seconds=15), first.cursor)

    assert woken(first) == ["web"]
    assert first.run_requests and first.run_requests[0].tags["convoy/woken"] == "web"
    assert woken(again) == []


def test_a_wakeup_runs_tag_names_whole_releases_then_how_many_more() -> None:
    names = [f"app-{n:04d}" for n in range(1000)]
    tag = wakeup_keys.woken_tag(names)
    shown, more = tag.split(" and ")
    assert len(tag) <= wakeup_keys.TAG_LIMIT < len(tag) + len(",app-0000")
    assert shown.split(",") == names[: len(shown.split(","))]  # whole names, in order
    assert more == f"{1000 - len(shown.split(','))} more"
    assert wakeup_keys.woken_tag(names[:3]) == "app-0000,app-0001,app-0002"
    exact = wakeup_keys.woken_tag(names[:3], limit=len("app-0000,app-0001,app-0002"))
    assert exact == "app-0000,app-0001,app-0002"
    assert wakeup_keys.woken_tag(names[:3], limit=19) == "app-0000 and 2 more"  # 19 characters
    assert wakeup_keys.woken_tag(names[:3], limit=5) == "3 Releases"


def test_the_wakeup_sensor_observes_only_progressing_releases(
    example: Example, monkeypatch: pytest.MonkeyPatch
) -> None:
    cursor = settled(example)
    example.play_controller("web")
    example.tick(T0 + timedelta(minutes=2))  # web: Succeeded; api and reports Progressing
    observed: list[str] = []

    def observe_release(tick: Any, entry: Any, **kwargs: Any) -> Any:
        observed.append(entry.name)
        return runner.observe_release(tick, entry, **kwargs)

    monkeypatch.setattr(wakeup_keys, "observe_release", observe_release)
    example.wakeup(T0 + timedelta(minutes=3), cursor)

    assert observed == ["api", "reports"]


def test_the_wakeup_sensor_fires_once_when_a_deadline_passed(example: Example) -> None:
    cursor = settled(example)

    first = example.wakeup(T0 + timedelta(minutes=11), cursor)
    again = example.wakeup(T0 + timedelta(minutes=11, seconds=15), first.cursor)

    assert woken(first) == ["api", "reports", "web"]
    assert woken(again) == []


def test_the_wakeup_sensor_fires_once_when_a_sync_window_opens(example: Example) -> None:
    freeze = "  syncWindows: [{kind: deny, schedule: '0 12 * * *', duration: 30m}]\n"
    commit_files(example.repo, {"releases/web.yaml": release_yaml("web", spec_extra=freeze)})
    example.tick(T0)  # 12:00: the freeze holds web's first render
    closed = example.wakeup(T0 + timedelta(minutes=10), None)

    opened = example.wakeup(T0 + timedelta(minutes=30), closed.cursor)
    again = example.wakeup(T0 + timedelta(minutes=31), opened.cursor)

    assert "web" not in woken(closed)  # (the others wake by their own causes)
    assert "web" in woken(opened)
    assert "web" not in woken(again)


def test_the_wakeup_sensor_wakes_a_waiting_dependent_once_its_dependency_changes(
    example: Example,
) -> None:
    waits = POLICY + "  dependsOn: [api]\n"
    commit_files(example.repo, {"releases/web.yaml": release_yaml("web", spec_extra=waits)})
    example.tick(T0)  # web waits for api
    cursor = example.wakeup(T0 + timedelta(minutes=1), None).cursor
    example.play_controller("api")
    run_tick(example.root, example.state, T0 + timedelta(minutes=1), ["api"])  # Succeeded

    woke = example.wakeup(T0 + timedelta(minutes=2), cursor)
    again = example.wakeup(T0 + timedelta(minutes=2, seconds=15), woke.cursor)

    assert "web" in woken(woke)
    assert "web" not in woken(again)


def test_the_wakeup_sensor_fires_when_a_source_changes(example: Example) -> None:
    cursor = settled(example)
    commit_files(example.repo, {"apps/api/deployment.yaml": DEPLOYMENT.replace("IMAGE", "2.0")})

    assert woken(example.wakeup(T0 + timedelta(minutes=2), cursor)) == ["api"]


def test_the_wakeup_sensor_wakes_new_releases_at_once(example: Example) -> None:
    result = example.wakeup(T0, None)

    assert woken(result) == ["api", "reports", "web"]
    assert json.loads(result.cursor or "{}").keys() == {"api", "reports", "web"}


def materialize_reports(example: Example, tags: dict[str, str]) -> dict[str, Any]:
    example.instance.add_dynamic_partitions("releases", ["reports"])
    result = example.materialize("reports", tags=tags)
    # Progressing or waiting: pending, an observation; no materialization (no verdict).
    assert result.get_asset_materialization_events() == []
    (event,) = result.get_asset_observation_events()
    observation = event.asset_observation_data.asset_observation
    return {k: v.value for k, v in observation.metadata.items()}


def test_a_manual_materialization_is_a_forced_sync(example: Example) -> None:
    found = materialize_reports(example, {})

    assert found["forced"] is True
    assert found["applied"] is True
    assert found["reason"] == "Synced"
    assert found["state"] == "Progressing"


def test_a_forced_sync_records_the_release_s_state_check_after_it(example: Example) -> None:
    example.instance.add_dynamic_partitions("releases", ["reports"])

    def force(minutes: int) -> dg.ExecuteInProcessResult:
        return example.materialize("reports", T0 + timedelta(minutes=minutes))

    # Synced, rolling out, no verdict yet: observed; no check result (with no
    # materialization to judge, Dagster would count a warning as failed).
    first = force(0)
    assert sorted(observations(first)) == ["reports"]
    assert first.get_asset_check_evaluations() == []

    example.play_controller("reports")
    healthy = force(1)
    (passed,) = healthy.get_asset_check_evaluations()
    assert materializations(healthy)["reports"]["state"] == "Succeeded"
    assert (passed.partition, passed.passed) == ("reports", True)
    assert passed.target_materialization_data is not None

    new_render = DEPLOYMENT.replace("IMAGE", "2.0")
    commit_files(example.repo, {"apps/reports/deployment.yaml": new_render})
    rolling = force(2)
    (check,) = rolling.get_asset_check_evaluations()
    # Pending after a verdict: a warning that judges no materialization (not evaluated).
    assert (check.partition, check.passed) == ("reports", False)
    assert check.severity is dg.AssetCheckSeverity.WARN
    assert check.target_materialization_data is None
    assert check.description == "Progressing (NewRender): Synced: 1 objects applied"
    assert materializations(rolling) == {}  # the partition keeps its last verdict
    assert example.instance.get_materialized_partitions(RELEASE_KEY) == {"reports"}


def test_a_forced_sync_that_errors_records_its_events_then_fails_its_run(
    example: Example,
) -> None:
    broken = release_yaml("broken").replace("cluster: staging", "cluster: nowhere")
    commit_files(example.repo, {"releases/broken.yaml": broken})
    example.instance.add_dynamic_partitions("releases", ["broken"])
    result = example.materialize("broken", raise_on_error=False)

    # Read from the instance: the events the UI shows, stored before the step failed.
    events = [e.dagster_event for e in example.instance.all_logs(result.run_id)]
    (mat,) = [
        e.step_materialization_data.materialization
        for e in events
        if e and e.is_step_materialization
    ]
    (check,) = [
        e.asset_check_evaluation_data
        for e in events
        if e and e.event_type_value == "ASSET_CHECK_EVALUATION"
    ]
    (failure,) = result.get_step_failure_events()
    assert not result.success
    assert mat.metadata["reason"].value == "ClusterNotFound"
    assert (check.passed, check.severity) == (False, dg.AssetCheckSeverity.ERROR)
    assert check.target_materialization_data is not None
    assert "broken: never rolled out: ClusterNotFound: " in str(failure.step_failure_data.error)


def test_a_scheduled_materialization_is_not_a_forced_sync(example: Example) -> None:
    found = materialize_reports(example, {"dagster/schedule_name": "convoy_tick"})

    assert found["forced"] is False
    assert found["reason"] == "WaitingForManualSync"


def test_loading_and_running_the_definitions_prints_no_warning(example: Example) -> None:
    """The project's own configuration and definitions make no console noise (every
    warning shown, as a user's first run would)."""
    code = (
        "from convoy_batch.definitions import build_definitions\n"
        f"d = build_definitions(repo={str(example.root)!r}, state={str(example.state)!r})\n"
        "d.get_repository_def().get_job('convoy_tick')\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", code],
        capture_output=True,
        text=True,
        check=False,
        cwd=PROJECT,
    )
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr


def test_the_judged_materialization_is_the_record_dagster_stored() -> None:
    """The one private Dagster type the project uses (``assets.judged_materialization``):
    it must still import and name the record, or the Release view's colours are wrong."""

    @dg.asset
    def probe() -> None:
        return None

    instance = dg.DagsterInstance.ephemeral()
    assert dg.materialize([probe], instance=instance).success
    (record,) = instance.fetch_materializations(dg.AssetKey("probe"), limit=1).records
    target = judged_materialization(record)
    assert (target.run_id, target.storage_id, target.timestamp) == (
        record.run_id,
        record.storage_id,
        record.timestamp,
    )
    evaluation = dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey("probe"),
        check_name="state",
        passed=True,
        target_materialization_data=target,
    )
    assert evaluation.target_materialization_data == target
