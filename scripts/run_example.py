"""``make run``: set up the embedded example and run convoy-batch on it under ``dg dev``.

1. Makes a fresh state directory (default ``.convoy/example``) and, inside it, a fresh git
   repository ``repo/`` from the project's ``releases/`` folder (never committing into
   the project's own history); Dagster's instance (``DAGSTER_HOME``) is ``dagster/``
   inside it, with the project's ``dagster.yaml``.
2. Starts ``dg dev`` (Dagster's local instance: webserver, daemon, code server) with
   ``CONVOY_REPO`` and ``CONVOY_STATE`` set; the schedules and sensors are on by default.
3. Once api has rolled out to Succeeded, commits ``releases/updates/api-1.1.0/`` (an api
   image that the simulated controller fails), so that api rolls back automatically.
   Once search has rolled out (its verification by metrics succeeded), commits
   ``releases/updates/search-1.1.0/`` and makes the metrics endpoint answer a success
   rate of 0.5 for search, so that search 1.1.0 fails its verification and rolls back.
4. Serves the example's metrics (``/success-rate/<release>``: ``{"ratio": 0.99}``) on
   loopback; its address is the Cluster's variable ``metrics`` in the repository it makes.
5. Receives the notifications of the example's Alert (``alerts/everything.yaml``): a
   webhook on loopback, named in the state directory's ``providers.yaml`` (the operator's
   file) as the generic provider ``example-log``, that appends each event's summary to
   ``notifications.log`` in the state directory, one line each.

Stops ``dg dev`` on Ctrl-C (or SIGTERM). Does I/O: files, git, processes.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from convoy_batch.state.locks import Locks

PROJECT = Path(__file__).resolve().parent.parent
EXAMPLE = PROJECT / "releases"
UPDATES = EXAMPLE / "updates"
UPDATE_TIMEOUT_SECONDS = 600
DEFAULT_STATE = Path(".convoy/example")
NOTIFICATIONS = "notifications.log"
"""Where the example's receiver writes each notification, in the state directory."""
AUDIT_TRAIL = "git -C {repo} log --format='%h %ad %an: %s' --date=format:%T -- status/"
"""The README's audit-trail command: each status commit with its time."""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    return done.stdout.decode()


METRICS_PLACEHOLDER = "EXAMPLE_METRICS"
"""The Cluster variable ``metrics`` of the example as the project holds it."""


def make_example_repo(repo: Path, metrics: str = METRICS_PLACEHOLDER) -> Path:
    """A fresh git repository holding the example, with one commit; ``metrics``: the
    address of the example's metrics endpoint (the Cluster's variable)."""
    ignore = shutil.ignore_patterns("README.md", UPDATES.name)
    shutil.copytree(EXAMPLE, repo, ignore=ignore)
    cluster = repo / "clusters" / "staging.yaml"
    cluster.write_text(cluster.read_text().replace(METRICS_PLACEHOLDER, metrics))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "example")
    git(repo, "config", "user.email", "example@localhost")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "example GitOps repository")
    return repo


def prepare(state: Path, metrics: str) -> dict[str, str]:
    """A fresh state directory with the example repository and a Dagster home; the
    environment that ``dg dev`` runs with."""
    if state.exists():
        shutil.rmtree(state)
    state.mkdir(parents=True)
    repo = make_example_repo(state / "repo", metrics)
    home = state / "dagster"
    home.mkdir()
    shutil.copy(PROJECT / "dagster.yaml", home / "dagster.yaml")
    return {
        **os.environ,
        **kustomize_env(),
        "CONVOY_REPO": str(repo),
        "CONVOY_STATE": str(state),
        "DAGSTER_HOME": str(home),
    }


