"""What a reading of the GitOps repository gives (:mod:`convoy_batch.repo.gitops`): a
:class:`GitOpsSnapshot` of one commit, holding a :class:`ReleaseEntry` per Release file
or ReleaseSet member and a :class:`SetEntry` per ReleaseSet, and the :class:`Loaded`
object files they are made from. Records only: no I/O.

A snapshot's derived maps (:attr:`GitOpsSnapshot.member_sets`,
:attr:`GitOpsSnapshot.by_cluster`) are computed once and kept on it: key, the snapshot;
it is frozen, so they never go stale.
"""

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from convoy_batch.errors import one_line
from convoy_batch.models import Cluster, Release, ReleaseSet


@dataclass(frozen=True)
class ReleaseEntry:
    name: str
    """metadata.name when it is a valid name, else the file's stem (see ``_claim`` of
    :mod:`convoy_batch.repo.gitops`)."""
    path: str
    """Repo-relative posix path, e.g. ``releases/web.yaml``."""
    blob: str
    """Git blob SHA of the file: a changed Release file wakes the Release up (for a name
    that several files claim, their SHAs joined by ``+``)."""
    release: Release | None
    error: str | None
    """One line naming the file and the field; exactly one of release and error is set."""


@dataclass(frozen=True)
class GitOpsSnapshot:
    commit: str
    branch: str | None
    """The checked-out branch; None when HEAD is detached."""
    releases: dict[str, ReleaseEntry]
    clusters: dict[str, Cluster]
    cluster_errors: dict[str, str]
    """Cluster name (or file stem) -> one-line error."""
    sets: dict[str, "SetEntry"] = field(default_factory=dict)
    """The valid ReleaseSets, by name (their members are in ``releases``)."""

    @cached_property
    def member_sets(self) -> dict[str, str]:
        """Member -> its ReleaseSet (derived from :attr:`sets`, once per snapshot)."""
        return {m: name for name, entry in self.sets.items() for m in entry.members}

    def set_of(self, name: str) -> str | None:
        """The ReleaseSet whose member ``name`` is (None: a hand-written Release)."""
        return self.member_sets.get(name)

    @cached_property
    def by_cluster(self) -> dict[str, list[str]]:
        """Cluster name -> its valid Releases' names, in :attr:`releases` order (derived
        once per snapshot)."""
        found: dict[str, list[str]] = {}
        for entry in self.releases.values():
            if entry.release is not None:
                found.setdefault(entry.release.spec.cluster, []).append(entry.release.name)
        return found


@dataclass(frozen=True)
class SetEntry:
    """A ReleaseSet file and what its generation gave."""

    path: str
    release_set: ReleaseSet
    members: tuple[str, ...]
    """Its members in ``releases``, in generation order (refused ones left out)."""
    failed: str | None
    """Why the member set cannot be told (GenerationFailed): none of its last members is
    removed meanwhile."""
    refused: tuple[str, ...] = ()
    """One line per member refused for a name another Release or set holds."""
    frozen_at: str | None = None
    """The commit whose members the set cannot generate now it keeps (at that version)."""
    unparsed: bool = False
    """The set's file does not parse at HEAD: the set is its newest version that did."""


@dataclass(frozen=True)
class Loaded:
    """One object file: its model, or the error that stopped it."""

    name: str
    path: str
    blob: str
    model: Any
    error: str | None

    def __post_init__(self) -> None:
        if self.error is not None:  # it becomes a status message and a line on stderr
            object.__setattr__(self, "error", one_line(self.error))
