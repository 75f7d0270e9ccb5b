"""Benchmark: how soon ``dg dev`` acts on a wake-up, and what it costs in CPU at idle.

Builds bench/tick.py's repository (default 3 Releases x 5 objects) on a directory cluster
without simulated controllers (the bench plays the Deployment controller by writing
``status``), gives ``dg dev`` a Dagster home of its own with the project's
``dagster.yaml`` and a free loopback port, and sets ``CONVOY_TICK_CRON`` to once a year,
so only the wake-up sensor starts runs. Once the first statuses are committed and every
Release has succeeded, each round makes two wake-ups of the first Release, each after a
random pause (so a change lands anywhere in the sensor's interval):

- commit: a new image in its source is committed (the status commit: Progressing);
- health: its Deployment's status says every replica is available (Succeeded).

For each wake-up it prints the seconds from the change (the commit made, the object file
written) to the wake-up sensor's evaluation that saw it, to the run being queued (the
sensor: the two together), dequeued, started (the run process up: queue + launch), and the
Release's status commit (seen in ``git log -- status/<name>.yaml``), read from the
instance's sensor ticks and run stats; then the median and max of each. Last, the CPU
seconds that ``dg dev``'s process group uses over ``--idle-seconds`` with nothing to
do (utime and stime from ``/proc``, reaped children included), per process.

``--sensor-interval`` sets ``CONVOY_WAKEUP_INTERVAL``; ``--dequeue-interval`` sets
``run_queue: dequeue_interval_seconds`` in the bench's copy of ``dagster.yaml``. Linux
only (``/proc``). Stops everything it started (the process group), also on Ctrl-C.

    python bench/wakeup.py [--rounds N] [--releases N] [--idle-seconds S]
        [--sensor-interval S] [--dequeue-interval S] [--keep DIR]
"""

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import dagster as dg
import yaml

# Not exported by dagster 1.13: the sensor's ticks say when each evaluation started.
from dagster._core.definitions.run_request import InstigatorType

# This checkout's package (not another one the environment installed) and the tests'
# helpers for dg dev.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tick import build_repo  # bench/tick.py, next to this script

from convoy_batch.definitions import WAKEUP_INTERVAL_SECONDS
from convoy_batch.deployers.directory import DirectoryDeployer, dump, load
from convoy_batch.models import ObjectKey
from convoy_batch.state.locks import Locks
from tests.support.dagster_dev import get, stop_group
from tests.support.loopback import free_port

PROJECT = Path(__file__).resolve().parents[1]
T = TypeVar("T")
YEARLY = "0 0 1 1 *"
"""The tick schedule's cron: not within a bench (the hourly full resync may still run)."""
SENSOR = "convoy_wakeups"
SENSOR_LOOP_SECONDS = 5
"""Dagster's sensor daemon evaluates sensors at most this often (1.13: a constant)."""
DEQUEUE_DEFAULT = 5
"""The queued run coordinator's ``dequeue_interval_seconds`` when not set."""
BUSY = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
STEPS = ("sensor wait", "sensor eval", "queue", "launch", "run", "total")
GROUPS = (
    ("visible -> run created (sensor)", ("sensor wait", "sensor eval")),
    ("created -> started (queue + launch)", ("queue", "launch")),
    ("started -> status committed", ("run",)),
    ("total", ("total",)),
)


@dataclass(frozen=True)
class Bench:
    """One bench's places and the ``dg dev`` it runs."""

    work: Path
    repo: Path
    state: Path
    home: Path
    log: Path
    names: list[str]


def poll(what: str, probe: Callable[[], T | None], timeout: float, every: float = 0.2) -> T:
    """``probe``'s first value that is not None or false, within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(every)
    raise TimeoutError(f"no {what} within {timeout:.0f}s")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    return done.stdout.decode()


# --- setting up -------------------------------------------------------------------------


def instance_yaml(dequeue: int | None) -> str:
    """The project's ``dagster.yaml``, with ``run_queue: dequeue_interval_seconds`` set."""
    text = (PROJECT / "dagster.yaml").read_text()
    if dequeue is None:
        return text
    config = yaml.safe_load(text)
    config.setdefault("run_queue", {})["dequeue_interval_seconds"] = dequeue
    return yaml.safe_dump(config, sort_keys=False)


