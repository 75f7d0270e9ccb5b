"""Helm: ``helm template`` of the chart at ``source.path``, or of a chart archive fetched
from a repository (:mod:`convoy_batch.renderers.charts`), helm on PATH, with the
``valuesFiles`` (inside the source, relative to ``source.path``) then the inline
``values``, the release name (default the Release's) and namespace, and the chart's
CRDs; on a Kubernetes Cluster, the server's version and API versions (as Argo CD passes
them). Helm's hooks are read as convoy-batch hooks by :mod:`convoy_batch.manifests.annotations`.
"""

import json
import shutil
from pathlib import Path

from convoy_batch.deployers.base import Capabilities
from convoy_batch.errors import RenderFailed
from convoy_batch.models import HelmRender
from convoy_batch.renderers import process
from convoy_batch.renderers.job import Job
from convoy_batch.repo.source import SourceFile

_MISSING = (
    "Helm: helm is not on PATH; install Helm (v3 or v4, a single binary, see Helm's "
    "installation guide) on the reconciler's PATH"
)


def tool_key() -> str:
    tool = process.find_tool("helm")
    return "helm:none" if tool is None else f"helm:{tool.identity()}"


def capability_args(capabilities: Capabilities | None) -> list[str]:
    """``--kube-version`` and one ``--api-versions`` per group/version and
    group/version/Kind the server serves; none for a directory cluster (helm's defaults)."""
    if capabilities is None:
        return []
    args = ["--kube-version", capabilities.kube_version] if capabilities.kube_version else []
    for api_version in capabilities.api_versions:
        args += ["--api-versions", api_version]
    return args


def render(spec: HelmRender, job: Job) -> list[SourceFile]:
    tool = process.find_tool("helm")
    if tool is None:
        raise RenderFailed(_MISSING)
    release = job.release
    chart = str(job.chart) if job.chart is not None else job.path or "."
    if job.dependencies:
        chart = str(_with_dependencies(job))
    argv = [tool.path, "template", spec.release_name or release.name, chart]
    argv += ["--namespace", release.spec.namespace, "--include-crds"]
    argv += capability_args(job.capabilities)
    for name in spec.values_files:
        path = job.inside(name, "valuesFiles")
        if not path.is_file():
            raise RenderFailed(f"render.valuesFiles {name!r}: not found")
        argv += ["--values", str(path)]
    if spec.values:
        inline = job.home / "values.json"
        inline.write_text(json.dumps(spec.values))
        argv += ["--values", str(inline)]
    env = {"HELM_CACHE_HOME": str(job.home / "cache"), "HELM_CONFIG_HOME": str(job.home)}
    env["HELM_DATA_HOME"] = str(job.home / "data")
    shown = f"{spec.chart} {spec.version}" if job.chart is not None else job.path or "."
    label = f"Helm (helm template {shown})"
    text = process.run(label, argv, job.root, process.minimal_env(job.home, env))
    return [SourceFile(f"{shown} (helm template)", text)]


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
