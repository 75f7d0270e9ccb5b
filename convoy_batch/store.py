"""Machine-local state under the state directory (SPEC 2): the render store, the
inventories and one tick's view of them (:class:`Inventories`), and every store under one
state directory together (:class:`Stores`); the locks are :mod:`convoy_batch.state.locks`.

Does file I/O (through :mod:`convoy_batch.state.files`). Every write is atomic (temp file
in the same folder, fsync, rename, fsync of the folder), files 0600; renders (content
addressed, never rewritten with other content) are written so by a :class:`Writer` in
the background during a tick, which waits for them before it ends. Paths are built only
from validated names and refs, and no symlink leading out of the state directory is
followed, so nothing a Release or a status file says can make a store read or write
outside it.

What cannot be read is reported in one line naming the path: a bad render blob (wrong
content, a folder, unreadable) is a warning and absent, never applied; tick records and
parse caches are hints (a warning, then ignored); an inventory or render folder that
cannot be used is :class:`StateFailed`, an error of the Release that needs it. Tick
records and parse caches: :mod:`convoy_batch.state.caches`.
"""

import contextlib
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convoy_batch.errors import StateFailed, UsageError
from convoy_batch.models import ReleaseInventory, parse_model
from convoy_batch.state.caches import HealthJournal, TickStore
from convoy_batch.state.files import (
    Writer,
    atomic_write,
    check_release_name,
    describe,
    folder_problem,
    open_state_dir,
    os_problem,
    read_file,
    real_root,
    remove_leftovers,
)
from convoy_batch.state.intents import IntentStore, RetiringStore
from convoy_batch.state.locks import Locks

log = logging.getLogger("convoy_batch")

_REF = re.compile(r"^sha256:([0-9a-f]{64})$")
_BLOB_FILE = re.compile(r"^([0-9a-f]{64})\.json$")


def ref_hex(ref: str) -> str:
    """The hex digest of a renderRef ``sha256:<hex>``; ValueError for anything else."""
    match = _REF.match(ref) if isinstance(ref, str) else None
    if match is None:
        raise ValueError(f"not a renderRef (sha256:<64 hex digits>): {ref!r}")
    return match.group(1)


STORE_FOLDERS = ("locks", "renders", "inventory", "cache", "intents", "outbox")
"""The folders of the state directory a tick writes to, besides the directory itself
(``ticks.json``) and the directory clusters (which check their own folders)."""


def open_state(state_dir: Path) -> None:
    """What a tick does first with the state directory: make it 0700 (or tighten it),
    check the folders it writes to, and remove the temp files of writes that never landed.
    UsageError (one line) when the directory or its ``locks`` cannot be used: no Release
    can be reconciled safely then. A ``cache`` that cannot be used is a warning (parse
    caches are skipped); ``renders`` and ``inventory`` are reported by their stores, as
    the error of each Release that needs them."""
    try:
        root = open_state_dir(state_dir)
    except StateFailed as exc:
        raise UsageError(f"state directory not usable: {exc}") from None
    problems = {name: folder_problem(state_dir / name, root) for name in STORE_FOLDERS}
    if problems["locks"]:
        raise UsageError(f"state directory not usable: {problems['locks']}")
    if problems["cache"]:
        log.warning("parse caches not used: %s", problems["cache"])
    now = time.time()  # file ages are wall-clock time, unlike a tick's (settable) now
    remove_leftovers(state_dir, now)
    for name, problem in problems.items():
        if problem is None:
            remove_leftovers(state_dir / name, now)


