"""What the state directory remembers only to save work or to make a Release due (SPEC
13): the tick records (``<state>/ticks.json``) and the parse caches (``<state>/cache/``).

Does file I/O (through :mod:`convoy_batch.statefiles`). These are hints: losing one costs
a tick more work (or makes a Release due once more), never a decision, so they are
written without fsync, and a file that cannot be used is one warning, then ignored.
"""

import json
import logging
from pathlib import Path
from typing import Any

from convoy_batch.errors import StateFailed
from convoy_batch.models import Model, Time, parse_model
from convoy_batch.statefiles import (
    atomic_write,
    folder_problem,
    problem_of,
    read_file,
    real_root,
)
from convoy_batch.store import Locks, check_file_name, describe

log = logging.getLogger("convoy_batch")


def _json_bytes(data: object) -> bytes:
    """Compact JSON (no indent: the C encoder; an indent takes Python's own, ~10x slower)."""
    return (json.dumps(data, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


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


CACHE_FORMAT = 1
"""The ``format`` of tick records and parse caches: a file of another format (or of no
format, or another shape) is ignored and rewritten, never misread."""


def _cache_body(data: Any, key: str) -> dict[str, Any] | None:
    """The ``key`` mapping of a ``{"format": CACHE_FORMAT, key: {...}}`` file; None when
    the file has another format or shape."""
    if isinstance(data, dict) and data.get("format") == CACHE_FORMAT:
        body = data.get(key)
        return body if isinstance(body, dict) else None
    return None


class TickStore:
    """``<state>/ticks.json``: the TickRecord of every Release, read once and written
    once per tick (:meth:`flush`), merged under a lock with what other processes wrote.

    A hint: a file that cannot be used is one warning, then ignored (and not written
    for the rest of the instance); another format is ignored and rewritten."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / "ticks.json"
        self._state = real_root(state_dir)
        self._locks = Locks(state_dir)
        self._stored: dict[str, Any] | None = None
        self._pending: dict[str, TickRecord] = {}
        self._unusable = False

    def _read(self) -> dict[str, Any]:
        try:
            data = read_file(self.path, self._state)
            records = _cache_body(json.loads(data), "records") if data is not None else {}
        except StateFailed as exc:
            self._give_up(f"{exc}; ignored")
            return {}
        except ValueError as exc:
            log.warning("unreadable tick records, ignored: %s", describe(self.path, exc))
            return {}
        return records if records is not None else {}  # another format: rewritten

    def _give_up(self, problem: str) -> None:
        log.warning("tick records: %s", problem)
        self._unusable = True

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
        there is no fsync on the hot path (and a failure is a warning)."""
        if not self._pending or self._unusable:
            return
        try:
            with self._locks.state():
                stored = self._read()
                if self._unusable:
                    return
                stored.update({name: r.dump() for name, r in self._pending.items()})
                body = {"format": CACHE_FORMAT, "records": stored}
                atomic_write(self.path, _json_bytes(body), durable=False, root=self._state)
        except (OSError, StateFailed) as exc:
            self._give_up(f"{problem_of(self.path, exc)}; not saved")
            return
        self._stored = stored
        self._pending.clear()


class ParseCache:
    """``<state>/cache/<name>.json``: parsed documents keyed by where they came from,
    valid while their signature (a git blob id, a file's stat) is unchanged.

    Only a performance cache: a missing, stale, unreadable file or one of another format
    means parsing again (and rewriting it). It spares a quiet tick the YAML parse of
    every status, Release and live object. ``root`` is the state directory, by default
    the folder above the cache's own: a cache whose folder cannot be used (a file, a
    symlink leading out: :meth:`Stores.open` reports it) is neither read nor written.
    """

    def __init__(self, path: Path, root: Path | None = None) -> None:
        self.path = path
        self._root = real_root(root if root is not None else path.parent.parent)
        self._usable = folder_problem(path.parent, self._root) is None
        self._dirty = False
        self._entries: dict[str, list[Any]] = self._read() if self._usable else {}

    def _read(self) -> dict[str, list[Any]]:
        try:
            data = read_file(self.path, self._root)
            if data is None:
                return {}
            entries = _cache_body(json.loads(data), "entries")
        except StateFailed as exc:
            log.warning("parse cache: %s; not used", exc)
            self._usable = False
            return {}
        except ValueError:
            entries = None
        if entries is None:  # another format or shape, or not JSON: rewritten on save
            self._dirty = True
        return entries or {}

    def get(self, key: str, signature: str) -> Any | None:
        entry = self._entries.get(key)
        if isinstance(entry, list) and len(entry) == 2 and entry[0] == signature:
            return entry[1]
        return None

    def put(self, key: str, signature: str, data: Any) -> None:
        self._entries[key] = [signature, data]
        self._dirty = True

    def save(self) -> None:
        if not self._dirty or not self._usable:
            return
        body = {"format": CACHE_FORMAT, "entries": self._entries}
        try:
            text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
            atomic_write(self.path, text.encode(), durable=False, root=self._root)
        except (OSError, StateFailed) as exc:
            log.warning("parse cache: %s; not saved", problem_of(self.path, exc))
        except (TypeError, ValueError) as exc:  # not JSON: a bug, not the disk
            log.warning("%s: parse cache not saved: %s", self.path, exc)
        self._dirty = False
