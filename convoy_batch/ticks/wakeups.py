"""Wake-ups between ticks (SPEC 13 items 2-4), for a sensor that starts reconciles promptly,
and the work waiting for a tick (:func:`work_waiting`), for a schedule that launches no
run when there is none.

Library code without Dagster: the Dagster sensor and schedule in
:mod:`convoy_batch.definitions` are thin shells over :func:`wake_keys`, :func:`woken` and
:func:`work_waiting`. Does I/O: reads the repository, and
observes each Progressing Release (the observer writes health into its inventory) under
the Release's lock, skipping Releases whose lock is held.
"""

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from convoy_batch.models import ReleaseInventory, Rollout, TickRecord
from convoy_batch.notify.outbox import Outbox
from convoy_batch.repo.gitops import GitOpsRepo, ReleaseEntry
from convoy_batch.rollout.due import DueReason, health_snapshot
from convoy_batch.state.locks import LockBusy
from convoy_batch.status.remote import BUNDLE, fetch_for_reading, remote_url
from convoy_batch.ticks.due import DueFacts, is_due, progressing
from convoy_batch.ticks.location import default_state_dir
from convoy_batch.ticks.runner import observe_release, open_between


@dataclass(frozen=True)
class _Seen:
    """What a wake-up key is made of."""

    entry: ReleaseEntry
    inventory: ReleaseInventory | None
    memo: TickRecord
    rollout: Rollout | None


def _health_key(seen: _Seen) -> str:
    health = health_snapshot(seen.inventory or ReleaseInventory(release=seen.entry.name))
    return f"health:{seen.memo.last_reconcile_at}:{_digest(health)}"


def _deadline_key(seen: _Seen) -> str | None:
    rollout = seen.rollout
    return f"deadline:{rollout.render_ref}:{rollout.started_at}" if rollout else None


def _release_key(seen: _Seen) -> str:
    return f"release:{seen.entry.blob}"


KEYS: Mapping[DueReason, Callable[[_Seen], str | None]] = {
    DueReason.HEALTH_CHANGED: _health_key,
    DueReason.DEADLINE_PASSED: _deadline_key,
    DueReason.RELEASE_CHANGED: _release_key,
    # A new Release file is a file change: reconcile it now, not at the next tick.
    DueReason.NEVER_RECONCILED: _release_key,
    # Keyed by the remembered revision: it changes once the new source is reconciled.
    DueReason.SOURCE_CHANGED: lambda seen: f"source:{seen.memo.source_revision}",
    DueReason.FORCED_SYNC: lambda seen: f"forced sync:{seen.memo.last_reconcile_at}",
    # Keyed by the reconcile that found the window closed: it changes once reconciled.
    DueReason.WINDOW_OPENED: lambda seen: f"window:{seen.memo.last_reconcile_at}",
    DueReason.DEPENDENCY_CHANGED: lambda seen: f"dependency:{seen.memo.last_reconcile_at}",
    DueReason.FLIGHT_CHANGED: lambda seen: f"flight:{seen.memo.last_reconcile_at}",
    DueReason.MEASUREMENT_DUE: lambda seen: f"measurement:{seen.memo.last_reconcile_at}",
}
"""One key per wake-up cause: the same cause keeps the same key until reconciled."""

WAKE_REASONS = frozenset(KEYS)
"""Reasons of :func:`convoy_batch.ticks.due.is_due` that wake a Release between ticks;
the interval is the schedule's business."""


def release_names(repo: Path) -> list[str]:
    """The Releases in ``releases/`` at HEAD, valid or not, and the removed ones whose
    status file is still there (their retirement waits): one partition each. A clone of
    the remote is fetched first (:mod:`convoy_batch.status.remote`)."""
    if remote_url() is not None:
        fetch_for_reading(repo, default_state_dir(repo))
    gitops = GitOpsRepo(repo)
    snapshot = gitops.snapshot()
    return sorted(set(snapshot.releases) | (gitops.status_names() - set(snapshot.sets)))


