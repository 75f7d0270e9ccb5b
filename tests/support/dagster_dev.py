"""What the tests of a Dagster process share (``make run``'s ``dg dev``, the UI's
webserver, ``dg launch``): bounded waits, the UI's GraphQL and ``/server_info``, the example
repository's status commits, the ``convoy_tick`` schedule's evaluations, the example
receiver's log, stopping a process group as Ctrl-C does, and Dagster's warnings in a
process's output.
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

T = TypeVar("T")

SCHEDULE_TICKS = """
{ repositoriesOrError { ... on RepositoryConnection { nodes { schedules { name
  scheduleState { ticks(limit: 5) { status skipReason runIds } } } } } } }
"""
"""The ``convoy_tick`` schedule's evaluations, as **Automation > convoy_tick** lists them."""
DAGSTER_WARNING = re.compile(
    r"\b(?:Supersession|Deprecation|Preview|Beta)Warning\b"
    r"|virtual environment does not match the virtual environment found in the project"
)
"""A line of a warning that Dagster prints: a Python warning of a superseded, deprecated,
preview or beta API (``SupersessionWarning: Function `dev_command` is superseded ... Use
'dg dev' instead.``), or ``dg``'s that the project's virtualenv is not the active one."""


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, log: Path) -> T:
    """Poll ``probe`` until it returns a value, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(1)
    tail = log.read_text(errors="replace")[-3000:]
    raise AssertionError(f"no {what} within {timeout:.0f}s; the output ends:\n{tail}")


def gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """Interrupt the whole process group as Ctrl-C does; then terminate stragglers (the
    code server outlives ``dg dev`` until its heartbeat times out); kill what is left."""
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


def notified(state: Path) -> list[str] | None:
    """The lines of the example receiver's log (None while it has none)."""
    path = state / "notifications.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return lines or None


def dagster_warnings(output: str) -> list[str]:
    """The lines of a process's output that are Dagster's warnings (:data:`DAGSTER_WARNING`)."""
    return [line for line in output.splitlines() if DAGSTER_WARNING.search(line)]
