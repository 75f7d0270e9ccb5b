"""What the Dagster UI shows of each Release, read through a real webserver's GraphQL API
(``dagster-webserver`` on loopback, the project's definitions, a sqlite instance in
tmp_path). Tick runs execute in this process against the same instance, with the
resource's fixed clock; the directory cluster's simulated controller turns a Deployment
available (or failed, when annotated) 20s after its apply.

The story: web succeeds; api succeeds, then a new render fails and is rolled back;
reports (Manual) waits for a forced sync; broken names a cluster that does not exist.
"""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from convoy_batch.assets import ConvoyResource, tick_job, tick_run_config
from convoy_batch.timefmt import format_time
from tests.support.dagster_dev import get, stop_group, wait_for
from tests.support.gitfixtures import commit_files, make_repo
from tests.support.loopback import free_port
from tests.support.scenario import DEPLOYMENT, PROJECT, T0, release_yaml

SIMULATED_CLUSTER = """\
apiVersion: convoy.dev/v1alpha1
kind: Cluster
metadata: {name: staging}
spec:
  simulate: {readyAfter: 20s, failAfter: 20s}
"""
POLICY = "  failurePolicy: {rollback: Auto, progressDeadline: 10m}\n"
MANUAL = "  syncPolicy: {mode: Manual}\n" + POLICY
FAILING = DEPLOYMENT.replace(
    "    metadata: {labels: {app: ${release}}}",
    "    metadata:\n      labels: {app: ${release}}\n"
    "      annotations: {convoy.dev/simulate: fail}",
).replace("IMAGE", "2.0")
APPS = ("web", "api", "reports")


@dataclass
class Story:
    root: Path
    state: Path
    home: Path
    runs: dict[str, dg.ExecuteInProcessResult]
    instance: dg.DagsterInstance


def tick(
    root: Path, state: Path, instance: dg.DagsterInstance, seconds: int, names: list[str]
) -> dg.ExecuteInProcessResult:
    resource = ConvoyResource(
        repo=str(root), state=str(state), now=format_time(T0 + timedelta(seconds=seconds))
    )
    return tick_job.execute_in_process(
        run_config=tick_run_config(names),
        instance=instance,
        resources={"convoy": resource},
        raise_on_error=False,
    )


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    base = tmp_path_factory.mktemp("ui")
    root, state, home = base / "repo", base / "state", base / "dagster"
    files = {"clusters/staging.yaml": SIMULATED_CLUSTER}
    for name, extra in (("web", POLICY), ("api", POLICY), ("reports", MANUAL)):
        files[f"apps/{name}/deployment.yaml"] = DEPLOYMENT.replace("IMAGE", "1.0")
        files[f"releases/{name}.yaml"] = release_yaml(name, spec_extra=extra)
    repo = make_repo(root, files)
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    instance = dg.DagsterInstance.from_config(str(home))
    runs = {
        "start": tick(root, state, instance, 0, list(APPS)),
        "healthy": tick(root, state, instance, 30, list(APPS)),
    }
    commit_files(repo, {"apps/api/deployment.yaml": FAILING}, "api 2.0: a render that fails")
    runs["new render"] = tick(root, state, instance, 60, list(APPS))
    runs["rollback"] = tick(root, state, instance, 90, list(APPS))
    runs["quiet"] = tick(root, state, instance, 120, list(APPS))
    broken = release_yaml("broken").replace("cluster: staging", "cluster: nowhere")
    commit_files(repo, {"releases/broken.yaml": broken}, "broken: a cluster that is not there")
    runs["error"] = tick(root, state, instance, 150, ["broken"])
    yield Story(root, state, home, runs, instance)
    instance.dispose()


