"""Benchmark: convoy-batch ticks against a real kube-apiserver, next to kubectl.

N Releases (default 100), each a Namespace plus 5 objects (Deployment, Service, 3
ConfigMaps). In one run it prints the wall time of convoy-batch's ticks of every Release
(``--all``) with the number of write requests each sent: the first (everything
applied), the second (the first health of the new objects observed and recorded; there
is no kubelet, so they stay Progressing) and a steady-state tick (nothing changed since
the one before), next to ``kubectl apply --server-side`` of the same manifests
(in namespaces of their own) in a single call, first and again (steady); then kubectl
once per Release, first and steady. Each step's CPU seconds are printed beside it: the
client's (convoy-batch's process, or kubectl) and the test control plane's (API server,
etcd, controller-manager) meanwhile. On a machine whose cores both share, their sum over
the cores is the shortest a step can take.

The wall times on a small machine move by 20-30% from one moment to the next, so the
first-tick and single-call measurements are repeated in interleaved rounds
(``--rounds``, default 3), each with a new set of Releases and namespaces, and the best
and the median of the rounds are printed, with the ratio of convoy-batch to kubectl in
each round. Who goes first alternates from round to round, and every timed step starts
on a quiet machine: after a first apply the controller-manager keeps creating
ReplicaSets, Pods and service accounts for about 20 seconds, which would otherwise fall
on the next step. kubectl per Release runs once (it takes half a minute).

Without ``--kubeconfig`` it starts the project's test control plane
(``scripts/k8s-testenv start``) on free ports and stops it at the end. kubectl is
Debian's 1.20 (``scripts/k8s-testenv kubectl``) unless ``--kubectl`` says otherwise.

    python bench/k8s_tick.py [--releases N] [--rounds R] [--kubeconfig PATH] [--kubectl PATH]
"""

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path

from tick import app_files, build_repo  # bench/tick.py, next to this script

from convoy_batch.deployers import kubeapi
from convoy_batch.ticks.runner import run_tick
from convoy_batch.timefmt import parse_time

T0 = parse_time("2026-11-29T12:00:00Z")
SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "k8s-testenv"

NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata: {name: ${namespace}}\n"


def rendered(name: str, namespace: str) -> str:
    """The Release's manifests as kubectl gets them (namespaces written out)."""
    docs = [NAMESPACE.replace("${namespace}", namespace)]
    for text in app_files().values():
        text = text.replace("${release}", name).replace("${env}", "bench")
        text = text.replace("${replicas}", "2")
        for doc in text.split("---\n"):
            docs.append(
                doc.replace("metadata: {name:", f"metadata: {{namespace: {namespace}, name:")
            )
    return "---\n".join(docs)


def allow(kubeconfig: Path) -> None:
    """Let this process's ticks read ``kubeconfig``: a Cluster names an absolute one only
    under a root of the operator's kubeconfigs file (``$CONVOY_KUBECONFIGS``)."""
    roots = kubeconfig.resolve().parent / "kubeconfigs.yaml"
    roots.write_text(f"roots: ['{kubeconfig.resolve().parent}']\n")
    os.environ["CONVOY_KUBECONFIGS"] = str(roots)


def build(root: Path, prefix: str, releases: int, kubeconfig: Path) -> None:
    """bench/tick.py's repository, each Release with its Namespace, on the API server."""
    allow(kubeconfig)
    build_repo(
        root,
        releases,
        prefix=prefix,
        cluster=f"{{vars: {{env: bench}}, kubernetes: {{kubeconfig: '{kubeconfig}'}}}}",
        extra={"namespace.yaml": NAMESPACE},
    )


@contextmanager
def control_plane(folder: Path) -> Iterator[Path]:
    """The project's test control plane on free ports; yields its kubeconfig."""
    env = {**os.environ, "CONVOY_K8S_PORT": "auto"}  # free ports, picked by the script
    done = subprocess.run(
        [str(SCRIPT), "start", str(folder)], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"cannot start the test control plane: {done.stderr.strip()}")
    try:
        yield folder / "kubeconfig"
    finally:
        subprocess.run([str(SCRIPT), "stop", str(folder)], env=env, check=False)


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) CPU time of the machine so far, from /proc/stat; None elsewhere."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def settle(window: float = 1.0, busy_below: float = 0.1, limit: float = 90.0) -> None:
    """Wait until the machine is quiet: after 100 Releases' objects are created, the
    controller-manager goes on creating their ReplicaSets, Pods and service accounts for
    about 20 seconds, which would fall on whatever is timed next. Quiet is at most
    ``busy_below`` of the machine's CPU time busy over ``window`` seconds."""
    deadline = time.monotonic() + limit
    before = _cpu_jiffies()
    while before is not None and time.monotonic() < deadline:
        time.sleep(window)
        after = _cpu_jiffies()
        if after is None or after[1] == before[1]:
            return
        if (after[0] - before[0]) / (after[1] - before[1]) < busy_below:
            return
        before = after