class RenderStore:
    """``<state>/renders/<hex>.json``: the canonical JSON of each render, content addressed.

    A blob that is not a readable file of the right content is absent (SPEC 2): reported,
    moved aside to ``<hex>.corrupt`` and replaced by the next :meth:`put`. A ``renders``
    folder that cannot be used makes :meth:`put` fail (StateFailed)."""

    def __init__(self, state_dir: Path, writer: Writer | None = None) -> None:
        self.root = Path(state_dir) / "renders"
        self._state = real_root(state_dir)
        self._verified: set[str] = set()  # read back or written by this instance (one tick)
        self._writer = writer
        self._problem: str | None = None
        self._checked = self._told = False

    def path(self, ref: str) -> Path:
        return self.root / f"{ref_hex(ref)}.json"

    def folder_problem(self) -> str | None:
        """Why ``renders`` cannot hold blobs (checked once per instance)."""
        if not self._checked:
            self._checked = True
            self._problem = folder_problem(self.root, self._state)
        return self._problem

    def put(self, ref: str, canonical: bytes) -> None:
        """Store ``canonical`` under ``ref``; a valid blob already there is not rewritten
        (nor read again when this instance has verified it already). StateFailed when
        the store cannot hold it."""
        if hashlib.sha256(canonical).hexdigest() != ref_hex(ref):
            raise ValueError(f"render store: content does not hash to {ref}")
        if ref in self._verified:
            return
        if problem := self.folder_problem():
            raise StateFailed(problem)
        path = self.path(ref)
        if not self._valid(path, ref):
            self._clear(path)
            if self._writer is None:
                self._write(path, canonical)
            else:
                try:
                    self._writer.write(path, canonical)
                except OSError as exc:  # a closed writer writes in the caller
                    raise StateFailed(os_problem(path, exc)) from None
        self._verified.add(ref)

    def get(self, ref: str) -> bytes | None:
        """The verified blob of ``ref``; None when absent or bad (bad is reported)."""
        path = self.path(ref)
        pending = self._writer.pending(path) if self._writer is not None else None
        if pending is not None:
            return pending
        if self.folder_problem():
            if not self._told:  # put's StateFailed tells each Release that stores a render
                log.warning("render store not usable, renders absent: %s", self._problem)
                self._told = True
            return None
        try:
            data = read_file(path, self._state)
        except StateFailed as exc:
            self._set_aside(path, str(exc))
            return None
        if data is None:
            return None
        if hashlib.sha256(data).hexdigest() != ref_hex(ref):
            self._set_aside(path, f"{path}: content does not hash to {ref}")
            return None
        self._verified.add(ref)
        return data

    def settle(self, ref: str) -> None:
        """Make the blob of ``ref`` durable now if its write is still pending; StateFailed
        (one line naming the blob and the operation) when it cannot be, or when its
        background write failed: nothing may name a render that is not stored."""
        if self._writer is None:
            return
        path = self.path(ref)
        try:
            self._writer.settle(path)
        except OSError as exc:
            self._verified.discard(ref)  # a later put writes it again
            raise StateFailed(f"render not stored: {os_problem(path, exc)}") from None

    def has(self, ref: str) -> bool:
        """Whether a blob exists for ``ref`` (not verified: ``get`` verifies)."""
        return self.path(ref).is_file()

    def gc(self, keep: Iterable[str]) -> list[str]:
        """Delete every blob whose ref is not in ``keep``; returns the removed refs, sorted.
        A blob that cannot be removed is reported and left."""
        if self.folder_problem():
            return []  # never list, let alone delete, through a folder that leads out
        kept = set(keep)
        removed = []
        for ref in self._refs():
            if ref not in kept and self._remove(self.path(ref)):
                self._verified.discard(ref)
                removed.append(ref)
        return sorted(removed)

    def _refs(self) -> Iterator[str]:
        try:
            names = os.listdir(self.root)
        except OSError:
            return
        for name in names:
            match = _BLOB_FILE.match(name)
            if match:
                yield f"sha256:{match.group(1)}"

    @staticmethod
    def _remove(path: Path) -> bool:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("render store: %s; not removed", os_problem(path, exc))
            return False
        return True

    def _valid(self, path: Path, ref: str) -> bool:
        try:
            data = read_file(path, self._state)
        except StateFailed:
            return False
        return data is not None and hashlib.sha256(data).hexdigest() == ref_hex(ref)

    def _set_aside(self, path: Path, problem: str) -> None:
        aside = path.with_suffix(".corrupt")
        log.warning("%s; moved to %s, not used", problem, aside.name)
        with contextlib.suppress(OSError):
            os.replace(path, aside)

    @staticmethod
    def _clear(path: Path) -> None:
        """Move a folder standing where a blob belongs out of the way (a rename onto a
        file or a symlink replaces it, onto a folder it fails)."""
        if os.path.isdir(path) and not os.path.islink(path):
            try:
                os.replace(path, path.with_suffix(".corrupt"))
            except OSError as exc:
                problem = f"{path}: a folder where a blob belongs; {exc.strerror}"
                raise StateFailed(problem) from None

    def _write(self, path: Path, data: bytes) -> None:
        try:
            atomic_write(path, data)
        except OSError as exc:
            raise StateFailed(f"render not stored: {os_problem(path, exc)}") from None