@pytest.fixture(scope="module")
def graphql(story: Story) -> Iterator[Any]:
    """A real webserver over the story's instance and the project's definitions; yields a
    function that posts a query and returns its ``data``."""
    port = free_port()
    log = story.home / "webserver.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVOY_", "DAGSTER_"))}
    env.update(
        DAGSTER_HOME=str(story.home),
        CONVOY_REPO=str(story.root),
        CONVOY_STATE=str(story.state),
        PYTHONPATH=str(PROJECT),
    )
    command = [sys.executable, "-m", "dagster_webserver", "-m", "convoy_batch.definitions"]
    command += ["-h", "127.0.0.1", "-p", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            url = f"http://127.0.0.1:{port}/graphql"
            wait_for("webserver", lambda: get(f"http://127.0.0.1:{port}/server_info"), 90, log)

            def query(text: str) -> Any:
                raw = get(url, {"query": text})
                assert raw is not None, log.read_text(errors="replace")[-3000:]
                answer = json.loads(raw)
                assert "errors" not in answer, answer["errors"]
                return answer["data"]

            yield query
        finally:
            stop_group(process)


PARTITION_STATUSES = """
{ assetNodeOrError(assetKey: {path: ["release"]}) { ... on AssetNode {
  assetCheckOrError(checkName: "state") { ... on AssetCheck {
    partitionKeysByDimension { partitionKeys }
    partitionStatuses { ... on AssetCheckDefaultPartitionStatuses {
      succeededPartitions failedPartitions inProgressPartitions skippedPartitions
      executionFailedPartitions } } } } } } }
"""
"""The fields of the UI's own query for a check's Partitions tab."""


def latest_execution(graphql: Any, name: str) -> dict[str, Any]:
    data = graphql(
        '{ assetCheckExecutions(assetKey: {path: ["release"]}, checkName: "state", '
        f'partition: "{name}", limit: 1) {{ status evaluation {{ severity description '
        "metadataEntries { label ... on TextMetadataEntry { text } } } } }"
    )
    (execution,) = data["assetCheckExecutions"]
    return dict(execution)


def metadata(execution: dict[str, Any]) -> dict[str, str]:
    entries = execution["evaluation"]["metadataEntries"]
    return {e["label"]: e["text"] for e in entries if "text" in e}


def test_each_release_reads_passed_failed_or_pending_in_the_state_check(graphql: Any) -> None:
    check = graphql(PARTITION_STATUSES)["assetNodeOrError"]["assetCheckOrError"]
    (dimension,) = check["partitionKeysByDimension"]
    statuses = check["partitionStatuses"]

    assert sorted(dimension["partitionKeys"]) == ["api", "broken", "reports", "web"]
    assert statuses["succeededPartitions"] == ["web"]
    assert sorted(statuses["failedPartitions"]) == ["api", "broken"]
    # Progressing and waiting: neither passed nor failed (pending).
    reported = {key for keys in statuses.values() for key in keys}
    assert "reports" not in reported


ASSET_PARTITION_STATUSES = """
{ assetNodeOrError(assetKey: {path: ["release"]}) { ... on AssetNode {
  assetPartitionStatuses { ... on DefaultPartitionStatuses {
    materializedPartitions failedPartitions materializingPartitions
    unmaterializedPartitions } } } } }
"""
"""The fields of the UI's own query for the asset's Partitions tab."""

CATALOG_PARTITION_STATS = """
{ assetNodes(assetKeys: [{path: ["release"]}]) {
  partitionStats { numMaterialized numMaterializing numPartitions numFailed } } }
"""
"""The fields of the UI's own query for the Catalog's row of the asset."""


def test_the_partitions_tab_shows_each_release_s_last_verdict(graphql: Any) -> None:
    node = graphql(ASSET_PARTITION_STATUSES)["assetNodeOrError"]
    statuses = node["assetPartitionStatuses"]

    # Rolled back, erroring: red. Healthy: green. Waiting, no verdict yet: grey, "Missing".
    assert sorted(statuses["failedPartitions"]) == ["api", "broken"]
    assert "web" in statuses["materializedPartitions"]
    assert statuses["unmaterializedPartitions"] == ["reports"]
    assert not {"web", "reports"} & set(statuses["failedPartitions"])
    assert statuses["materializingPartitions"] == []


def test_the_catalog_counts_the_failed_and_the_missing_releases(graphql: Any) -> None:
    (node,) = graphql(CATALOG_PARTITION_STATS)["assetNodes"]
    stats = node["partitionStats"]

    assert stats["numPartitions"] == 4
    assert stats["numFailed"] == 2  # api, broken
    assert stats["numMaterializing"] == 0
    assert stats["numMaterialized"] == 1  # web (a failed partition is not counted)
    # What the Catalog shows as "Missing": reports, waiting, no verdict yet.
    assert stats["numPartitions"] - stats["numMaterialized"] - stats["numFailed"] == 1


@pytest.mark.parametrize(
    ("name", "status", "severity", "glance", "state", "reason"),
    [
        ("web", "SUCCEEDED", "ERROR", "passed", "Succeeded", "Synced"),
        ("api", "FAILED", "ERROR", "failed", "RolledBack", "RolledBack"),
        ("broken", "FAILED", "ERROR", "failed", None, "ClusterNotFound"),
    ],
    ids=["succeeded-passes", "rolled-back-fails", "error-fails"],
)
def test_a_release_s_view_says_its_state_reason_and_message(
    graphql: Any,
    name: str,
    status: str,
    severity: str,
    glance: str,
    state: str | None,
    reason: str,
) -> None:
    execution = latest_execution(graphql, name)
    evaluation = execution["evaluation"]
    found = metadata(execution)

    assert (execution["status"], evaluation["severity"]) == (status, severity)
    assert (found["glance"], found.get("state"), found["reason"]) == (glance, state, reason)
    # The description is the one line a person reads: state, reason and message.
    assert evaluation["description"].startswith(f"{state} (" if state else "never rolled out")
    assert reason in evaluation["description"]
    assert found["message"] and evaluation["description"].endswith(found["message"])


LATEST_OBSERVATION = """
{{ assetOrError(assetKey: {{path: ["release"]}}) {{ ... on Asset {{
  assetObservations(partitions: ["{name}"], limit: 1) {{ description
    metadataEntries {{ label ... on TextMetadataEntry {{ text }} }} }} }} }} }}
"""


def test_a_waiting_release_says_why_in_its_observation_and_has_no_verdict(
    graphql: Any,
) -> None:
    (observation,) = graphql(LATEST_OBSERVATION.format(name="reports"))["assetOrError"][
        "assetObservations"
    ]
    found = {e["label"]: e["text"] for e in observation["metadataEntries"] if "text" in e}

    assert (found["state"], found["reason"]) == ("Progressing", "WaitingForManualSync")
    assert observation["description"] == (
        "reports: Progressing (NewRender): WaitingForManualSync: "
        "syncPolicy.mode is Manual: waiting for a forced sync"
    )
    # No check result: one with no materialization to judge would count as a failure.
    no_result = graphql(
        '{ assetCheckExecutions(assetKey: {path: ["release"]}, checkName: "state", '
        'partition: "reports", limit: 1) { status } }'
    )
    assert no_result["assetCheckExecutions"] == []


RUN_STATUS = '{{ runOrError(runId: "{run_id}") {{ ... on Run {{ status }} }} }}'
STEP_FAILURES = """
{{ logsForRun(runId: "{run_id}") {{ ... on EventConnection {{ events {{
  ... on ExecutionStepFailureEvent {{ error {{ message }} }} }} }} }} }}
"""


def run_status(graphql: Any, story: Story, run: str) -> str:
    data = graphql(RUN_STATUS.format(run_id=story.runs[run].run_id))
    return str(data["runOrError"]["status"])


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        ("start", "SUCCESS"),
        ("healthy", "SUCCESS"),
        ("new render", "SUCCESS"),
        ("rollback", "FAILURE"),
        ("quiet", "SUCCESS"),
        ("error", "FAILURE"),
    ],
)
def test_a_run_fails_when_a_release_rolled_back_or_errored_in_it(
    graphql: Any, story: Story, run: str, expected: str
) -> None:
    assert run_status(graphql, story, run) == expected


