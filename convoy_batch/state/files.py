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
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from convoy_batch.errors import StateFailed
from convoy_batch.names import is_label

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
    """One line: the path that is wrong, the operation that failed on it (when
    :func:`failing` named one) and what is wrong with it."""
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        path = _blocker(Path(exc.filename) if exc.filename else path)
    why = _PROBLEMS.get(exc.errno or 0) or " ".join((exc.strerror or str(exc)).split())
    operation = getattr(exc, OPERATION, None)
    return f"{path}: {operation}: {why}" if operation else f"{path}: {why}"


OPERATION = "convoy_operation"
"""The attribute :func:`failing` sets on an OSError: which operation failed."""


@contextlib.contextmanager
def failing(operation: str) -> Iterator[None]:
    """Name the operation (``write``, ``fsync``, ``rename``, ...) on an OSError raised
    within, for :func:`os_problem`; the innermost name wins."""
    try:
        yield
    except OSError as exc:
        if getattr(exc, OPERATION, None) is None:
            setattr(exc, OPERATION, operation)
        raise


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
    path: Path, data: bytes | Iterable[bytes], *, durable: bool = True, root: Path | None = None
) -> None:
    """Replace ``path`` with ``data`` (bytes, or chunks of them written as they come)
    atomically: readers see the old or the new bytes. The file is 0600; missing folders
    are made 0700. ``durable=False`` skips the fsyncs, for records that are only a hint
    if lost. With ``root``, a symlink at ``path`` leading out of it is refused
    (StateFailed). Other failures are OSErrors."""
    if root is not None:
        refuse_link_out(path, root)
    with failing("mkdir"):
        path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    # mkstemp creates the file 0600, whatever the umask; the name is recognisable as a
    # leftover of this function (see remove_leftovers).
    with failing("create"):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            with failing("write"):
                for chunk in [data] if isinstance(data, bytes) else data:
                    f.write(chunk)
                f.flush()
            if durable:
                with failing("fsync"):
                    os.fsync(f.fileno())
        with failing("rename"):
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # the write failed: its temp file goes too
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


_CANNOT_SYNC_FOLDERS = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF}
"""What ``fsync`` of a folder gives on a platform or filesystem that cannot do it."""


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable. A failing fsync is a failed write (OSError
    naming the folder): only "folders cannot be synced here" is ignored, as is a
    platform that cannot open a folder at all."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except (IsADirectoryError, PermissionError):
        return  # a platform that opens no folder (nothing to sync through)
    except OSError as exc:
        setattr(exc, OPERATION, "open for fsync")
        raise
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _CANNOT_SYNC_FOLDERS:
            exc.filename = exc.filename or str(folder)
            setattr(exc, OPERATION, "fsync of the folder")
            raise
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
    landed yet to the readers of the tick; :meth:`settle` makes one land now and raises
    its failure, even one a background thread met; :meth:`drain` waits for every write
    and hands back the failures nobody settled (the end of a tick)."""

    def __init__(self, workers: int = 4) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="convoy-write")
        self._lock = threading.Lock()
        self._pending: dict[Path, bytes] = {}
        self._failed: dict[Path, OSError] = {}
        """The paths whose newest write failed, and how (until settled or written again)."""
        self._path_locks: dict[Path, threading.Lock] = {}
        self._jobs: list[Future[None]] = []

    def write(self, path: Path, data: bytes) -> None:
        """Write ``data`` to ``path`` in the background (in the caller once closed: an
        OSError then)."""
        with self._lock:
            self._pending[path] = data
            self._failed.pop(path, None)
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
        """Make the pending write of ``path`` (if any) land now, in the caller; the OSError
        of the newest write of ``path`` when it failed (here or on a background thread)."""
        with self._lock:
            path_lock = self._path_locks.get(path)
        if path_lock is None:
            return
        with path_lock:
            data = self.pending(path)
            if data is not None:
                self._attempt(path, data)
            with self._lock:
                failed = self._failed.pop(path, None)
        if failed is not None:
            raise failed

    def drain(self) -> list[tuple[Path, OSError]]:
        """Wait until every write has landed; the failures no :meth:`settle` reported."""
        with self._lock:
            jobs, self._jobs = self._jobs, []
        for job in jobs:
            job.exception()  # waits; failures are kept in _failed
        with self._lock:
            failed, self._failed = list(self._failed.items()), {}
        return failed

    def close(self) -> list[tuple[Path, OSError]]:
        """:meth:`drain`, then stop the threads (a later write is made in the caller)."""
        try:
            return self.drain()
        finally:
            self._pool.shutdown(wait=True)

    def _land(self, path: Path, path_lock: threading.Lock) -> None:
        with path_lock:  # one write of a path at a time, each with the newest data
            data = self.pending(path)
            if data is not None:  # else an earlier job wrote the newest data already
                self._attempt(path, data)

    def _attempt(self, path: Path, data: bytes) -> None:
        """Write ``data`` (the caller holds the path's lock); a failure is kept, not
        raised: the data is no longer served from memory, and a reader finds no file."""
        try:
            atomic_write(path, data)
        except OSError as exc:
            failure: OSError | None = exc
        else:
            failure = None
        with self._lock:
            if self._pending.get(path) is data:
                del self._pending[path]
                if failure is not None:
                    self._failed[path] = failure


# Ticks, locks and status files also exist for Releases whose file is invalid, named
# after the file (SPEC 10): any plain file name, but never a path or a dot file.
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")


def check_release_name(name: str) -> str:
    """A Release name as stored: a DNS-1123 label; ValueError otherwise."""
    if not isinstance(name, str) or not is_label(name):
        raise ValueError(f"not a Release name (DNS-1123 label): {name!r}")
    return name


def check_file_name(name: str) -> str:
    """A name usable as one file name in a store folder (no separators, no dot files)."""
    if not isinstance(name, str) or not _FILE_NAME.match(name):
        raise ValueError(f"not a usable Release or file name: {name!r}")
    return name


def describe(path: Path, exc: Exception) -> str:
    """One line naming the file: parse_model's messages already start with it."""
    text = " ".join(str(exc).split())
    return text if text.startswith(str(path)) else f"{path}: {text}"
