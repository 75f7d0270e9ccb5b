"""Verification by metrics through the CLI on the directory cluster (README
"Verification"): a render whose objects are all Current waits for its analyses, one
measurement per interval from a local web endpoint the test controls; success after
``count`` measurements, a failure beyond ``failureLimit`` rolls back, an inconclusive
verification holds until a forced sync promotes it, and a metrics outage (500, a
time-out, nothing listening) holds and never rolls back, then recovers."""

import importlib.util
import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import git
import pytest

from convoy_batch.ticks.wakeups import work_waiting
from convoy_batch.timefmt import format_time
from tests.support.loopback import Exchange, Loopback
from tests.support.metrics_servers import Exporter, Prometheus, prometheus_binary
from tests.support.needs import needs
from tests.support.scenario import FAILURE_POLICY, PROJECT, T0, Result, Scenario


class Endpoint:
    """A metrics endpoint on loopback: answers ``{"data": {"ratio": <value>}}`` with
    ``status`` (the test sets both), and counts the requests."""

    def __init__(self) -> None:
        self.value: Any = 1.0
        self.status = 200
        self.token: str | None = None  # set: a request without this bearer token is 401
        self.delay = threading.Event()  # set: answer only once the client gave up
        self.closed = threading.Event()
        self._server = Loopback(self._handle)
        self.url = f"{self._server.url}/metrics"

    def _handle(self, exchange: Exchange) -> None:
        if self.token and exchange.request.headers.get("Authorization") != f"Bearer {self.token}":
            exchange.reply(401)
        elif self.delay.is_set():
            self.closed.wait(3)  # beyond the analysis's timeout (1s)
            exchange.drop()
        else:
            exchange.json({"data": {"ratio": self.value}}, self.status)

    @property
    def requests(self) -> int:
        return len(self._server.requests)

    def close(self) -> None:
        self.closed.set()
        self._server.close()


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    e = Endpoint()
    yield e
    e.close()


def verification(url: str, extra: str = "") -> str:
    return (
        FAILURE_POLICY + "  verification:\n    analyses:\n"
        "    - name: success-rate\n"
        f"      provider: {{web: {{url: '{url}', jsonPath: '$.data.ratio', timeout: 2s}}}}\n"
        "      successCondition: result >= 0.95\n"
        "      interval: 1m\n      count: 3\n" + extra
    )


def rollout(s: Scenario) -> dict[str, Any]:
    return dict(s.status()["rollout"])


def applied_and_ready(s: Scenario, endpoint: Endpoint) -> None:
    """Release web with a verification against ``endpoint``, applied at minute 0; its
    Deployment then ready (not measured yet)."""
    s.app(spec_extra=verification(endpoint.url))
    s.reconcile("web", minutes=0)
    s.deployment_ready()


def test_a_render_is_succeeded_once_count_measurements_succeed(
    scenario: Scenario, endpoint: Endpoint
) -> None:
    s = scenario
    s.app(spec_extra=verification(endpoint.url))
    assert s.reconcile("web", minutes=0).code == 0
    assert endpoint.requests == 0  # not every object is Current yet
    s.deployment_ready()

    result = s.reconcile("web", minutes=1)

    assert result.code == 0, result.err
    assert rollout(s)["state"] == "Progressing"
    attempted = s.status()["lastAttempted"]
    assert attempted["reason"] == "WaitingForVerification"
    assert attempted["message"] == (
        "waiting for verification: success-rate: Running, 3 measurements to conclude"
    )
    block = s.status()["verification"]
    assert block["phase"] == "Running"
    assert (block["analyses"][0]["successful"], block["analyses"][0]["lastValue"]) == (1, "1.0")
    # plan and status show the analysis as the measurements have it.
    now = format_time(T0 + timedelta(minutes=1.5))
    plan = s.cli("plan", "web", "--now", now).out
    assert (
        "; verification Running: success-rate 1 successful 0 failed 0 inconclusive "
        "0 errors (last value 1.0), next measurement at 2026-11-29T12:02:00Z" in plan
    ), plan
    assert "outcome WaitingForVerification: waiting for verification: " in plan
    shown = s.cli("status", "web", "--now", now).out
    assert "(verification Running (" in shown, shown
    rows = json.loads(s.cli("status", "web", "--now", now, "--output", "json").out)
    assert rows[0]["verification"]["phase"] == "Running"
    head = s.head()
    assert s.reconcile("web", minutes=1.5).code == 0  # not due: no request, no commit
    assert endpoint.requests == 1 and s.head() == head
    assert s.reconcile("web", minutes=2).code == 0
    assert s.head() == head  # the phase did not change: no commit
    assert endpoint.requests == 2

    assert s.reconcile("web", minutes=3).code == 0

    assert rollout(s)["state"] == "Succeeded"
    assert s.status()["lastHealthy"]["renderRef"] == rollout(s)["renderRef"]
    block = s.status()["verification"]
    assert block["phase"] == "Successful"
    assert block["analyses"][0]["successful"] == 3
    assert endpoint.requests == 3
    assert s.reconcile("web", minutes=4).code == 0
    assert endpoint.requests == 3  # concluded: no more measurements
    table = s.cli("history", "web").out.splitlines()
    assert table[0].split()[-1] == "VERIFICATION"
    cells = [r.split()[-1] if r.endswith(" -") else r.split()[-2] for r in table[1:]]
    assert cells == ["-", "Running", "Successful"], table
    phases = [
        r["verification"] for r in json.loads(s.cli("history", "web", "--output", "json").out)
    ]
    assert [p.split()[0] if p else None for p in phases] == [None, "Running", "Successful"]


