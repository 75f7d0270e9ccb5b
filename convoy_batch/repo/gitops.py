"""The GitOps repository (SPEC 1): Releases and Clusters read from the checked-out
branch's HEAD commit, never from the working tree. Does I/O (reads git objects).

A broken file never stops the others: each Release file gives a :class:`ReleaseEntry`
holding either the Release or a one-line error naming the file and the field. A
ReleaseSet file (``kind: ReleaseSet``, README "ReleaseSets") gives one entry per member
(:mod:`convoy_batch.rollout.releaseset`, :mod:`convoy_batch.repo.members`), listed at
the set's path. Each Release read knows its file (``Release.file``; a member, its
set's): what the operator's keys and credentials name as the Releases that may use them.
The records a snapshot holds are :mod:`convoy_batch.repo.entries`' (read from here too).
"""

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import git
from git.exc import ODBError
from pydantic import TypeAdapter, ValidationError

from convoy_batch.errors import UsageError, one_line
from convoy_batch.manifests.yamlload import load_documents
from convoy_batch.models import Cluster, Model, Name, Release, ReleaseSet, parse_model
from convoy_batch.repo.entries import GitOpsSnapshot as GitOpsSnapshot  # read from here too
from convoy_batch.repo.entries import Loaded
from convoy_batch.repo.entries import ReleaseEntry as ReleaseEntry  # read from here too
from convoy_batch.repo.entries import SetEntry as SetEntry  # read from here too
from convoy_batch.repo.members import has_file, members, templates_added
from convoy_batch.rollout.depends import refused
from convoy_batch.state.caches import ParseCache

RELEASES_DIR = "releases"
STATUS_DIR = "status"
"""Where the status files are (``convoy_batch.status`` writes them)."""
CLUSTERS_DIR = "clusters"
SUFFIXES = (".yaml", ".yml")
_NAME = TypeAdapter(Name)
M = TypeVar("M", bound=Model)


