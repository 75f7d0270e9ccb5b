"""Benchmark: a ReleaseSet's members against the same Releases written by hand.

Builds two repositories of the same 1,000 Releases (default: 10 apps x 100 Clusters, each
app ``bench/tick.py``'s 5 objects) on directory clusters: one with a Release file per app
and Cluster, one with a ReleaseSet per app over every Cluster (a ``clusters`` generator
selecting them by label). Prints, for each, a first tick, a steady tick of every Release
(``--all``) and a quiet tick of the due ones, best of three, each in a forked child (from
``bench/tick.py``), and the ratio of the sets' quiet ticks to the hand-written ones'.

    python bench/releaseset.py [--apps N] [--clusters N] [--keep DIR]
"""

import argparse
import sys
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tick import T0, app_files, commit_all, measure, write_clusters  # bench/tick.py

from convoy_batch.ticks.runner import run_tick

SET = """\
apiVersion: convoy.dev/v1alpha1
kind: ReleaseSet
metadata: {{name: {app}}}
spec:
  generators:
  - clusters: {{selector: {{matchLabels: {{fleet: bench}}}}}}
  template:
    namespace: {app}
    source: {{path: apps/{app}}}
    vars: {{replicas: '2'}}
    failurePolicy: {{progressDeadline: 10m}}
"""
RELEASE = """\
apiVersion: convoy.dev/v1alpha1
kind: Release
metadata: {{name: {app}-{cluster}}}
spec:
  cluster: {cluster}
  namespace: {app}
  source: {{path: apps/{app}}}
  vars: {{replicas: '2'}}
  failurePolicy: {{progressDeadline: 10m}}
"""


def build(root: Path, apps: int, clusters: int, *, sets: bool) -> None:
    """The repository: ``apps`` apps on ``clusters`` Clusters, as sets or by hand."""
    cluster_names = [f"c{c:03d}" for c in range(clusters)]
    write_clusters(root, cluster_names, "{vars: {env: b}}", ", labels: {fleet: bench}")
    for a in range(apps):
        app = f"app{a:02d}"
        folder = root / "apps" / app
        folder.mkdir(parents=True)
        for file, text in app_files().items():
            (folder / file).write_text(text)
        if sets:
            (root / "releases" / f"{app}.yaml").write_text(SET.format(app=app))
            continue
        for cluster in cluster_names:
            text = RELEASE.format(app=app, cluster=cluster)
            (root / "releases" / f"{app}-{cluster}.yaml").write_text(text)
    commit_all(root)


def tick(repo: Path, state: Path, minutes: int, all_releases: bool) -> Callable[[], object]:
    def run() -> str:
        report = run_tick(repo, state, T0 + timedelta(minutes=minutes), all_releases=all_releases)
        errors = sum(1 for h in report.handled if h.outcome.is_error)
        return f"reconciled={len(report.handled)} errors={errors}"

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=10)
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--keep", type=Path, default=None, help="build the repositories here")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="convoy-bench-sets-"))
    n = args.apps * args.clusters
    print(f"{n} Releases ({args.apps} apps x {args.clusters} Clusters) x 5 objects")
    print(f"{'phase':<44} {'wall s':>8} {'ms/Release':>11}  detail")
    quiet: dict[str, float] = {}
    for label, sets in (("by hand", False), ("ReleaseSets", True)):
        repo, state = work / f"{label}-repo".replace(" ", "-"), work / f"{label}-state"
        build(repo, args.apps, args.clusters, sets=sets)
        phases = [
            ("first tick", tick(repo, state, 0, False), 1),
            ("second tick (--all)", tick(repo, state, 1, True), 1),
            ("steady tick (--all)", tick(repo, state, 2, True), 3),
            ("quiet tick (due only)", tick(repo, state, 3, False), 3),
        ]
        for phase, fn, runs in phases:
            wall, _rss, detail = min(measure(fn) for _ in range(runs))
            quiet[f"{label}: {phase}"] = wall
            name = f"{label}: {phase}"
            print(f"{name:<44} {wall:8.2f} {1000 * wall / n:11.2f}  {detail}")
    for phase in ("steady tick (--all)", "quiet tick (due only)"):
        ratio = quiet[f"ReleaseSets: {phase}"] / quiet[f"by hand: {phase}"]
        print(f"{phase}, ReleaseSets / by hand: {ratio:.2f}")


if __name__ == "__main__":
    main()