def kustomize_env() -> dict[str, str]:
    """The example's Kustomize Release needs kustomize v5: unless a ``kustomize`` is on
    PATH or $CONVOY_KUBECTL names a kubectl, the official kubectl 1.35 (kustomize v5,
    fetched once by scripts/k8s-testenv) is named in $CONVOY_KUBECTL."""
    if os.environ.get("CONVOY_KUBECTL") or shutil.which("kustomize"):
        return {}
    done = subprocess.run(
        [str(PROJECT / "scripts" / "k8s-testenv"), "kustomize-kubectl"],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        if shutil.which("kubectl"):
            return {}  # the one on PATH renders what its kustomize can
        print(">>> no kustomize or kubectl: the shop Release will fail to render", flush=True)
        return {}
    return {"CONVOY_KUBECTL": done.stdout.decode().strip()}


def rollout_state(repo: Path, release: str) -> str | None:
    """``status.rollout.state`` of a Release as committed at HEAD (None: no status yet)."""
    try:
        text = git(repo, "show", f"HEAD:status/{release}.yaml")
    except subprocess.CalledProcessError:
        return None
    for line in text.splitlines():
        if line.strip().startswith("state:"):
            return line.split(":", 1)[1].strip()
    return None


def commit_update(repo: Path, state: Path, update: Path) -> None:
    """Commit an update folder's files over the repository, under convoy-batch's repo
    lock (convoy-batch commits statuses to the same repository)."""
    with Locks(state).repo():
        # Written now (not with the update's own times): a file of the same size and time
        # as the one it replaces would look unchanged to git.
        shutil.copytree(update, repo, dirs_exist_ok=True, copy_function=shutil.copy)
        files = [str(p.relative_to(update)) for p in update.rglob("*") if p.is_file()]
        git(repo, "add", "--", *files)
        git(repo, "commit", "-q", "-m", f"{update.name}: a new render that fails")


def push_updates(repo: Path, state: Path, metrics: "ExampleMetrics", stop: threading.Event) -> None:
    """Wait for api, then search, to succeed, and commit each one's failing update
    (step 3): api's fails its health, search's its verification by metrics."""
    deadline = time.monotonic() + UPDATE_TIMEOUT_SECONDS
    waiting = {"api", "search"}
    while waiting and not stop.wait(2):
        if "api" in waiting and rollout_state(repo, "api") == "Succeeded":
            commit_update(repo, state, UPDATES / "api-1.1.0")
            print("\n>>> committed api 1.1.0 (it will fail): watch api roll back\n", flush=True)
            waiting.discard("api")
        if "search" in waiting and rollout_state(repo, "search") == "Succeeded":
            metrics.ratios["search"] = 0.5
            commit_update(repo, state, UPDATES / "search-1.1.0")
            print(
                "\n>>> committed search 1.1.0 (its success rate is 0.5): watch it fail its "
                "verification and roll back\n",
                flush=True,
            )
            waiting.discard("search")
        if time.monotonic() > deadline:
            print(f">>> {', '.join(sorted(waiting))} did not succeed in time", flush=True)
            return


class ExampleMetrics:
    """The example's metrics endpoint (step 4), in a thread of this process:
    ``GET /success-rate/<release>`` answers ``{"ratio": <ratio>}`` (0.99 unless set)."""

    def __init__(self) -> None:
        self.ratios: dict[str, float] = {}
        ratios = self.ratios

        class Metrics(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                release = self.path.rsplit("/", 1)[-1]
                body = json.dumps({"ratio": ratios.get(release, 0.99)}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def start_receiver(state: Path) -> ThreadingHTTPServer:
    """The example's notification receiver (step 4), in a thread of this process; the
    state directory's ``providers.yaml`` sends the example's Alert to it."""
    log = state / NOTIFICATIONS
    log.touch()

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                summary = str(json.loads(body)["summary"])
            except (ValueError, KeyError, TypeError):
                summary = body.decode(errors="replace")
            with log.open("a", encoding="utf-8") as out:
                out.write(f"{datetime.now():%H:%M:%S} {summary}\n")
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return  # the log file is the record

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    (state / "providers.yaml").write_text(
        f"providers:\n  example-log: {{type: generic, url: '{url}'}}\n"
    )
    return server


def dg_dev(env: dict[str, str], host: str, port: int) -> subprocess.Popen[bytes]:
    """``dg dev`` (``dagster dev`` is superseded by it) on the project's definitions.

    The module is named and the command runs from the state directory: the project's
    dagster.yaml is a template, not the instance (DAGSTER_HOME is), and Dagster warns about
    one in the folder it runs from; without ``-m``, ``dg dev`` would run from the project's
    folder (``[tool.dg]``)."""
    dg = Path(sys.executable).parent / "dg"
    command = [str(dg), "dev", "-m", "convoy_batch.definitions", "-h", host, "-p", str(port)]
    return subprocess.Popen(command, env=env, cwd=env["CONVOY_STATE"])


def explain(state: Path, host: str, port: int) -> None:
    """The banner; commands name the state directory as given (``make run``: relative)."""
    by_make = state == DEFAULT_STATE and Path.cwd() == PROJECT
    force = "make force RELEASE=reports, or " if by_make else ""
    print(
        f"""
convoy-batch example
  repository:  {(state / "repo").resolve()}
  state:       {state.resolve()}
  Dagster UI:  http://{host}:{port}   (schedules and sensors are on)
  runs that changed a Release: http://{host}:{port}/runs?q[]=tag%3Aconvoy%2Fchanged%3Dtrue
  failed runs:                 http://{host}:{port}/runs?q[]=status%3AFAILURE

  watch the audit trail:   {AUDIT_TRAIL.format(repo=state / "repo")}
  notifications:           {state / NOTIFICATIONS}
  force-sync reports:      {force}UI > Assets > release > Materialize > partition "reports"
  stop:                    Ctrl-C
""",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "state",
        nargs="?",
        default=DEFAULT_STATE,
        type=Path,
        help=f"the state directory, made afresh (default {DEFAULT_STATE})",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="the UI's address (default %(default)s)"
    )
    parser.add_argument(
        "--port", type=int, default=3000, help="the UI's port (default %(default)s)"
    )
    parser.add_argument(
        "--no-update", action="store_true", help="do not commit api 1.1.0 and search 1.1.0"
    )
    args = parser.parse_args(argv)
    state = args.state.resolve()
    metrics = ExampleMetrics()
    env = prepare(state, metrics.url)
    receiver = start_receiver(state)
    explain(args.state, args.host, args.port)
    # Started in the background by a shell, SIGINT may be ignored, and dg dev (which
    # maps SIGTERM to SIGINT) would then ignore both: restore it before it is inherited.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    server = dg_dev(env, args.host, args.port)
    # SIGTERM ends us like Ctrl-C, so dg dev is always stopped and awaited.
    signal.signal(signal.SIGTERM, lambda *_: server.send_signal(signal.SIGINT))
    stop = threading.Event()
    if not args.no_update:
        updater = threading.Thread(
            target=push_updates, args=(state / "repo", state, metrics, stop), daemon=True
        )
        updater.start()
    try:
        return server.wait()
    except KeyboardInterrupt:
        return server.wait()
    finally:
        stop.set()
        receiver.shutdown()
        metrics.server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