class GitOpsRepo:
    """A GitOps repository on disk; :meth:`snapshot` reads its committed objects."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.repo = git.Repo(self.path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise UsageError(f"{self.path}: not a git repository") from None
        if not self.repo.head.is_valid():
            raise UsageError(f"{self.path}: the repository has no commit yet")
        self._versions: dict[tuple[str, str], LastVersion | None] = {}
        """:meth:`last_version`'s answers; key (name, head commit), valid for ever (a
        commit's history does not change); lifetime: this object, one tick."""

    def commit(self, revision: str | None = None) -> git.Commit:
        """HEAD's commit, or the commit ``revision`` (a branch, tag or SHA) names, read
        without touching HEAD, the index or the working tree (UsageError, one line)."""
        if revision is None:
            return self.repo.head.commit
        try:
            if revision.startswith("-"):
                raise ValueError(revision)
            commit = self.repo.commit(revision)
            commit.tree  # noqa: B018 - the commit's objects must be present
        except (ODBError, ValueError):
            raise UsageError(f"{revision!r}: not a revision of {self.path}") from None
        return commit

    def status_names(self) -> set[str]:
        """The Releases with a status file (``status/<name>.yaml``) at HEAD."""
        try:
            folder = self.repo.head.commit.tree / STATUS_DIR
        except KeyError:
            return set()
        if folder.type != "tree":
            return set()
        return {b.name.removesuffix(".yaml") for b in folder.blobs if b.name.endswith(".yaml")}

    def has_commit(self, sha: str) -> bool:
        """Whether ``sha`` names a commit of this repository."""
        try:
            self.repo.git.rev_parse("--verify", "--quiet", f"{sha}^{{commit}}")
        except git.GitCommandError:
            return False
        return True

    def snapshot(
        self, cache: ParseCache | None = None, revision: str | None = None, *, thaw: bool = True
    ) -> GitOpsSnapshot:
        """Releases and Clusters of the HEAD commit (or of ``revision``), in one pass over
        its tree. With ``cache``, a file whose blob was parsed before is not read again.
        A ReleaseSet whose generation fails (its file does not parse, a Cluster file or a
        folder cannot be read, it is wrong in itself) keeps the members it cannot generate
        now as the newest commit that generated them had them (:meth:`_frozen`,
        :meth:`_unparsed_sets`; ``thaw=False``: not looked for)."""
        head = self.repo.head
        commit = self.commit(revision)
        releases: dict[str, ReleaseEntry] = {}
        clusters: dict[str, Cluster] = {}
        cluster_errors: dict[str, str] = {}
        set_files: list[Loaded] = []
        try:
            for item in load_objects(commit.tree, RELEASES_DIR, Release, cache, RELEASE_KINDS):
                if isinstance(item.model, ReleaseSet):
                    set_files.append(item)
                    continue
                releases[item.name] = ReleaseEntry(
                    item.name, item.path, item.blob, item.model, item.error
                )
            for item in load_objects(commit.tree, CLUSTERS_DIR, Cluster, cache):
                if item.error is None:
                    clusters[item.name] = item.model
                else:
                    cluster_errors[item.name] = item.error
            sets = members(commit.tree, set_files, releases, clusters, cluster_errors)
            if thaw:
                sets.update(self._unparsed_sets(sets, commit, releases, cache))
                for name, entry in list(sets.items()):
                    if entry.failed is not None:
                        sets[name] = self._frozen(entry, commit, releases, cache)
        except (ODBError, ValueError, git.GitCommandError) as exc:
            # A missing or corrupt object: the repository cannot be read, so nothing is
            # decided from it (a removed Release is never retired on a partial reading).
            raise UsageError(
                f"{self.path}: commit {commit.hexsha[:12]} cannot be read: {one_line(str(exc))}"
            ) from None
        branch = None if head.is_detached else head.reference.name
        releases = templates_added(_dependencies_checked(releases), clusters)
        return GitOpsSnapshot(commit.hexsha, branch, releases, clusters, cluster_errors, sets)

    def last_version(self, name: str, head: str | None = None) -> "LastVersion | None":
        """Release ``name`` as its last committed version had it: its file in the first
        parent of the newest commit on ``head``'s first-parent line (default HEAD) that
        removed it; None when no commit removed such a file. Git walks the history."""
        if head is None:  # HEAD may move: not kept
            return self._last_version(name, None)
        if (name, head) not in self._versions:
            self._versions[name, head] = self._last_version(name, head)
        return self._versions[name, head]

    def _last_version(self, name: str, head: str | None) -> "LastVersion | None":
        paths = [f"{RELEASES_DIR}/{name}{suffix}" for suffix in SUFFIXES]
        try:
            found = self.repo.git.log(
                "--first-parent",
                "-m",
                "--diff-filter=D",
                "--no-renames",
                "--format=%H",
                "--max-count=1",
                head or "HEAD",
                "--",
                *paths,
            ).split()
            if not found:
                return None
            removing = self.repo.commit(found[0])
            before = removing.parents[0].tree
            for path in paths:
                try:
                    blob = before / path
                except KeyError:
                    continue
                loaded = _load_file(blob, Release, None)
                return LastVersion(name, removing.hexsha, path, loaded.model, loaded.error)
        except (ODBError, ValueError, git.GitCommandError) as exc:
            why = f"the history of {paths[0]} cannot be read: {one_line(str(exc))}"
            return LastVersion(name, "", paths[0], None, why)
        return None

    def _frozen(
        self,
        entry: "SetEntry",
        commit: git.Commit,
        releases: dict[str, ReleaseEntry],
        cache: ParseCache | None,
    ) -> "SetEntry":
        """A set whose generation failed, with the members of the newest commit before
        ``commit`` that generated them all (among :data:`MEMBER_HISTORY` that change a
        file outside ``status/``, back to the commit that wrote the set) that it cannot
        generate now added to ``releases`` at that version, so they keep syncing; the
        entry as it was when there is none."""
        name = entry.release_set.name
        try:
            for sha in self._history(commit.hexsha):
                before = self.snapshot(cache, sha, thaw=False)
                old = before.sets.get(name)
                if old is None and has_file(before, entry.path):
                    continue  # its file did not parse then either
                if old is None:  # before the set was written: no members to keep
                    break
                if old.failed is not None or not old.members:
                    continue
                kept = [m for m in old.members if m not in releases]
                for member in kept:
                    releases[member] = before.releases[member]
                if not kept:
                    return entry
                return replace(entry, members=(*entry.members, *kept), frozen_at=sha)
        except (ODBError, ValueError, git.GitCommandError, UsageError):
            return entry
        return entry

    def _unparsed_sets(
        self,
        sets: Mapping[str, "SetEntry"],
        commit: git.Commit,
        releases: dict[str, ReleaseEntry],
        cache: ParseCache | None,
    ) -> dict[str, "SetEntry"]:
        """The ReleaseSets whose file does not parse at ``commit``: each as the newest
        version of its file that parsed (among :data:`MEMBER_HISTORY` commits that
        changed it), with that error as its GenerationFailed; their entries leave
        ``releases`` (a set's name is no Release). A file that never parsed as a set
        stays a Release that does not parse."""
        found: dict[str, SetEntry] = {}
        set_paths = {entry.path for entry in sets.values()}
        broken = [e for e in releases.values() if e.error and e.path not in set_paths]
        for entry in broken:
            release_set = self._last_parsed_set(entry.path, commit, cache)
            if release_set is None or release_set.name in sets:
                continue
            del releases[entry.name]
            assert entry.error is not None
            found[release_set.name] = SetEntry(
                entry.path, release_set, (), entry.error, unparsed=True
            )
        return found

    def _last_parsed_set(
        self, path: str, commit: git.Commit, cache: ParseCache | None
    ) -> ReleaseSet | None:
        """The newest version of ``path`` before ``commit`` that parses, when it is a
        ReleaseSet (None: a Release, or no version parses)."""
        try:
            text: str = self.repo.git.log(
                "--first-parent", "--format=%H", f"--max-count={MEMBER_HISTORY}",
                commit.hexsha, "--", path,
            )  # fmt: skip
            for sha in text.split()[1:]:  # the first one wrote the version that fails
                try:
                    blob = self.repo.commit(sha).tree / path
                except KeyError:
                    return None  # the file was removed there: a new file since
                loaded = _load_file(blob, Release, cache, RELEASE_KINDS)
                if loaded.error is None:
                    return loaded.model if isinstance(loaded.model, ReleaseSet) else None
        except (ODBError, ValueError, git.GitCommandError):
            return None
        return None

    def _history(self, head: str) -> list[str]:
        """The first-parent commits from ``head`` (newest first) that change a file outside
        ``status/``, at most :data:`MEMBER_HISTORY`: where a member set can change. When
        a tree of that history cannot be read (a missing object), the last commits
        unfiltered: their own objects may still be whole."""
        line = ["--first-parent", "--format=%H", f"--max-count={MEMBER_HISTORY}", head]
        try:
            text: str = self.repo.git.log(*line, "--", ".", f":(exclude){STATUS_DIR}")
        except git.GitCommandError:
            text = self.repo.git.log(*line)
        return text.split()

    def last_member_version(
        self, name: str, head: str, cache: ParseCache | None = None
    ) -> "LastVersion | None":
        """ReleaseSet member ``name`` as the newest commit that generated it had it: the
        first parent of the newest commit on ``head``'s first-parent line after which it
        is no member (None: no such commit among the last :data:`MEMBER_HISTORY`). Each
        commit is read as :meth:`snapshot` reads one (``cache``: the files parsed before)."""
        if (name, f"member:{head}") in self._versions:
            return self._versions[name, f"member:{head}"]
        found = None
        try:
            for sha in self._history(head):
                parents = self.repo.commit(sha).parents
                if not parents:
                    break
                before = self.snapshot(cache, revision=parents[0].hexsha, thaw=False)
                entry = before.releases.get(name)
                if entry is not None and before.set_of(name) is not None:
                    found = LastVersion(name, sha, entry.path, entry.release, entry.error)
                    break
        except (ODBError, ValueError, git.GitCommandError, UsageError) as exc:
            why = f"the history of its ReleaseSet cannot be read: {one_line(str(exc))}"
            found = LastVersion(name, "", RELEASES_DIR, None, why)
        self._versions[name, f"member:{head}"] = found
        return found

    def trailers(self, key: str, since: str | None, head: str | None = None) -> list[str]:
        """The values of trailer ``key`` in the commits of ``since..head`` (``head`` alone
        when ``since`` is None), as git parses them."""
        span = f"{since}..{head or 'HEAD'}" if since else head or "HEAD"
        text = self.repo.git.log(
            f"--format=%(trailers:key={key},valueonly,separator=%x00)%x00",
            *(() if since else ("--max-count=1",)),
            span,
        )
        return [v.strip() for v in text.split("\0") if v.strip()]


