"""What a renderer is given: the Release, its Cluster and variables, and the export."""

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from convoy_batch.deployers.base import Capabilities
from convoy_batch.errors import RenderFailed
from convoy_batch.models import Cluster, Release


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

    @property
    def source_dir(self) -> Path:
        return self.root / self.path if self.path else self.root

    def inside(self, relative: str, field: str) -> Path:
        """``relative`` (to ``source.path``) in the export; RenderFailed naming ``field``
        when it leaves the repository."""
        joined = posixpath.normpath(posixpath.join(self.path or ".", relative))
        if relative.startswith("/") or joined == ".." or joined.startswith("../"):
            raise RenderFailed(f"render.{field} {relative!r}: leaves the repository")
        return self.root / joined
