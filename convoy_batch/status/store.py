"""``status/<name>.yaml`` in the GitOps repository (SPEC 10): read from HEAD, commit, push.

Does git I/O. Statuses are read from the HEAD commit (never the working tree), every
file in one pass over the tree. Each changed status is committed alone, by git itself
(:mod:`convoy_batch.status.gitwrite`): inside :meth:`StatusStore.batch` the texts are made on one
background thread while the tick goes on (:mod:`convoy_batch.status.text`), and the
commits are written by one ``git fast-import`` when the batch ends, the branch, index and
working tree moved together. Nothing the user staged or changed elsewhere is committed or
lost. Pushing: :mod:`convoy_batch.status.push`.
"""

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
from git.refs.symbolic import SymbolicReference

from convoy_batch.errors import StateFailed, UsageError
from convoy_batch.models import ReleaseStatus
from convoy_batch.state.caches import ParseCache
from convoy_batch.state.files import check_file_name, problem_of
from convoy_batch.state.locks import LockBusy, Locks
from convoy_batch.status.gitwrite import Change, GitError
from convoy_batch.status.push import STATUS_DIR, Pusher, PushResult
from convoy_batch.status.text import is_set_status, parse_status, render_status

log = logging.getLogger("convoy_batch")

__all__ = ["STATUS_DIR", "GitError", "PushResult", "StatusStore", "parse_status"]

_SYMLINK_MODE = 0o120000


