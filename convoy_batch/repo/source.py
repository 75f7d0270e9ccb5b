"""Fetch a Release's source (SPEC 3 steps 1 and 7). Does I/O: reads git objects, runs
``git fetch`` into a cached bare clone per URL, and one lazy ``git log`` per repository
and commit for the last-change revisions (:mod:`convoy_batch.repo.changes`).

One :class:`SourceResolver` per tick shares everything between Releases: resolved refs,
remote fetches (at most one per URL per tick), file snapshots and last-change walks,
so 1000 Releases of one repository cost one ``git log`` process, not 1000.

Decided where the spec is silent:
- url unset, ref unset: the GitOps repository's HEAD commit when the resolver was made,
  so status commits made during the tick do not move the source under later Releases.
- A symlink whose target leaves the repository is refused, wherever it is under
  ``source.path``. A symlink to a file inside the repository is followed (its content
  is read under the link's own path); a manifest-named symlink to a directory, or one
  that dangles, is refused.
- ``revision`` is the first commit in ``git log`` order (from the resolved commit) whose
  diff touches a file under ``source.path``; a merge counts through the commits it
  brings in, as ``git log -- path`` shows them.
- A relative local ``url`` is relative to the GitOps repository's directory.
- A local ``url`` (a path, or a ``file:`` URL as git reads it) that resolves, links
  resolved, inside the state directory is refused (SourceFailed) before anything is
  fetched: the source cache there holds other Releases' remotes. Local repositories
  elsewhere are sources as any other.
"""

import bisect
import hashlib
import os
import posixpath
import re
import shutil
import tempfile
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import git
from git.exc import ODBError

from convoy_batch.errors import SourceFailed, one_line
from convoy_batch.models import Release
from convoy_batch.repo.changes import STATUS_FOLDER, ChangeLog, Remembered
from convoy_batch.repo.gitops import GitOpsRepo
from convoy_batch.state.locks import LockBusy, Locks
from convoy_batch.state.operator_files import shown, without_state_dir

SOURCE_SUFFIXES = (".yaml", ".yml", ".json")
REMOTE_HEAD = "refs/convoy/remote-head"
_FETCH_REFSPECS = (
    "+refs/heads/*:refs/heads/*",
    "+refs/tags/*:refs/tags/*",
    f"+HEAD:{REMOTE_HEAD}",
)
_FETCH_LOCK_TIMEOUT_S = 600
_MAX_LINK_DEPTH = 8
_LINK_MODE = 0o120000
_USERINFO = re.compile(r"://[^/@\s]+@")
_REMOTE_URL = re.compile(r"^[^/]*:")  # scheme://, user@host:path, host:path (as git reads them)


@dataclass(frozen=True)
class SourceFile:
    path: str
    """Repo-relative posix path."""
    text: str


@dataclass(frozen=True)
class SourceSnapshot:
    revision: str
    """SHA of the last commit at the ref that changed ``source.path``."""
    files: tuple[SourceFile, ...]
    """Every ``*.yaml``, ``*.yml``, ``*.json`` under ``source.path``, sorted by path."""


@dataclass(frozen=True)
class SourceListing:
    """What a source is made of, without reading the files: for the render cache."""

    revision: str
    fingerprint: str
    """SHA-256 over every manifest file's path and blob id (symlinks resolved)."""


RepoKey = str | None  # the source URL; None for the GitOps repository itself
ListingKey = tuple[RepoKey, str, str]