class InventoryStore:
    """``<state>/inventory/<release>.json``: the ReleaseInventory of each Release.

    Not a cache: what the file says cannot be known otherwise, so a file that cannot be
    read or written (a folder, unreadable, a symlink leading out of the state directory,
    an ``inventory`` that is a file) is StateFailed, the Release's error. Content that
    does not parse is a warning and an empty inventory (the next save replaces it)."""

    def __init__(self, state_dir: Path) -> None:
        self.root = Path(state_dir) / "inventory"
        self._state = real_root(state_dir)
        self._problem: str | None = None
        self._checked = False
        self._digests: dict[str, str | None] = {}

    def digest(self, release: str) -> str | None:
        """The SHA-256 of the Release's inventory file as last read or written by this
        store (None: no file): what a health journal record applies to."""
        return self._digests.get(release)

    def path(self, release: str) -> Path:
        return self.root / f"{check_release_name(release)}.json"

    def _usable(self) -> None:
        if not self._checked:
            self._problem = folder_problem(self.root, self._state)
            self._checked = True
        if self._problem:
            raise StateFailed(self._problem)

    def load(self, release: str, journal: HealthJournal | None = None) -> ReleaseInventory:
        """The stored inventory, with the health of ``journal``'s record for it when one
        applies; empty when missing, or (with a warning) when it does not parse.
        StateFailed when it cannot be read."""
        path = self.path(release)
        self._usable()
        empty = ReleaseInventory(release=release)
        data = read_file(path, self._state)
        self._digests[release] = None  # set once the file holds exactly what is returned
        if data is None:
            return empty
        digest = hashlib.sha256(data).hexdigest()
        try:
            raw = json.loads(data)
            inventory = _parse(raw, path, _journal_health(raw, release, digest, journal))
        except ValueError as exc:  # JSONDecodeError and parse_model's are ValueErrors
            log.warning("unreadable inventory, treated as empty: %s", describe(path, exc))
            return empty
        if inventory.release != release:
            log.warning("%s: release: holds %r, treated as empty", path, inventory.release)
            return empty
        valid = _valid_entries(inventory, path)
        if valid is inventory:
            self._digests[release] = digest
        return valid

    def save(self, inventory: ReleaseInventory, *, durable: bool = True) -> None:
        """Write the inventory (StateFailed when it cannot be written). ``durable=False``
        skips the fsyncs: for a change of health alone, which the observer sees again."""
        path = self.path(inventory.release)
        self._usable()
        data = inventory.model_dump_json(by_alias=True).encode() + b"\n"  # compact JSON
        # Written before the Release's lock is let go (not in the background): another
        # process reconciling it next must not see its newer inventory overwritten late.
        self._digests.pop(inventory.release, None)  # unknown until the write is done
        try:
            atomic_write(path, data, durable=durable, root=self._state)
        except OSError as exc:
            raise StateFailed(os_problem(path, exc)) from None
        self._digests[inventory.release] = hashlib.sha256(data).hexdigest()

    def remove(self, release: str) -> None:
        """Remove the Release's inventory file (a retired Release; StateFailed when it
        cannot be removed)."""
        path = self.path(release)
        self._usable()
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise StateFailed(os_problem(path, exc)) from None
        self._digests[release] = None


