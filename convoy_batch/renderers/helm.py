"""Helm: ``helm template`` of the chart at ``source.path``, or of a chart archive fetched
from a repository (:mod:`convoy_batch.renderers.charts`), helm on PATH, with the
``valuesFiles`` (inside the source, relative to ``source.path``) then the inline
``values``, the release name (default the Release's) and namespace, and the chart's
CRDs. On a Kubernetes Cluster, ``.Capabilities`` are the server's version and API
versions alone: helm runs with ``--dry-run=server`` against a stand-in server on loopback
that answers the server's discovery (:mod:`convoy_batch.renderers.discovery`), since
``--api-versions`` only adds to Helm's built-in list. Helm's hooks are read as
convoy-batch hooks by :mod:`convoy_batch.manifests.annotations`.

A chart in git reads the repository only: each values file resolves inside it (links
resolved), and a ``file://`` dependency of its ``Chart.yaml`` that would lead out of it
is refused before helm runs (helm itself reads only the chart's ``charts/``, but a
dependency is the chart's to name, not a way out). The export holds no symlink, so
``.Files`` sees the chart's own files.
"""

import json
import re
import shutil
from pathlib import Path
from typing import Any

from convoy_batch.deployers.base import Capabilities
from convoy_batch.errors import RenderFailed
from convoy_batch.manifests import yamlload
from convoy_batch.models import HelmRender, Release
from convoy_batch.renderers import discovery, process
from convoy_batch.renderers.base import Charts, Exported, Reader
from convoy_batch.renderers.charts import ChartResolver
from convoy_batch.renderers.job import Job
from convoy_batch.repo.source import SourceFile, SourceResolver

CHART_YAML = "Chart.yaml"
"""A chart in git's file naming its dependencies (from repositories: render inputs)."""
_MISSING = (
    "Helm: helm is not on PATH; install Helm (v3 or v4, a single binary, see Helm's "
    "installation guide) on the reconciler's PATH"
)


def tool_key() -> str:
    tool = process.find_tool("helm")
    return "helm:none" if tool is None else f"helm:{tool.identity()}"


def render(spec: HelmRender, job: Job) -> list[SourceFile]:
    tool = process.find_tool("helm")
    if tool is None:
        raise RenderFailed(_MISSING)
    release = job.release
    if job.chart is None:
        _check_local_dependencies(job)
    chart = str(job.chart) if job.chart is not None else job.path or "."
    if job.dependencies:
        chart = str(_with_dependencies(job))
    argv = [tool.path, "template", spec.release_name or release.name, chart]
    argv += ["--namespace", release.spec.namespace, "--include-crds"]
    for name in spec.values_files:
        path = job.inside(name, "valuesFiles")
        if not path.is_file():
            raise RenderFailed(f"render.valuesFiles {name!r}: not found")
        argv += ["--values", str(path)]
    if spec.values:
        inline = job.home / "values.json"
        inline.write_text(json.dumps(spec.values))
        argv += ["--values", str(inline)]
    homes = {"HELM_CACHE_HOME": str(job.home / "cache"), "HELM_CONFIG_HOME": str(job.home)}
    homes["HELM_DATA_HOME"] = str(job.home / "data")
    shown = f"{spec.chart} {spec.version}" if job.chart is not None else job.path or "."
    label = f"Helm (helm template {shown})"
    env = process.minimal_env(job.home, homes)
    if job.capabilities is None:
        text = process.run(label, argv, job.root, env, limits=job.limits)
    else:
        text = _run_against(job.capabilities, label, argv, job, env)
    return [SourceFile(f"{shown} (helm template)", text)]