class SourceResolver:
    """One per tick: caches resolved refs, trees, remote fetches and last-change revisions.

    Thread-safe (one lock around the git readers). :meth:`close` ends the ``git log``
    processes (they also end when the resolver is garbage collected).
    """

    def __init__(self, gitops: GitOpsRepo, state_dir: Path, head: git.Commit | None = None) -> None:
        self._gitops = gitops
        self._state_dir = Path(state_dir)
        self._cache_dir = Path(state_dir) / "sources"
        self._locks = Locks(state_dir)
        # ``head``: the commit an unset url and ref mean (``diff --revision``), else HEAD's
        self._head = head if head is not None else gitops.repo.head.commit
        self._repos: dict[RepoKey, git.Repo] = {None: gitops.repo}
        self._fetch_errors: dict[str, str] = {}
        self._commits: dict[tuple[RepoKey, str | None], git.Commit] = {}
        self._logs: dict[tuple[RepoKey, str], ChangeLog] = {}
        self._remembered = Remembered(Path(state_dir) / "cache" / "last-change.json", gitops)
        self._snapshots: dict[ListingKey, SourceSnapshot] = {}
        self._texts: dict[str, str] = {}  # blob id -> text: Releases often share files
        self._listings: dict[ListingKey, tuple[SourceListing, _Files]] = {}
        # (url, ref or pin, path as written) -> its listing's key, resolved once a tick
        self._resolved: dict[Asked, ListingKey] = {}
        self._revisions: dict[Asked, str] = {}  # -> its revision, found once a tick
        self._trees = _TreeIndex()
        # (url, commit) -> its export, shared by the renders of this tick that only read it
        self._exports: dict[tuple[RepoKey, str], Path] = {}
        self._scratch: Path | None = None
        # Releases may be reconciled on several threads; git's reader processes are not.
        self._lock = threading.RLock()

    def listing(self, release: Release) -> SourceListing:
        """The revision and a fingerprint of ``release``'s source, reading no file content
        (SourceFailed, one line)."""
        with self._lock:
            return self._listing(release)[1][0]

    def revision(self, release: Release) -> str:
        """``listing(release).revision``, without listing the files when the last change
        of ``source.path`` is remembered from an earlier tick (:class:`Remembered`: the
        folder was listed then, and no commit since changed it); SourceFailed, one line.
        Found once a tick per source asked for."""
        with self._lock:
            asked = _asked(release)
            if asked not in self._revisions:
                self._revisions[asked] = self._revision(release, asked)
            return self._revisions[asked]

    def _revision(self, release: Release, asked: "Asked") -> str:
        key = self._resolved.get(asked)
        if key is not None and key in self._listings:
            return self._listings[key][0].revision
        url, ref, path = asked
        if url is None and path is not None:
            commit = self._commit(None, self._repos[None], ref)
            if known := self._remembered.get(commit.hexsha, normalize_source_path(path)):
                return known
        return self._listing(release)[1][0].revision

    def fetch(self, release: Release) -> SourceSnapshot:
        """The source files and revision of ``release`` (SourceFailed, one line)."""
        with self._lock:
            key, (listing, files) = self._listing(release)
            if key not in self._snapshots:
                texts = tuple(SourceFile(path, self._text(blob, path)) for path, blob in files)
                self._snapshots[key] = SourceSnapshot(listing.revision, texts)
            return self._snapshots[key]

    def _listing(self, release: Release) -> tuple[ListingKey, tuple[SourceListing, "_Files"]]:
        source = release.spec.source
        if source.path is None:  # a chart from a repository alone: nothing in git
            raise SourceFailed("source.path: not set, no file of the source is read")
        asked = _asked(release)
        key = self._resolved.get(asked)
        if key is None:
            path = normalize_source_path(source.path)
            commit = self._commit(source.url, self._repo(source.url), asked[1])
            key = self._resolved[asked] = (source.url, commit.hexsha, path)
        if key not in self._listings:
            commit, path = self._commit(source.url, self._repo(source.url), asked[1]), key[2]
            files = _list_files(self._trees, commit, path, _describe(source.url, commit))
            digest = hashlib.sha256()
            for name, blob in files:
                digest.update(f"{name}\0{blob.hexsha}\n".encode())
            revision = self._last_change(source.url, commit, path)
            self._listings[key] = (SourceListing(revision, digest.hexdigest()), files)
        return key, self._listings[key]

    def tree_fingerprint(self, release: Release) -> str:
        """A fingerprint of every file a renderer may read for ``release``: the files of
        the commit its source is read at (an overlay's base or a chart's library lies
        outside ``source.path``), less the folders convoy-batch itself reads
        (:data:`CONTROL_FOLDERS`, in the GitOps repository only). Reads no file content."""
        with self._lock:
            self._listing(release)
            return self._tree(release).fingerprint(_control_folders(release))

    def file_text(self, release: Release, name: str) -> str | None:
        """The text of the file ``name`` (relative to ``source.path``: ``../x`` is beside
        it) at the source's commit (None: there is none; SourceFailed, one line, when the
        source cannot be read or ``name`` leaves the repository)."""
        with self._lock:
            self._listing(release)
            flat = self._tree(release)
            folder = normalize_source_path(release.spec.source.path or "")
            path = posixpath.normpath(posixpath.join(folder or ".", name))
            if name.startswith("/") or path == ".." or path.startswith("../"):
                raise SourceFailed(f"{name!r}: leaves the repository")
            if path not in flat.blobs:
                return None
            return self._text(flat.blob(path), path)

    def export(self, release: Release, directory: Path) -> None:
        """Write the files :meth:`tree_fingerprint` covers into ``directory``, from git
        objects (never the working tree): symlinks are written as the file they lead to
        inside the repository, or left out; executable bits are kept."""
        with self._lock:
            self._listing(release)
            flat = self._tree(release)
            skip = _control_folders(release)
            for name in flat.paths:
                if not name.startswith(skip):
                    _export_file(flat, name, directory)

    def shared_export(self, release: Release) -> Path:
        """The export of :meth:`export` for ``release``'s source commit, made once a tick
        and shared by every renderer that only reads it (a repository of many Releases is
        written once, not once per Release); removed by :meth:`close`."""
        with self._lock:
            source = release.spec.source
            ref = release.spec.pin or source.ref
            key = (source.url, self._commit(source.url, self._repo(source.url), ref).hexsha)
            if key not in self._exports:
                if self._scratch is None:
                    self._scratch = Path(tempfile.mkdtemp(prefix="convoy-exports-"))
                folder = self._scratch / str(len(self._exports))
                folder.mkdir()
                self.export(release, folder)
                self._exports[key] = folder
            return self._exports[key]

    def _tree(self, release: Release) -> "_Flat":
        source = release.spec.source
        ref = release.spec.pin or source.ref
        return self._trees.of(self._commit(source.url, self._repo(source.url), ref))

    def _text(self, blob: git.Blob, path: str) -> str:
        if blob.hexsha not in self._texts:
            self._texts[blob.hexsha] = _text(blob, path)
        return self._texts[blob.hexsha]

    def remember(self) -> None:
        """Keep the last changes this tick knows for the next one (a reconciling tick's
        end; ``plan`` and ``diff`` keep nothing)."""
        self._remembered.save()

    def close(self) -> None:
        """End the tick's git readers and remove its shared exports."""
        for log in self._logs.values():
            log.close()
        self._logs.clear()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
            self._exports.clear()

    def _repo(self, url: str | None) -> git.Repo:
        if url in self._repos:
            return self._repos[url]
        assert url is not None  # the GitOps repository is always cached
        if url not in self._fetch_errors:
            try:
                self._repos[url] = self._fetch_remote(url)
                return self._repos[url]
            except SourceFailed as exc:
                self._fetch_errors[url] = str(exc)  # one failed fetch per URL per tick
        raise SourceFailed(self._fetch_errors[url])

    def _fetch_remote(self, url: str) -> git.Repo:
        """Fetch every branch, tag and the remote HEAD into the cached bare clone."""
        if url.startswith("-"):
            raise SourceFailed(f"source.url {redact(url)!r}: not a repository URL or path")
        self._refuse_the_state_directory(url)
        digest = hashlib.sha256(url.encode()).hexdigest()[:16]
        directory = self._cache_dir / digest
        try:
            with self._locks.source(digest, timeout=_FETCH_LOCK_TIMEOUT_S):
                repo = git.Repo.init(directory, bare=True)
                with repo.git.custom_environment(GIT_TERMINAL_PROMPT="0"):
                    repo.git.fetch(
                        "--prune", "--force", "--quiet", "--end-of-options",
                        self._fetch_url(url), *_FETCH_REFSPECS,
                    )  # fmt: skip
        except git.GitCommandError as exc:
            error = without_state_dir(redact(_git_error(exc)), self._state_dir)
            raise SourceFailed(f"source.url {redact(url)!r}: fetch failed: {error}") from None
        except LockBusy:
            raise SourceFailed(f"source.url {redact(url)!r}: the source cache is locked") from None
        return repo

    def _refuse_the_state_directory(self, url: str) -> None:
        """SourceFailed naming ``spec.source.url`` when the local repository ``url``
        names lies in the state directory, its links resolved (the message names it as
        ``<state>/...``, never the state directory's path)."""
        state = os.path.realpath(self._state_dir)
        for path in self._local_paths(url):
            real = os.path.realpath(path)
            if real == state or real.startswith(state + os.sep):
                raise SourceFailed(
                    f"spec.source.url {shown(real, Path(state))!r}: a repository inside the "
                    "state directory is never a source"
                )

    def _local_paths(self, url: str) -> list[str]:
        """Where git reads the repository of ``url`` when it is on this machine: a path
        (relative to the GitOps repository), or a ``file://`` URL, whose host git drops,
        percent-escapes decoded (as git decodes them) or not; none for a remote."""
        if not _REMOTE_URL.match(url):
            return [self._fetch_url(url)]
        paths = []
        for text in {url, urllib.parse.unquote(url)}:
            if text[:7].lower() == "file://":
                rest = text[7:]
                paths.append(rest[rest.index("/") :] if "/" in rest else "/")
        return paths

    def _fetch_url(self, url: str) -> str:
        if _REMOTE_URL.match(url):
            return url
        return str(self._gitops.path / Path(url).expanduser())

    def _commit(self, url: str | None, repo: git.Repo, ref: str | None) -> git.Commit:
        key = (url, ref)
        if key not in self._commits:
            self._commits[key] = self._resolve(url, repo, ref)
        return self._commits[key]

    def _resolve(self, url: str | None, repo: git.Repo, ref: str | None) -> git.Commit:
        if ref is None and url is None:
            return self._head
        try:
            commit = repo.commit(REMOTE_HEAD if ref is None else ref)
            commit.tree  # noqa: B018 - a full SHA is taken as it is: the object must exist
            return commit
        except (ODBError, ValueError):
            where = "this repository" if url is None else repr(redact(url))
            what = "has no HEAD" if ref is None else f"has no ref {ref!r}"
            raise SourceFailed(f"source {where} {what}") from None

    def _last_change(self, url: str | None, commit: git.Commit, path: str) -> str:
        remembered = self._remembered if url is None else None
        if remembered is not None and (known := remembered.get(commit.hexsha, path)):
            return known
        key = (url, commit.hexsha)
        if key not in self._logs:
            skip = (STATUS_FOLDER,) if url is None else ()
            self._logs[key] = ChangeLog(str(self._repos[url].git_dir), commit.hexsha, skip)
        # A shallow history may end before the path's first commit: the commit itself.
        found = self._logs[key].last_change(path) or commit.hexsha
        if remembered is not None:
            remembered.put(commit.hexsha, path, found)
        return found


