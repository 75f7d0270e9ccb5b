"""Benchmark: one tick over N Releases on a directory cluster (default 1000 x 5 objects).

Prints wall time and peak memory of a first tick, a second one (the observer records
health for the first time), a steady-state tick that reconciles every Release (``--all``,
nothing changed) and a steady-state tick of due Releases only,
next to a baseline measured in the same run: parsing the same manifests with PyYAML's C
loader. Then the same Releases with drift rules on every object (a Cluster's rule for
every object, a Release's rule by kind and name pattern), whose steady tick is put next
to the one without rules. Each phase runs in a forked child so its peak RSS is its own.

    python bench/tick.py [--releases N] [--keep DIR]
"""

import argparse
import multiprocessing as mp
import resource
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path

import yaml

from convoy_batch.ticks.runner import run_tick
from convoy_batch.timefmt import parse_time

T0 = parse_time("2026-11-29T12:00:00Z")

OBJECTS = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: ${release}}
spec:
  replicas: ${replicas}
  selector: {matchLabels: {app: ${release}}}
  template:
    metadata: {labels: {app: ${release}}}
    spec:
      containers:
        - name: app
          image: example/${release}:1.0
          ports: [{containerPort: 8080, protocol: TCP}]
---
apiVersion: v1
kind: Service
metadata: {name: ${release}}
spec:
  selector: {app: ${release}}
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
"""
CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: ${release}-config-INDEX}
data: {env: ${env}, index: "INDEX", release: ${release}}
"""


DRIFT_CLUSTER = (
    "{vars: {env: bench}, drift: {ignore: [{paths: [/spec/replicas, /metadata/annotations/team]}]}}"
)
DRIFT_RELEASE = """\
  drift:
    mode: Correct
    ignore:
    - paths: [/data/index]
      target: {kind: ConfigMap, name: 'app-[0-9]+-.*'}
"""


def app_files() -> dict[str, str]:
    """One Release's source files: a Deployment and a Service, and 3 ConfigMaps."""
    files = {"workload.yaml": OBJECTS}
    files.update({f"config-{n}.yaml": CONFIGMAP.replace("INDEX", str(n)) for n in range(3)})
    return files


def build_repo(
    root: Path,
    releases: int,
    *,
    prefix: str = "app",
    cluster: str = "{vars: {env: bench}}",
    extra: Mapping[str, str] | None = None,
    render: str | None = None,
    clusters: int = 1,
    release_extra: str = "",
) -> list[str]:
    """A GitOps repository with N Releases ``<prefix>-NNNN`` of ``app_files()`` (and
    ``extra`` files) on ``clusters`` Clusters with spec ``cluster`` (``bench``, or
    ``bench-NN`` in turn), rendered by ``render`` (a ``spec.source.render`` in flow style;
    default Plain), each Release's spec ending with ``release_extra``; returns the
    manifest texts."""
    texts: list[str] = []
    names = ["bench"] if clusters == 1 else [f"bench-{c:02d}" for c in range(clusters)]
    write_clusters(root, names, cluster)
    for i in range(releases):
        name = f"{prefix}-{i:04d}"
        app = root / "apps" / name
        app.mkdir(parents=True)
        for file, text in {**app_files(), **(extra or {})}.items():
            (app / file).parent.mkdir(parents=True, exist_ok=True)
            (app / file).write_text(text)
            texts.append(
                text.replace("${release}", name)
                .replace("${env}", "bench")
                .replace("${replicas}", "2")
            )
        (root / "releases" / f"{name}.yaml").write_text(
            "apiVersion: convoy.dev/v1alpha1\nkind: Release\n"
            f"metadata: {{name: {name}}}\n"
            f"spec:\n  cluster: {names[i % len(names)]}\n  namespace: {name}\n"
            f"  source: {{path: apps/{name}{', render: ' + render if render else ''}}}\n"
            "  vars: {replicas: '2'}\n"
            "  failurePolicy: {progressDeadline: 10m}\n" + release_extra
        )
    commit_all(root)
    return texts


