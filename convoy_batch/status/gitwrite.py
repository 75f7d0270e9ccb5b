"""Commits written by git itself: one ``git fast-import`` per batch, the branch moved by
one ``git update-ref`` transaction with its old value, and the index and working tree of
the committed paths moved with it under git's ``index.lock``. Does git and file I/O.

The order of a batch, which keeps a person working in the same checkout safe and lets a
kill at any point be repaired by the next tick (the caller holds
``<state>/locks/repo.lock`` throughout):

1. a marker (``<state>/locks/git-write.json``, durable) names the paths being written;
2. ``.git/index.lock`` is taken (gitdb's ``LockedFD``: git's own lock protocol), holding a
   copy of the index; from here a person's ``git commit`` fails (or, retried, waits) with
   git's own message, and cannot move the branch;
3. ``git fast-import`` writes the commits onto a staging ref, built on HEAD;
4. ``git checkout <new> -- <paths>`` writes those files and their entries into the locked
   copy of the index;
5. one ``git update-ref --stdin`` transaction moves HEAD (its branch) from the old commit
   to the new one (refused if it moved) and deletes the staging ref; git writes the
   ref logs; the locked copy is renamed over the index the moment git answers
   ``commit: ok``, before git exits (the lock let go);
6. the marker is removed.

Why the index is ready before the branch moves: ``git commit`` reads HEAD, then the
index without a lock, and only then takes ``index.lock``; a person's commit that saw
the new HEAD and the old index would delete the new statuses. So the time between the
branch moving and the index being replaced is only the rename, as in git's own commit
(which writes the index before it moves the branch): the transaction is sent as
``start``/``prepare``/``commit`` and the rename follows git's answer to ``commit``, not
git's exit (milliseconds: a person's commit, retried in a loop beside a 40-Release
tick under load, once fell into that window). A batch that fails before the
branch moves (a full disk, a failing fsync, a lock git could not write) puts the paths
back as HEAD has them, a new status file removed from the working tree too, so nothing
is left untracked; one that fails after has landed: it is reported as written, and the
paths are put back as HEAD (the new commits) has them, the marker kept for the next
tick when even that fails.

Git's objects, refs and the index are fsynced (``core.fsync``). :meth:`GitWriter.recover`,
at the start of every tick under the repo lock, finds a marker a killed process left: it
removes the lock files git left (only convoy-batch can have left them: it held the index
lock), and puts the marked paths of the index and working tree back as HEAD has them,
whether or not the branch had moved.
"""

import contextlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git
from gitdb.util import LockedFD

from convoy_batch.state.files import atomic_write

log = logging.getLogger("convoy_batch")

BOT_NAME = "convoy-batch"
BOT_EMAIL = "convoy-batch@localhost"
STAGING_REF = "refs/convoy-batch/staging"
MARKER_FILE = "git-write.json"
"""The marker of a batch in flight, in the state directory's ``locks/``."""
_ZERO = "0" * 40
_SCRATCH = "convoy-batch-scratch-"
_LOCK_WAIT = 10.0  # seconds a lock held by another git process is waited for
# Objects, refs and the index are fsynced (git's default leaves refs and the index to the
# page cache); hooks are not run (a post-checkout hook is the user's, not ours).
_CONFIG = ("-c", "core.fsync=committed,index", "-c", "core.hooksPath=/dev/null")


class GitError(Exception):
    """A git command failed; the message is one line."""


class HeadMoved(GitError):
    """The branch moved between building the commits and moving it."""


@dataclass(frozen=True)
class Landed:
    """A batch whose branch moved: its commits, and what failed after the branch moved
    (updating the index and working tree, one line; None: nothing)."""

    commits: list[str]
    problem: str | None = None
    repaired: bool = True
    """The paths of the index and working tree are as HEAD has them after all (put back
    once more); False: they are not, and the marker stays for the next tick."""


@dataclass(frozen=True)
class Change:
    """One commit of a batch: ``path`` set to ``data`` (None: the file removed)."""

    path: str
    data: bytes | None
    message: str