Asked = tuple[str | None, str | None, str | None]
"""A source as a Release asks for it: (url, ref or pin, path as written)."""


def _asked(release: Release) -> Asked:
    source = release.spec.source
    return (source.url, release.spec.pin or source.ref, source.path)


def normalize_source_path(path: str) -> str:
    """``source.path`` as a repo-relative posix path (``""`` is the repository root);
    absolute paths and ``..`` are refused (SourceFailed)."""
    if path.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", path):
        raise SourceFailed(f"source.path {path!r}: an absolute path leaves the repository")
    parts = PurePosixPath(path).parts
    if ".." in parts:
        raise SourceFailed(f"source.path {path!r}: '..' leaves the repository")
    return "/".join(parts)


def _describe(url: str | None, commit: git.Commit) -> str:
    return f"{'' if url is None else redact(url) + ' '}at {commit.hexsha[:12]}"


def redact(text: str) -> str:
    """Messages end up in committed status files: hide credentials in URLs."""
    return _USERINFO.sub("://***@", text)


def _git_error(exc: git.GitCommandError) -> str:
    """The first line git wrote to stderr."""
    text = str(exc.stderr).strip().removeprefix("stderr:").strip().strip("'")
    return next((line for line in text.splitlines() if line.strip()), f"exit {exc.status}")