CONTROL_PLANE = ("apiserver", "etcd", "controller-manager")
"""The processes of the test control plane, by their pid files in its folder."""


def server_cpu(folder: Path | None) -> float | None:
    """CPU seconds the test control plane (API server, etcd, controller-manager) has used
    so far, from /proc; None for a control plane this bench did not start."""
    if folder is None:
        return None
    total = 0
    for name in CONTROL_PLANE:
        try:
            pid = (folder / f"{name}.pid").read_text().strip()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        total += int(fields[11]) + int(fields[12])  # utime and stime, in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


def client_cpu() -> float:
    """CPU seconds of this process and of its children waited for (kubectl) so far."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@dataclass
class Timed:
    wall: float
    detail: str
    client: float
    """CPU seconds of the client: convoy-batch's process, or kubectl."""
    server: float | None
    """CPU seconds of the control plane meanwhile (None: not measured)."""


def timed(fn: Callable[[], object], plane: Path | None = None) -> Timed:
    settle()
    client, server = client_cpu(), server_cpu(plane)
    start = time.perf_counter()
    detail = str(fn())
    wall = time.perf_counter() - start
    after = server_cpu(plane)
    spent = after - server if after is not None and server is not None else None
    return Timed(wall, detail, client_cpu() - client, spent)


class Kubectl:
    """``kubectl apply --server-side`` of the bench's manifests, in namespaces of its own."""

    def __init__(self, kubectl: str, kubeconfig: Path, work: Path, releases: int) -> None:
        self.kubectl = kubectl
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        self.work = work
        self.releases = releases

    def apply(self, path: Path) -> None:
        cmd = [self.kubectl, "apply", "--server-side", "-f", str(path)]
        subprocess.run(cmd, env=self.env, check=True, stdout=subprocess.DEVNULL)

    def single_file(self, prefix: str) -> Path:
        """Every Release's manifests in one file (namespaces ``<prefix>-NNNN``)."""
        path = self.work / f"{prefix}.yaml"
        docs = (rendered(f"app-{i:04d}", f"{prefix}-{i:04d}") for i in range(self.releases))
        path.write_text("---\n".join(docs))
        return path

    def per_release(self, prefix: str) -> Callable[[], None]:
        """One kubectl call per Release."""
        folder = self.work / prefix
        folder.mkdir()
        files = []
        for i in range(self.releases):
            path = folder / f"{prefix}-{i:04d}.yaml"
            path.write_text(rendered(f"app-{i:04d}", f"{prefix}-{i:04d}"))
            files.append(path)

        def run() -> None:
            for path in files:
                self.apply(path)

        return run