def test_a_failed_measurement_beyond_the_limit_rolls_back(
    scenario: Scenario, endpoint: Endpoint
) -> None:
    s = scenario
    applied_and_ready(s, endpoint)
    for minute in (1, 2, 3):
        s.reconcile("web", minutes=minute)
    healthy = rollout(s)["renderRef"]
    s.app(image="2.0", spec_extra=verification(endpoint.url))
    assert s.reconcile("web", minutes=4).code == 0
    s.deployment_ready()
    endpoint.value = 0.5

    result = s.reconcile("web", minutes=5)

    assert result.code == 0, result.err
    assert rollout(s)["state"] == "RolledBack"
    assert rollout(s)["reason"] == "VerificationFailed"
    assert rollout(s)["message"] == (
        "success-rate: 1 of 1 measurements failed (failureLimit 0), failed values 0.5"
    )
    assert s.status()["lastHealthy"]["renderRef"] == healthy
    live = s.live("web", "deployment.apps", "web")
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "example/web:1.0"
    assert s.status_log()[0].startswith("web: Progressing -> RolledBack (VerificationFailed)")
    # What a notification of that commit says (its message is the attempt's).
    assert s.status()["lastAttempted"]["message"].endswith(rollout(s)["message"])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("500", "/metrics: HTTP 500"),
        ("401", "/metrics: HTTP 401"),
        ("timeout", "/metrics: timed out"),
        ("stopped", "/metrics: cannot connect (connection refused)"),
        ("empty", "successCondition: result is empty: guard with size(result) > 0"),
    ],
)
def test_a_metrics_outage_holds_past_the_deadline_and_never_rolls_back(
    scenario: Scenario, endpoint: Endpoint, fault: str, error: str
) -> None:
    s = scenario
    spec = verification(endpoint.url).replace("timeout: 2s", "timeout: 1s")
    if fault == "empty":
        spec = spec.replace("result >= 0.95", "result[0] >= 0.95")
    s.app(spec_extra=spec)
    s.reconcile("web", minutes=0)
    s.deployment_ready()
    if fault in ("500", "401"):
        endpoint.status = int(fault)
    elif fault == "timeout":
        endpoint.delay.set()
    elif fault == "stopped":
        endpoint.close()
    else:
        endpoint.value = []

    for minute in (1, 2, 20):  # 20: past the 10m progress deadline
        result = s.reconcile("web", minutes=minute)
        assert result.code == 0, result.err
        assert rollout(s)["state"] == "Progressing"
        attempted = s.status()["lastAttempted"]
        assert attempted["reason"] == "WaitingForVerification"
        assert error in attempted["message"], attempted["message"]
    analysis = s.status()["verification"]["analyses"][0]
    assert analysis["errorsInARow"] >= 1 and analysis["successful"] == 0
    assert "RolledBack" not in " ".join(s.status_log())


