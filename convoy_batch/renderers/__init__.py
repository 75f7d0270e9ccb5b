"""Renderers (``spec.source.render``): turn the source at its revision into manifest
text, which then goes through the render pipeline of SPEC 3 (variables, parse, scope,
duplicates, renderRef) as plain files do.

A renderer other than Plain runs in a fresh export of the source's commit (files
written from git objects into a temporary folder, never the working tree); what it
depends on, :func:`render_inputs`, is found without starting any process, so a Release
whose inputs did not change reloads its stored render and a quiet tick runs nothing.
A Helm chart from a repository is resolved by :mod:`.charts`, whose index answers
without a request while the chart is pinned (or its range fresh).

A render reads the repository at its revision and nothing else of the machine: the
export holds no symlink, each renderer keeps its paths inside it (Kustomize walks the
kustomizations it would load first), and every renderer's process runs under the
operator's memory and time limits (``renderers.yaml``'s ``limits``).

Each renderer is registered once, by the model of its ``render``, in :data:`RENDERERS`:
the functions here and the render stage ask it what differs, never the spec's type.

- :mod:`.base`: the ``Renderer`` protocol; ``Exported``, what the renderers that run a tool share
- :mod:`.plain`: Plain, the files under ``source.path`` as they are
- :mod:`.kustomize`: Kustomize, ``kustomize build`` of what the export holds
- :mod:`.helm`: Helm, ``helm template`` of a chart in git or from a repository
- :mod:`.jsonnet`: Jsonnet, evaluated in a child Python process (:mod:`.jsonnet_eval`)
- :mod:`.command`: Command renderers the operator defines, and every renderer's limits
- :mod:`.charts`: Helm charts from repositories and registries: resolved, fetched, cached
- :mod:`.discovery`: the stand-in API server that answers helm's discovery
- :mod:`.sops`: SOPS decryption: encrypted objects stay sealed, once checked to decrypt
- :mod:`.job`: what a renderer that runs a tool is given (a Job)
- :mod:`.process`: a renderer's process: found, started under the limits, its output read
- :mod:`.pipeline`: the render pipeline (SPEC 3 steps 2-6), pure
"""

from functools import partial
from pathlib import Path

from convoy_batch.deployers.base import Capabilities
from convoy_batch.models import (
    Cluster,
    CommandRender,
    HelmRender,
    JsonnetRender,
    KustomizeRender,
    Model,
    PlainRender,
    Release,
)
from convoy_batch.renderers import command, helm, jsonnet, kustomize, plain, sops
from convoy_batch.renderers.base import Reader, Renderer
from convoy_batch.renderers.charts import ChartResolver
from convoy_batch.renderers.pipeline import Render
from convoy_batch.repo.source import SourceResolver

RENDERERS: dict[type[Model], Renderer] = {
    PlainRender: plain.PLAIN,
    KustomizeRender: kustomize.KUSTOMIZE,
    JsonnetRender: jsonnet.JSONNET,
    HelmRender: helm.HELM,
    CommandRender: command.COMMAND,
}
"""Every renderer, by the model of its ``render`` (``models.RenderSpec``)."""


def renderer_of(release: Release) -> Renderer:
    """The renderer of ``release``'s ``source.render``."""
    return RENDERERS[type(release.spec.source.render)]


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
    reader = _reader(sources, state_dir, charts)
    return renderer_of(release).inputs(release, reader, capabilities)


def source_revision(release: Release, sources: SourceResolver, charts: ChartResolver) -> str:
    """The revision a render of ``release`` is named by: the last commit that changed
    ``source.path``, or for a chart from a repository its ``<version>@sha256:<digest>``."""
    return renderer_of(release).revision(release, sources, charts)


def watched_revision(release: Release, sources: SourceResolver, charts: ChartResolver) -> str:
    """What a tick compares to the last one's to see the source changed: the revision,
    and for a chart from a repository read with values files, their commit too."""
    return renderer_of(release).watched_revision(release, sources, charts)


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
    reader = _reader(sources, state_dir, charts)
    made = renderer_of(release).render(release, cluster, reader, capabilities)
    sops.verify(made, release, state_dir)
    return made


def _reader(sources: SourceResolver, state_dir: Path, charts: ChartResolver | None) -> Reader:
    charts = charts if charts is not None else ChartResolver(state_dir, None)
    return Reader(sources, charts, state_dir, partial(command.limits, state_dir))
