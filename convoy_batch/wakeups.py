"""Wake-ups between ticks (SPEC 13 items 2-4), for a sensor that starts reconciles promptly.

Library code without Dagster: the Dagster sensor in :mod:`convoy_batch.definitions` is a
thin shell over :func:`wake_keys` and :func:`woken`. Does I/O: reads the repository, and
observes each Release (the observer writes health into its inventory) under the
Release's lock, skipping Releases whose lock is held.
"""

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path

from convoy_batch.due import health_snapshot
from convoy_batch.gitops import GitOpsRepo, ReleaseEntry
from convoy_batch.models import ReleaseInventory
from convoy_batch.runner import is_due, observe_release
from convoy_batch.store import LockBusy
from convoy_batch.tick import Tick

WAKE_REASONS = frozenset(
    {
        "health changed",
        "deadline passed",
        "release changed",
        "source changed",
        "forced sync",
        # A new Release file is a file change: reconcile it now, not at the next tick.
        "never reconciled",
    }
)
"""Reasons of :func:`convoy_batch.runner.is_due` that wake a Release between ticks;
the interval is the schedule's business."""


def release_names(repo: Path) -> list[str]:
    """The Releases in ``releases/`` at HEAD, valid or not (one partition each)."""
    return sorted(GitOpsRepo(repo).snapshot().releases)


def _digest(value: object) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def _keys(tick: Tick, entry: ReleaseEntry, inventory: ReleaseInventory | None) -> set[str]:
    """One key per wake-up reason: the same cause keeps the same key until reconciled."""
    reasons = set(is_due(tick, entry, inventory, False)) & WAKE_REASONS
    memo = tick.stores.ticks.load(entry.name)
    rollout = tick.status(entry.name).rollout
    keys = set()
    for reason in reasons:
        if reason == "health changed":
            health = health_snapshot(inventory or ReleaseInventory(release=entry.name))
            keys.add(f"health:{memo.last_reconcile_at}:{_digest(health)}")
        elif reason == "deadline passed" and rollout is not None:
            keys.add(f"deadline:{rollout.render_ref}:{rollout.started_at}")
        elif reason in ("release changed", "never reconciled"):
            keys.add(f"release:{entry.blob}")
        elif reason == "source changed":
            # Keyed by the remembered revision: it changes once the new source is reconciled.
            keys.add(f"source:{memo.source_revision}")
        else:
            keys.add(f"{reason}:{memo.last_reconcile_at}")
    return keys


def wake_keys(repo: Path, state_dir: Path, now: datetime) -> dict[str, set[str]]:
    """Release -> the keys of its current wake-up causes (empty: none). Releases whose
    lock is held (a reconcile is running) are left out."""
    tick = Tick.open(repo, state_dir, now)
    found: dict[str, set[str]] = {}
    for name in sorted(tick.snapshot.releases):
        entry = tick.snapshot.releases[name]
        try:
            with tick.stores.locks.release(name):
                found[name] = _keys(tick, entry, observe_release(tick, entry))
        except LockBusy:
            continue
    return found


def woken(current: Mapping[str, Iterable[str]], seen: Mapping[str, Iterable[str]]) -> list[str]:
    """Releases with a wake-up cause not already acted on (``seen``: the last keys)."""
    return sorted(name for name, keys in current.items() if set(keys) - set(seen.get(name, ())))
