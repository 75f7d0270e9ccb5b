"""Benchmark: a fleet tick in one process against the same tick sharded by Cluster.

Builds a GitOps repository of N Releases (default 10,000 x 5 objects) spread over C
directory Clusters (default 20), copies it, and runs on one copy the ticks in one process
(``reconcile``) and on the other the same ticks sharded (``reconcile --jobs J``, default
the number of cores): the first tick (every Release rolled out), the second (every
Release, its health seen for the first time), a quiet tick (due Releases only: none) and
a steady tick of every Release (``--all``, nothing changed).
Prints wall time and the peak memory of the process and of its largest worker; the
ratios are sharded against one process, measured in the same run.

    python bench/fleet.py [--releases N] [--clusters C] [--jobs J] [--keep DIR]
"""

import argparse
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from tick import T0, build_repo, measure

from convoy_batch.runner import run_tick
from convoy_batch.shards import run_sharded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=10_000)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--keep", type=Path, default=None, help="build the repositories here")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="convoy-fleet-"))
    started = time.perf_counter()
    build_repo(work / "one" / "repo", args.releases, clusters=args.clusters)
    shutil.copytree(work / "one", work / "sharded", symlinks=True)
    print(
        f"{args.releases} Releases x 5 objects on {args.clusters} directory Clusters "
        f"(built in {time.perf_counter() - started:.0f} s); sharded: --jobs {args.jobs}"
    )

    def tick(where: str, minutes: int, all_releases: bool) -> Callable[[], object]:
        repo, state = work / where / "repo", work / where / "state"
        now = T0 + timedelta(minutes=minutes)

        def run() -> str:
            if where == "one":
                report = run_tick(repo, state, now, all_releases=all_releases)
                count = len(report.handled)
            else:
                report = run_sharded(repo, state, now, args.jobs, all_releases=all_releases)
                count = len(report.handled)
            workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            return f"reconciled={count} worker-peak-MiB={workers // 1024}"

        return run

    phases = [
        ("first tick", 0, False),
        ("second tick (first health, --all)", 1, True),
        ("quiet tick (due Releases only)", 2, False),
        ("steady tick, every Release (--all)", 3, True),
    ]
    print(f"{'phase':<36} {'one s':>7} {'sharded s':>10} {'ratio':>6}  {'one MiB':>8}  sharded")
    for label, minutes, all_releases in phases:
        one = measure(tick("one", minutes, all_releases))
        sharded = measure(tick("sharded", minutes, all_releases))
        print(
            f"{label:<36} {one[0]:7.1f} {sharded[0]:10.1f} {sharded[0] / one[0]:6.2f}  "
            f"{one[1] // 1024:8d}  parent {sharded[1] // 1024} MiB, {sharded[2]}"
        )
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