def test_the_failure_names_the_release_and_why(graphql: Any, story: Story) -> None:
    def failures(run: str) -> list[str]:
        data = graphql(STEP_FAILURES.format(run_id=story.runs[run].run_id))
        events = data["logsForRun"]["events"]
        return [e["error"]["message"] for e in events if e.get("error")]

    (rollback,) = failures("rollback")
    (error,) = failures("error")

    assert "api: RolledBack (" in rollback
    assert "web" not in rollback and "reports" not in rollback
    assert "broken: never rolled out: ClusterNotFound: " in error


FAILURE_DETAIL = """
{{ logsForRun(runId: "{run_id}") {{ ... on EventConnection {{ events {{
  ... on ExecutionStepFailureEvent {{ error {{ message stack errorChain {{ error {{ message }} }} }}
    failureMetadata {{ metadataEntries {{ label }} }} }} }} }} }} }}
"""
"""What the run's page shows of a step failure: the message, the stack printed under it,
any chained error, and the failure's metadata."""


@pytest.mark.parametrize("run", ["rollback", "error"])
def test_a_failed_run_says_why_in_one_line_without_a_stack_trace(
    graphql: Any, story: Story, run: str
) -> None:
    data = graphql(FAILURE_DETAIL.format(run_id=story.runs[run].run_id))
    (failure,) = [e for e in data["logsForRun"]["events"] if e.get("error")]
    error = failure["error"]

    assert error["stack"] == []
    assert error["errorChain"] == []
    assert len(error["message"].strip().splitlines()) == 1
    labels = [e["label"] for e in failure["failureMetadata"]["metadataEntries"]]
    assert labels == ["releases"]