def test_a_recovered_endpoint_concludes_the_verification(
    scenario: Scenario, endpoint: Endpoint
) -> None:
    s = scenario
    applied_and_ready(s, endpoint)
    endpoint.status = 503
    s.reconcile("web", minutes=1)
    endpoint.status = 200
    for minute in (2, 3, 4):
        assert s.reconcile("web", minutes=minute).code == 0
    assert rollout(s)["state"] == "Succeeded"
    analysis = s.status()["verification"]["analyses"][0]
    assert (analysis["successful"], analysis["errors"]) == (3, 1)


def test_an_inconclusive_verification_holds_until_a_forced_sync_promotes_it(
    scenario: Scenario, endpoint: Endpoint
) -> None:
    s = scenario
    spec = verification(endpoint.url, "      failureCondition: result < 0.5\n")
    s.app(spec_extra=spec.replace("progressDeadline: 10m", "progressDeadline: 1h"))
    s.reconcile("web", minutes=0)
    s.deployment_ready()
    endpoint.value = 0.8  # neither condition: inconclusive

    assert s.reconcile("web", minutes=1).code == 0

    assert rollout(s)["state"] == "Progressing"
    assert s.status()["verification"]["phase"] == "Inconclusive"
    attempted = s.status()["lastAttempted"]
    assert attempted["reason"] == "WaitingForVerification"
    assert "inconclusive (inconclusiveLimit 0)" in attempted["message"]
    assert s.reconcile("web", minutes=5).code == 0
    assert rollout(s)["state"] == "Progressing"

    assert s.reconcile("web", minutes=6, extra=("--force",)).code == 0

    assert rollout(s)["state"] == "Succeeded"
    assert "promoted by a forced sync" in s.status()["rollout"]["message"]
    assert (
        str(s.repo.head.commit.message)
        .rstrip("\n")
        .endswith(
            "\n\nPromoted by a forced sync: success-rate: 1 of 1 measurements inconclusive "
            "(inconclusiveLimit 0), last value 0.8"
        )
    )


@pytest.mark.parametrize(
    ("analysis", "error"),
    [
        ("{name: a, provider: {web: {url: 'http://x'}}}", "successCondition or failureCondition"),
        (
            "{name: a, provider: {web: {url: 'http://x'}}, successCondition: 'result >='}",
            "successCondition: ",
        ),
        (
            "{name: a, provider: {web: {url: 'http://x', body: 'x'}}, successCondition: 'true'}",
            "body: a GET request has no body",
        ),
        ("{name: a, provider: {graphite: {}}, successCondition: 'true'}", "graphite"),
        (
            "{name: a, provider: {web: {url: 'http://x'}}, successCondition: 'true', count: 0}",
            "count",
        ),
    ],
)
def test_an_analysis_refused_at_load_names_the_field(
    scenario: Scenario, analysis: str, error: str
) -> None:
    s = scenario
    s.app(spec_extra=FAILURE_POLICY + f"  verification: {{analyses: [{analysis}]}}\n")

    result = s.reconcile("web", minutes=0)

    assert result.code == 1
    attempted = s.status()["lastAttempted"]
    assert attempted["reason"] == "InvalidRelease"
    assert "releases/web.yaml: spec.verification.analyses.0" in attempted["message"]
    assert error in attempted["message"], attempted["message"]
    assert "\n" not in attempted["message"]


def test_a_measurement_due_wakes_its_release_between_its_intervals(
    scenario: Scenario, endpoint: Endpoint
) -> None:
    s = scenario
    s.app(spec_extra=verification(endpoint.url))  # the Release's interval: 5m
    assert s.reconcile(minutes=0).code == 0
    s.deployment_ready()
    assert s.reconcile(minutes=1).code == 0  # its health changed: measured
    assert endpoint.requests == 1
    assert s.reconcile(minutes=1.5).code == 0  # nothing due
    assert endpoint.requests == 1

    # What the Dagster schedule and wake-up sensor read: it is due at minute 2.
    assert work_waiting(s.root, s.state, T0 + timedelta(minutes=1.5)) == []
    assert work_waiting(s.root, s.state, T0 + timedelta(minutes=2)) == ["web (measurement due)"]

    assert s.reconcile(minutes=2).code == 0

    assert endpoint.requests == 2
    assert s.reconcile(minutes=3).code == 0
    assert rollout(s)["state"] == "Succeeded"