class Helm(Exported[HelmRender]):
    """A chart in git (at ``source.path``) or from a repository (``repository``): the
    latter's render is named by the chart's version and digest, and depends on them; the
    former's depends on those of its dependencies from repositories. Its templates may
    call random functions, and are told the Cluster's API server."""

    may_vary = True
    reads_server = True

    def tool_key(self, spec: HelmRender, state_dir: Path) -> str:
        return tool_key()

    def files(self, spec: HelmRender, job: Job) -> list[SourceFile]:
        return render(spec, job)

    def revision(self, release: Release, sources: SourceResolver, charts: ChartResolver) -> str:
        """A chart from a repository's ``<version>@sha256:<digest>``; else the last
        commit that changed ``source.path``."""
        if self.spec(release).from_repository:
            return charts.resolve(release).revision
        return sources.revision(release)

    def watched_revision(
        self, release: Release, sources: SourceResolver, charts: ChartResolver
    ) -> str:
        """The revision, and for a chart from a repository read with values files (a
        ``source.path``), their commit too."""
        revision = self.revision(release, sources, charts)
        if self.spec(release).from_repository and release.spec.source.path:
            revision += f" {sources.revision(release)}"
        return revision

    def extra_inputs(self, release: Release, reader: Reader) -> list[str]:
        """A chart from a repository's version and digest; a chart in git's dependencies
        from repositories, each by its version and digest (from the chart index)."""
        if self.spec(release).from_repository:
            return [reader.charts.resolve(release).revision]
        chart_yaml = reader.sources.file_text(release, CHART_YAML)
        return reader.charts.dependency_revisions(release, chart_yaml)

    def charts(self, release: Release, reader: Reader) -> Charts:
        """A chart from a repository's archive; a chart in git's dependencies'."""
        if self.spec(release).from_repository:
            return Charts(chart=reader.charts.archive(release))
        chart_yaml = reader.sources.file_text(release, CHART_YAML)
        return Charts(dependencies=tuple(reader.charts.dependencies(release, chart_yaml)))

    def subject(self, release: Release) -> str:
        chart = self.spec(release).chart
        return f"chart {chart!r}" if chart else super().subject(release)


HELM = Helm()


_SERVER_MODE = ("--dry-run=server", "--disable-openapi-validation")
"""Helm reads ``.Capabilities`` from the cluster's discovery (``--dry-run=server``); the
objects are validated by the deployer's own dry run, not against a schema here."""
_PASSES = 4
"""Runs of helm at most for one render: the first, then one more for each answer naming
kinds the server does not serve yet (custom resources the chart brings with their
definitions), each run adding those."""
_NO_MATCH = re.compile(r'no matches for kind "([^"]+)" in version "([^"]+)"')


def _run_against(
    capabilities: Capabilities, label: str, argv: list[str], job: Job, env: dict[str, str]
) -> str:
    """Helm's output, run against a stand-in server answering the Cluster's discovery
    (:mod:`convoy_batch.renderers.discovery`): ``.Capabilities`` are the server's alone."""
    mappable: frozenset[str] = frozenset()
    for left in range(_PASSES - 1, -1, -1):
        with discovery.serving(capabilities, job.home / "kube", mappable) as kubeconfig:
            told = [*argv, *_SERVER_MODE, "--kubeconfig", str(kubeconfig)]
            try:
                return process.run(label, told, job.root, env, limits=job.limits)
            except RenderFailed as exc:
                more = mappable | _unmapped(str(exc))
                if not left or more == mappable:
                    raise
                mappable = more
    raise AssertionError("unreachable")


def _unmapped(message: str) -> frozenset[str]:
    """The group/version/Kind of each object helm could not map, from its message."""
    return frozenset(f"{version}/{kind}" for kind, version in _NO_MATCH.findall(message))


_CHART_FILES = ("Chart.yaml", "requirements.yaml")
"""Where a chart names its dependencies (``requirements.yaml``: a chart of apiVersion v1)."""


def _check_local_dependencies(job: Job) -> None:
    """RenderFailed, one line naming the file, the dependency and its ``repository``
    as written: a ``file://`` dependency of the chart in git resolves outside the
    repository. A file that does not parse is left to helm's message."""
    for name in _CHART_FILES:
        path = job.source_dir / name
        for index, repository in _file_repositories(path):
            target = job.source_dir / repository[len("file://") :]
            if not job.contains(target):
                where = (Path(job.path) / name).as_posix()
                raise RenderFailed(
                    f"Helm: {where}: dependencies[{index}].repository "
                    f"{job.masked(repository)!r}: leaves the repository"
                )


def _file_repositories(path: Path) -> list[tuple[int, str]]:
    """(index, repository) of each ``file://`` dependency listed in ``path``."""
    try:
        docs = yamlload.documents(path.read_text(encoding="utf-8"), path.name)
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    data: Any = docs[0].value if docs else None
    listed = data.get("dependencies") if isinstance(data, dict) else None
    found = []
    for index, dep in enumerate(listed if isinstance(listed, list) else ()):
        repository = dep.get("repository") if isinstance(dep, dict) else None
        if isinstance(repository, str) and repository.lower().startswith("file://"):
            found.append((index, repository))
    return found


def _with_dependencies(job: Job) -> Path:
    """A copy of the chart in git (the export is shared, read only) with the archives of
    its dependencies from repositories in its ``charts/``, as ``helm dependency build``
    leaves them."""
    copy = job.home / "chart"
    shutil.copytree(job.source_dir, copy, symlinks=False)
    vendored = copy / "charts"
    vendored.mkdir(exist_ok=True)
    for archive in job.dependencies:
        shutil.copyfile(archive, vendored / archive.name)
    return copy
