"""Benchmark: renderers. Render time per Release for each type (Plain, Kustomize,
Jsonnet, Command, and Helm when helm is on PATH), then a quiet tick of N Kustomize
Releases against the same with Plain: the render cache makes them equal within noise
(no renderer process starts on a quiet tick).

    python bench/renderers.py [--releases N] [--per-type M]

Kustomize runs ``kustomize`` on PATH, else the kubectl of ``$CONVOY_KUBECTL`` or PATH.
"""

import argparse
import os
import re
import shutil
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import yaml
from tick import T0, app_files, build_repo, measure  # bench/tick.py, next to this script

from convoy_batch.models import Cluster, Release, parse_model
from convoy_batch.renderers import render_release
from convoy_batch.repo.gitops import GitOpsRepo
from convoy_batch.repo.source import SourceResolver
from convoy_batch.ticks.runner import run_tick

KUSTOMIZATION = "resources: [" + ", ".join(sorted(app_files())) + "]\n"
_UNQUOTED = re.compile(r"(?<=[:\[{,] )([^\s,{}\[\]\"]*\$\{[^}]+\}[^\s,{}\[\]\"]*)")
# Kustomize and Helm read the files as YAML before ${} is substituted: quote those scalars.
QUOTED = {name: _UNQUOTED.sub(r'"\1"', text) for name, text in app_files().items()}
KUSTOMIZE_FILES = {"kustomization.yaml": KUSTOMIZATION, **QUOTED}
JSONNET = """\
local name = std.extVar('release');
[
  {apiVersion: 'apps/v1', kind: 'Deployment', metadata: {name: name},
   spec: {replicas: 2, selector: {matchLabels: {app: name}},
          template: {metadata: {labels: {app: name}},
                     spec: {containers: [{name: 'app', image: 'example/' + name + ':1.0'}]}}}},
  {apiVersion: 'v1', kind: 'Service', metadata: {name: name},
   spec: {selector: {app: name}, ports: [{port: 80, targetPort: 8080}]}},
] + [
  {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: name + '-config-' + i},
   data: {env: std.extVar('env'), index: '' + i}}
  for i in std.range(0, 2)
]
"""
# The same five objects as a chart: the files under files/, each a document of its template.
CHART = {
    "Chart.yaml": "apiVersion: v2\nname: app\nversion: 0.1.0\n",
    "templates/all.yaml": (
        '{{ range $path, $_ := .Files.Glob "files/*.yaml" }}---\n{{ $.Files.Get $path }}\n{{ end }}'
    ),
    **{f"files/{name}": text for name, text in QUOTED.items()},
}
TYPES = {
    "Plain": ("", {}),
    "Kustomize": ("{type: Kustomize}", KUSTOMIZE_FILES),
    "Jsonnet": ("{type: Jsonnet}", {"main.jsonnet": JSONNET}),
    "Command": ("{type: Command, name: cat-all}", {}),
}


def per_release_render(per_type: int, work: Path) -> None:
    """Milliseconds per render of each type (the export, the process and the pipeline)."""
    types = dict(TYPES)
    if shutil.which("helm"):
        types["Helm"] = ("{type: Helm}", CHART)
    print(f"render time per Release ({per_type} Releases of 5 objects per type)")
    for kind, (render, extra) in types.items():
        root, state = work / f"render-{kind}", work / f"render-{kind}-state"
        state.mkdir(parents=True)
        (state / "renderers.yaml").write_text(
            "renderers: {cat-all: {command: [sh, -c, 'cat *.yaml']}}\n"
        )
        build_repo(root, per_type, extra=extra, render=render or None)
        cluster = parse_model(
            Cluster, yaml.safe_load((root / "clusters" / "bench.yaml").read_text()), "cluster"
        )
        releases = [
            parse_model(Release, yaml.safe_load(p.read_text()), str(p))
            for p in sorted((root / "releases").glob("*.yaml"))
        ]
        sources = SourceResolver(GitOpsRepo(root), state)
        try:
            start = time.perf_counter()
            for release in releases:
                render_release(release, cluster, sources, state)
            wall = time.perf_counter() - start
        finally:
            sources.close()
        print(f"  {kind:<10} {1000 * wall / per_type:8.1f} ms/Release")


def quiet_ticks(releases: int, work: Path) -> None:
    print(f"quiet tick of {releases} Releases (every Release reconciled, nothing changed)")
    for kind in ("Plain", "Kustomize"):
        render, extra = TYPES[kind]
        root, state = work / f"quiet-{kind}", work / f"quiet-{kind}-state"
        build_repo(root, releases, extra=extra, render=render or None)
        for minutes in (0, 1):  # the first render, then the first health recorded
            run_tick(root, state, T0 + timedelta(minutes=minutes), all_releases=True)

        def quiet(root: Path = root, state: Path = state) -> str:
            report = run_tick(root, state, T0 + timedelta(minutes=2), all_releases=True)
            errors = sum(1 for h in report.handled if h.outcome.is_error)
            return f"reconciled={len(report.handled)} errors={errors}"

        wall, rss, detail = min(measure(quiet) for _ in range(3))
        print(f"  {kind:<10} {wall:8.2f} s  peak {rss / 1024:.0f} MiB  {detail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=1000, help="for the quiet ticks")
    parser.add_argument("--per-type", type=int, default=50, help="for the render times")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="convoy-bench-renderers-"))
    if not (
        shutil.which("kustomize") or shutil.which("kubectl") or os.environ.get("CONVOY_KUBECTL")
    ):
        print("no kustomize or kubectl: the Kustomize rows fail (set $CONVOY_KUBECTL)")
    per_release_render(args.per_type, work)
    quiet_ticks(args.releases, work)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