# --- Prometheus ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
@needs("prometheus")
def prometheus_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Exporter, Prometheus]]:
    """One exporter and one Prometheus scraping it for the module's tests."""
    binary = prometheus_binary()
    exporter = Exporter()
    server = Prometheus(binary, exporter, tmp_path_factory.mktemp("metrics") / "prometheus")
    yield exporter, server
    server.stop()
    exporter.close()


@pytest.fixture
def prometheus(
    prometheus_server: tuple[Exporter, Prometheus],
) -> tuple[Exporter, Prometheus]:
    """The module's Prometheus, its exporter's values cleared: a test waits (``seen``)
    for what it set, a series it did not set is gone at the next scrape."""
    prometheus_server[0].values.clear()
    return prometheus_server


QUERY = 'http_success_ratio{app="${release}"}'


def prometheus_spec(address: str, deadline: str = "1h") -> str:
    return (
        FAILURE_POLICY.replace("10m", deadline) + "  verification:\n    analyses:\n"
        "    - name: success-rate\n"
        f"      provider: {{prometheus: {{address: '{address}', query: '{QUERY}'}}}}\n"
        "      successCondition: result[0] >= 0.95\n"
        "      interval: 1m\n      count: 2\n"
    )


def tick_at(s: Scenario, at: datetime) -> Result:
    return s.cli("reconcile", "web", "--now", format_time(at))


def test_a_prometheus_query_verifies_a_render_and_a_failing_one_rolls_back(
    scenario: Scenario, prometheus: tuple[Exporter, Prometheus]
) -> None:
    s, (exporter, server) = scenario, prometheus
    exporter.values["web"] = "0.99"
    s.app(spec_extra=prometheus_spec(server.address))
    start = server.seen('http_success_ratio{app="web"}', "0.99")
    assert tick_at(s, start).code == 0
    s.deployment_ready()
    assert tick_at(s, start + timedelta(seconds=1)).code == 0
    assert s.status()["verification"]["analyses"][0]["lastValue"] == "[0.99]"
    assert tick_at(s, start + timedelta(minutes=1, seconds=1)).code == 0
    assert rollout(s)["state"] == "Succeeded"
    healthy = rollout(s)["renderRef"]

    s.app(image="2.0", spec_extra=prometheus_spec(server.address))
    exporter.values["web"] = "0.5"
    bad = server.seen('http_success_ratio{app="web"}', "0.5")
    assert tick_at(s, bad).code == 0
    s.deployment_ready()
    result = tick_at(s, bad + timedelta(seconds=1))

    assert result.code == 0, result.err
    assert rollout(s)["state"] == "RolledBack"
    assert rollout(s)["reason"] == "VerificationFailed"
    assert rollout(s)["message"] == (
        "success-rate: 1 of 1 measurements failed (failureLimit 0), failed values [0.5]"
    )
    assert s.status()["lastHealthy"]["renderRef"] == healthy


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (None, "successCondition: result is empty: guard with size(result) > 0"),
        ("NaN", "result is NaN"),
    ],
)
def test_an_empty_or_nan_prometheus_result_holds(
    scenario: Scenario, prometheus: tuple[Exporter, Prometheus], value: str | None, error: str
) -> None:
    s, (exporter, server) = scenario, prometheus
    exporter.values["web"] = value
    exporter.values["other"] = "1"  # something is scraped, so the empty vector is real
    s.app(spec_extra=prometheus_spec(server.address, deadline="1m"))
    server.seen('http_success_ratio{app="other"}', "1")
    start = server.seen('http_success_ratio{app="web"}', value)  # None: no sample
    assert tick_at(s, start).code == 0
    s.deployment_ready()

    for seconds in (1, 61, 121):  # 121: past the 1m progress deadline
        result = tick_at(s, start + timedelta(seconds=seconds))
        assert result.code == 0, result.err
        attempted = s.status()["lastAttempted"]
        assert attempted["reason"] == "WaitingForVerification"
        assert error in attempted["message"], attempted["message"]
    assert rollout(s)["state"] == "Progressing"


TOKEN = "s3cr3t-metrics-token"


