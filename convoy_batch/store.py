"""Machine-local state under the state directory (SPEC 2): renders, inventories, locks, ticks.

Does file I/O. Every write is atomic (temp file in the same folder, fsync, rename, fsync
of the folder); renders (content addressed, never rewritten with other content) are
written so by a :class:`Writer` in the background during a tick, which waits for them
before it ends. Paths are built only
from validated names and refs, so nothing a Release or a status file says can make a
store read or write outside the state directory. Unreadable state is reported as a
warning on the ``convoy_batch`` logger and treated as absent: a corrupt render blob is
never applied.
"""

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from convoy_batch.models import Model, ReleaseInventory, Time, parse_model

log = logging.getLogger("convoy_batch")

_REF = re.compile(r"^sha256:([0-9a-f]{64})$")
_BLOB_FILE = re.compile(r"^([0-9a-f]{64})\.json$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# Ticks, locks and status files also exist for Releases whose file is invalid, named
# after the file (SPEC 10): any plain file name, but never a path or a dot file.
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")


def ref_hex(ref: str) -> str:
    """The hex digest of a renderRef ``sha256:<hex>``; ValueError for anything else."""
    match = _REF.match(ref) if isinstance(ref, str) else None
    if match is None:
        raise ValueError(f"not a renderRef (sha256:<64 hex digits>): {ref!r}")
    return match.group(1)


def check_release_name(name: str) -> str:
    """A Release name as stored: a DNS-1123 label; ValueError otherwise."""
    if not isinstance(name, str) or not _DNS1123_LABEL.match(name):
        raise ValueError(f"not a Release name (DNS-1123 label): {name!r}")
    return name


def check_file_name(name: str) -> str:
    """A name usable as one file name in a store folder (no separators, no dot files)."""
    if not isinstance(name, str) or not _FILE_NAME.match(name):
        raise ValueError(f"not a usable Release or file name: {name!r}")
    return name


def atomic_write(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically: readers see the old or the new bytes.
    ``durable=False`` skips the fsyncs, for records that are only a hint if lost."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        # mkstemp creates 0600; keep the mode of the file we replace (status files are
        # in the user's working tree), else the usual 0644.
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if durable:
        _fsync_dir(path.parent)


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


def _fsync_dir(folder: Path) -> None:
    """Make the rename durable; some platforms cannot open a directory, which is fine."""
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


def _describe(path: Path, exc: Exception) -> str:
    """One line naming the file: parse_model's messages already start with it."""
    text = " ".join(str(exc).split())
    return text if text.startswith(str(path)) else f"{path}: {text}"


class RenderStore:
    """``<state>/renders/<hex>.json``: the canonical JSON of each render, content addressed."""

    def __init__(self, state_dir: Path, writer: Writer | None = None) -> None:
        self.root = Path(state_dir) / "renders"
        self._verified: set[str] = set()  # read back or written by this instance (one tick)
        self._writer = writer

    def path(self, ref: str) -> Path:
        return self.root / f"{ref_hex(ref)}.json"

    def put(self, ref: str, canonical: bytes) -> None:
        """Store ``canonical`` under ``ref``; a valid blob already there is not rewritten
        (nor read again when this instance has verified it already)."""
        if hashlib.sha256(canonical).hexdigest() != ref_hex(ref):
            raise ValueError(f"render store: content does not hash to {ref}")
        if ref in self._verified:
            return
        path = self.path(ref)
        if not self._valid(path, ref):
            if self._writer is None:
                atomic_write(path, canonical)
            else:
                self._writer.write(path, canonical)
        self._verified.add(ref)

    def get(self, ref: str) -> bytes | None:
        """The verified blob of ``ref``; None when absent or corrupt (corrupt is reported)."""
        path = self.path(ref)
        try:
            pending = self._writer.pending(path) if self._writer is not None else None
            data = pending if pending is not None else path.read_bytes()
        except FileNotFoundError:
            return None
        if hashlib.sha256(data).hexdigest() == ref_hex(ref):
            self._verified.add(ref)
            return data
        aside = path.with_suffix(".corrupt")
        log.warning("%s: content does not hash to %s; moved to %s, not used", path, ref, aside)
        with contextlib.suppress(OSError):
            os.replace(path, aside)
        return None

    def settle(self, ref: str) -> None:
        """Make the blob of ``ref`` durable now if its write is still pending."""
        if self._writer is not None:
            self._writer.settle(self.path(ref))

    def has(self, ref: str) -> bool:
        """Whether a blob exists for ``ref`` (not verified: ``get`` verifies)."""
        return self.path(ref).is_file()

    def gc(self, keep: Iterable[str]) -> list[str]:
        """Delete every blob whose ref is not in ``keep``; returns the removed refs, sorted."""
        kept = set(keep)
        removed = []
        for ref in self._refs():
            if ref not in kept:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path(ref))
                self._verified.discard(ref)
                removed.append(ref)
        return sorted(removed)

    def _refs(self) -> Iterator[str]:
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return
        for name in names:
            match = _BLOB_FILE.match(name)
            if match:
                yield f"sha256:{match.group(1)}"

    @staticmethod
    def _valid(path: Path, ref: str) -> bool:
        try:
            return hashlib.sha256(path.read_bytes()).hexdigest() == ref_hex(ref)
        except FileNotFoundError:
            return False


class InventoryStore:
    """``<state>/inventory/<release>.json``: the ReleaseInventory of each Release."""

    def __init__(self, state_dir: Path) -> None:
        self.root = Path(state_dir) / "inventory"

    def path(self, release: str) -> Path:
        return self.root / f"{check_release_name(release)}.json"

    def load(self, release: str) -> ReleaseInventory:
        """The stored inventory; empty when missing, or (with a warning) when unreadable."""
        path = self.path(release)
        empty = ReleaseInventory(release=release)
        try:
            inventory = parse_model(ReleaseInventory, json.loads(path.read_bytes()), str(path))
        except FileNotFoundError:
            return empty
        except (OSError, ValueError) as exc:  # JSONDecodeError and parse_model's are ValueErrors
            log.warning("unreadable inventory, treated as empty: %s", _describe(path, exc))
            return empty
        if inventory.release != release:
            log.warning("%s: release: holds %r, treated as empty", path, inventory.release)
            return empty
        return inventory

    def save(self, inventory: ReleaseInventory) -> None:
        data = inventory.model_dump(mode="json", by_alias=True)
        # Written before the Release's lock is let go (not in the background): another
        # process reconciling it next must not see its newer inventory overwritten late.
        atomic_write(self.path(inventory.release), _json_bytes(data))


def _json_bytes(data: object) -> bytes:
    return (json.dumps(data, indent=1, ensure_ascii=False) + "\n").encode()


class LockBusy(Exception):
    """Another process holds the lock."""


class Locks:
    """``<state>/locks/``: cross-process file locks, one per Release and one for the repo."""

    def __init__(self, state_dir: Path) -> None:
        self.root = Path(state_dir) / "locks"

    @contextlib.contextmanager
    def release(self, name: str, timeout: float = 0) -> Iterator[None]:
        """Hold the lock of Release ``name``; LockBusy when it stays held for ``timeout``."""
        with self._hold(f"release-{check_file_name(name)}.lock", timeout):
            yield

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
    def _hold(self, file_name: str, timeout: float) -> Iterator[None]:
        # flock(2) straight from the stdlib: filelock costs ~0.35 ms a lock, which is a
        # whole parse baseline over a tick of 1000 Releases.
        path = self.root / file_name
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the first lock of this state directory
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _flock(fd, path, timeout)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


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


class TickRecord(Model):
    """What the wake-ups of SPEC 13 remember of a Release's last reconcile."""

    last_reconcile_at: Time | None = None
    release_blob: str | None = None
    """Blob SHA of the Release file at the last reconcile."""
    source_revision: str | None = None
    """Source revision seen at the last reconcile."""
    health: tuple[tuple[str, str, str | None], ...] = ()
    """(object identity, state, assessedRenderRef) of each inventory entry then."""
    render_key: str | None = None
    """Fingerprint of the last render's inputs (source files, Release, Cluster)."""
    render_ref: str | None = None
    """The renderRef those inputs gave: a render-cache hit reloads it from the store."""


class TickStore:
    """``<state>/ticks.json``: the TickRecord of every Release, read once and written
    once per tick (:meth:`flush`), merged under a lock with what other processes wrote."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / "ticks.json"
        self._locks = Locks(state_dir)
        self._stored: dict[str, Any] | None = None
        self._pending: dict[str, TickRecord] = {}

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("unreadable tick records, ignored: %s", _describe(self.path, exc))
            return {}
        return data if isinstance(data, dict) else {}

    def load(self, release: str) -> TickRecord:
        """The stored record; defaults when missing, or (with a warning) when unreadable."""
        check_file_name(release)
        if release in self._pending:
            return self._pending[release]
        if self._stored is None:
            self._stored = self._read()
        raw = self._stored.get(release)
        if raw is None:
            return TickRecord()
        try:
            return parse_model(TickRecord, raw, f"{self.path}: {release}")
        except ValueError as exc:
            log.warning("unreadable tick record, ignored: %s", exc)
            return TickRecord()

    def save(self, release: str, record: TickRecord) -> None:
        """Keep ``record`` for the next :meth:`flush`."""
        self._pending[check_file_name(release)] = record

    def flush(self) -> None:
        """Write the saved records. A lost write only makes a Release due once more, so
        there is no fsync on the hot path."""
        if not self._pending:
            return
        with self._locks.state():
            stored = self._read()
            stored.update({name: r.dump() for name, r in self._pending.items()})
            atomic_write(self.path, _json_bytes(stored), durable=False)
        self._stored = stored
        self._pending.clear()


class ParseCache:
    """``<state>/cache/<name>.json``: parsed documents keyed by where they came from,
    valid while their signature (a git blob id, a file's stat) is unchanged.

    Only a performance cache: a missing, stale or unreadable file means parsing again.
    It spares a quiet tick the YAML parse of every status, Release and live object.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, list[Any]] = self._read()
        self._dirty = False

    def _read(self) -> dict[str, list[Any]]:
        try:
            data = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: str, signature: str) -> Any | None:
        entry = self._entries.get(key)
        if isinstance(entry, list) and len(entry) == 2 and entry[0] == signature:
            return entry[1]
        return None

    def put(self, key: str, signature: str, data: Any) -> None:
        self._entries[key] = [signature, data]
        self._dirty = True

    def save(self) -> None:
        if not self._dirty:
            return
        try:
            text = json.dumps(self._entries, separators=(",", ":"), ensure_ascii=False)
            atomic_write(self.path, text.encode(), durable=False)
        except (TypeError, ValueError, OSError) as exc:
            log.warning("%s: parse cache not saved: %s", self.path, exc)
        self._dirty = False
