"""``make run``'s script starts ``dagster dev`` on a free loopback port against a temporary
example repository: the UI answers, the tick schedule is evaluated (a run, or a skip that
says nothing waits), and the status commits are in the repository's git log. Everything
it started is stopped (the process group).

Waits are bounded polls of the UI and of git log; the schedule ticks on the minute, so
this takes up to about a minute.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

import pytest

from convoy_batch.definitions import NOTHING_WAITING

PROJECT = Path(__file__).resolve().parents[2]
SCRIPT = PROJECT / "scripts" / "run_example.py"
T = TypeVar("T")

SCHEDULE_TICKS = """
{ repositoriesOrError { ... on RepositoryConnection { nodes { schedules { name
  scheduleState { ticks(limit: 5) { status skipReason runIds } } } } } } }
"""
"""The ``convoy_tick`` schedule's evaluations, as **Automation > convoy_tick** lists them."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, log: Path) -> T:
    """Poll ``probe`` until it returns a value, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(1)
    tail = log.read_text(errors="replace")[-3000:]
    raise AssertionError(f"no {what} within {timeout:.0f}s; dagster dev output ends:\n{tail}")


def gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """Interrupt the whole process group as Ctrl-C does; then terminate stragglers (the
    code server outlives dagster dev until its heartbeat times out); kill what is left."""
    pgid = process.pid
    os.killpg(pgid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=30)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if gone(pgid):
            break
        os.killpg(pgid, sig)
        deadline = time.monotonic() + 10
        while not gone(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
    process.wait()
    assert gone(pgid)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[int, Path, Path]]:
    port = free_port()
    log = tmp_path / "dagster-dev.log"
    state = tmp_path / "example"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVOY_", "DAGSTER_"))}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, str(SCRIPT), str(state), "--port", str(port), "--no-update"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp_path,
            start_new_session=True,
        )
        try:
            yield port, state / "repo", log
        finally:
            stop_group(process)
    assert process.returncode is not None


def get(url: str, body: dict[str, Any] | None = None) -> bytes | None:
    data = json.dumps(body).encode() if body else None
    headers = {"Content-Type": "application/json"}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, headers), timeout=5) as r:
            response: IO[bytes] = r
            return response.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def status_commits(repo: Path) -> list[str] | None:
    done = subprocess.run(
        ["git", "-C", str(repo), "log", "--format=%an: %s", "--", "status/"],
        capture_output=True,
        text=True,
    )
    return done.stdout.splitlines() if done.returncode == 0 else None


def schedule_ticks(port: int) -> list[dict[str, Any]] | None:
    """The ``convoy_tick`` schedule's finished evaluations (none yet: None)."""
    raw = get(f"http://127.0.0.1:{port}/graphql", {"query": SCHEDULE_TICKS})
    if raw is None:
        return None
    nodes = json.loads(raw).get("data", {}).get("repositoriesOrError", {}).get("nodes", [])
    ticks = [
        tick
        for node in nodes
        for schedule in node["schedules"]
        if schedule["name"] == "convoy_tick"
        for tick in schedule["scheduleState"]["ticks"]
        if tick["status"] != "STARTED"
    ]
    return ticks or None


def test_dagster_dev_runs_scheduled_ticks_that_commit_statuses(
    running: tuple[int, Path, Path],
) -> None:
    port, repo, log = running

    wait_for("UI", lambda: get(f"http://127.0.0.1:{port}/server_info"), 60, log)
    commits = wait_for("status commit", lambda: status_commits(repo), 60, log)
    # The schedule's tick launches a run when something waits (a new Release), else
    # says why not: the example's Releases are due every 5 minutes, and the wake-up
    # sensor may have reconciled the new ones first.
    ticks = wait_for("a tick of the schedule", lambda: schedule_ticks(port), 80, log)

    assert all(
        (tick["status"], tick["skipReason"]) in {("SUCCESS", None), ("SKIPPED", NOTHING_WAITING)}
        for tick in ticks
    ), ticks
    assert any(c.startswith("convoy-batch: web: none -> Progressing") for c in commits)
    assert status_commits(repo) is not None
    # The example's Alert reaches make run's receiver: one line per event.
    told = wait_for("a notification", lambda: notified(repo.parent), 60, log)
    assert any(line.split(" ", 1)[1].startswith("web (staging): none -> Progressing")
               for line in told), told  # fmt: skip


def notified(state: Path) -> list[str] | None:
    """The lines of the example receiver's log (None while it has none)."""
    path = state / "notifications.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return lines or None