def test_a_token_from_the_operators_file_is_sent_and_shown_nowhere(
    scenario: Scenario, endpoint: Endpoint
) -> None:
    s = scenario
    endpoint.token = TOKEN
    s.state.mkdir(exist_ok=True)
    (s.state / "metrics.token").write_text(TOKEN + "\n")
    (s.state / "credentials.yaml").write_text(
        "credentials: {metrics: {bearerToken: {file: metrics.token}, "
        f"urls: ['{endpoint.url}'], releases: [releases/web.yaml]}}}}\n"
    )
    spec = verification(endpoint.url).replace("timeout: 2s", "timeout: 2s, credentials: metrics")
    s.app(spec_extra=spec)
    s.reconcile("web", minutes=0)
    s.deployment_ready()
    outputs = [s.reconcile("web", minutes=m) for m in (1, 2, 3)]

    assert rollout(s)["state"] == "Succeeded"
    outputs += [s.cli(*c) for c in (("status",), ("plan", "web"), ("history", "web"))]
    for result in outputs:
        assert TOKEN not in result.out + result.err
    objects = s.repo.git.cat_file("--batch-all-objects", "--batch")
    assert TOKEN not in objects
    operator = {s.state / "metrics.token"}
    for path in s.state.rglob("*"):
        if path.is_file() and path not in operator:
            assert TOKEN.encode() not in path.read_bytes(), path
    # Without the credential the endpoint refuses: an error that holds, naming no token.
    (s.state / "credentials.yaml").write_text("credentials: {}\n")
    s.app(image="2.0", spec_extra=spec)
    s.reconcile("web", minutes=4)
    s.deployment_ready()
    s.reconcile("web", minutes=5)
    message = s.status()["lastAttempted"]["message"]
    assert "provider.web.credentials 'metrics': not defined in <state>/credentials.yaml" in (
        message
    ), message
    assert str(s.state) not in message


def test_the_examples_search_verifies_then_fails_its_update_and_rolls_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``make run``'s story of search, through the CLI: the simulated controller makes its
    Deployment available 20s after an apply, the example's metrics endpoint answers."""
    spec = importlib.util.spec_from_file_location(
        "run_example", PROJECT / "scripts" / "run_example.py"
    )
    assert spec is not None and spec.loader is not None
    run_example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_example)
    metrics = run_example.ExampleMetrics()
    try:
        repo = run_example.make_example_repo(tmp_path / "repo", metrics.url)
        state = tmp_path / "state"
        s = Scenario.__new__(Scenario)
        s.root, s.state, s.capsys, s.repo = repo, state, capsys, git.Repo(repo)

        def tick(seconds: int) -> None:
            at = format_time(T0 + timedelta(seconds=seconds))
            result = s.cli("reconcile", "search", "--now", at)
            assert result.code == 0, result.err

        for seconds in (0, 30, 50, 70):  # applied, available (measured), measured twice
            tick(seconds)
        assert s.status("search")["rollout"]["state"] == "Succeeded"
        metrics.ratios["search"] = 0.5
        run_example.commit_update(repo, state, run_example.UPDATES / "search-1.1.0")
        for seconds in (80, 110):  # 1.1.0 applied; available, measured: 0.5
            tick(seconds)

        rollout_now = s.status("search")["rollout"]
        assert (rollout_now["state"], rollout_now["reason"]) == ("RolledBack", "VerificationFailed")
        live = state / "clusters" / "staging" / "search" / "deployment.apps" / "search.yaml"
        assert "registry.example/search:1.0.0" in live.read_text()
    finally:
        metrics.server.shutdown()


SMOKE = """\
apiVersion: batch/v1
kind: Job
metadata: {name: smoke}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: smoke, image: "example/smoke:1", args: ["${release}"]}]
"""


def job_spec() -> str:
    return (
        FAILURE_POLICY + "  verification:\n    analyses:\n"
        "    - name: smoke\n"
        "      provider: {job: {manifest: ../../checks/smoke.yaml}}\n"
        "      successCondition: result == 'Complete'\n"
        "      interval: 1m\n      count: 1\n"
    )


def play_job(s: Scenario, name: str, condition: str) -> None:
    """Play the Job controller: the Job ``name`` ended with ``condition``."""
    import yaml

    path = s.object_path("web", "job.batch", name)
    job = yaml.safe_load(path.read_text())
    job["status"] = {"conditions": [{"type": condition, "status": "True", "message": "exit 1"}]}
    path.write_text(yaml.safe_dump(job))


