"""Benchmark: a fleet tick in one process against the same tick sharded by Cluster.

Builds a GitOps repository of N Releases (default 10,000 x 5 objects) spread over C
directory Clusters (default 20), copies it, and runs on one copy the ticks in one process
(``reconcile``) and on the other the same ticks sharded (``reconcile --jobs J``, default
the number of cores): the first tick (every Release rolled out), the second (every
Release, its health seen for the first time), a quiet tick (due Releases only: none) and
a steady tick of every Release (``--all``, nothing changed).
Prints wall time and the peak memory of the process and of its largest worker; the
ratios are sharded against one process, measured in the same run.

With ``--kubernetes`` the Clusters are Kubernetes ones (default 200 Releases on 2
Clusters), each Release a Namespace and 5 objects: every Cluster is the project's test
API server (started as bench/k8s_tick.py starts it), so the Clusters are sets of
namespaces there, and the two repositories' Releases are named apart (``one-NNNN``,
``shd-NNNN``) so that they never share a namespace.

    python bench/fleet.py [--releases N] [--clusters C] [--jobs J] [--kubernetes] [--keep DIR]
"""

import argparse
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path
from types import ModuleType

from tick import T0, build_repo, measure  # bench/tick.py, next to this script

from convoy_batch.ticks.options import TickOptions
from convoy_batch.ticks.runner import run_tick
from convoy_batch.ticks.shards import run_sharded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=None, help="10,000 (200 on Kubernetes)")
    parser.add_argument("--clusters", type=int, default=None, help="20 (2 on Kubernetes)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--kubernetes", action="store_true", help="Clusters on the test API server")
    parser.add_argument("--keep", type=Path, default=None, help="build the repositories here")
    args = parser.parse_args()
    releases = args.releases or (200 if args.kubernetes else 10_000)
    clusters = args.clusters or (2 if args.kubernetes else 20)
    work = args.keep or Path(tempfile.mkdtemp(prefix="convoy-fleet-"))
    with _k8s().control_plane(work / "k8s") if args.kubernetes else nullcontext() as kubeconfig:
        started = time.perf_counter()
        build(work, releases, clusters, kubeconfig)
        kind = "Kubernetes Clusters (one API server)" if kubeconfig else "directory Clusters"
        print(
            f"{releases} Releases x 5 objects on {clusters} {kind} "
            f"(built in {time.perf_counter() - started:.0f} s); sharded: --jobs {args.jobs}"
        )
        compare(work, args.jobs, quiet_first=args.kubernetes)
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


def _k8s() -> ModuleType:
    """bench/k8s_tick.py, imported by the ``--kubernetes`` runs alone: each measured tick
    is a child forked from this process and holds what it imported, and the Kubernetes
    client (49 MiB) is nothing a tick of directory Clusters loads."""
    import k8s_tick  # bench/k8s_tick.py, next to this script

    return k8s_tick


def build(work: Path, releases: int, clusters: int, kubeconfig: Path | None) -> None:
    """The two repositories, ``one`` and ``sharded``: copies of one build on directory
    Clusters; on Kubernetes, built apart with Releases of other names."""
    if kubeconfig is None:
        build_repo(work / "one" / "repo", releases, clusters=clusters)
        shutil.copytree(work / "one", work / "sharded", symlinks=True)
        return
    _k8s().allow(kubeconfig)
    cluster = f"{{vars: {{env: bench}}, kubernetes: {{kubeconfig: '{kubeconfig.resolve()}'}}}}"
    for where, prefix in (("one", "one"), ("sharded", "shd")):
        extra = {"namespace.yaml": _k8s().NAMESPACE}
        build_repo(
            work / where / "repo", releases, prefix=prefix, cluster=cluster, extra=extra,
            clusters=clusters,
        )  # fmt: skip


def compare(work: Path, jobs: int, quiet_first: bool = False) -> None:
    """Each phase in one process, then sharded over ``jobs`` workers; with
    ``quiet_first``, each once the machine is quiet (after a first apply the API server's
    controller-manager works on for a while: bench/k8s_tick.py's ``settle``)."""

    def tick(where: str, minutes: int, all_releases: bool) -> Callable[[], object]:
        repo, state = work / where / "repo", work / where / "state"
        now = T0 + timedelta(minutes=minutes)

        def run() -> str:
            if where == "one":
                report = run_tick(repo, state, now, all_releases=all_releases)
            else:
                options = TickOptions(all_releases=all_releases)
                report = run_sharded(repo, state, now, jobs, options)
            errors = sum(1 for h in report.handled if h.outcome.is_error)
            workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            return (
                f"reconciled={len(report.handled)} errors={errors} "
                f"worker-peak-MiB={workers // 1024}"
            )

        return run

    phases = [
        ("first tick", 0, False),
        ("second tick (first health, --all)", 1, True),
        ("quiet tick (due Releases only)", 2, False),
        ("steady tick, every Release (--all)", 3, True),
    ]
    print(f"{'phase':<36} {'one s':>7} {'sharded s':>10} {'ratio':>6}  {'one MiB':>8}  sharded")
    for label, minutes, all_releases in phases:
        if quiet_first:
            _k8s().settle()
        one = measure(tick("one", minutes, all_releases))
        if quiet_first:
            _k8s().settle()
        sharded = measure(tick("sharded", minutes, all_releases))
        print(
            f"{label:<36} {one[0]:7.2f} {sharded[0]:10.2f} {sharded[0] / one[0]:6.2f}  "
            f"{one[1] // 1024:8d}  parent {sharded[1] // 1024} MiB, {sharded[2]}"
        )


if __name__ == "__main__":
    main()
