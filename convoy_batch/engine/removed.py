"""Which Releases a commit removed, and what the repository's history says of them: their
last committed versions (their Cluster, ``deletionPolicy`` and ReleaseSet), the commit the
last tick read (``<state>/last-tick.json``), and the trailers of the commits read since,
which let the mass-deletion guard's deletions through. Read by the retirement pass
(:mod:`.retire`), ``plan``, ``diff`` and the notifications. Reads git and the state
directory; writes nothing.
"""

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from convoy_batch.errors import StateFailed, UsageError
from convoy_batch.models import LABEL_RELEASE_SET
from convoy_batch.repo.gitops import GitOpsRepo, GitOpsSnapshot, LastVersion
from convoy_batch.rollout.retire import ALLOW_DELETE_TRAILER, Allowed, allowed_by_trailers
from convoy_batch.state.caches import ParseCache
from convoy_batch.state.files import read_file, real_root

LAST_TICK_FILE = "last-tick.json"
"""``<state>/last-tick.json``: the commit the last tick read (the guard counts the
Releases there; trailers are read from the commits after it)."""


def gone_names(snapshot: GitOpsSnapshot, opened: Iterable[str]) -> list[str]:
    """The Releases whose status file is at HEAD (``opened``) and whose file no commit
    keeps (``snapshot``: the commit the tick reads)."""
    releases, sets = snapshot.releases, snapshot.sets
    return sorted(name for name in opened if name not in releases and name not in sets)


def last_versions(
    repo: GitOpsRepo, head: str, names: Sequence[str], cache: ParseCache
) -> dict[str, LastVersion | None]:
    """Each removed Release's last committed version on ``head``'s line: the file the
    commit that removed it took away, else (no such commit) the ReleaseSet member as the
    newest commit that generated it had it (``cache``: the repository's parse cache)."""
    versions = {name: repo.last_version(name, head) for name in names}
    for name in names:  # no commit removed a file of it: it may have left a ReleaseSet
        if versions[name] is None:
            versions[name] = repo.last_member_version(name, head, cache)
    return versions


def set_of(version: LastVersion | None) -> str | None:
    """The ReleaseSet a gone Release was a member of, by its last version's label."""
    if version is None or version.release is None:
        return None
    return version.release.metadata.labels.get(LABEL_RELEASE_SET)


def unknown_why(name: str, version: LastVersion | None) -> str:
    if version is None:
        why = f"no commit that removed releases/{name}.yaml was found"
    else:
        why = f"its last committed version does not parse ({version.error})"
    return (
        f"deletion waits: {why}, so its Cluster and deletionPolicy are unknown; "
        f"'reconcile {name} --orphan' ends it without deleting"
    )


def first_unreadable(snapshot: GitOpsSnapshot) -> str | None:
    """The first Release or ReleaseSet file of the snapshot that cannot be read (it could
    be a removed one); a ReleaseSet member's own error is not one (its set's file was
    read)."""
    broken = sorted(
        [
            (e.path, e.error)
            for e in snapshot.releases.values()
            if e.error and not snapshot.set_of(e.name)
        ]
        + [(e.path, e.failed) for e in snapshot.sets.values() if e.unparsed and e.failed]
    )
    return broken[0][1] if broken else None


def uncertain(snapshot: GitOpsSnapshot, set_name: str | None) -> str | None:
    """Why a gone member of ``set_name`` is not retired now: its set's member set cannot
    be told (GenerationFailed), so it may still be a member."""
    entry = snapshot.sets.get(set_name or "")
    if entry is None or entry.failed is None:
        return None
    return f"deletion waits: ReleaseSet {set_name}: GenerationFailed: {entry.failed}"


def last_head(state_dir: Path) -> str | None:
    """The commit the last tick read (None: none recorded, or unreadable)."""
    try:
        raw = read_file(Path(state_dir) / LAST_TICK_FILE, real_root(state_dir))
        commit = json.loads(raw)["commit"] if raw is not None else None
    except (StateFailed, ValueError, KeyError, TypeError):
        return None
    return commit if isinstance(commit, str) else None


def deletions_allowed(repo: GitOpsRepo, head: str, state_dir: Path, every: bool) -> Allowed:
    """What lets the guard's deletions through: ``--allow-deletions`` (``every``), or the
    trailers of the commits this tick reads for the first time (after the last tick's, up
    to ``head``)."""
    if every:
        return Allowed(every=True)
    since = last_head(state_dir)
    if since is not None and not repo.has_commit(since):
        since = None  # the recorded commit is gone (history rewritten): HEAD's alone
    values = repo.trailers(ALLOW_DELETE_TRAILER, since, head)
    return allowed_by_trailers(values)


def last_snapshot(
    repo: GitOpsRepo, snapshot: GitOpsSnapshot, state_dir: Path, cache: ParseCache
) -> GitOpsSnapshot | None:
    """The Releases and ReleaseSets of the commit the last tick read (None: none known,
    or that commit is gone); ``snapshot`` itself when it is that commit."""
    since = last_head(state_dir)
    if since is None or since == snapshot.commit or not repo.has_commit(since):
        return snapshot if since == snapshot.commit else None
    try:
        return repo.snapshot(cache, revision=since)
    except UsageError:
        return None


def last_releases(last: GitOpsSnapshot | None, head: GitOpsSnapshot) -> dict[str, str]:
    """Release -> Cluster at the commit the last tick read (``head``'s when none is
    known), ReleaseSet members included; a Release file that did not parse counts, on no
    Cluster ("")."""
    snapshot = last if last is not None else head
    return {
        name: e.release.spec.cluster if e.release else "" for name, e in snapshot.releases.items()
    }