@dataclass(frozen=True)
class LastVersion:
    """The Release file a commit removed, read from that commit's first parent."""

    name: str
    removed_in: str
    """The SHA of the commit that removed the file."""
    path: str
    release: Release | None
    error: str | None
    """Why that version does not parse (one line), else None."""


MEMBER_HISTORY = 100
"""Commits :meth:`GitOpsRepo.last_member_version` looks back through, at most (those that
change a file outside ``status/``)."""

RELEASE_KINDS: Mapping[str, type[Model]] = {"Release": Release, "ReleaseSet": ReleaseSet}
"""The kinds a file of ``releases/`` may hold, by its ``kind``."""


def _dependencies_checked(releases: dict[str, ReleaseEntry]) -> dict[str, ReleaseEntry]:
    """The entries, those whose ``dependsOn`` is refused (a name that is no Release,
    itself, a cycle) made invalid with a line naming the file and field."""
    graph = {
        name: [d.name for d in e.release.spec.depends_on]
        for name, e in releases.items()
        if e.release is not None and e.release.spec.depends_on
    }
    if not graph:
        return releases
    problems = refused(graph, releases.keys())
    if not problems:
        return releases
    checked = dict(releases)
    for name, problem in problems.items():
        entry = releases[name]
        checked[name] = replace(entry, release=None, error=f"{entry.path}: {problem}")
    return checked


