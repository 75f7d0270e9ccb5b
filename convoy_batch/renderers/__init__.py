"""Renderers (``spec.source.render``): turn the source at its revision into manifest
text, which then goes through the render pipeline of SPEC 3 (variables, parse, scope,
duplicates, renderRef) as plain files do.

A renderer other than Plain runs in a fresh export of the source's commit (files
written from git objects into a temporary folder, never the working tree); what it
depends on, :func:`render_inputs`, is found without starting any process, so a Release
whose inputs did not change reloads its stored render and a quiet tick runs nothing.
A Helm chart from a repository is resolved by :mod:`convoy_batch.renderers.charts`,
whose index answers without a request while the chart is pinned (or its range fresh).

A render reads the repository at its revision and nothing else of the machine: the
export holds no symlink, each renderer keeps its paths inside it (Kustomize walks the
kustomizations it would load first, :mod:`convoy_batch.renderers.kustomize`), and every
renderer's process runs under the operator's memory and time limits
(``renderers.yaml``'s ``limits``, :mod:`convoy_batch.renderers.command`).
"""

import tempfile
from pathlib import Path

from convoy_batch.deployers.base import Capabilities
from convoy_batch.models import (
    Cluster,
    CommandRender,
    HelmRender,
    JsonnetRender,
    KustomizeRender,
    PlainRender,
    Release,
    RenderSpec,
)
from convoy_batch.renderers import command, helm, jsonnet, kustomize, sops
from convoy_batch.renderers.charts import ChartResolver
from convoy_batch.renderers.job import Job
from convoy_batch.renderers.pipeline import Render, render, render_files, variables_for
from convoy_batch.repo.source import SourceResolver, normalize_source_path

CHART_YAML = "Chart.yaml"


def render_inputs(
    release: Release,
    sources: SourceResolver,
    state_dir: Path,
    capabilities: Capabilities | None = None,
    charts: ChartResolver | None = None,
) -> list[str]:
    """What a render depends on beyond the Release and its Cluster: for Plain, the
    listing's fingerprint (as before renderers); for the others, every file a renderer
    may read and the tool that renders (its path, size and time: no process runs), the
    server's ``capabilities`` a Helm render is given (so a server upgrade re-renders), a
    chart from a repository's version and digest (from the chart index), and with
    ``source.decryption`` the operator's key files (size and time)."""
    spec = release.spec.source.render
    keys = [sops.key_input(release, state_dir)] if release.spec.source.decryption else []
    if isinstance(spec, PlainRender):
        return [sources.listing(release).fingerprint, *keys]
    inputs = [] if release.spec.source.chart_only else [sources.tree_fingerprint(release)]
    inputs += [_tool_key(spec, state_dir), *keys]
    if isinstance(spec, HelmRender) and spec.from_repository:
        inputs.append(_charts(charts, state_dir).resolve(release).revision)
    elif isinstance(spec, HelmRender):  # a chart in git: its dependencies from repositories
        chart_yaml = sources.file_text(release, CHART_YAML)
        inputs += _charts(charts, state_dir).dependency_revisions(release, chart_yaml)
    if capabilities is not None:
        inputs += [capabilities.kube_version, " ".join(capabilities.api_versions)]
    return inputs


def source_revision(release: Release, sources: SourceResolver, charts: ChartResolver) -> str:
    """The revision a render of ``release`` is named by: the last commit that changed
    ``source.path``, or for a chart from a repository its ``<version>@sha256:<digest>``."""
    spec = release.spec.source.render
    if isinstance(spec, HelmRender) and spec.from_repository:
        return charts.resolve(release).revision
    return sources.revision(release)


def watched_revision(release: Release, sources: SourceResolver, charts: ChartResolver) -> str:
    """What a tick compares to the last one's to see the source changed: the revision,
    and for a chart from a repository read with values files, their commit too."""
    revision = source_revision(release, sources, charts)
    spec = release.spec.source
    if isinstance(spec.render, HelmRender) and spec.render.from_repository and spec.path:
        revision += f" {sources.revision(release)}"
    return revision


def _charts(charts: ChartResolver | None, state_dir: Path) -> ChartResolver:
    return charts if charts is not None else ChartResolver(state_dir, None)


def _tool_key(spec: RenderSpec, state_dir: Path) -> str:
    if isinstance(spec, KustomizeRender):
        return kustomize.tool_key()
    if isinstance(spec, JsonnetRender):
        return jsonnet.tool_key()
    if isinstance(spec, HelmRender):
        return helm.tool_key()
    assert isinstance(spec, CommandRender)
    return command.tool_key(spec, state_dir)


def render_release(
    release: Release,
    cluster: Cluster,
    sources: SourceResolver,
    state_dir: Path,
    capabilities: Capabilities | None = None,
    charts: ChartResolver | None = None,
) -> Render:
    """Render ``release`` with its renderer (RenderFailed or SourceFailed, one line);
    ``capabilities``: the Cluster's API server, for Helm on a Kubernetes Cluster. Its
    SOPS-encrypted objects stay sealed, once checked to decrypt (``renderers.sops``)."""
    made = _render(release, cluster, sources, state_dir, capabilities, charts)
    sops.verify(made, release, state_dir)
    return made


def _render(
    release: Release,
    cluster: Cluster,
    sources: SourceResolver,
    state_dir: Path,
    capabilities: Capabilities | None,
    charts: ChartResolver | None,
) -> Render:
    spec = release.spec.source.render
    if isinstance(spec, PlainRender):
        return render(sources.fetch(release), release, cluster)
    limits = command.limits(state_dir)
    charts = _charts(charts, state_dir)
    chart, dependencies = None, []
    if isinstance(spec, HelmRender) and spec.from_repository:
        chart = charts.archive(release)
    elif isinstance(spec, HelmRender):
        dependencies = charts.dependencies(release, sources.file_text(release, CHART_YAML))
    revision = source_revision(release, sources, charts)
    with tempfile.TemporaryDirectory(prefix="convoy-render-") as scratch:
        root, home = Path(scratch) / "tree", Path(scratch) / "home"
        home.mkdir()
        if isinstance(spec, CommandRender):  # an operator's program may write: its own
            root.mkdir()
            sources.export(release, root)
        elif release.spec.source.chart_only:  # nothing is read from git
            root.mkdir()
        else:  # kustomize, helm and jsonnet only read their source: the tick's export
            root = sources.shared_export(release)
        path = normalize_source_path(release.spec.source.path or "")
        job = Job(
            release=release,
            cluster=cluster,
            variables=variables_for(release, cluster),
            revision=revision,
            root=root,
            path=path,
            home=home,
            state_dir=state_dir,
            capabilities=capabilities,
            chart=chart,
            dependencies=tuple(dependencies),
            limits=limits,
        )
        if isinstance(spec, KustomizeRender):
            files = kustomize.render(job)
        elif isinstance(spec, JsonnetRender):
            files = jsonnet.render(spec, job)
        elif isinstance(spec, HelmRender):
            files = helm.render(spec, job)
        else:
            files = command.render(spec, job)
    return render_files(files, revision, release, cluster)