def convoy_tick(repo: Path, state: Path, minutes: int) -> Callable[[], str]:
    def run() -> str:
        before = kubeapi.write_count()
        counts = dict(kubeapi.COUNTS)
        report = run_tick(repo, state, T0 + timedelta(minutes=minutes), all_releases=True)
        errors = [h.outcome.message for h in report.handled if h.outcome.is_error]
        writes = kubeapi.write_count() - before
        first_error = f" first error: {errors[0]}" if errors else ""
        sent = {m: n - counts.get(m, 0) for m, n in kubeapi.COUNTS.items()}
        dry = sum(n for m, n in sent.items() if m.startswith("dry-run "))
        reads = sum(n for m, n in sent.items() if m == "GET")
        objects = 6 * len(report.handled)  # a Namespace and 5 objects each
        per = (
            f" per object: dry run {dry / objects:.2f}, write {writes / objects:.2f}, "
            f"read {reads / objects:.2f}"
            if objects
            else ""
        )
        return (
            f"reconciled={len(report.handled)} errors={len(errors)} writes={writes}"
            f"{per}{first_error}"
        )

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kubeconfig", type=Path, default=None)
    parser.add_argument("--kubectl", default=None, help="default: Debian's kubectl 1.20")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="convoy-k8s-bench-"))
    kubectl_path = (
        args.kubectl
        or subprocess.run(
            [str(SCRIPT), "kubectl"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    runs: dict[str, list[float]] = {}
    details: dict[str, str] = {}
    cpu: dict[str, list[tuple[float, float | None]]] = {}
    ratios: list[float] = []
    plane = work / "k8s" if args.kubeconfig is None else None
    with control_plane(work / "k8s") if args.kubeconfig is None else _given(args.kubeconfig) as kc:
        kubectl = Kubectl(kubectl_path, kc, work, args.releases)
        for n in range(args.rounds):
            repo, state = work / f"repo-{n}", work / f"state-{n}"
            build(repo, f"app{n}", args.releases, kc.resolve())
            single = kubectl.single_file(f"ks{n}")
            convoy: list[tuple[str, Callable[[], object]]] = [
                ("convoy-batch first tick", convoy_tick(repo, state, 0)),
                ("convoy-batch second tick", convoy_tick(repo, state, 1)),
                ("convoy-batch steady tick", convoy_tick(repo, state, 2)),
            ]
            by_kubectl: list[tuple[str, Callable[[], object]]] = [
                ("kubectl single call, first", partial(kubectl.apply, single)),
                ("kubectl single call, steady", partial(kubectl.apply, single)),
            ]
            # Who goes first alternates: neither always meets a cluster the other just grew.
            steps = convoy + by_kubectl if n % 2 == 0 else by_kubectl + convoy
            for label, fn in steps:
                step = timed(fn, plane)
                runs.setdefault(label, []).append(step.wall)
                cpu.setdefault(label, []).append((step.client, step.server))
                details[label] = step.detail if step.detail != "None" else ""
            first, single_call = runs["convoy-batch first tick"], runs["kubectl single call, first"]
            ratios.append(first[-1] / single_call[-1])
        each = kubectl.per_release("kr")
        for label in ("kubectl per Release, first", "kubectl per Release, steady"):
            step = timed(each, plane)
            runs[label], cpu[label] = [step.wall], [(step.client, step.server)]
    print(
        f"{args.releases} Releases x (Namespace + 5 objects), real kube-apiserver 1.20, "
        f"{args.rounds} rounds"
    )
    print(
        f"{'run':<30} {'best s':>7} {'median s':>9} {'client CPU':>11} {'server CPU':>11}"
        "  detail (last round)"
    )
    for label, walls in runs.items():
        client, server = _median_cpu(cpu[label])
        print(
            f"{label:<30} {min(walls):7.2f} {statistics.median(walls):9.2f} {client:11.2f} "
            f"{'-' if server is None else f'{server:.2f}':>11}  {details.get(label, '')}"
        )
    first, single = runs["convoy-batch first tick"], runs["kubectl single call, first"]
    steady = runs["convoy-batch steady tick"]
    print(
        f"first tick / kubectl single call: best {min(first) / min(single):.2f}, "
        f"median of rounds {statistics.median(ratios):.2f}, "
        f"per round {', '.join(f'{r:.2f}' for r in ratios)}"
    )
    print(
        f"steady tick / kubectl single call: best {min(steady) / min(single):.2f}, "
        f"median {statistics.median(steady) / statistics.median(single):.2f}"
    )
    cores = os.cpu_count() or 1
    for label in ("convoy-batch first tick", "kubectl single call, first"):
        client, server = _median_cpu(cpu[label])
        if server is not None:  # the machine's cores shared by the client and the server
            print(
                f"{label}: CPU of client and server {client + server:.2f} s over {cores} "
                f"cores, at least {(client + server) / cores:.2f} s "
                f"(median wall {statistics.median(runs[label]):.2f} s)"
            )


def _median_cpu(steps: list[tuple[float, float | None]]) -> tuple[float, float | None]:
    """The median CPU seconds of a step's rounds: client, server (None: not measured)."""
    servers = [s for _, s in steps if s is not None]
    client = statistics.median(c for c, _ in steps)
    return client, statistics.median(servers) if servers else None


@contextmanager
def _given(kubeconfig: Path) -> Iterator[Path]:
    yield kubeconfig


if __name__ == "__main__":
    main()