def load_objects(
    tree: git.Tree,
    directory: str,
    model: type[M],
    cache: ParseCache | None = None,
    kinds: Mapping[str, type[Model]] | None = None,
) -> list[Loaded]:
    """Every object file of ``<directory>/`` in ``tree``, in path order, each holding its
    model or a one-line error naming the file and the field; names are made distinct as
    for Releases (see :func:`_claim`). ``kinds``: the model of a file by its ``kind``
    (another kind, or none: ``model``)."""
    return _claim(_load_dir(tree, directory, model, cache, kinds or {}))


def _load_dir(
    tree: git.Tree,
    directory: str,
    model: type[M],
    cache: ParseCache | None,
    kinds: Mapping[str, type[Model]],
) -> list[Loaded]:
    """Every ``<directory>/*.yaml|yml`` blob of ``tree`` (not recursive), sorted by path."""
    try:
        folder = tree / directory
    except KeyError:
        return []
    if folder.type != "tree":
        return []
    blobs = [b for b in folder.blobs if b.name.endswith(SUFFIXES)]
    ordered = sorted(blobs, key=lambda b: str(b.path))
    return [_load_file(blob, model, cache, kinds) for blob in ordered]


def _document(blob: git.Blob, cache: ParseCache | None) -> Any:
    """The one YAML document of ``blob`` (ValueError, one line), parsed once per blob."""
    path = str(blob.path)
    cached = cache.get(path, blob.hexsha) if cache is not None else None
    if cached is not None:
        return cached
    data = _single_document(blob.data_stream.read(), path)
    if cache is not None:
        cache.put(path, blob.hexsha, data)
    return data


def _load_file(
    blob: git.Blob,
    model: type[M],
    cache: ParseCache | None,
    kinds: Mapping[str, type[Model]] | None = None,
) -> Loaded:
    path = str(blob.path)
    stem = PurePosixPath(path).stem
    if blob.mode == blob.link_mode:
        return Loaded(stem, path, blob.hexsha, None, f"{path}: a symlink, not a file")
    try:
        data = _document(blob, cache)
    except ValueError as exc:
        return Loaded(stem, path, blob.hexsha, None, str(exc))
    name = _readable_name(data) or stem
    chosen: type[Model] = (kinds or {}).get(str(data.get("kind")), model)
    try:
        parsed = parse_model(chosen, data, path)
    except ValueError as exc:
        return Loaded(name, path, blob.hexsha, None, str(exc))
    if parsed.metadata.name != stem:  # type: ignore[attr-defined]
        error = f"{path}: metadata.name: {name!r} does not match the file name {stem!r}"
        return Loaded(name, path, blob.hexsha, None, error)
    if isinstance(parsed, Release):  # what the operator's keys and credentials are bound to
        parsed = parsed.read_from(path)
    return Loaded(name, path, blob.hexsha, parsed, None)


def _single_document(raw: bytes, path: str) -> Any:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    docs = load_documents(text, path)
    if not docs:
        raise ValueError(f"{path}: empty file")
    if len(docs) > 1:
        raise ValueError(f"{path}: holds {len(docs)} documents; one object per file")
    if not isinstance(docs[0], dict):
        raise ValueError(f"{path}: not a mapping")
    return docs[0]


def _readable_name(data: dict[str, Any]) -> str | None:
    """metadata.name when it is a DNS-1123 label: only such a name may name a status file."""
    meta = data.get("metadata")
    if not isinstance(meta, dict):
        return None
    try:
        return _NAME.validate_python(meta.get("name"))
    except ValidationError:
        return None


def _claim(items: list[Loaded]) -> list[Loaded]:
    """One entry per name (decided): files that claim the same name (``web.yaml`` and
    ``web.yml``, or a broken ``web.yml`` whose name is its stem) are one entry whose error
    names every one of them, so neither is reconciled as if the other did not exist; it is
    keyed by that name, listed at the first file's path, and its ``blob`` is theirs joined
    (a change to any of them is a change of the entry)."""
    claims: dict[str, list[Loaded]] = {}
    for item in items:
        claims.setdefault(item.name, []).append(item)
    result = [group[0] if len(group) == 1 else _ambiguous(group) for group in claims.values()]
    return sorted(result, key=lambda i: i.path)


def _ambiguous(group: list[Loaded]) -> Loaded:
    paths = sorted(item.path for item in group)
    name = group[0].name
    error = (
        f"{', '.join(paths)}: metadata.name: {name!r} is claimed by {len(paths)} files; "
        "one file per Release"
    )
    blob = "+".join(item.blob for item in sorted(group, key=lambda i: i.path))
    return Loaded(name, paths[0], blob, None, error)
