"""Write-ahead records of decided outcomes (SPEC 15, "Write-ahead"):
``<state>/intents/<release>.json``, and of decided retirements:
``<state>/retiring/<release>.json``. Does file I/O.

Decide, write, then act: before a tick changes a cluster on a decision that changes a
Release's status, it records here what it decided (the :class:`Step` it is about to carry
out, and the status and commit message that follow when the step succeeds), durably, and
the render the step applies is durable in the render store first. The record is removed
once the tick's status commits have landed (in a clone of the remote, which may not
outlive the run: once they are pushed or kept in the state directory, see
:mod:`convoy_batch.status.remote`). A tick that finds a record completes it
before it decides anything new for that Release: the step again (applies are
idempotent), then the recorded status commit. So a crash at any point can delay a
decided transition, never undo it.

A removed Release's retirement is recorded the same way (:class:`Retiring`: its fate and
the commit message that removes its status file) before its first delete, and completed
by the next tick the same way: the deletes again (a delete of what is gone is a no-op),
then the recorded commit, so a kill between two deletes gives exactly one such commit.
"""

import json
import logging
import os
from pathlib import Path
from typing import Generic, Literal, TypeVar

from convoy_batch.errors import StateFailed
from convoy_batch.models import Model, ObjectKey, ReleaseStatus, parse_model
from convoy_batch.names import is_label
from convoy_batch.rollout.step import Step
from convoy_batch.state.files import (
    atomic_write,
    check_release_name,
    os_problem,
    read_file,
    real_root,
)

log = logging.getLogger("convoy_batch")


class Record(Model):
    """A record of one Release in a folder of the state directory (:class:`RecordStore`)."""

    release: str


class Intent(Record):
    """What a tick decided for one Release before it changed the cluster."""

    format: Literal[1] = 1
    cluster: str
    step: Step
    status: ReleaseStatus
    """The status to commit once the step has succeeded."""
    message: str
    """Its commit message."""


class Retiring(Record):
    """What a tick decided for a removed Release before it changed the cluster."""

    format: Literal[1] = 1
    cluster: str | None
    """None: unknown (an Orphan that ``--orphan`` asked for)."""
    fate: Literal["Delete", "Orphan", "Adopted"]
    adopted_by: str | None = None
    """The Release that takes its objects over (fate ``Adopted``)."""
    message: str
    """The commit message that removes its status file."""
    namespace: str | None = None
    """The namespace its ``createNamespace`` made, deleted once empty (fate Delete)."""
    kept: tuple[ObjectKey, ...] = ()
    """The objects a Delete leaves in place (decided with it, spared by every try)."""


R = TypeVar("R", bound=Record)


class RecordStore(Generic[R]):
    """``<state>/<folder>/<release>.json``: at most one record per Release."""

    def __init__(self, state_dir: Path, folder: str, model: type[R]) -> None:
        self.root = Path(state_dir) / folder
        self.model: type[R] = model
        self._state = real_root(state_dir)

    def path(self, release: str) -> Path:
        return self.root / f"{check_release_name(release)}.json"

    def save(self, record: R) -> None:
        """Write ``record`` durably (temp file, fsync, rename, fsync of the folder)."""
        data = json.dumps(record.dump(), separators=(",", ":"), ensure_ascii=False)
        path = self.path(record.release)
        try:
            atomic_write(path, data.encode(), root=self._state)
        except OSError as exc:
            raise StateFailed(os_problem(path, exc)) from None

    def load(self, release: str) -> R | None:
        """The record of ``release``; None when there is none. A record that cannot be
        read is reported and removed: its decision is made again from the committed
        status (a torn record cannot exist: every write is atomic)."""
        path = self.path(release)
        try:
            raw = read_file(path, self._state)
            if raw is None:
                return None
            return parse_model(self.model, json.loads(raw), str(path))
        except (OSError, ValueError, StateFailed) as exc:
            log.warning("%s: unreadable write-ahead record, dropped: %s", path, exc)
            self.clear(release)
            return None

    def names(self) -> set[str]:
        """The Releases that have a record."""
        try:
            files = os.listdir(self.root)
        except (FileNotFoundError, NotADirectoryError):
            return set()
        return {f.removesuffix(".json") for f in files if f.endswith(".json")}

    def clear(self, release: str) -> None:
        if not is_label(release):
            return  # an invalid file keyed by its file name: it never has a record
        try:
            self.path(release).unlink(missing_ok=True)
        except OSError as exc:
            log.warning("%s: write-ahead record not removed: %s", self.path(release), exc)


class IntentStore(RecordStore[Intent]):
    """``<state>/intents/<release>.json``: a decided step and the status it gives."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir, "intents", Intent)


class RetiringStore(RecordStore[Retiring]):
    """``<state>/retiring/<release>.json``: a decided retirement and its commit message."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir, "retiring", Retiring)