# --- Files -------------------------------------------------------------------------------


class _TreeIndex:
    """Every path of a commit from one ``git ls-tree -r`` per commit, shared by every
    Release: reading trees one object at a time costs a round trip each, which adds
    up to seconds for 1000 Releases under one ``apps/`` folder."""

    def __init__(self) -> None:
        self._flat: dict[str, _Flat] = {}

    def of(self, commit: git.Commit) -> "_Flat":
        """The commit's paths (SourceFailed, one line: an object of its tree is missing)."""
        if commit.hexsha not in self._flat:
            try:
                self._flat[commit.hexsha] = _Flat(commit)
            except git.GitCommandError as exc:
                why = one_line(str(exc.stderr).strip().removeprefix("stderr:").strip(" '"))
                raise SourceFailed(f"commit {commit.hexsha[:12]} cannot be read: {why}") from None
        return self._flat[commit.hexsha]


class _Flat:
    """The blobs of one commit by path, and its directories."""

    def __init__(self, commit: git.Commit) -> None:
        self.repo = commit.repo
        out = self.repo.git.ls_tree("-r", "-z", "--full-tree", commit.hexsha)
        self.blobs: dict[str, tuple[int, str]] = {}
        self.dirs: set[str] = {""}
        for record in out.split("\0"):
            if not record:
                continue
            meta, _, name = record.partition("\t")
            mode, kind, sha = meta.split()
            if kind != "blob":
                continue  # submodules are not part of the source
            self.blobs[name] = (int(mode, 8), sha)
            parent = posixpath.dirname(name)
            while parent not in self.dirs:
                self.dirs.add(parent)
                parent = posixpath.dirname(parent)
        self.paths = sorted(self.blobs)
        self._fingerprints: dict[tuple[str, ...], str] = {}

    def fingerprint(self, skip: tuple[str, ...]) -> str:
        """SHA-256 over every blob's path, mode and id but those under ``skip``."""
        if skip not in self._fingerprints:
            digest = hashlib.sha256()
            for name in self.paths:
                if not name.startswith(skip):
                    mode, sha = self.blobs[name]
                    digest.update(f"{name}\0{mode:o}\0{sha}\n".encode())
            self._fingerprints[skip] = digest.hexdigest()
        return self._fingerprints[skip]

    def blob(self, path: str) -> git.Blob:
        mode, sha = self.blobs[path]
        return git.Blob(self.repo, bytes.fromhex(sha), mode, path)

    def under(self, folder: str) -> list[str]:
        """Every blob path below ``folder`` ("" is the root), sorted."""
        if not folder:
            return self.paths
        prefix = folder + "/"
        start = bisect.bisect_left(self.paths, prefix)
        end = bisect.bisect_left(self.paths, folder + "0")  # "0" sorts right after "/"
        return self.paths[start:end]


