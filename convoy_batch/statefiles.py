"""Files of the state directory (SPEC 2) and of directory clusters. Does file I/O.

- :func:`atomic_write`: temp file in the same folder (``.<name>.<random>.tmp``), rename;
  files are 0600 and new folders 0700 (they may hold Secret data).
- :func:`read_file`: the bytes of a regular file, refusing a folder, an unreadable file
  or a symlink that leads out of its root.
- :class:`Writer`: atomic, durable writes on a few background threads (renders).
- :func:`folder_problem`, :func:`open_state_dir`, :func:`remove_leftovers`: what a tick
  checks when it opens the state directory, and the temp files of writes that never
  landed (a crash between write and rename), removed once they are old.

Every problem is a :class:`StateFailed` (or a string) of one line naming the path; the
caller decides whether it is one Release's error or a warning.
"""

import contextlib
import errno
import os
import re
import stat
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from convoy_batch.errors import StateFailed

FILE_MODE = 0o600
DIR_MODE = 0o700
LEFTOVER_AGE = 600.0
"""Seconds after its last write a temp file counts as a leftover: a younger one may be a
write in flight in another process (a sensor opens the state directory during a tick)."""
_TMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")  # what mkstemp makes of prefix/suffix
_PROBLEMS = {
    errno.EISDIR: "a folder where a file belongs",
    errno.ENOTDIR: "a file where a folder belongs",
    errno.EEXIST: "a file where a folder belongs",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


def real_root(folder: Path) -> Path:
    """``folder`` with every symlink resolved: what "inside" is measured against."""
    return Path(os.path.realpath(folder))


def inside(path: Path, root: Path) -> bool:
    """Whether ``path``, symlinks resolved, is ``root`` or under it (``root`` resolved)."""
    real = os.path.realpath(path)
    return real == str(root) or real.startswith(os.path.join(root, ""))


def _blocker(path: Path) -> Path:
    """The file that stands where ``path`` or a folder on its way belongs (ENOTDIR and
    EEXIST name the path asked for, not the file in the way)."""
    for candidate in (path, *path.parents):
        if candidate.exists() and not candidate.is_dir():
            return candidate
    return path


def os_problem(path: Path, exc: OSError) -> str:
    """One line: the path that is wrong, and what is wrong with it."""
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        path = _blocker(Path(exc.filename) if exc.filename else path)
    why = _PROBLEMS.get(exc.errno or 0) or " ".join((exc.strerror or str(exc)).split())
    return f"{path}: {why}"


def problem_of(path: Path, exc: OSError | StateFailed) -> str:
    """One line for either kind of failure of a state file."""
    return os_problem(path, exc) if isinstance(exc, OSError) else str(exc)


def _leads_out(path: Path, root: Path) -> str:
    return f"{path}: a symlink leading out of {root}, refused"


def open_inside(path: Path, flags: int, root: Path) -> int:
    """``os.open`` that follows a symlink at ``path`` only when it stays inside ``root``
    (StateFailed otherwise); a file it creates is 0600."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, FILE_MODE)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
    if not inside(path, root):
        raise StateFailed(_leads_out(path, root))
    return os.open(path, flags, FILE_MODE)


def read_file(path: Path, root: Path) -> bytes | None:
    """The bytes of the file ``path``; None when it does not exist. StateFailed (one line)
    when it is a folder, unreadable, or a symlink leading out of ``root``."""
    try:
        with os.fdopen(open_inside(path, os.O_RDONLY, root), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFailed(os_problem(path, exc)) from None


def refuse_link_out(path: Path, root: Path) -> None:
    """StateFailed when ``path`` is a symlink leading out of ``root``. (A rename onto a
    symlink replaces the link, never its target; this refuses it in so many words.)"""
    if os.path.islink(path) and not inside(path, root):
        raise StateFailed(_leads_out(path, root))


def atomic_write(
    path: Path, data: bytes, *, durable: bool = True, root: Path | None = None
) -> None:
    """Replace ``path`` with ``data`` atomically: readers see the old or the new bytes.
    The file is 0600; missing folders are made 0700. ``durable=False`` skips the fsyncs,
    for records that are only a hint if lost. With ``root``, a symlink at ``path``
    leading out of it is refused (StateFailed). Other failures are OSErrors."""
    if root is not None:
        refuse_link_out(path, root)
    path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    # mkstemp creates the file 0600, whatever the umask; the name is recognisable as a
    # leftover of this function (see remove_leftovers).
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename durable; some platforms cannot open a directory, which is fine."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def folder_problem(folder: Path, root: Path) -> str | None:
    """Why ``folder`` cannot hold files: it is a file, or a symlink leading out of
    ``root``. None when it is a folder, or missing (it is made when first written)."""
    try:
        if os.path.islink(folder) and not inside(folder, root):
            return _leads_out(folder, root)
        if not stat.S_ISDIR(os.stat(folder).st_mode):
            return f"{folder}: a file where a folder belongs"
    except FileNotFoundError:
        return None
    except OSError as exc:
        return os_problem(folder, exc)
    return None


def remove_leftovers(folder: Path, now: float) -> int:
    """Remove the temp files of :func:`atomic_write` in ``folder`` (not below it) whose
    last write is older than :data:`LEFTOVER_AGE` at ``now`` (wall-clock seconds); how
    many. A folder that cannot be listed has none."""
    removed = 0
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if _TMP_NAME.match(entry.name) and _old_file(entry, now):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                        removed += 1
    except OSError:
        pass
    return removed


def _old_file(entry: os.DirEntry[str], now: float) -> bool:
    try:
        st = entry.stat(follow_symlinks=False)
    except FileNotFoundError:  # renamed into place meanwhile
        return False
    return stat.S_ISREG(st.st_mode) and now - st.st_mtime > LEFTOVER_AGE


def open_state_dir(state_dir: Path) -> Path:
    """Make the state directory 0700, or tighten an existing one of ours to that; its
    resolved path. StateFailed (one line) when it is not a usable folder."""
    try:
        state_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        st = os.stat(state_dir)
        if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(state_dir, stat.S_IMODE(st.st_mode) & DIR_MODE)
    except OSError as exc:
        raise StateFailed(os_problem(state_dir, exc)) from None
    return real_root(state_dir)


class Writer:
    """Atomic, durable writes (``atomic_write``) done on a few background threads, so a
    caller does not wait for the fsyncs (milliseconds each on many disks). Writes to one
    path land in order, the newest last; :meth:`pending` serves a write that has not
    landed yet to the readers of the tick; :meth:`drain` waits for every write and
    raises the first failure (the end of a tick)."""

    def __init__(self, workers: int = 4) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="convoy-write")
        self._lock = threading.Lock()
        self._pending: dict[Path, bytes] = {}
        self._path_locks: dict[Path, threading.Lock] = {}
        self._jobs: list[Future[None]] = []

    def write(self, path: Path, data: bytes) -> None:
        with self._lock:
            self._pending[path] = data
            path_lock = self._path_locks.setdefault(path, threading.Lock())
            try:
                self._jobs.append(self._pool.submit(self._land, path, path_lock))
                return
            except RuntimeError:  # closed: write it here and now
                del self._pending[path]
        atomic_write(path, data)

    def pending(self, path: Path) -> bytes | None:
        """The data of a write to ``path`` that has not landed yet."""
        with self._lock:
            return self._pending.get(path)

    def settle(self, path: Path) -> None:
        """Make the pending write of ``path`` (if any) land now, in the caller."""
        with self._lock:
            path_lock = self._path_locks.get(path)
        if path_lock is None:
            return
        with path_lock:
            data = self.pending(path)
            if data is not None:
                atomic_write(path, data)
                with self._lock:
                    if self._pending.get(path) is data:
                        del self._pending[path]

    def drain(self) -> None:
        """Wait until every write has landed; the first failure is raised (OSError)."""
        with self._lock:
            jobs, self._jobs = self._jobs, []
        errors = [job.exception() for job in jobs]
        if failed := next(filter(None, errors), None):
            raise failed

    def close(self) -> None:
        """:meth:`drain`, then stop the threads (a later write is made in the caller)."""
        try:
            self.drain()
        finally:
            self._pool.shutdown(wait=True)

    def _land(self, path: Path, path_lock: threading.Lock) -> None:
        with path_lock:  # one write of a path at a time, each with the newest data
            data = self.pending(path)
            if data is None:
                return  # an earlier job wrote the newest data already
            try:
                atomic_write(path, data)
            finally:
                with self._lock:
                    if self._pending.get(path) is data:
                        del self._pending[path]
