"""What the state directory remembers only to save work or to make a Release due (SPEC
13): the tick records (``<state>/ticks.json``) and the parse caches (``<state>/cache/``).

Does file I/O (through :mod:`convoy_batch.state.files`). These are hints: losing one costs
a tick more work (or makes a Release due once more), never a decision, so they are
written without fsync, and a file that cannot be used is one warning, then ignored.
"""

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from convoy_batch.errors import StateFailed
from convoy_batch.models import ReleaseInventory, TickRecord, parse_model
from convoy_batch.state.files import (
    atomic_write,
    check_file_name,
    describe,
    folder_problem,
    problem_of,
    read_file,
    real_root,
)
from convoy_batch.state.locks import Locks

log = logging.getLogger("convoy_batch")


def _json_text(data: object) -> str:
    """Compact JSON text (the C encoder)."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


_CHUNKS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _json_chunks(data: object) -> Iterator[bytes]:
    """Compact JSON in the pieces Python's encoder yields, for a file written as they come
    (:func:`atomic_write`): a cache of 10,000 Releases is 10-17 MB of text, which one
    string and its bytes held twice at the end of a tick (+39 MiB at its peak). It takes
    Python's own encoder, 1.4x the C one's time (0.14 s against 0.10 s for 17 MB)."""
    for chunk in _CHUNKS.iterencode(data):
        yield chunk.encode()
    yield b"\n"


CACHE_FORMAT = 1
"""The ``format`` of tick records and the health journal: a file of another format (or of
no format, or another shape) is ignored and rewritten, never misread."""

PARSE_CACHE_FORMAT = 2
"""The ``format`` of parse caches (2: each entry's document kept as JSON text), ignored
and rewritten as :data:`CACHE_FORMAT` is."""


def _cache_body(data: Any, key: str, form: int = CACHE_FORMAT) -> dict[str, Any] | None:
    """The ``key`` mapping of a ``{"format": form, key: {...}}`` file; None when the file
    has another format or shape."""
    if isinstance(data, dict) and data.get("format") == form:
        body = data.get(key)
        return body if isinstance(body, dict) else None
    return None


class _SharedRecords:
    """A JSON file of one record per Release, read once and written once per tick
    (:meth:`flush`), merged under the state lock with what other processes wrote: each
    Release's record is the one of the process that flushed last. A hint: a file that
    cannot be used is one warning, then ignored (and not written for the rest of the
    instance); another format is ignored and rewritten."""

    what = "records"

    def __init__(self, path: Path, state_dir: Path) -> None:
        self.path = path
        self._state = real_root(state_dir)
        self._locks = Locks(state_dir)
        self._stored: dict[str, Any] | None = None
        """Release -> its record as the file holds it (JSON data; a tick record, once
        parsed, its model, let go once a new one is pending: see :class:`TickStore`)."""
        self._pending: dict[str, Any] = {}
        """Release -> its new record (:meth:`_data` gives its JSON data); None: the record
        is removed."""
        self.unusable = False

    def _read(self) -> dict[str, Any]:
        try:
            data = read_file(self.path, self._state)
            records = _cache_body(json.loads(data), "records") if data is not None else {}
        except StateFailed as exc:
            self._give_up(f"{exc}; ignored")
            return {}
        except ValueError as exc:
            log.warning("unreadable %s, ignored: %s", self.what, describe(self.path, exc))
            return {}
        return records if records is not None else {}  # another format: rewritten

    def _data(self, record: Any) -> Any:
        """A pending record as the file holds it (JSON data)."""
        return record

    def _give_up(self, problem: str) -> None:
        log.warning("%s: %s", self.what, problem)
        self.unusable = True

    def stored(self, release: str) -> Any:
        """The record of ``release`` as the file holds it (None: none)."""
        check_file_name(release)
        if self._stored is None:
            self._stored = self._read()
        return self._stored.get(release)

    def flush(self) -> None:
        """Write the pending records. A lost write costs a tick more work, so there is no
        fsync on the hot path (and a failure is a warning)."""
        if not self._pending or self.unusable:
            return
        self._stored = None  # let go before the file is read again (10,000 records: ~20 MiB)
        try:
            with self._locks.state():
                stored = self._read()
                if self.unusable:
                    return
                for name, record in self._pending.items():
                    if record is None:
                        stored.pop(name, None)
                    else:
                        stored[name] = self._data(record)
                body = {"format": CACHE_FORMAT, "records": stored}
                atomic_write(self.path, _json_chunks(body), durable=False, root=self._state)
        except (OSError, StateFailed) as exc:
            self._give_up(f"{problem_of(self.path, exc)}; not saved")
            return
        self._stored = stored
        self._pending.clear()


class TickStore(_SharedRecords):
    """``<state>/ticks.json``: the TickRecord of every Release (see :class:`_SharedRecords`)."""

    what = "tick records"

    def __init__(self, state_dir: Path) -> None:
        super().__init__(Path(state_dir) / "ticks.json", state_dir)
        self._records: dict[str, TickRecord] = {}
        """Release -> its record: the one saved by this instance, else the stored one
        (parsed once)."""

    def load(self, release: str) -> TickRecord:
        """The Release's record: saved by this store, else stored; defaults when missing,
        or (with a warning) when unreadable."""
        if release in self._records:
            return self._records[release]
        raw = self.stored(release)
        record = TickRecord()
        if raw is not None:
            try:
                record = parse_model(TickRecord, raw, f"{self.path}: {release}")
            except ValueError as exc:
                log.warning("unreadable tick record, ignored: %s", exc)
            else:  # held once, as its model (10,000 records: 25.6 MiB of JSON data, 14.3 parsed)
                if self._stored is not None:
                    self._stored[release] = record
        return self._records.setdefault(release, record)

    def save(self, release: str, record: TickRecord) -> None:
        """Keep ``record`` for the next :meth:`flush`."""
        self._records[check_file_name(release)] = record
        self._pending[release] = record  # its JSON made as it is written (one copy held)
        if self._stored is not None:  # no longer read (flush reads the file again)
            self._stored.pop(release, None)

    def _data(self, record: TickRecord) -> Any:
        return record.dump()

    def forget(self, release: str) -> None:
        """Remove the Release's record at the next :meth:`flush` (a retired Release)."""
        self._records.pop(release, None)
        if release in self._pending or self.stored(release) is not None:
            self._pending[release] = None


class HealthJournal(_SharedRecords):
    """``<state>/health.json``: health the observer saw that is newer than the inventory
    file it belongs to, so a tick that only sees health change (every Release, the tick
    after a rollout) writes one file, not one inventory per Release.

    Key and invariant: a record applies to the inventory file whose SHA-256 it names
    (``of``) and holds the health of each of its entries, in order; an inventory file
    written since (new bytes) makes it stale, and it is ignored. Losing a record (a crash,
    another process's flush of the same Release) leaves the inventory file's own, older
    health, which the observer sees again; with the observer stopped, the older health
    is what the verdict reads, as when an unsynced inventory write is lost."""

    what = "health journal"

    def __init__(self, state_dir: Path) -> None:
        super().__init__(Path(state_dir) / "health.json", state_dir)

    def health_of(self, release: str, digest: str | None, count: int) -> list[Any] | None:
        """The health list (JSON data, one item per entry) of the record that applies to
        ``release``'s inventory file of SHA-256 ``digest`` and ``count`` entries; None when
        none applies."""
        if digest is None or self.unusable:
            return None
        record = self._pending.get(release) or self.stored(release)
        if not isinstance(record, dict) or record.get("of") != digest:
            return None
        healths = record.get("health")
        return healths if isinstance(healths, list) and len(healths) == count else None

    def keep(self, inventory: ReleaseInventory, digest: str | None) -> bool:
        """Record the health of ``inventory``, whose file (SHA-256 ``digest``) holds the
        same entries with older health; False when it cannot (no file, journal unusable):
        the caller writes the inventory file instead."""
        if digest is None or self.unusable:
            return False
        health = [e.health.dump() if e.health is not None else None for e in inventory.entries]
        self._pending[check_file_name(inventory.release)] = {"of": digest, "health": health}
        return True

    def forget(self, release: str) -> None:
        """The Release's inventory file was written: its record (if any) is stale."""
        if self._pending.get(release) is not None or self.stored(release) is not None:
            self._pending[release] = None


class ParseCache:
    """``<state>/cache/<name>.json``: parsed documents keyed by where they came from,
    valid while their signature (a git blob id, a file's stat) is unchanged.

    Only a performance cache: a missing, stale, unreadable file or one of another format
    means parsing again (and rewriting it). It spares a quiet tick the YAML parse of
    every status, Release and live object. ``root`` is the state directory, by default
    the folder above the cache's own: a cache whose folder cannot be used (a file, a
    symlink leading out: :meth:`Stores.open` reports it) is neither read nor written.
    The file is read on the first :meth:`get` or :meth:`put`: a tick that never asks
    never reads it. Each document is kept as its JSON text and parsed when asked for, so
    the cache of a large fleet (tens of thousands of live objects) costs its text in
    memory, not Python's objects of every document, and a caller may change what
    :meth:`get` returns.
    """

    def __init__(self, path: Path, root: Path | None = None) -> None:
        self.path = path
        self._root = real_root(root if root is not None else path.parent.parent)
        self._usable = folder_problem(path.parent, self._root) is None
        self._dirty = False
        self._read_entries: dict[str, list[Any]] | None = None

    @property
    def _entries(self) -> dict[str, list[Any]]:
        if self._read_entries is None:
            self._read_entries = self._read() if self._usable else {}
        return self._read_entries

    def _read(self) -> dict[str, list[Any]]:
        try:
            data = read_file(self.path, self._root)
            if data is None:
                return {}
            entries = _cache_body(json.loads(data), "entries", PARSE_CACHE_FORMAT)
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
        if not (isinstance(entry, list) and len(entry) == 2 and entry[0] == signature):
            return None
        try:
            return json.loads(entry[1]) if isinstance(entry[1], str) else None
        except ValueError:
            return None

    def put(self, key: str, signature: str, data: Any) -> None:
        """Remember ``data`` (plain JSON data: anything else is a bug, warned of and not
        remembered)."""
        try:
            text = _json_text(data)
        except (TypeError, ValueError) as exc:
            log.warning("%s: %s: not remembered: %s", self.path, key, exc)
            return
        if self._entries.get(key) == [signature, text]:
            return  # remembered already: nothing to write back
        self._entries[key] = [signature, text]
        self._dirty = True

    def save(self) -> None:
        if not self._dirty or not self._usable or self._read_entries is None:
            return
        body = {"format": PARSE_CACHE_FORMAT, "entries": self._read_entries}
        try:
            atomic_write(self.path, _json_chunks(body), durable=False, root=self._root)
        except (OSError, StateFailed) as exc:
            log.warning("parse cache: %s; not saved", problem_of(self.path, exc))
        self._dirty = False
