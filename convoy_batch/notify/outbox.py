"""The notification outbox in the state directory: ``<state>/outbox/``. Does file I/O.

- ``cursor.json``: the newest status commit whose events are in the outbox, and the
  number the next entry gets.
- ``<commit>.<release>.<provider>.json``: one event waiting for one provider (its
  attempts, the time of the next one, the last error). The name is the key: a status
  commit, a Release and a provider are put in once, however often they are found.
- ``failed/``: entries given up after :data:`MAX_ATTEMPTS`, kept for the operator.

New entries are written durably (fsynced, on a few threads) before the cursor moves
past their commit, so a crash loses none: the commits after the cursor are found again.
A sent entry is removed; an attempt is recorded without fsync (a power cut may send it
once more, never lose it). Every file is 0600, written atomically.
"""

import contextlib
import json
import logging
import os
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from convoy_batch.errors import StateFailed
from convoy_batch.models import Model, Name, Time, parse_model
from convoy_batch.notify.event import Event
from convoy_batch.state.files import (
    DIR_MODE,
    Writer,
    atomic_write,
    folder_problem,
    fsync_dir,
    os_problem,
    read_file,
    real_root,
)
from convoy_batch.state.operator_files import without_state_dir

log = logging.getLogger("convoy_batch")

OUTBOX_DIR = "outbox"
CURSOR_FILE = "cursor.json"
FAILED_DIR = "failed"
MAX_ATTEMPTS = 10
FIRST_BACKOFF = timedelta(minutes=1)
MAX_BACKOFF = timedelta(hours=1)
_ENTRY_NAME = re.compile(r"^[0-9a-f]{40,64}\.[a-z0-9-]+\.[a-z0-9-]+\.json$")


class Cursor(Model):
    format: Literal[1] = 1
    commit: str
    """Every status commit up to this one (on HEAD's history) is in the outbox."""
    seq: int = 0
    """The number of the next entry: entries are sent in this order."""


class Entry(Model):
    format: Literal[1] = 1
    seq: int
    provider: Name
    alert: str
    event: Event
    attempts: int = 0
    next_attempt_at: Time | None = None
    last_error: str = ""

    @property
    def file_name(self) -> str:
        return f"{self.event.commit}.{self.event.release}.{self.provider}.json"

    def due(self, now: datetime) -> bool:
        return self.next_attempt_at is None or self.next_attempt_at <= now

    def failed(self, error: str, now: datetime) -> "Entry":
        """The entry after one more failed attempt, its next one backed off."""
        attempts = self.attempts + 1
        wait = min(FIRST_BACKOFF * 2 ** (attempts - 1), MAX_BACKOFF)
        update = {"attempts": attempts, "next_attempt_at": now + wait, "last_error": error}
        return self.model_copy(update=update)


def backoff_schedule() -> list[timedelta]:
    """The waits after each failed attempt but the last (the README's table)."""
    return [min(FIRST_BACKOFF * 2**i, MAX_BACKOFF) for i in range(MAX_ATTEMPTS - 1)]


class Outbox:
    """``<state>/outbox/``: the cursor and the entries waiting to be sent."""

    def __init__(self, state_dir: Path) -> None:
        self.root = Path(state_dir) / OUTBOX_DIR
        self._given = Path(state_dir)
        self._state = real_root(state_dir)

    def _said(self, text: str) -> str:
        """A message as it is told: the state directory's path written ``<state>``."""
        return without_state_dir(without_state_dir(text, self._given), self._state)

    # the cursor

    def cursor(self) -> Cursor | None:
        raw = self._read(self.root / CURSOR_FILE)
        if raw is None:
            return None
        return parse_model(Cursor, json.loads(raw), self._said(str(self.root / CURSOR_FILE)))

    def save_cursor(self, cursor: Cursor) -> None:
        self._write(self.root / CURSOR_FILE, cursor.dump(), durable=True)

    def drop_cursor(self) -> None:
        path = self.root / CURSOR_FILE
        if os.path.lexists(path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    # entries

    def add(self, entries: Sequence[Entry]) -> list[Entry]:
        """Write the entries that are not in the outbox yet (durably, before returning);
        those written."""
        new = [e for e in entries if not self._known(e.file_name)]
        if not new:
            return []
        self._check_folder()
        writer = Writer()
        try:
            self.root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            for entry in new:
                writer.write(self.root / entry.file_name, _json(entry.dump()))
        finally:
            failed = writer.close()  # every write landed (fsynced), or these failed
        if failed:
            path, exc = failed[0]
            raise StateFailed(self._said(os_problem(path, exc)))
        return new

    def pending(self) -> list[Entry]:
        """The entries waiting, in the order they were put in. One that cannot be read
        is a warning and is moved to ``failed/``."""
        entries = []
        for name in self._names():
            path = self.root / name
            try:
                raw = self._read(path)
                if raw is not None:
                    entries.append(parse_model(Entry, json.loads(raw), self._said(str(path))))
            except (ValueError, StateFailed) as exc:
                log.warning("notifications: %s; set aside in %s/", exc, FAILED_DIR)
                self._set_aside(name)
        return sorted(entries, key=lambda e: e.seq)

    def update(self, entry: Entry) -> None:
        self._write(self.root / entry.file_name, entry.dump(), durable=False)

    def sent(self, entry: Entry) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.root / entry.file_name).unlink()

    def give_up(self, entry: Entry) -> None:
        """Keep the entry in ``failed/``, out of the way of the ones after it."""
        self.update(entry)
        self._set_aside(entry.file_name)

    def _set_aside(self, name: str) -> None:
        failed = self.root / FAILED_DIR
        try:
            failed.mkdir(mode=DIR_MODE, exist_ok=True)
            os.replace(self.root / name, failed / name)
            fsync_dir(self.root)
        except OSError as exc:
            raise StateFailed(self._said(os_problem(failed / name, exc))) from None

    def _names(self) -> list[str]:
        try:
            return [n for n in os.listdir(self.root) if _ENTRY_NAME.match(n)]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StateFailed(self._said(os_problem(self.root, exc))) from None

    def _known(self, name: str) -> bool:
        return any(os.path.lexists(p) for p in (self.root / name, self.root / FAILED_DIR / name))

    def _read(self, path: Path) -> bytes | None:
        try:
            return read_file(path, self._state)
        except StateFailed as exc:
            raise StateFailed(self._said(str(exc))) from None

    def _check_folder(self) -> None:
        """StateFailed when ``outbox`` is a file, or a symlink leading out of the state
        directory: nothing is written through it."""
        problem = folder_problem(self.root, self._state)
        if problem is not None:
            raise StateFailed(self._said(problem))

    def _write(self, path: Path, data: object, *, durable: bool) -> None:
        self._check_folder()
        try:
            atomic_write(path, _json(data), durable=durable, root=self._state)
        except OSError as exc:
            raise StateFailed(self._said(os_problem(path, exc))) from None


def _json(data: object) -> bytes:
    return (json.dumps(data, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