def prepare(work: Path, releases: int, dequeue: int | None) -> Bench:
    repo, state, home = work / "repo", work / "state", work / "dagster"
    build_repo(repo, releases)
    names = sorted(p.stem for p in (repo / "releases").glob("*.yaml"))
    state.mkdir(mode=0o700)
    home.mkdir()
    (home / "dagster.yaml").write_text(instance_yaml(dequeue))
    return Bench(work, repo, state, home, work / "dagster-dev.log", names)


def environment(bench: Bench, sensor_interval: int | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVOY_", "DAGSTER_"))}
    env.update(
        CONVOY_REPO=str(bench.repo),
        CONVOY_STATE=str(bench.state),
        CONVOY_TICK_CRON=YEARLY,
        DAGSTER_HOME=str(bench.home),
        PYTHONPATH=os.pathsep.join(filter(None, [str(PROJECT), env.get("PYTHONPATH")])),
    )
    if sensor_interval is not None:
        env["CONVOY_WAKEUP_INTERVAL"] = str(sensor_interval)
    return env


@contextmanager
def dagster_dev(bench: Bench, env: dict[str, str]) -> Iterator[int]:
    """``dg dev`` on a free loopback port, in a process group of its own (stopped at
    the end); yields the group's id once the UI answers."""
    port = free_port()
    dg = Path(sys.executable).parent / "dg"
    command = [str(dg), "dev", "-m", "convoy_batch.definitions"]
    with bench.log.open("wb") as out:
        process = subprocess.Popen(
            [*command, "-h", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=bench.state,
            start_new_session=True,
        )
        try:
            poll("UI", lambda: get(f"http://127.0.0.1:{port}/server_info"), 120, every=1)
            yield process.pid
        finally:
            stop_group(process)


# --- the repository, the cluster, the instance ------------------------------------------


def state_of(repo: Path, name: str) -> str | None:
    """``status.rollout.state`` of a Release at HEAD (None: no status yet)."""
    try:
        status = yaml.safe_load(git(repo, "show", f"HEAD:status/{name}.yaml"))
    except subprocess.CalledProcessError:
        return None
    return (status.get("rollout") or {}).get("state")


def last_status_commit(repo: Path, name: str) -> str:
    return git(repo, "log", "-1", "--format=%H", "--", f"status/{name}.yaml").strip()


def commit_image(bench: Bench, name: str, tag: str) -> None:
    """A new image in the Release's source, committed under convoy-batch's repo lock."""
    workload = bench.repo / "apps" / name / "workload.yaml"
    text = workload.read_text()
    image = next(line for line in text.splitlines() if "image:" in line)
    with Locks(bench.state).repo():
        workload.write_text(text.replace(image, f"{image.rsplit(':', 1)[0]}:{tag}"))
        git(bench.repo, "commit", "-q", "-am", f"{name}: image {tag}")


def play_controller(bench: Bench, name: str) -> None:
    """Write the status a Deployment controller writes once every replica is available,
    atomically (a sensor may read the file meanwhile)."""
    deployer = DirectoryDeployer(bench.state / "clusters" / "bench")
    key = ObjectKey(api_version="apps/v1", kind="Deployment", namespace=name, name=name)
    path = deployer.path_of(key)
    obj: dict[str, Any] = dict(load(path) or {})
    replicas = obj["spec"]["replicas"]
    counts = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
    obj["status"] = {"observedGeneration": obj["metadata"]["generation"]}
    obj["status"].update(dict.fromkeys(counts, replicas))
    temp = path.with_name(f".{path.name}.bench.tmp")
    temp.write_text(dump(obj))
    temp.chmod(0o600)
    os.replace(temp, path)


def quiet(instance: dg.DagsterInstance) -> bool:
    return instance.get_runs_count(dg.RunsFilter(statuses=BUSY)) == 0


def sensor_ticks(instance: dg.DagsterInstance, after: float) -> list[Any]:
    """The wake-up sensor's ticks (evaluations) since ``after`` (epoch seconds)."""
    for state in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR):
        if state.instigator_name == SENSOR:
            return list(
                instance.get_ticks(state.instigator_origin_id, state.selector_id, after=after)
            )
    return []


def sensor_tick_start(instance: dg.DagsterInstance, run_id: str, after: float) -> float | None:
    """When the wake-up sensor's evaluation that requested ``run_id`` started."""
    return next((t.timestamp for t in sensor_ticks(instance, after) if run_id in t.run_ids), None)


def woken_run(instance: dg.DagsterInstance, name: str, after: float) -> str | None:
    """The first wake-up run for ``name`` queued after ``after`` (epoch seconds)."""
    created = datetime.fromtimestamp(after - 2, UTC)  # sqlite keeps whole seconds
    filters = dg.RunsFilter(tags={"convoy/woken": name}, created_after=created)
    found = []
    for record in instance.get_run_records(filters):
        stats = instance.get_run_stats(record.dagster_run.run_id)
        if stats.enqueued_time is not None and stats.enqueued_time >= after:
            found.append((stats.enqueued_time, record.dagster_run.run_id))
    return min(found)[1] if found else None


# --- one wake-up ------------------------------------------------------------------------


def wake_up(
    bench: Bench, instance: dg.DagsterInstance, change: Callable[[], None], pause: float
) -> dict[str, float]:
    """Make ``change`` to the first Release once nothing runs, after ``pause`` seconds;
    the seconds of each step until its status commit."""
    name = bench.names[0]
    settle(instance, pause)
    before = last_status_commit(bench.repo, name)
    change()
    visible = time.time()
    poll("status commit", lambda: last_status_commit(bench.repo, name) != before, 120)
    committed = time.time()
    run_id = poll("wake-up run", lambda: woken_run(instance, name, visible), 30)
    stats = instance.get_run_stats(run_id)
    evaluated = sensor_tick_start(instance, run_id, visible - 1)
    marks = [visible, evaluated, stats.enqueued_time, stats.launch_time, stats.start_time]
    if any(mark is None for mark in marks):
        raise RuntimeError(f"run {run_id}: missing times {marks}")
    times = [float(mark) for mark in marks if mark is not None] + [committed]
    steps = {label: times[i + 1] - times[i] for i, label in enumerate(STEPS[:-1])}
    return {**steps, "total": committed - visible}


def settle(instance: dg.DagsterInstance, pause: float) -> None:
    """Return once no run is queued or running, ``pause`` seconds after it was so."""
    while True:
        poll("quiet instance", lambda: quiet(instance), 120, every=0.5)
        time.sleep(pause)
        if quiet(instance):
            return


Result = tuple[str, dict[str, float]]


def rounds(bench: Bench, instance: dg.DagsterInstance, n: int, jitter: float) -> list[Result]:
    """``n`` rounds of a commit and a health change, each after a random pause of up to
    ``jitter`` seconds; (kind, steps) of each wake-up."""
    name = bench.names[0]
    results: list[Result] = []
    rng = random.Random(16)
    for i in range(n):
        changes: dict[str, Callable[[], None]] = {
            "commit": partial(commit_image, bench, name, f"2.{i}"),
            "health": partial(play_controller, bench, name),
        }
        for kind, change in changes.items():
            steps = wake_up(bench, instance, change, rng.uniform(0, jitter))
            results.append((kind, steps))
            show(len(results), kind, steps, state_of(bench.repo, name))
    return results


def warm_up(bench: Bench, instance: dg.DagsterInstance) -> None:
    """The first statuses (a wake-up of each new Release), then every Release healthy."""
    repo = bench.repo

    def states() -> set[str | None]:
        return {state_of(repo, name) for name in bench.names}

    # A run over 1,000 new Releases takes about 90 s; the sensor may split them in two.
    timeout = 120 + 0.5 * len(bench.names)
    poll("first statuses", lambda: None not in states(), timeout, every=1)
    settle(instance, 0)
    for name in bench.names:
        play_controller(bench, name)
    poll("every Release Succeeded", lambda: states() == {"Succeeded"}, timeout, every=1)


# --- CPU at idle ------------------------------------------------------------------------


def group_processes(pgid: int) -> Iterator[tuple[Path, list[str]]]:
    """The ``/proc`` folder of every process in the group, with the fields of its ``stat``
    after the command (the third is the group)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid:
            yield stat.parent, fields


def group_cpu(pgid: int) -> dict[int, tuple[str, float]]:
    """pid -> (command, CPU seconds: user and system, its reaped children's included) of
    every process in the group."""
    found: dict[int, tuple[str, float]] = {}
    for folder, fields in group_processes(pgid):
        try:
            cmdline = (folder / "cmdline").read_bytes()
        except OSError:
            continue
        ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
        found[int(folder.name)] = (_command(cmdline), ticks / CLOCK_TICKS)
    return found


def _command(cmdline: bytes) -> str:
    """The command line with each path shortened to its last part, cut at 60 characters."""
    args = [Path(a).name for a in cmdline.decode(errors="replace").split("\0") if a]
    return " ".join(args)[:60] or "?"


def idle_cpu(pgid: int, instance: dg.DagsterInstance, seconds: float) -> None:
    start = time.time()
    before = group_cpu(pgid)
    time.sleep(seconds)
    after = group_cpu(pgid)
    ticks = [t for t in sensor_ticks(instance, start) if t.end_timestamp]
    runs = instance.get_runs_count(dg.RunsFilter(created_after=datetime.fromtimestamp(start, UTC)))
    used = {pid: (cmd, cpu - before.get(pid, (cmd, 0.0))[1]) for pid, (cmd, cpu) in after.items()}
    total = sum(cpu for _, cpu in used.values()) - sum(
        cpu for pid, (_, cpu) in before.items() if pid not in after
    )
    share = 100 * total / seconds
    print(f"\nidle: {total:.2f} CPU s over {seconds:.0f} s ({share:.1f}% of a core)")
    if ticks:
        mean = statistics.mean(t.end_timestamp - t.timestamp for t in ticks)
        print(f"  {len(ticks)} evaluations of {SENSOR}, {mean:.2f} s each on average")
    print(f"  runs launched meanwhile: {runs}")
    for pid, (cmd, cpu) in sorted(used.items(), key=lambda item: -item[1][1]):
        if cpu >= 0.005:
            print(f"  {cpu:6.2f} s  pid {pid:<7} {cmd}")


# --- printing ---------------------------------------------------------------------------


def show(n: int, kind: str, steps: dict[str, float], state: str | None) -> None:
    cells = " ".join(f"{steps[label]:>11.2f}" for label in STEPS)
    print(f"{n:>3} {kind:<7}{cells}  {state}", flush=True)


def summary(results: Sequence[Result]) -> None:
    if not results:
        return
    print(f"\n{'':<38} {'median':>7} {'max':>7}   (s, {len(results)} wake-ups)")
    for label, parts in GROUPS:
        values = [sum(steps[p] for p in parts) for _, steps in results]
        print(f"{label:<38} {statistics.median(values):7.2f} {max(values):7.2f}")
    for label in STEPS[:-1]:
        values = [steps[label] for _, steps in results]
        print(f"  {label:<36} {statistics.median(values):7.2f} {max(values):7.2f}")


def intervals(bench: Bench, env: dict[str, str]) -> tuple[int, int]:
    """The wake-up sensor's interval and the run queue's dequeue interval, in seconds."""
    config = yaml.safe_load((bench.home / "dagster.yaml").read_text())
    dequeue = (config.get("run_queue") or {}).get("dequeue_interval_seconds", DEQUEUE_DEFAULT)
    sensor = env.get("CONVOY_WAKEUP_INTERVAL", WAKEUP_INTERVAL_SECONDS)
    return int(sensor), int(dequeue)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="commit + health (default 5)")
    parser.add_argument("--releases", type=int, default=3)
    parser.add_argument("--idle-seconds", type=float, default=60)
    parser.add_argument("--sensor-interval", type=int, default=None, help="seconds")
    parser.add_argument("--dequeue-interval", type=int, default=None, help="seconds")
    parser.add_argument("--keep", type=Path, default=None, help="work here (kept)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="convoy-wakeup-"))
    bench = prepare(work, args.releases, args.dequeue_interval)
    env = environment(bench, args.sensor_interval)
    sensor, dequeue = intervals(bench, env)
    print(
        f"{args.releases} Releases on a directory cluster; sensor interval {sensor} s, "
        f"dequeue interval {dequeue} s",
        flush=True,
    )
    try:
        with dagster_dev(bench, env) as pgid:
            instance = dg.DagsterInstance.from_config(str(bench.home))
            warm_up(bench, instance)
            print(f"\n{'':>11}" + " ".join(f"{label:>11}" for label in STEPS) + "  state")
            # The sensor daemon loops every 5 s at least: a change lands anywhere in it.
            jitter = max(sensor, SENSOR_LOOP_SECONDS)
            results = rounds(bench, instance, args.rounds, jitter)
            summary(results)
            poll("quiet instance", lambda: quiet(instance), 120, every=1)
            time.sleep(5)
            idle_cpu(pgid, instance, args.idle_seconds)
    except (TimeoutError, RuntimeError):
        print(bench.log.read_text(errors="replace")[-3000:], file=sys.stderr)
        raise
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
