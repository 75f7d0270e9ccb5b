"""What a renderer is given: the Release, its Cluster and variables, the export, and
the limits its process runs under. No I/O but resolving paths in the export."""

import dataclasses
import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from convoy_batch.deployers.base import Capabilities
from convoy_batch.errors import RenderFailed
from convoy_batch.models import Cluster, Release
from convoy_batch.renderers.process import Limits
from convoy_batch.state.operator_files import without_state_dir


@dataclass(frozen=True)
class Job:
    release: Release
    cluster: Cluster
    variables: Mapping[str, str]
    revision: str
    root: Path
    """The export of the source's commit."""
    path: str
    """``source.path``, normalized ("" is the root)."""
    home: Path
    """A scratch folder: the program's HOME and TMPDIR."""
    state_dir: Path
    capabilities: Capabilities | None = None
    """The Cluster's API server, for Helm on a Kubernetes Cluster (None otherwise)."""
    chart: Path | None = None
    """A Helm chart from a repository: its verified archive (None otherwise)."""
    dependencies: tuple[Path, ...] = ()
    """A Helm chart in git: the verified archives of its dependencies from repositories."""
    limits: Limits = dataclasses.field(default_factory=Limits)
    """The operator's limits of a renderer's process (``renderers.yaml``)."""

    @property
    def source_dir(self) -> Path:
        return self.root / self.path if self.path else self.root

    def inside(self, relative: str, field: str) -> Path:
        """``relative`` (to ``source.path``) in the export; RenderFailed naming ``field``
        when it leaves the repository, as written or once its links are resolved."""
        joined = posixpath.normpath(posixpath.join(self.path or ".", relative))
        if relative.startswith("/") or joined == ".." or joined.startswith("../"):
            raise RenderFailed(f"render.{field} {relative!r}: leaves the repository")
        if not self.contains(self.root / joined):
            raise RenderFailed(f"render.{field} {relative!r}: leaves the repository")
        return self.root / joined

    def contains(self, path: Path | str) -> bool:
        """``path``, its links resolved, is the export or lies in it."""
        root, real = os.path.realpath(self.root), os.path.realpath(path)
        return real == root or real.startswith(root + os.sep)

    def masked(self, text: str) -> str:
        """``text`` with the state directory's path as ``<state>``."""
        return without_state_dir(text, self.state_dir)