_Files = tuple[tuple[str, git.Blob], ...]

CONTROL_FOLDERS = ("alerts/", "clusters/", "releases/", "status/")
"""Folders of the GitOps repository that a renderer neither reads nor is keyed on: a
status commit does not make every rendered Release render again."""


def _control_folders(release: Release) -> tuple[str, ...]:
    return CONTROL_FOLDERS if release.spec.source.url is None else ()


def _export_file(flat: _Flat, name: str, directory: Path) -> None:
    current = name
    for _ in range(_MAX_LINK_DEPTH):
        mode, sha = flat.blobs[current]
        if mode != _LINK_MODE:
            target = directory / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(flat.repo.odb.stream(bytes.fromhex(sha)).read())
            if mode & 0o111:
                target.chmod(0o755)
            return
        try:
            current = _link_target(git.Blob(flat.repo, bytes.fromhex(sha), mode, current), name)
        except SourceFailed:
            return  # leaves the repository
        if current not in flat.blobs:
            return  # a directory or nothing


def _list_files(trees: _TreeIndex, commit: git.Commit, path: str, where: str) -> _Files:
    """(path, blob) of every manifest file under ``path``, symlinks followed, sorted."""
    flat = trees.of(commit)
    if path in flat.blobs:
        raise SourceFailed(f"source.path {path!r}: not a directory ({where})")
    if path not in flat.dirs:
        raise SourceFailed(f"source.path {path!r}: not found ({where})")
    files = []
    for name in flat.under(path):
        item = flat.blob(name)
        blob = _follow(flat, item, where) if item.mode == _LINK_MODE else item
        if blob is not None and name.endswith(SOURCE_SUFFIXES):
            files.append((name, blob))
    return tuple(files)


def _link_target(link: git.Blob, where: str) -> str:
    """The repo-relative path a symlink points to; SourceFailed when it leaves the repo."""
    target = link.data_stream.read().decode("utf-8", "surrogateescape")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(str(link.path)), target))
    if target.startswith("/") or resolved == ".." or resolved.startswith("../"):
        raise SourceFailed(f"{link.path}: symlink to {target!r} leaves the repository ({where})")
    return resolved


def _follow(flat: _Flat, link: git.Blob, where: str) -> git.Blob | None:
    """The blob a symlink resolves to; None for a non-manifest link (checked, not read)."""
    current = link
    for _ in range(_MAX_LINK_DEPTH):
        target = _link_target(current, where)
        if not str(link.path).endswith(SOURCE_SUFFIXES):
            return None
        if target in flat.dirs:
            raise SourceFailed(f"{link.path}: symlink to a directory is not followed ({where})")
        if target not in flat.blobs:
            raise SourceFailed(f"{link.path}: symlink to missing {target!r} ({where})")
        found = flat.blob(target)
        if found.mode != _LINK_MODE:
            return found
        current = found
    raise SourceFailed(f"{link.path}: too many levels of symlinks ({where})")


def _text(blob: git.Blob, path: str) -> str:
    try:
        return str(blob.data_stream.read().decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise SourceFailed(f"{path}: not UTF-8 text") from None
