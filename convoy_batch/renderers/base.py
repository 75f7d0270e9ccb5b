"""The ``Renderer`` protocol: what differs from one ``render.type`` to the next. Each is
implemented once, in its module, and registered once, by its spec type, in
:data:`convoy_batch.renderers.RENDERERS`; nothing else asks which type a render is.

:class:`Exported` is what every renderer but Plain shares: a tool run in an export of
the source's commit (a process under the operator's limits), its output then read as
Plain files are. A subclass names its tool (:meth:`Exported.tool_key`) and renders from
a :class:`~convoy_batch.renderers.job.Job` (:meth:`Exported.files`).
"""

import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar, cast

from convoy_batch.deployers.base import Capabilities
from convoy_batch.models import Cluster, Release
from convoy_batch.renderers import sops
from convoy_batch.renderers.charts import ChartResolver
from convoy_batch.renderers.job import Job
from convoy_batch.renderers.pipeline import Render, render_files, variables_for
from convoy_batch.renderers.process import Limits
from convoy_batch.repo.source import SourceFile, SourceResolver, normalize_source_path


@dataclass(frozen=True)
class Reader:
    """What a render reads besides its Release and Cluster."""

    sources: SourceResolver
    charts: ChartResolver
    state_dir: Path
    """The operator's files: keys, renderers, limits."""
    limits: Callable[[], Limits]
    """The operator's limits of a renderer's process (``renderers.yaml``), read when a
    renderer runs one (RenderFailed, one line)."""


class Renderer(Protocol):
    """One ``render.type``: what the package's functions and the render stage ask of it."""

    may_vary: bool
    """Its output may differ from one run to the next on the same input (random
    functions): a new render is made twice and compared (``stages/render.py``)."""
    reads_server: bool
    """Is told the Cluster's API server (its version and API versions) on a Kubernetes
    Cluster, and its render depends on them."""

    def revision(self, release: Release, sources: SourceResolver, charts: ChartResolver) -> str:
        """The revision a render of ``release`` is named by."""
        ...

    def watched_revision(
        self, release: Release, sources: SourceResolver, charts: ChartResolver
    ) -> str:
        """What a tick compares to the last one's to see the source changed."""
        ...

    def inputs(
        self, release: Release, reader: Reader, capabilities: Capabilities | None
    ) -> list[str]:
        """What a render depends on beyond the Release and its Cluster (no process runs)."""
        ...

    def render(
        self, release: Release, cluster: Cluster, reader: Reader, capabilities: Capabilities | None
    ) -> Render:
        """The render of ``release`` (RenderFailed or SourceFailed, one line)."""
        ...

    def subject(self, release: Release) -> str:
        """What a message names as the render's input (``source.path 'app'``)."""
        ...


def decryption_inputs(release: Release, state_dir: Path) -> list[str]:
    """With ``source.decryption``, the operator's key files (size and time)."""
    return [sops.key_input(release, state_dir)] if release.spec.source.decryption else []


def source_path(release: Release) -> str:
    """``source.path 'app'``: what a message names as a render's input."""
    return f"source.path {release.spec.source.path!r}"


@dataclass(frozen=True)
class Charts:
    """The chart archives a render is given besides its source (a Helm chart's)."""

    chart: Path | None = None
    """A chart from a repository: its verified archive."""
    dependencies: tuple[Path, ...] = ()
    """A chart in git: the verified archives of its dependencies from repositories."""


S = TypeVar("S")
"""A renderer's spec type (``render``'s model)."""


class FromPath:
    """What a renderer of the files under ``source.path`` is by default: its revision is
    the last commit that changed them, and a message names the path."""

    may_vary = False
    reads_server = False

    def revision(self, release: Release, sources: SourceResolver, charts: ChartResolver) -> str:
        """The last commit that changed ``source.path``."""
        return sources.revision(release)

    def watched_revision(
        self, release: Release, sources: SourceResolver, charts: ChartResolver
    ) -> str:
        return self.revision(release, sources, charts)

    def subject(self, release: Release) -> str:
        return source_path(release)


class Exported(FromPath, ABC, Generic[S]):
    """A renderer that runs a tool in a fresh export of the source's commit (files
    written from git objects, never the working tree): the tick's shared export, which
    it only reads, or one of its own when it runs an operator's program (which may
    write). Its render depends on the source's tree and on the tool, found without
    starting it."""

    runs_program = False
    """Runs an operator's program (a Command renderer): an export of its own."""

    @abstractmethod
    def tool_key(self, spec: S, state_dir: Path) -> str:
        """The tool that renders (its path, size and time: no process runs)."""

    @abstractmethod
    def files(self, spec: S, job: Job) -> list[SourceFile]:
        """The render itself: what the tool writes, as source files."""

    def extra_inputs(self, release: Release, reader: Reader) -> list[str]:
        """What else a render depends on, after the operator's keys: nothing."""
        return []

    def charts(self, release: Release, reader: Reader) -> Charts:
        """The chart archives a render is given: none."""
        return Charts()

    def inputs(
        self, release: Release, reader: Reader, capabilities: Capabilities | None
    ) -> list[str]:
        """The source's tree, the tool, the operator's keys, :meth:`extra_inputs`, and
        the server's ``capabilities`` it is given (so a server upgrade re-renders)."""
        keys = decryption_inputs(release, reader.state_dir)
        source = release.spec.source
        inputs = [] if source.chart_only else [reader.sources.tree_fingerprint(release)]
        inputs += [self.tool_key(self.spec(release), reader.state_dir), *keys]
        inputs += self.extra_inputs(release, reader)
        if capabilities is not None:
            inputs += [capabilities.kube_version, " ".join(capabilities.api_versions)]
        return inputs

    def render(
        self, release: Release, cluster: Cluster, reader: Reader, capabilities: Capabilities | None
    ) -> Render:
        """:meth:`files` from a Job in the export, then the render pipeline (SPEC 3)."""
        limits = reader.limits()
        charts = self.charts(release, reader)
        revision = self.revision(release, reader.sources, reader.charts)
        with tempfile.TemporaryDirectory(prefix="convoy-render-") as scratch:
            home = Path(scratch) / "home"
            home.mkdir()
            root = self._export(release, reader.sources, Path(scratch) / "tree")
            job = Job(
                release=release,
                cluster=cluster,
                variables=variables_for(release, cluster),
                revision=revision,
                root=root,
                path=normalize_source_path(release.spec.source.path or ""),
                home=home,
                state_dir=reader.state_dir,
                capabilities=capabilities,
                chart=charts.chart,
                dependencies=charts.dependencies,
                limits=limits,
            )
            files = self.files(self.spec(release), job)
        return render_files(files, revision, release, cluster)

    def spec(self, release: Release) -> S:
        """``render`` of ``release``: of this renderer's spec type, which the table chose
        it by."""
        return cast(S, release.spec.source.render)

    def _export(self, release: Release, sources: SourceResolver, root: Path) -> Path:
        """Where the tool runs: ``root``, an export of its own, for an operator's
        program; empty when nothing is read from git; else the tick's shared export."""
        if self.runs_program:
            root.mkdir()
            sources.export(release, root)
            return root
        if release.spec.source.chart_only:
            root.mkdir()
            return root
        return sources.shared_export(release)
