"""The observer (SPEC 11): reads each inventory object from the cluster and writes its health.

I/O only through the given Deployer (one ``get_many`` per call); the health rules are
the Release's and its Cluster's CEL rules (:mod:`convoy_batch.health.cel`) for the
kinds they name, else the built-in :func:`convoy_batch.health.builtin.compute`. The observer
never decides failure: it records what it sees, and a deployer error (e.g.
ClusterUnavailable) propagates so that nothing is assessed and the verdict stays Pending.
"""

from datetime import datetime

from convoy_batch.deployers.base import Deployer, Manifest
from convoy_batch.health import builtin as health
from convoy_batch.health.cel import NO_RULES, Rules, evaluate
from convoy_batch.models import (
    ANNOTATION_RENDER,
    Health,
    HealthState,
    Identity,
    InventoryEntry,
    ReleaseInventory,
)


def _render_ref(live: Manifest | None) -> str | None:
    """The live object's ``convoy.dev/render`` annotation; None when absent or no object."""
    if live is None:
        return None
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    ref = annotations.get(ANNOTATION_RENDER)
    return str(ref) if ref else None


def assess(live: Manifest | None, now: datetime, rules: Rules = NO_RULES) -> Health:
    """The health record of one live object (None: not in the cluster)."""
    rule = rules.find(live) if live is not None else None
    if live is not None and rule is not None:
        state, message = evaluate(rule, live, rules.memo)
    else:
        state, message = health.compute(live, now)
    return Health(
        state=state,
        assessed_render_ref=_render_ref(live),
        message=message,
        observed_at=now,
    )


def observe(
    inventory: ReleaseInventory, deployer: Deployer, now: datetime, rules: Rules = NO_RULES
) -> ReleaseInventory:
    """A new inventory whose every entry carries the health seen now (by ``rules`` for
    the kinds they name); the rest is unchanged."""
    if not inventory.entries:
        return inventory
    found = deployer.get_many([e.key for e in inventory.entries])
    # Matched by identity, not by the whole key: a deployer may report another version.
    live = {key.identity(): obj for key, obj in found.items()}
    entries = tuple(
        entry
        if entry.hook_deleted  # deleted on purpose: it keeps the health it finished with
        else _with_health(entry, assess(live.get(entry.key.identity()), now, rules))
        for entry in inventory.entries
    )
    if entries == inventory.entries:
        return inventory
    return inventory.model_copy(update={"entries": entries})


def _with_health(entry: InventoryEntry, health: Health) -> InventoryEntry:
    """``observedAt`` is when this health was first seen: an unchanged health keeps its
    time, so a quiet tick leaves the inventory (and its file) as it was."""
    old = entry.health
    if old is not None and old.model_copy(update={"observed_at": health.observed_at}) == health:
        return entry
    return entry.model_copy(update={"health": health})


def _seen(entry: InventoryEntry) -> tuple[HealthState | None, str | None]:
    if entry.health is None:
        return None, None
    return entry.health.state, entry.health.assessed_render_ref


def health_changed(old: ReleaseInventory, new: ReleaseInventory) -> bool:
    """True when an entry's (state, assessedRenderRef) differs, or entries came or went."""
    if len(old.entries) != len(new.entries):
        return True
    before: dict[Identity, tuple[HealthState | None, str | None]] = {
        e.key.identity(): _seen(e) for e in old.entries
    }
    for entry in new.entries:
        identity = entry.key.identity()
        if identity not in before or before[identity] != _seen(entry):
            return True
    return False


def unknown_health(inventory: ReleaseInventory) -> str | None:
    """The first entry whose health is Unknown (a health rule that does not compile or
    fails), in words, for the Release's status; None when there is none."""
    for entry in inventory.entries:
        if entry.health is not None and entry.health.state == HealthState.UNKNOWN:
            return f"{entry.key} is Unknown: {entry.health.message}"
    return None
