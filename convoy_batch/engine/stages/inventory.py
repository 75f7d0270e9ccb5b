"""Inventory bookkeeping shared by ``stage_sync`` and ``apply_last_healthy``: record what
was applied, and prune what left the render (SPEC 4 step 5, 12.3). I/O only through
the deployer it is given.
"""

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from convoy_batch.deployers.base import Deployer
from convoy_batch.errors import ConvoyError, Forbidden
from convoy_batch.models import (
    LABEL_RELEASE,
    POST_SYNC,
    PRE_SYNC,
    SYNC,
    SYNC_FAIL,
    Identity,
    InventoryEntry,
    ObjectKey,
    Phase,
    ReleaseInventory,
)
from convoy_batch.renderers.pipeline import RenderedObject

log = logging.getLogger("convoy_batch")
Claimants = Callable[[ObjectKey], Collection[str]]
"""The other Releases that claim an object (render or inventory it): see ownership.py."""


def no_claimants(_key: ObjectKey) -> Collection[str]:
    return ()


def record_applied(
    inventory: ReleaseInventory,
    objects: Sequence[RenderedObject],
    applied: Collection[Identity],
    render_ref: str,
) -> ReleaseInventory:
    """Every object of the render gets an entry (health kept from the observer); those in
    ``applied`` are marked applied for ``render_ref``. Entries that left the render stay
    until their prune is confirmed."""
    old = {e.key.identity(): e for e in inventory.entries}
    entries = []
    for obj in objects:
        ident = obj.key.identity()
        prior = old.pop(ident, None)
        applied_ref = (
            render_ref if ident in applied else (prior.applied_render_ref if prior else None)
        )
        same = (obj.key, obj.phase, applied_ref, obj.prune, obj.retain)
        if (
            prior is not None
            and (prior.key, prior.wave, prior.applied_render_ref, prior.prune, prior.retain) == same
        ):
            entries.append(prior)  # unchanged: no new model on a quiet tick
            continue
        entries.append(
            InventoryEntry(
                key=obj.key,
                wave=obj.phase,
                applied_render_ref=applied_ref,
                prune=obj.prune,
                retain=obj.retain,
                health=prior.health if prior else None,
            )
        )
    entries.extend(old.values())
    if tuple(entries) == inventory.entries:
        return inventory
    return ReleaseInventory(release=inventory.release, entries=tuple(entries))


_HOOK_RANKS: dict[Phase, tuple[int, int]] = {
    PRE_SYNC: (0, 0),
    SYNC: (1, 0),
    POST_SYNC: (3, 0),
    SYNC_FAIL: (4, 0),
}


def _wave_rank(phase: Phase) -> tuple[int, int]:
    """Apply order: PreSync, Sync, the waves, PostSync, SyncFail."""
    return _HOOK_RANKS.get(phase, (2, phase if isinstance(phase, int) else 0))


@dataclass(frozen=True)
class PruneResult:
    inventory: ReleaseInventory
    deleted: tuple[ObjectKey, ...]
    errors: tuple[str, ...]


def prune(
    deployer: Deployer,
    inventory: ReleaseInventory,
    keep: Iterable[Identity],
    enabled: bool,
    claimants: Claimants = no_claimants,
    spared: Collection[Identity] = (),
) -> PruneResult:
    """Delete what the inventory holds and the render lacks, highest wave first. Objects
    kept by ``prune: false``, the per-object annotation, or ``spared`` (objects the render
    ignores) leave the inventory; a delete that is not confirmed stays in it, to be
    retried. A live object whose release label names another Release that claims it is
    that Release's: it leaves the inventory, undeleted. A hook its delete policy deleted
    that the live listing lacks leaves it without a request: it is gone already."""
    wanted = set(keep)
    left = [e for e in inventory.entries if e.key.identity() not in wanted]
    remaining = [e for e in inventory.entries if e.key.identity() in wanted]
    deleted: list[ObjectKey] = []
    errors: list[str] = []
    gone_hooks = _gone_hooks(deployer, left) if enabled else set()
    for entry in sorted(left, key=lambda e: _wave_rank(e.wave), reverse=True):
        if not enabled or not entry.prune or entry.key.identity() in spared:
            continue
        if entry.key.identity() in gone_hooks:
            continue  # deleted by its policy, confirmed gone: nothing to send
        try:
            if owner := _other_owner(deployer, entry.key, claimants(entry.key)):
                log.info("%s: not pruned: it belongs to Release %s", entry.key, owner)
                continue
            gone = deployer.delete(entry.key)
        except Forbidden:
            raise  # an outcome of its own, not a prune to retry
        except ConvoyError as exc:
            errors.append(str(exc))
            gone = False
        if gone:
            deleted.append(entry.key)
        else:
            remaining.append(entry)
    result = ReleaseInventory(release=inventory.release, entries=tuple(remaining))
    return PruneResult(result, tuple(deleted), tuple(errors))


def _gone_hooks(deployer: Deployer, entries: Sequence[InventoryEntry]) -> set[Identity]:
    """The hooks among ``entries`` marked deleted by their policy that the live listing
    lacks (one read for all; a Kubernetes deployer's listing is the tick's, shared)."""
    marked = [e.key for e in entries if e.hook_deleted]
    if not marked:
        return set()
    try:
        found = deployer.get_many(marked)
    except Forbidden:
        raise
    except ConvoyError:
        return set()  # not known gone: their deletes are sent (a 404 is fine)
    return {key.identity() for key, live in found.items() if live is None}


def _other_owner(deployer: Deployer, key: ObjectKey, others: Collection[str]) -> str | None:
    """The Release of ``others`` that the live object's release label names, if any."""
    if not others:
        return None
    live = deployer.get(key)
    labels = ((live or {}).get("metadata") or {}).get("labels") or {}
    owner = labels.get(LABEL_RELEASE)
    return str(owner) if owner in others else None