class StatusStore:
    """Status files of the GitOps repository ``repo``: load from HEAD, commit, push."""

    def __init__(
        self,
        repo: git.Repo,
        locks: Locks,
        *,
        push_attempts: int = 3,
        cache: ParseCache | None = None,
    ) -> None:
        """``cache``: parsed statuses by blob id; the statuses committed here go in it, so
        the next tick does not parse what this one wrote."""
        # A Repo of its own: its git processes are not shared with the caller's threads.
        self.repo = git.Repo(repo.git_dir if repo.bare else repo.working_tree_dir)
        self.locks = locks
        self.pusher = Pusher.open(self.repo, locks, push_attempts)
        self.writer = self.pusher.writer
        self.cache = cache
        self.unreadable: set[str] = set()
        """Status files :meth:`load_all` could not read (their renders are unknown)."""
        self.error: str | None = None
        """Why the last batch of commits was not written, or what failed once it was
        (one line); None when all went well."""
        self.landed = False
        """The last batch's commits are on the branch (whatever :attr:`error` says)."""
        # HEAD's status blobs and texts, read once (a batch starts over: HEAD may move).
        self._blobs: dict[str, git.Blob] | None = None
        self._texts: dict[str, str] = {}
        self._queue: list[tuple[Future[_Planned | None], Future[str | None]]] | None = None
        self._texter: ThreadPoolExecutor | None = None
        self._read_at: str | None = None
        """The HEAD commit :meth:`_read_head_blobs` last read."""
        self._opened: tuple[str | None, dict[str, str]] = (None, {})
        """The HEAD commit :meth:`load_all` read, and its status blob ids by Release."""
        self._probe: git.Repo | None = None
        """:meth:`committed_since_opened`'s reader (one caller at a time)."""
        self._stamp: _HeadStamp | None = None
        """The files HEAD is kept in, as they were when :meth:`load_all` read it."""
        self.set_statuses: dict[str, str] = {}
        """ReleaseSet status files at HEAD (name -> text): :meth:`load_all` leaves them
        out of the Releases' statuses."""

    def recover(self) -> None:
        """Repair what a convoy-batch process killed while writing git left behind. When
        another convoy-batch process holds the repo lock, it is alive and writing: there
        is nothing to repair."""
        try:
            with contextlib.suppress(LockBusy), self.locks.repo(timeout=0):
                self.writer.recover()
        except StateFailed as exc:  # the tick goes on: its own commits take the lock again
            log.warning("git not checked for a killed write: %s", exc)

    # reading

    def load_all(self, cache: ParseCache | None = None) -> dict[str, ReleaseStatus]:
        """Every ``status/*.yaml`` of HEAD; an invalid file is a warning and an empty status.
        With ``cache``, a file whose blob was parsed before is not read again."""
        statuses = {}
        self._blobs, self._texts = None, {}
        # Taken before HEAD is read, here only: a batch reads HEAD again for its commits,
        # and the stamp must stay the one of the HEAD the statuses were opened at.
        self._stamp = _HeadStamp.take(self.repo)
        blobs = self._head_blobs()
        self._opened = (self._read_at, {name: blob.hexsha for name, blob in blobs.items()})
        self.set_statuses = {}
        for name, blob in blobs.items():
            status = _load_blob(blob, cache)
            if isinstance(status, str):
                self.set_statuses[name] = status
                continue
            if status is None:
                self.unreadable.add(name)
            statuses[name] = status or ReleaseStatus()
        return statuses

    def committed_since_opened(self, name: str) -> bool:
        """Whether another writer committed ``status/<name>.yaml`` since :meth:`load_all`
        read HEAD (a tick racing this one): HEAD is read now, the file only when HEAD
        moved. One caller at a time."""
        opened_head, opened = self._opened
        if self._stamp is not None and self._stamp.unchanged():
            return False
        if self._probe is None:  # its own git processes: the texts' thread uses self.repo
            self._probe = git.Repo(self.repo.git_dir)
        # HEAD's commit id alone (a third of the cost of reading its commit object).
        if SymbolicReference.dereference_recursive(self._probe, "HEAD") == opened_head:
            return False
        head = self._probe.head.commit
        try:
            now: str | None = (head.tree / _path(name)).hexsha
        except KeyError:
            now = None
        return now != opened.get(name)

    def load(self, name: str) -> ReleaseStatus:
        """The status of ``name`` at HEAD; empty when there is none or it is invalid."""
        text = self._head_text(name)
        return ReleaseStatus() if text is None else _parse_or_warn(text, _path(name))

    def render_text(self, name: str, status: ReleaseStatus) -> str:
        """The file text for ``status``: HEAD's file updated in place, else a new document."""
        return render_status(self._head_text(name), status)

    def _head_blobs(self) -> dict[str, git.Blob]:
        """Release name -> blob of ``status/<name>.yaml`` at HEAD (regular files only)."""
        if self._blobs is None:
            self._blobs = self._read_head_blobs()
        return self._blobs

    def _read_head_blobs(self) -> dict[str, git.Blob]:
        try:
            commit = self.repo.head.commit
            self._read_at = commit.hexsha
            folder = commit.tree / STATUS_DIR
        except (ValueError, KeyError):  # ValueError: an unborn branch, no commit yet
            return {}
        if folder.type != "tree":
            kind = "symlink" if folder.mode == _SYMLINK_MODE else "file"
            raise UsageError(
                f"{STATUS_DIR}: committed as a {kind}, not a folder; "
                "convoy-batch reads and writes no status through it"
            )
        blobs = {}
        for blob in folder.blobs:
            if not blob.name.endswith(".yaml"):
                continue
            name = blob.name.removesuffix(".yaml")
            if blob.mode == _SYMLINK_MODE:
                log.warning("%s: a symlink, not a status file; treated as empty", blob.path)
                self.unreadable.add(name)
                continue
            blobs[name] = blob
        return blobs

    def _head_text(self, name: str) -> str | None:
        if name not in self._texts:
            blob = self._head_blobs().get(name)
            if blob is None:
                return None
            self._texts[name] = blob.data_stream.read().decode(errors="replace")
        return self._texts[name]

    # committing

    def commit(self, name: str, status: ReleaseStatus, message: str) -> str | None:
        """Commit ``status/<name>.yaml`` alone, now; the commit SHA, or None when unchanged."""
        with self.batch():
            done = self.commit_later(name, status, message)
        if self.error is not None:
            raise GitError(self.error)
        return done.result()

    def commit_later(
        self, name: str, status: ReleaseStatus | None, message: str
    ) -> "Future[str | None]":
        """Inside :meth:`batch`: the commit, written when the batch ends (its SHA, or None
        when the text did not change or the batch could not be written); ``status`` None
        removes the file (:meth:`remove_later`)."""
        return self._later(self._change, name, status, message)

    def commit_text_later(self, name: str, text: str, message: str) -> "Future[str | None]":
        """Inside :meth:`batch`: commit ``status/<name>.yaml`` with ``text`` (a ReleaseSet's
        status), when it differs from HEAD's."""
        return self._later(self._text_change, name, text, message)

    def _later(self, plan: Callable[..., "_Planned | None"], *args: Any) -> "Future[str | None]":
        """Queue a commit ``plan(*args)`` makes on the texts' thread (see :meth:`batch`)."""
        if self._queue is None or self._texter is None:
            raise RuntimeError("a status commit queued outside StatusStore.batch()")
        change = self._texter.submit(plan, *args)
        done: Future[str | None] = Future()
        self._queue.append((change, done))
        return done

    def _text_change(self, name: str, text: str, message: str) -> "_Planned | None":
        if text == self._head_text(name):
            return None
        self._texts[name] = text
        return _Planned(Change(path=_path(name), data=text.encode(), message=message), None)

    def remove_later(self, name: str, message: str) -> "Future[str | None]":
        """Inside :meth:`batch`: the commit that removes ``status/<name>.yaml`` (a retired
        Release), written when the batch ends; None when there is no such file."""
        return self.commit_later(name, None, message)

    def _change(self, name: str, status: ReleaseStatus | None, message: str) -> "_Planned | None":
        old = self._head_text(name)
        if status is None:
            if old is None:
                return None
            self._texts.pop(name, None)
            self._blobs = {k: v for k, v in self._head_blobs().items() if k != name}
            return _Planned(Change(path=_path(name), data=None, message=message), None)
        text = render_status(old, status)
        if text == old:
            return None
        self._texts[name] = text  # the next commit of this batch starts from it
        return _Planned(Change(path=_path(name), data=text.encode(), message=message), status)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Within, :meth:`commit_later` collects commits (their texts made on a background
        thread); they are written in order, in one go, when the block ends. A batch that
        cannot be written is logged and kept in :attr:`error`; nothing is raised."""
        self._queue, self._texter = [], ThreadPoolExecutor(1, thread_name_prefix="convoy-text")
        self._blobs, self._texts = None, {}  # HEAD may have moved since the last batch
        try:
            yield
        finally:
            queue, self._queue = self._queue, None
            self._texter.shutdown(wait=True)
            self._texter = None
            self._write(queue)
            self._blobs, self._texts = None, {}  # HEAD has moved

    def _write(self, queue: list[tuple["Future[_Planned | None]", "Future[str | None]"]]) -> None:
        self.error, self.landed = None, False
        planned = [(change.result(), done) for change, done in queue]
        changes = [p.change for p, _ in planned if p is not None]
        commits: list[str] = []
        if changes:
            commits = self._land(changes)
        shas = iter(commits)
        for p, done in planned:
            done.set_result(next(shas, None) if p is not None else None)
        if commits and self.cache is not None:
            self._remember([p for p, _ in planned if p is not None], commits[-1])

    def _land(self, changes: list[Change]) -> list[str]:
        """Write the batch under the repo lock; its commits (none when not written, which
        :attr:`error` says, as it says what failed once they landed)."""
        try:
            with self.locks.repo():
                landed = self.writer.write(changes)
        except (GitError, OSError, StateFailed) as exc:
            # An OSError here is the marker's (git's own failures are GitErrors).
            problem = str(exc) if isinstance(exc, GitError) else problem_of(self.writer.marker, exc)
            self.error = f"status commits not written: {problem}"
            log.error("%s", self.error)
            return []
        self.landed = True
        if landed.problem is not None and landed.repaired:
            log.warning(
                "status commits written; the index was put back as HEAD has it after: %s",
                landed.problem,
            )
        elif landed.problem is not None:
            self.error = (
                f"status commits written, but the index and working tree of {STATUS_DIR}/ "
                f"are not as HEAD has them ({landed.problem}); the next tick puts them back"
            )
            log.error("%s", self.error)
        return landed.commits

    def _remember(self, planned: list["_Planned"], tip: str) -> None:
        """Put the committed statuses in the parse cache under their blob ids (one
        ``git ls-tree`` of the status folder)."""
        assert self.cache is not None
        listing = self.writer.git("ls-tree", "-z", tip, f"{STATUS_DIR}/", strip=False)
        blobs = {}
        for line in filter(None, listing.split("\0")):
            info, path = line.split("\t", 1)
            blobs[path] = info.split()[2]
        newest = {p.change.path: p.status for p in planned}  # the last of a path wins
        for path, status in newest.items():
            if path in blobs and status is not None:
                self.cache.put(path, blobs[path], status.dump_status())

    # pushing

    def push(self) -> PushResult:
        """Push the branch; a rejected push is fetched, rebased and retried (never raises)."""
        return self.pusher.push()


@dataclass(frozen=True)
class _Planned:
    change: Change
    status: ReleaseStatus | None
    """None: the file removed."""


class _HeadStamp:
    """Whether HEAD may have moved since it was read, told from the files git keeps it in
    without reading them (a tick asks once per Release:
    :meth:`StatusStore.committed_since_opened`). Key: each file's inode, mtime and size,
    taken before HEAD is read. Invariant: git replaces each of these files by renaming a
    new one over it (``HEAD``, the branch's loose ref, ``packed-refs``, the reftable's
    ``tables.list``), so while none of them changed, HEAD is still the commit read after
    the stamp; any change sends the caller to read HEAD itself. Lifetime: until HEAD is
    read again."""

    def __init__(self, files: list[Path]) -> None:
        self.files = files
        self.seen = self._now()

    @classmethod
    def take(cls, repo: git.Repo) -> "_HeadStamp":
        git_dir, common = Path(repo.git_dir), Path(repo.common_dir)
        files = [git_dir / "HEAD", common / "packed-refs", common / "reftable" / "tables.list"]
        with contextlib.suppress(TypeError, ValueError, OSError):  # detached, or unreadable
            files.append(common / repo.head.reference.path)
        return cls(files)

    def _now(self) -> list[tuple[int, int, int] | None]:
        found: list[tuple[int, int, int] | None] = []
        for file in self.files:
            try:
                st = os.stat(file)
            except OSError:
                found.append(None)
                continue
            found.append((st.st_ino, st.st_mtime_ns, st.st_size))
        return found

    def unchanged(self) -> bool:
        return self._now() == self.seen


def _path(name: str) -> str:
    return f"{STATUS_DIR}/{check_file_name(name)}.yaml"


def _load_blob(blob: git.Blob, cache: ParseCache | None) -> ReleaseStatus | str | None:
    """The status in ``blob``; a ReleaseSet's status as its text (never cached); None
    (with a warning) when it cannot be read."""
    path = str(blob.path)
    cached = cache.get(path, blob.hexsha) if cache is not None else None
    if cached is not None:
        return ReleaseStatus.model_validate(cached)
    raw: bytes = blob.data_stream.read()
    if is_set_status(raw):
        return raw.decode(errors="replace")
    try:
        status = parse_status(raw, path)
    except ValueError as exc:
        log.warning("%s; treated as an empty status", exc)
        return None
    if cache is not None:
        cache.put(path, blob.hexsha, status.dump_status())
    return status


def _parse_or_warn(text: bytes | str, source: str) -> ReleaseStatus:
    try:
        return parse_status(text, source)
    except ValueError as exc:
        log.warning("%s; treated as an empty status", exc)
        return ReleaseStatus()
