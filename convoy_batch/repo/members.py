"""ReleaseSet members (README "ReleaseSets"): each ReleaseSet file of a commit generated
(:mod:`convoy_batch.rollout.releaseset`) into one :class:`ReleaseEntry` per member, a
name another Release holds refused, and each Release's ``verification.templates`` added
from its Cluster. Does I/O: reads git trees (the folders a set's ``directories``
match); keeps no cache.
"""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from fnmatch import fnmatchcase

import git
from git.exc import ODBError

from convoy_batch.errors import one_line
from convoy_batch.models import Cluster, ReleaseSet
from convoy_batch.repo.entries import GitOpsSnapshot, Loaded, ReleaseEntry, SetEntry
from convoy_batch.rollout.releaseset import Folders, Member, directory_patterns, generate


def members(
    tree: git.Tree,
    set_files: list[Loaded],
    releases: dict[str, ReleaseEntry],
    clusters: Mapping[str, Cluster],
    cluster_errors: Mapping[str, str],
) -> dict[str, SetEntry]:
    """Each ReleaseSet's members added to ``releases`` (in file order). A member whose
    name a hand-written Release holds, or an earlier set's member, is refused: the other
    keeps its name, and the refusal is one line on stderr and in the set's entry."""
    hand_written = {name: entry.path for name, entry in releases.items()}
    sets: dict[str, SetEntry] = {}
    for item in set_files:
        release_set: ReleaseSet = item.model
        generation = generate(
            release_set, item.path, clusters, cluster_errors, _folders(tree, release_set)
        )
        kept, refusals = [], []
        for member in generation.members:
            holder = _holder(member.name, hand_written, sets)
            if holder is not None:
                line = f"{item.path}: member {member.name} refused: {holder} has that name"
                refusals.append(line)
                continue
            release = None if member.release is None else member.release.read_from(item.path)
            releases[member.name] = ReleaseEntry(
                member.name, item.path, _member_blob(item.blob, member), release, member.error
            )
            kept.append(member.name)
        sets[release_set.name] = SetEntry(
            item.path, release_set, tuple(kept), generation.failed, tuple(refusals)
        )
    return sets


def has_file(snapshot: GitOpsSnapshot, path: str) -> bool:
    """Whether ``path`` is a Release file of ``snapshot`` that does not parse."""
    return any(e.path == path and e.error for e in snapshot.releases.values())


def _holder(name: str, hand_written: Mapping[str, str], sets: Mapping[str, SetEntry]) -> str | None:
    """Who holds a member's name: a hand-written Release (its file), or an earlier set."""
    if name in hand_written:
        return f"{hand_written[name]} (a Release)"
    for set_name, entry in sets.items():
        if name in entry.members:
            return f"{entry.path} (a member of ReleaseSet {set_name})"
    return None


def _member_blob(set_blob: str, member: Member) -> str:
    """A member's change key: the set file's blob and a digest of what it generated, so
    a change of the set, or of a Cluster's labels or vars, is a change of the member."""
    made = member.release.dump() if member.release is not None else member.error
    digest = hashlib.sha256(json.dumps(made, sort_keys=True).encode()).hexdigest()[:16]
    return f"{set_blob}:{digest}"


def _folders(tree: git.Tree, release_set: ReleaseSet) -> Folders:
    """The folders each ``directories`` pattern of the set matches in ``tree``."""
    found: dict[str, list[str]] = {}
    errors: dict[str, str] = {}
    for pattern in directory_patterns(release_set):
        try:
            found[pattern] = _matching(tree, pattern)
        except (ODBError, ValueError) as exc:
            errors[pattern] = f"the folders cannot be read: {one_line(str(exc))}"
    return Folders(found, errors)


def _matching(tree: git.Tree, pattern: str) -> list[str]:
    """Folders of ``tree`` matching ``pattern`` segment by segment (``*`` within one)."""
    level = [tree]
    for segment in [p for p in pattern.strip("/").split("/") if p]:
        level = [sub for t in level for sub in t.trees if fnmatchcase(sub.name, segment)]
    return sorted(str(t.path) for t in level)


def templates_added(
    releases: dict[str, ReleaseEntry], clusters: Mapping[str, Cluster]
) -> dict[str, ReleaseEntry]:
    """The entries, each Release's ``verification.templates`` added to its analyses from
    its Cluster's ``spec.analyses``; a name the Cluster lacks (or a Cluster that cannot
    be read) makes the Release invalid with a line naming the file and field."""
    if not any(
        e.release is not None and e.release.spec.verification is not None
        and e.release.spec.verification.templates
        for e in releases.values()
    ):  # fmt: skip
        return releases
    added = dict(releases)
    for name, entry in releases.items():
        release = entry.release
        verification = release.spec.verification if release is not None else None
        if release is None or verification is None or not verification.templates:
            continue
        cluster = clusters.get(release.spec.cluster)
        shared = {a.name: a for a in cluster.spec.analyses} if cluster is not None else {}
        missing = [t for t in verification.templates if t not in shared]
        if missing:
            where = f"clusters/{release.spec.cluster}.yaml spec.analyses"
            i = verification.templates.index(missing[0])
            error = (
                f"{entry.path}: spec.verification.templates.{i}: {missing[0]!r} is not an "
                f"analysis of {where}"
            )
            added[name] = replace(entry, release=None, error=error)
            continue
        analyses = (*verification.analyses, *(shared[t] for t in verification.templates))
        spec = release.spec.model_copy(
            update={"verification": verification.model_copy(update={"analyses": analyses})}
        )
        added[name] = replace(entry, release=release.model_copy(update={"spec": spec}))
    return added