Update = Callable[[str | None, str, Sequence[str], Mapping[str, str]], None]
"""Updates the locked copy of the index (and the working tree) from the old HEAD to the
new one for the paths; given the environment that makes git write that copy."""


class GitWriter:
    """Writes commits of single files onto HEAD's branch of ``repo``."""

    def __init__(self, repo: git.Repo, marker: Path) -> None:
        self.repo = repo
        self.git_dir = Path(repo.git_dir)
        self.common_dir = Path(repo.common_dir)
        self.work_tree = Path(repo.working_tree_dir) if repo.working_tree_dir else None
        self.marker = marker

    # --- the batch ------------------------------------------------------------------

    def write(self, changes: Sequence[Change], tries: int = 3) -> Landed:
        """Commit ``changes`` in order onto HEAD; their commit ids. The caller holds the
        repo lock. GitError or OSError (one line) when the branch did not move, the
        index and working tree left as they were; HeadMoved when the branch moved under
        the index lock ``tries`` times (only a writer that ignores it can do that)."""
        paths = list(dict.fromkeys(c.path for c in changes))
        first = changes[0].message.splitlines()[0]
        message = f"{BOT_NAME}: {first}"
        if len(changes) > 1:
            message = f"{BOT_NAME}: {len(changes)} commits ({first}, ...)"
        tips: list[str] = []

        def build(old: str | None) -> str:
            tips[:] = self._fast_import(changes, old)
            return tips[-1]

        # A batch that removes a file updates the index as the new HEAD has each path.
        removes = any(c.data is None for c in changes)
        update = self._as_in_new if removes else self._checkout_paths
        for attempt in range(tries):
            try:
                moved = self.move_branch(build, message, paths, update)
            except HeadMoved:
                if attempt == tries - 1:
                    raise
                continue
            return Landed(list(tips), moved.problem, moved.repaired)
        raise AssertionError("unreachable")  # pragma: no cover

    def move_branch(
        self,
        build: Callable[[str | None], str],
        message: str,
        paths: Sequence[str],
        update: Update,
        *,
        update_first: bool = True,
    ) -> Landed:
        """Steps 2 to 5, under index.lock (so a person's ``git commit`` cannot move the
        branch meanwhile): ``build`` the new commit on HEAD, move the branch, and
        ``update`` the locked copy of the index (and the working tree) for ``paths``:
        before the branch moves with ``update_first`` (an update that may refuse),
        after it otherwise. Raises when the branch did not move (the paths put back as
        HEAD has them, when ``update`` ran); once it moved, a later failure is the
        returned problem (the paths put back as HEAD has them where possible)."""
        # Marked first: a kill between taking a lock and writing the marker would leave a
        # lock nobody can tell from another git process's.
        self._mark({"paths": list(paths)})
        moved = False
        try:
            with self._index_locked() as locked:
                old = self.head()
                new = build(old)
                if locked.env is not None and update_first:
                    update(old, new, paths, locked.env)

                def landed() -> None:
                    nonlocal moved
                    moved = True
                    if update_first:
                        locked.replace()  # at once: see the module docstring

                self._move(old, new, message, then=landed)
                if locked.env is not None and not update_first:
                    update(old, new, paths, locked.env)
        except Exception as exc:
            if not moved:
                self._unmoved(paths, touched=update_first)
                raise
            return self._moved_but(paths, exc)
        except BaseException:
            if not moved:
                self._unmoved(paths, touched=update_first)
            raise
        self._unmark()
        return Landed([])

    def _move(self, old: str | None, new: str, message: str, then: Callable[[], None]) -> None:
        """One ``update-ref`` transaction: the branch from ``old`` to ``new``, the staging
        ref deleted; ``then`` is called the moment git says it is committed (before git
        exits). Returns once the branch is at ``new``; GitError when it stayed at
        ``old``, HeadMoved when another writer moved it."""
        transaction = f"start\nupdate HEAD {new} {old or _ZERO}\ndelete {STAGING_REF}\n"
        with self.popen("update-ref", "-m", message, "--stdin") as proc:
            assert proc.stdin is not None and proc.stdout is not None
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(f"{transaction}prepare\ncommit\n".encode())
                proc.stdin.close()
            said = [proc.stdout.readline() for _ in range(3)]
            if said[-1] == b"commit: ok\n":
                then()
                return
            assert proc.stderr is not None
            problem = _one_line(proc.stderr.read(), f"exit {proc.wait()}")
        now = self.head()
        if now == new:
            then()  # git moved the branch, then failed at what followed
            return
        if now != old:
            raise HeadMoved("the branch moved while the commits were written")
        raise GitError(f"git update-ref: {problem}")

    def _unmoved(self, paths: Sequence[str], *, touched: bool) -> None:
        """The branch did not move: put back what ``update`` wrote, else only drop the
        marker (nothing of the index or working tree was written)."""
        if touched:
            self._restore(paths)
        else:
            self._unmark()

    def _moved_but(self, paths: Sequence[str], exc: Exception) -> Landed:
        """The branch moved, then updating the index or working tree failed: put the paths
        back as HEAD (now the new commits) has them, once more."""
        problem = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, OSError) and exc.filename:
            problem = f"{exc.filename}: {exc.strerror or problem}"
        return Landed([], problem, repaired=self._restore(paths))

    def head(self) -> str | None:
        """HEAD's commit; None on a branch with no commit yet."""
        out = self.git("rev-parse", "-q", "--verify", "HEAD^{commit}", check=False)
        return out or None

    def _fast_import(self, changes: Sequence[Change], parent: str | None) -> list[str]:
        stamp = f"{int(time.time())} +0000"
        ident = f"{BOT_NAME} <{BOT_EMAIL}> {stamp}".encode()
        out = [b"feature done\n"]
        for mark, change in enumerate(changes, 1):
            message = change.message.rstrip("\n").encode() + b"\n"
            out += [b"commit %s\nmark :%d\n" % (STAGING_REF.encode(), mark)]
            out += [b"author %s\ncommitter %s\n" % (ident, ident)]
            out += [b"data %d\n" % len(message), message]
            if mark == 1 and parent is not None:
                out.append(b"from %s\n" % parent.encode())
            if change.data is None:
                out += [b"D %s\n" % change.path.encode()]
                continue
            out += [b"M 100644 inline %s\n" % change.path.encode()]
            out += [b"data %d\n" % len(change.data), change.data, b"\n"]
        out += [b"get-mark :%d\n" % mark for mark in range(1, len(changes) + 1)]
        out.append(b"done\n")
        tips = self.git("fast-import", "--quiet", "--force", "--done", input=b"".join(out))
        return tips.split()

    def _checkout_paths(
        self, _old: str | None, new: str, paths: Sequence[str], env: Mapping[str, str]
    ) -> None:
        """``git checkout <new> -- <paths>``: the files and their index entries as ``new``
        has them (status files are convoy-batch's: a local edit of one is overwritten)."""
        listing = "".join(f"{p}\0" for p in paths).encode()
        self.git(
            "checkout", new, "--pathspec-from-file=-", "--pathspec-file-nul",
            input=listing, env=env,
        )  # fmt: skip

    def _as_in_new(
        self, _old: str | None, new: str, paths: Sequence[str], env: Mapping[str, str]
    ) -> None:
        """The paths of the locked copy of the index and the working tree as ``new`` has
        them, a removed one taken out of both (a batch that removes a status file)."""
        self._as_in_head(new, paths, env)

    @contextlib.contextmanager
    def _index_locked(self) -> Iterator["_LockedIndex"]:
        """Hold ``index.lock`` holding a copy of the index (:class:`_LockedIndex`). The
        copy replaces the index when the block ends without an error, unless the block
        replaced it already."""
        index = self.git_dir / "index"
        if self.work_tree is None:
            yield _LockedIndex(None, None, index)
            return
        lock, fd = self._take(index)
        locked = _LockedIndex({"GIT_INDEX_FILE": f"{index}.lock"}, lock, index)
        try:
            with failing(f"{index}.lock", "write"):
                copy = index.read_bytes() if index.is_file() else self._empty_index()
                _write_all(fd, copy)
            yield locked
        except BaseException:
            if not locked.replaced:
                with contextlib.suppress(OSError):
                    lock.rollback()
            raise
        locked.replace()

    def _empty_index(self) -> bytes:
        """An index with no entry, as git writes it (a checkout that never staged a file
        has no index file yet)."""
        with scratch_dir(self.git_dir) as tmp:
            empty = Path(tmp) / "index"
            self.git("read-tree", "--empty", env={"GIT_INDEX_FILE": str(empty)})
            return empty.read_bytes()

    def _take(self, index: Path) -> tuple[LockedFD, int]:
        """Take ``index.lock``, waiting a bounded time for another git process to let go."""
        deadline = time.monotonic() + _LOCK_WAIT
        while True:
            lock = LockedFD(str(index))  # one attempt each: it refuses a second open()
            try:
                return lock, int(lock.open(write=True))
            except OSError as exc:
                cause = exc.__cause__
                if isinstance(cause, OSError) and not isinstance(cause, FileExistsError):
                    # Not another process's lock: the lock file cannot be made (a full
                    # disk, a failing one, permissions).
                    why = cause.strerror or str(cause)
                    raise GitError(f"{index}.lock: create: {why}") from None
                if time.monotonic() >= deadline:
                    raise GitError(
                        f"{index}.lock: held by another git process (remove it if no git "
                        "process is running); the statuses are committed on a later tick"
                    ) from None
                time.sleep(0.05)

    def _mark(self, record: Mapping[str, object]) -> None:
        """Write the marker durably; on failure (OSError) none is left: nothing of git
        was written yet, and a marker that may not be durable must not make a later tick
        remove lock files that are another process's."""
        try:
            atomic_write(self.marker, json.dumps({"format": 1, **record}).encode())
        except OSError:
            self._unmark()
            raise

    def _unmark(self) -> None:
        with contextlib.suppress(OSError):  # a marker left over only makes a repair
            self.marker.unlink(missing_ok=True)

    # --- after a crash ----------------------------------------------------------------

    def recover(self) -> None:
        """Repair what a killed or failed write left (see the module docstring): the lock
        files git left are removed and the marked paths of the index and working tree are
        put back as HEAD has them. The caller holds the repo lock."""
        for scratch in self.git_dir.glob(f"{_SCRATCH}*"):  # only made under the repo lock
            shutil.rmtree(scratch, ignore_errors=True)
        try:
            record = json.loads(self.marker.read_bytes())
        except FileNotFoundError:
            return
        except (OSError, ValueError):
            record = {}
        try:
            for leftover in self._lock_files():
                leftover.unlink(missing_ok=True)
        except OSError as exc:
            log.warning(
                "git: %s: not removed (%s); repaired on a later tick", exc.filename, exc.strerror
            )
            return
        paths = record.get("paths") if isinstance(record, dict) else None
        self._restore([str(p) for p in paths] if isinstance(paths, list) else [])

    def _restore(self, paths: Sequence[str]) -> bool:
        """Put ``paths`` of the index and working tree back as HEAD has them, then drop
        the marker; whether that was done. When it fails, the marker stays for the next
        tick's :meth:`recover`."""
        head = self.head()
        try:
            if paths and head is not None:
                with self._index_locked() as locked:
                    if locked.env is not None:
                        self._as_in_head(head, paths, locked.env)
        except (GitError, OSError) as exc:
            log.warning(
                "git: %s of the index not put back as HEAD has them: %s",
                ", ".join(paths),
                " ".join(str(exc).split()),
            )
            return False
        self._unmark()
        return True

    def _as_in_head(self, head: str, paths: Sequence[str], env: Mapping[str, str]) -> None:
        present = self.git(
            "ls-tree", "-r", "-z", "--name-only", head, "--", *paths, strip=False
        ).split("\0")
        present = [p for p in present if p]
        gone = [p for p in paths if p not in set(present)]
        if present:
            self._checkout_paths(None, head, present, env)
        if gone:
            self.git("rm", "-q", "--cached", "--ignore-unmatch", "--", *gone, env=env)
            for path in gone:  # a status file the failed batch wrote: convoy-batch's own
                if self.work_tree is not None:
                    (self.work_tree / path).unlink(missing_ok=True)

    def _lock_files(self) -> list[Path]:
        """The lock files a killed batch can leave: the index's, the refs' it updates."""
        index = self.git_dir / "index"
        branch = self.git("symbolic-ref", "-q", "HEAD", check=False)
        refs = [self.git_dir / "HEAD", self.common_dir / STAGING_REF]
        refs += [self.common_dir / "packed-refs"]
        if branch:
            refs.append(self.common_dir / branch)
        files = [Path(f"{index}.lock"), Path(f"{index}.lock.lock")]
        return files + [Path(f"{ref}.lock") for ref in refs]

    # --- running git ------------------------------------------------------------------

    def git(
        self,
        *args: str,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        strip: bool = True,
    ) -> str:
        """Run git on this repository; GitError (one line) when it fails and ``check``."""
        proc = subprocess.run(
            ["git", *_CONFIG, *args], input=input, env=self._env(env), capture_output=True,
            check=False, cwd=self.work_tree or self.git_dir,
        )  # fmt: skip
        if check and proc.returncode != 0:
            raise GitError(f"git {args[0]}: {_one_line(proc.stderr, f'exit {proc.returncode}')}")
        out = proc.stdout.decode(errors="replace")
        return out.strip() if strip else out

    def popen(self, *args: str) -> "subprocess.Popen[bytes]":
        """git on this repository, talked to through its standard input and output."""
        return subprocess.Popen(
            ["git", *_CONFIG, *args], env=self._env(None), cwd=self.work_tree or self.git_dir,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        full_env = {k: v for k, v in os.environ.items() if k != "GIT_INDEX_FILE"}
        full_env.update(GIT_DIR=str(self.git_dir), GIT_TERMINAL_PROMPT="0")
        if self.work_tree is not None:
            full_env["GIT_WORK_TREE"] = str(self.work_tree)
        full_env.update(env or {})
        return full_env


class _LockedIndex:
    """``index.lock`` held, holding a copy of the index: ``env`` makes git update that
    copy (None: a bare repository, nothing to update); :meth:`replace` renames the copy
    over the index, letting go of the lock."""

    def __init__(self, env: dict[str, str] | None, lock: LockedFD | None, index: Path) -> None:
        self.env = env
        self._lock = lock
        self._index = index
        self.replaced = lock is None

    def replace(self) -> None:
        if self.replaced:
            return
        assert self._lock is not None
        self.replaced = True
        try:
            self._lock.commit()
        except OSError as exc:
            # Ours, and the index it was to replace is now stale: let go of it, so that
            # the paths can be put back (or a person's git can take the lock again).
            with contextlib.suppress(OSError):
                os.unlink(f"{self._index}.lock")
            why = exc.strerror or exc
            raise GitError(f"{self._index}.lock: rename to index: {why}") from None


def _one_line(stderr: bytes, otherwise: str) -> str:
    """git's error output as one line, without its hints (advice for a person at a
    terminal, not part of the error)."""
    lines = stderr.decode(errors="replace").splitlines()
    return " ".join(" ".join(ln.split()) for ln in lines if not ln.startswith("hint:")) or otherwise


@contextlib.contextmanager
def scratch_dir(git_dir: Path) -> Iterator[Path]:
    """A temporary folder in the git directory (for throwaway index files); one a killed
    process left is removed by the next :meth:`GitWriter.recover`."""
    with tempfile.TemporaryDirectory(dir=git_dir, prefix=_SCRATCH) as tmp:
        yield Path(tmp)


@contextlib.contextmanager
def failing(path: str, operation: str) -> Iterator[None]:
    """An OSError within becomes a GitError of one line naming the file and operation."""
    try:
        yield
    except OSError as exc:
        raise GitError(f"{path}: {operation}: {exc.strerror or exc}") from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