def test_a_failed_run_leaves_tracebacks_as_they_were(story: Story) -> None:
    """The frames are left out of the failure only while Dagster records it."""
    assert getattr(sys, "tracebacklimit", None) is None


CHANGED_RUNS = """
{ runsOrError(filter: {tags: [{key: "convoy/changed", value: "true"}]}) {
  ... on Runs { results { runId } } } }
"""
"""The runs list filtered as the README's link filters it."""


def test_the_runs_that_changed_a_release_are_one_filter_away(graphql: Any, story: Story) -> None:
    found = {r["runId"] for r in graphql(CHANGED_RUNS)["runsOrError"]["results"]}

    changed = {story.runs[run].run_id for run in ("start", "healthy", "new render", "rollback")}
    assert found == changed | {story.runs["error"].run_id}
    assert story.runs["quiet"].run_id not in found


def test_a_materialization_s_line_names_its_release(story: Story) -> None:
    logs = story.instance.all_logs(story.runs["rollback"].run_id)
    (line,) = [
        e.dagster_event.message
        for e in logs
        if e.dagster_event and e.dagster_event.event_type_value == "ASSET_MATERIALIZATION"
    ]
    assert line is not None and line.startswith("api: RolledBack (Unhealthy): "), line


def test_a_quiet_tick_records_no_check_result(story: Story) -> None:
    def events(run: str) -> list[str]:
        logs = story.instance.all_logs(story.runs[run].run_id)
        return [e.dagster_event.event_type_value for e in logs if e.dagster_event]

    assert events("rollback").count("ASSET_CHECK_EVALUATION") == 1
    assert events("rollback").count("ASSET_MATERIALIZATION") == 1
    assert "ASSET_CHECK_EVALUATION" not in events("quiet")
    assert "ASSET_MATERIALIZATION" not in events("quiet")