def write_clusters(root: Path, names: list[str], spec: str, metadata: str = "") -> None:
    """``clusters/<name>.yaml`` for each name (``spec`` and extra ``metadata`` in flow
    style), and the empty ``releases/``."""
    (root / "clusters").mkdir(parents=True)
    for name in names:
        (root / "clusters" / f"{name}.yaml").write_text(
            "apiVersion: convoy.dev/v1alpha1\nkind: Cluster\n"
            f"metadata: {{name: {name}{metadata}}}\nspec: {spec}\n"
        )
    (root / "releases").mkdir()


def commit_all(root: Path) -> None:
    """A git repository at ``root`` with everything in it as one commit."""
    git = ["git", "-C", str(root)]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "config", "user.name", "bench"], check=True)
    subprocess.run([*git, "config", "user.email", "bench@localhost"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    # git's automatic gc, which so many files start, runs before this returns, not in the
    # background (bench/fleet.py copies the repository next).
    subprocess.run([*git, "-c", "gc.autoDetach=false", "commit", "-q", "-m", "bench"], check=True)


def _child(fn: Callable[[], object], queue: "mp.Queue[tuple[float, int, str]]") -> None:
    start = time.perf_counter()
    detail = str(fn())
    wall = time.perf_counter() - start
    queue.put((wall, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, detail))


def measure(fn: Callable[[], object]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (KiB) and a detail string of ``fn`` run in a forked child."""
    ctx = mp.get_context("fork")
    queue: mp.Queue[tuple[float, int, str]] = ctx.Queue()
    proc = ctx.Process(target=_child, args=(fn, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def parse_floor(texts: list[str]) -> Callable[[], int]:
    """The baseline of a tick: parsing the same manifests with PyYAML's C loader."""

    def parse() -> int:
        return sum(1 for t in texts for _ in yaml.load_all(t, Loader=yaml.CSafeLoader))

    return parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=1000)
    parser.add_argument("--keep", type=Path, default=None, help="build the repository here")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="convoy-bench-"))
    repo, state = work / "repo", work / "state"
    texts = build_repo(repo, args.releases)
    ruled, ruled_state = work / "ruled", work / "ruled-state"
    build_repo(ruled, args.releases, cluster=DRIFT_CLUSTER, release_extra=DRIFT_RELEASE)
    n = args.releases

    baseline = parse_floor(texts)

    def tick(
        minutes: int, all_releases: bool, repo: Path = repo, state: Path = state
    ) -> Callable[[], object]:
        def run() -> str:
            now = T0 + timedelta(minutes=minutes)
            report = run_tick(repo, state, now, all_releases=all_releases)
            errors = sum(1 for h in report.handled if h.outcome.is_error)
            commits = sum(1 for h in report.handled if h.commit)
            return f"reconciled={len(report.handled)} errors={errors} commits={commits}"

        return run

    # (label, function, runs): repeatable phases report the best of three, so a busy
    # machine disturbs the ratios less.
    phases = [
        ("baseline: parse manifests (CSafeLoader)", baseline, 3),
        ("first tick", tick(0, False), 1),
        ("second tick (first health seen, --all)", tick(1, True), 1),
        ("steady tick, every Release (--all)", tick(2, True), 3),
        ("steady tick, due Releases only", tick(3, False), 3),
        ("drift rules: first tick", tick(0, False, ruled, ruled_state), 1),
        ("drift rules: second tick (--all)", tick(1, True, ruled, ruled_state), 1),
        ("drift rules: steady tick (--all)", tick(2, True, ruled, ruled_state), 3),
    ]
    walls: dict[str, float] = {}
    base = None
    print(f"{n} Releases x 5 objects ({len(texts)} manifest files), directory cluster")
    print(f"{'phase':<42} {'wall s':>8} {'ms/Release':>11} {'x base':>7} {'peak MiB':>9}  detail")
    for label, fn, runs in phases:
        wall, rss, detail = min(measure(fn) for _ in range(runs))
        walls[label] = wall
        base = base or wall
        per = 1000 * wall / n
        print(f"{label:<42} {wall:8.2f} {per:11.2f} {wall / base:7.1f} {rss / 1024:9.0f}  {detail}")
    ratio = walls["drift rules: steady tick (--all)"] / walls["steady tick, every Release (--all)"]
    print(f"steady tick with drift rules on every object / without: {ratio:.2f}")


if __name__ == "__main__":
    main()
