"""Benchmark: what ``make run`` costs once its stories have played out (idle).

Starts the example as ``make run`` does (``scripts/run_example.py --no-update``, in a
temporary state directory, on a free loopback port), waits until web, api and shop have
succeeded and reports waits for its forced sync, lets it settle, then prints, over
``--idle-seconds``: the CPU seconds the example's process group used (``dg dev``'s
webserver, daemon and code servers and every run's process, reaped ones included; from
``/proc``) as a share of one core, the runs launched, and the group's resident memory
(the sum of its processes' RSS, sampled every 5 s: mean and max). Linux only.

    python bench/idle_example.py [--idle-seconds S] [--settle-seconds S]
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg

# This checkout's package and the tests' helpers for dg dev, as bench/wakeup.py.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wakeup import group_cpu, group_processes  # bench/wakeup.py, next to this script

from tests.support.dagster_dev import get, stop_group
from tests.support.loopback import free_port

PROJECT = Path(__file__).resolve().parent.parent
READY = {"web": "Succeeded", "api": "Succeeded", "shop": "Succeeded", "reports": "Progressing"}


def group_rss(pgid: int) -> int:
    """The resident memory of every process in the group, in KiB."""
    total = 0
    for folder, _fields in group_processes(pgid):
        try:
            status = (folder / "status").read_text()
        except OSError:
            continue
        rss = [line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")]
        total += int(rss[0]) if rss else 0
    return total


def states(repo: Path) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in READY:
        done = subprocess.run(
            ["git", "-C", str(repo), "show", f"HEAD:status/{name}.yaml"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        lines = [s.split(":", 1)[1].strip() for s in done.stdout.splitlines() if "  state:" in s]
        found[name] = lines[0] if lines else None
    return found


def runs(home: Path) -> int:
    """The runs the example's Dagster instance holds."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return instance.get_runs_count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-seconds", type=float, default=180)
    parser.add_argument("--settle-seconds", type=float, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="convoy-idle-") as temp:
        state, port, log = Path(temp) / "example", free_port(), Path(temp) / "example.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, str(PROJECT / "scripts" / "run_example.py"), str(state),
                 "--port", str(port), "--no-update"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            try:
                deadline = time.monotonic() + 600
                while get(f"http://127.0.0.1:{port}/server_info") is None:
                    time.sleep(1)
                while states(state / "repo") != READY:
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise SystemExit(f"the example did not settle: {states(state / 'repo')}")
                    time.sleep(2)
                time.sleep(args.settle_seconds)
                before, runs_before = group_cpu(process.pid), runs(state / "dagster")
                samples, end = [], time.monotonic() + args.idle_seconds
                while time.monotonic() < end:
                    samples.append(group_rss(process.pid))
                    time.sleep(5)
                after, runs_after = group_cpu(process.pid), runs(state / "dagster")
            finally:
                stop_group(process)
    used = (
        sum(cpu for _, cpu in after.values())
        - sum(cpu for pid, (_, cpu) in before.items() if pid not in after)
        - sum(cpu for pid, (_, cpu) in before.items() if pid in after)
    )
    print(f"make run, idle over {args.idle_seconds:.0f} s (after {args.settle_seconds:.0f} s)")
    print(f"  CPU: {used:.1f} s, {100 * used / args.idle_seconds:.1f}% of a core")
    print(f"  runs launched: {runs_after - runs_before}")
    mib = [s / 1024 for s in samples]
    print(f"  resident memory: mean {statistics.mean(mib):.0f} MiB, max {max(mib):.0f} MiB")
    spent = {pid: cpu - before.get(pid, (cmd, 0.0))[1] for pid, (cmd, cpu) in after.items()}
    for pid, cpu in sorted(spent.items(), key=lambda item: -item[1]):
        if cpu >= 0.05:  # a parent's share holds its runs' processes, reaped
            print(f"  {cpu:6.2f} s  {after[pid][0]}")


if __name__ == "__main__":
    main()