def test_a_job_of_the_source_is_applied_once_per_render_and_its_end_is_the_measurement(
    scenario: Scenario,
) -> None:
    s = scenario
    s.commit({"checks/smoke.yaml": SMOKE}, "the smoke test")  # beside the app, not in it
    s.app(spec_extra=job_spec())
    s.reconcile("web", minutes=0)
    s.deployment_ready()
    first = s.status()["rollout"]["renderRef"].removeprefix("sha256:")[:8]

    assert s.reconcile("web", minutes=1).code == 0  # every object Current: the Job applied

    job = s.live("web", "job.batch", f"smoke-{first}")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["web"]
    assert job["metadata"]["labels"]["convoy.dev/release"] == "web"
    assert s.status()["lastAttempted"]["reason"] == "WaitingForVerification"
    assert s.reconcile("web", minutes=2).code == 0  # it runs: no measurement
    assert rollout(s)["state"] == "Progressing"
    play_job(s, f"smoke-{first}", "Complete")
    assert s.reconcile("web", minutes=3).code == 0
    assert rollout(s)["state"] == "Succeeded"

    s.app(image="2.0", spec_extra=job_spec())
    s.reconcile("web", minutes=4)
    s.deployment_ready()
    second = s.status()["rollout"]["renderRef"].removeprefix("sha256:")[:8]
    s.reconcile("web", minutes=5)  # its own Job
    play_job(s, f"smoke-{second}", "Failed")
    assert s.reconcile("web", minutes=6).code == 0

    assert (rollout(s)["state"], rollout(s)["reason"]) == ("RolledBack", "VerificationFailed")
    assert rollout(s)["message"] == (
        "smoke: 1 of 1 measurements failed (failureLimit 0), failed values Failed"
    )


def test_a_release_uses_an_analysis_its_cluster_shares_by_name(
    scenario: Scenario, endpoint: Endpoint
) -> None:
    s = scenario
    shared = (
        "  analyses:\n  - name: success-rate\n"
        f"    provider: {{web: {{url: '{endpoint.url}', jsonPath: '$.data.ratio'}}}}\n"
        "    successCondition: result >= 0.95\n    interval: 1m\n    count: 2\n"
    )
    cluster = (s.root / "clusters" / "staging.yaml").read_text()
    s.commit({"clusters/staging.yaml": cluster.rstrip("\n") + "\n" + shared}, "shared")
    s.app(spec_extra=FAILURE_POLICY + "  verification: {templates: [success-rate]}\n")
    s.reconcile("web", minutes=0)
    s.deployment_ready()
    for minute in (1, 2):
        assert s.reconcile("web", minutes=minute).code == 0
    assert rollout(s)["state"] == "Succeeded"
    assert endpoint.requests == 2

    s.app(spec_extra=FAILURE_POLICY + "  verification: {templates: [latency]}\n")
    result = s.reconcile("web", minutes=3)

    assert result.code == 1
    assert s.status()["lastAttempted"]["message"] == (
        "releases/web.yaml: spec.verification.templates.0: 'latency' is not an analysis "
        "of clusters/staging.yaml spec.analyses"
    )


def test_time_in_error_does_not_count_against_the_progress_deadline(
    scenario: Scenario, endpoint: Endpoint
) -> None:
    s = scenario
    applied_and_ready(s, endpoint)  # progressDeadline: 10m, from minute 0
    endpoint.status = 503
    for minute in range(1, 13):  # 11 minutes of errors: measured every minute
        assert s.reconcile("web", minutes=minute).code == 0
    endpoint.status = 200
    for minute in (13, 14):  # past 10m, but 11m of it was an outage: still waiting
        assert s.reconcile("web", minutes=minute).code == 0
        assert rollout(s)["state"] == "Progressing", s.status()["lastAttempted"]

    assert s.reconcile("web", minutes=15).code == 0

    assert rollout(s)["state"] == "Succeeded"


def test_the_dagster_view_carries_the_verification(scenario: Scenario, endpoint: Endpoint) -> None:
    from convoy_batch.assets import outcome_metadata
    from convoy_batch.ticks.runner import run_tick

    s = scenario
    applied_and_ready(s, endpoint)

    report = run_tick(s.root, s.state, T0 + timedelta(minutes=1), ["web"])

    shown = outcome_metadata(next(h for h in report.handled if h.name == "web"))
    assert shown["reason"] == "WaitingForVerification"
    ref = s.status()["rollout"]["renderRef"].removeprefix("sha256:")[:12]
    assert shown["verification"] == (
        f"verification Running ({ref}): success-rate: Running, 3 measurements to conclude"
    )