class Inventories:
    """One tick's view of every Release's inventory, over the inventory files and the
    health journal (:class:`~convoy_batch.state.caches.HealthJournal`).

    An inventory has four copies: its file, the journal's overlay of the file, what the
    state directory holds (``stored``: read or written this tick) and what the tick now
    knows (``known``, :meth:`note`); :meth:`save` makes the file (or the journal) agree
    with ``known``. Key: the Release; read once per tick, held until the Release is
    handled and what the tick knows of it is stored (:meth:`let_go`). A thread
    writes only its own Release's entries (one key per thread: a dict's item assignment
    is atomic); other Releases' inventories are read (the ownership index)."""

    def __init__(self, files: InventoryStore, journal: HealthJournal) -> None:
        self.files = files
        self.journal = journal
        self.known: dict[str, ReleaseInventory] = {}
        self.stored: dict[str, ReleaseInventory] = {}

    def get(self, name: str) -> ReleaseInventory:
        """The Release's inventory as this tick knows it (StateFailed when its file
        cannot be read)."""
        if name not in self.known:
            inventory = self.files.load(name, self.journal)
            self.known[name] = self.stored[name] = inventory
        return self.known[name]

    def read(self, name: str) -> ReleaseInventory:
        """The Release's inventory as this tick knows it, else from its file, not kept:
        the ownership index reads every Release of a Cluster at once, and 10,000 held
        until each is handled took 120 MiB (each is read again when its Release is)."""
        known = self.known.get(name)
        return known if known is not None else self.files.load(name, self.journal)

    def note(self, inventory: ReleaseInventory) -> None:
        """What the tick now knows of an inventory, written by :meth:`save`."""
        self.known[inventory.release] = inventory

    def save(self, name: str) -> None:
        """Write the Release's inventory when it differs from the stored one: durably
        when its entries changed; when only their health did, into the health journal
        (written once, when the tick closes; the observer sees health again)."""
        inventory, stored = self.get(name), self.stored.get(name)
        if inventory == stored:
            return
        same_entries = stored is not None and _bookkeeping(inventory) == _bookkeeping(stored)
        if not (same_entries and self.journal.keep(inventory, self.files.digest(name))):
            self.files.save(inventory, durable=not same_entries)
            self.journal.forget(name)
        self.stored[name] = inventory

    def let_go(self, name: str) -> None:
        """Forget the Release's inventory once what the tick knows of it is stored (a
        handled Release: no later step of the tick reads it but the ownership index,
        which has its objects already); asked again, it is read again."""
        if name in self.known and self.known[name] == self.stored.get(name):
            del self.known[name], self.stored[name]

    def drop(self, name: str) -> None:
        """Remove the Release's inventory, file and journal record (a retired Release)."""
        self.files.remove(name)
        self.journal.forget(name)
        self.known[name] = self.stored[name] = ReleaseInventory(release=name)


def _journal_health(
    raw: Any, release: str, digest: str, journal: HealthJournal | None
) -> list[Any] | None:
    """The health list of ``journal``'s record that applies to the inventory file's data
    ``raw`` (SHA-256 ``digest``); None when none applies."""
    entries = raw.get("entries") if isinstance(raw, dict) else None
    if journal is None or not isinstance(entries, list):
        return None
    return journal.health_of(release, digest, len(entries))


def _parse(raw: Any, path: Path, healths: list[Any] | None) -> ReleaseInventory:
    """The inventory file's data validated once, each entry's health taken from
    ``healths`` (a journal record's) where it has one; a deleted hook's entry keeps its
    own. A record that does not validate is warned of and not used."""
    if healths is not None:
        entries = [
            entry
            if not isinstance(entry, dict) or entry.get("hookDeleted") or health is None
            else {**entry, "health": health}
            for entry, health in zip(raw["entries"], healths, strict=True)
        ]
        try:
            return parse_model(ReleaseInventory, {**raw, "entries": entries}, str(path))
        except ValueError as exc:
            log.warning("%s: health journal record ignored: %s", path, exc)
    return parse_model(ReleaseInventory, raw, str(path))


def _bookkeeping(inventory: ReleaseInventory) -> list[tuple[object, ...]]:
    """An inventory's entries without their health (a hook's deletion mark is kept: it is
    written before the delete)."""
    return [
        (e.key, e.wave, e.applied_render_ref, e.prune, e.retain, e.hook_deleted)
        for e in inventory.entries
    ]


def _valid_entries(inventory: ReleaseInventory, path: Path) -> ReleaseInventory:
    """The inventory without entries whose identity is no Kubernetes name (it could name
    a path outside a directory cluster, and no prune of it could ever succeed)."""
    kept = []
    for entry in inventory.entries:
        if problem := entry.key.name_problem():
            log.warning("%s: entry dropped: %s", path, problem)
        else:
            kept.append(entry)
    if len(kept) == len(inventory.entries):
        return inventory
    return ReleaseInventory(release=inventory.release, entries=tuple(kept))


@dataclass
class Stores:
    """The machine-local stores under one state directory."""

    state_dir: Path
    renders: RenderStore
    inventories: InventoryStore
    ticks: TickStore
    locks: Locks
    writer: Writer
    """Renders are written through it, in the background."""
    intents: IntentStore
    health: HealthJournal
    retiring: RetiringStore
    """Write-ahead records of removed Releases' retirements."""

    @classmethod
    def open(cls, state_dir: Path) -> "Stores":
        """The stores, once the state directory is ready (UsageError when it cannot be)."""
        open_state(state_dir)
        writer = Writer()
        return cls(
            state_dir=state_dir,
            renders=RenderStore(state_dir, writer),
            inventories=InventoryStore(state_dir),
            ticks=TickStore(state_dir),
            locks=Locks(state_dir),
            writer=writer,
            intents=IntentStore(state_dir),
            health=HealthJournal(state_dir),
            retiring=RetiringStore(state_dir),
        )