def _digest(value: object) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def _keys(facts: DueFacts, entry: ReleaseEntry, inventory: ReleaseInventory | None) -> set[str]:
    reasons = set(is_due(facts, entry, inventory, False)) & WAKE_REASONS
    seen = _Seen(
        entry, inventory, facts.stores.ticks.load(entry.name), facts.status_of(entry.name).rollout
    )
    keys = (KEYS[reason](seen) for reason in reasons)
    return {key for key in keys if key is not None}


def wake_keys(repo: Path, state_dir: Path, now: datetime) -> dict[str, set[str]]:
    """Release -> the keys of its current wake-up causes (empty: none). Only a
    Progressing Release is observed (health wakes nothing else up, as in a tick's
    :func:`convoy_batch.ticks.runner.due_entries`); Releases whose lock is held (a reconcile
    is running) are left out. A clone of the remote is fetched first."""
    fetch_for_reading(repo, state_dir)
    tick, facts, _ = open_between(repo, state_dir, now)
    found: dict[str, set[str]] = {}
    releases = facts.snapshot.releases
    for name in sorted(releases):
        entry = releases[name]
        try:
            with facts.stores.locks.release(name):
                observed = progressing(facts.status_of(name))
                inventory = observe_release(tick, entry) if observed else None
                found[name] = _keys(facts, entry, inventory)
        except LockBusy:
            continue
    return found


def work_waiting(repo: Path, state_dir: Path, now: datetime) -> list[str]:
    """What a tick of the due Releases would do now, one phrase each, in this order (empty:
    nothing, and the tick schedule launches no run): each due Release with its reasons
    (:func:`~convoy_batch.ticks.due.is_due`; a change of health is the wake-up
    sensor's), each Release a killed tick left a write-ahead record for, each removed
    Release whose retirement waits, the notifications due for another attempt, and, from
    a clone, status commits a failed push left to push. A clone of the remote is fetched
    first. Reads only: no lock, no observation."""
    remote = remote_url()
    fetch_for_reading(repo, state_dir)
    _, facts, gone = open_between(repo, state_dir, now)
    try:
        found = []
        releases = facts.snapshot.releases
        for name in sorted(releases):
            reasons = is_due(facts, releases[name], None, False)
            if reasons:
                found.append(f"{name} ({' and '.join(reasons)})")
        found += [f"{name} (unfinished)" for name in sorted(facts.stores.intents.names())]
        removed = set(gone) | facts.stores.retiring.names()
        found += [f"{name} (removed)" for name in sorted(removed)]
        if any(entry.due(now) for entry in Outbox(state_dir).pending()):
            found.append("notifications to retry")
        if remote is not None and (state_dir / BUNDLE).exists():
            found.append("status commits to push")
        return found
    finally:
        facts.sources.close()  # its git readers; nothing else of it is written


def woken(current: Mapping[str, Iterable[str]], seen: Mapping[str, Iterable[str]]) -> list[str]:
    """Releases with a wake-up cause not already acted on (``seen``: the last keys)."""
    return sorted(name for name, keys in current.items() if set(keys) - set(seen.get(name, ())))


TAG_LIMIT = 200
"""The longest value of a wake-up run's ``convoy/woken`` tag."""


def woken_tag(names: Sequence[str], limit: int = TAG_LIMIT) -> str:
    """The woken Releases for a run's tag: all of them, comma-separated, or as many whole
    names as fit in ``limit`` characters followed by how many more."""
    text = ",".join(names)
    if len(text) <= limit:
        return text
    shown: list[str] = []
    length = 0
    for name in names:
        grown = length + (1 if shown else 0) + len(name)
        if grown + len(f" and {len(names) - len(shown) - 1} more") > limit:
            break
        shown.append(name)
        length = grown
    more = len(names) - len(shown)
    return f"{','.join(shown)} and {more} more" if shown else f"{more} Releases"
