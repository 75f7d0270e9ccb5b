"""``<state>/locks/``: every cross-process file lock of convoy-batch (flock(2)). Does file
I/O through :mod:`convoy_batch.state.files`."""

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from convoy_batch.errors import StateFailed
from convoy_batch.state.files import (
    DIR_MODE,
    FILE_MODE,
    check_file_name,
    open_inside,
    os_problem,
    real_root,
)

log = logging.getLogger("convoy_batch")


class LockBusy(Exception):
    """Another process holds the lock."""


class Locks:
    """``<state>/locks/``: every cross-process file lock of convoy-batch, one per Release,
    one for shared state files, one for the repo, one for a tick on a clone of the
    remote, one for the outbox, one per source cache. A lock file that cannot be opened
    is StateFailed (one line)."""

    def __init__(self, state_dir: Path) -> None:
        self.root = Path(state_dir) / "locks"
        self._state = real_root(state_dir)

    @contextlib.contextmanager
    def release(self, name: str, timeout: float = 0) -> Iterator[None]:
        """Hold the lock of Release ``name``; LockBusy when it stays held for ``timeout``."""
        with self._hold(_release_file(name), timeout):
            yield

    def make_release_locks(self, names: Sequence[str]) -> None:
        """Create the lock files of Releases ``names`` that do not exist yet, one after the
        other, before a tick holds any. A new file changes the locks folder, and that
        change waits for the filesystem journal's commit of any fsync in flight: one at a
        time between a tick's durable writes, about 0.5-1 ms each (a first tick of 10,000
        Releases: 10,000 of them); in a row, they share the journal's commits. The first
        that cannot be made ends this with a warning: each is made when its Release is
        reconciled, which reports a lock file it cannot make. No Release (a quiet tick):
        not even the folder is read."""
        if not names:
            return
        try:
            present = set(os.listdir(self.root))
        except FileNotFoundError:
            present = set()
        except OSError as exc:
            log.warning("lock files not made ahead: %s", os_problem(self.root, exc))
            return
        for name in names:
            try:
                file_name = _release_file(name)
            except ValueError:
                continue  # no lock file can be named after it; its reconcile says why
            if file_name in present:
                continue
            try:
                os.close(self._open(self.root / file_name))
            except StateFailed as exc:
                log.warning("lock files not made ahead: %s", exc)
                return

    @contextlib.contextmanager
    def state(self, timeout: float = 60) -> Iterator[None]:
        """Hold the lock of shared files in the state directory (tick records)."""
        with self._hold("state.lock", timeout):
            yield

    @contextlib.contextmanager
    def repo(self, timeout: float = 60) -> Iterator[None]:
        """Hold the lock that serialises commits and pushes to the GitOps repository."""
        with self._hold("repo.lock", timeout):
            yield

    @contextlib.contextmanager
    def remote(self, timeout: float = 60) -> Iterator[None]:
        """Hold the lock of a tick that works from a clone of the remote, from its fetch
        to its push (:mod:`convoy_batch.status.remote`): such ticks take turns."""
        with self._hold("remote.lock", timeout):
            yield

    @contextlib.contextmanager
    def outbox(self, timeout: float = 0) -> Iterator[None]:
        """Hold the lock of the notification outbox (one process fills and sends it)."""
        with self._hold("outbox.lock", timeout):
            yield

    @contextlib.contextmanager
    def source(self, name: str, timeout: float) -> Iterator[None]:
        """Hold the lock of the source cache ``<state>/sources/<name>`` (one fetch at a
        time into a cached clone)."""
        with self._hold(f"source-{check_file_name(name)}.lock", timeout):
            yield

    @contextlib.contextmanager
    def _hold(self, file_name: str, timeout: float) -> Iterator[None]:
        # flock(2) straight from the stdlib: filelock costs ~0.35 ms a lock, which is a
        # whole parse baseline over a tick of 1000 Releases.
        path = self.root / file_name
        fd = self._open(path)
        try:
            _flock(fd, path, timeout)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _open(self, path: Path) -> int:
        flags = os.O_RDWR | os.O_CREAT
        try:
            try:
                fd = open_inside(path, flags, self._state)
            except FileNotFoundError:  # the first lock of this state directory
                self.root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
                fd = open_inside(path, flags, self._state)
        except OSError as exc:
            raise StateFailed(os_problem(path, exc)) from None
        if os.fstat(fd).st_mode & 0o077:  # made by an older version, 0644
            os.fchmod(fd, FILE_MODE)
        return fd


def _release_file(name: str) -> str:
    """The lock file of Release ``name`` (ValueError: no file can be named after it)."""
    return f"release-{check_file_name(name)}.lock"


def _flock(fd: int, path: Path, timeout: float) -> None:
    """Take an exclusive lock, retrying until ``timeout``; LockBusy when it stays held."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockBusy(f"{path}: held by another process") from None
            time.sleep(0.05)
