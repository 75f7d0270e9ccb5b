"""The observer (SPEC 11): reads each inventory object from the cluster and writes its health.

A hook is read through what deletes it once it finished (a Job's
``ttlSecondsAfterFinished``): held by convoy-batch's finalizer it is assessed as if
nobody were deleting it, and once its end is on record and it is gone it keeps that end
(``stages/hooks.py``).

I/O only through the given Deployer (one ``get_many`` per call); the health rules are
the Release's and its Cluster's CEL rules (:mod:`convoy_batch.health.cel`) for the
kinds they name, else the built-in :func:`convoy_batch.health.builtin.compute`. The observer
never decides failure: it records what it sees, and a deployer error (e.g.
ClusterUnavailable) propagates so that nothing is assessed and the verdict stays Pending.

What a Release's objects were seen as is remembered across ticks in a :class:`Memo`
(the tick's ``<state>/cache/observed-<cluster>.json``), for a deployer that can tell each
object's version without reading it (:class:`~convoy_batch.deployers.base.Versioned`:
a directory cluster's file stat). Key: the Release. Signature: a digest of the built-in
rules' code, the Release's and its Cluster's health rules, and each object's identity
and version (none: not there). Invariant: an object of the same version is the same
object, and assessed by the same rules it has the same health; but for a kind of
:data:`~convoy_batch.health.builtin.CLOCK_KINDS` without a rule of its own, which is
assessed every time. The versions are read before the objects, so what is remembered
is never newer than the versions it is remembered under. An unchanged Release costs a
stat of each object's file and one entry's decode.
"""

import hashlib
import os
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, TypeGuard

from convoy_batch.deployers.base import Deployer, Manifest, Versioned
from convoy_batch.health import builtin as health
from convoy_batch.health.cel import NO_RULES, Memo, Rules, evaluate
from convoy_batch.manifests.annotations import held
from convoy_batch.models import (
    ANNOTATION_RENDER,
    Health,
    HealthState,
    Identity,
    InventoryEntry,
    ObjectKey,
    ReleaseInventory,
    is_hook_phase,
)

FINISHED = frozenset({HealthState.CURRENT, HealthState.FAILED})
"""How a hook ends."""

Seen = tuple[HealthState, str | None, str]
"""What an observation of one object finds: its state, ``assessedRenderRef``, message."""


def _render_ref(live: Manifest | None) -> str | None:
    """The live object's ``convoy.dev/render`` annotation; None when absent or no object."""
    if live is None:
        return None
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    ref = annotations.get(ANNOTATION_RENDER)
    return str(ref) if ref else None


def _seen_of(live: Manifest | None, now: datetime, rules: Rules) -> Seen:
    if live is not None and held(live) and (live.get("metadata") or {}).get("deletionTimestamp"):
        return _seen_deleted(live, now, rules)
    rule = rules.find(live) if live is not None else None
    if live is not None and rule is not None:
        state, message = evaluate(rule, live, rules.memo)
    else:
        state, message = health.compute(live, now)
    return state, _render_ref(live), message


def _seen_deleted(live: Manifest, now: datetime, rules: Rules) -> Seen:
    """A hook being deleted that convoy-batch's finalizer holds: what it shows, as if
    nobody were deleting it, when it finished (a Job that deletes itself once complete is
    read complete, not Terminating); Failed when it had not (deleted while running: it
    never will)."""
    meta = {k: v for k, v in (live.get("metadata") or {}).items() if k != "deletionTimestamp"}
    state, ref, message = _seen_of({**live, "metadata": meta}, now, rules)
    if state in FINISHED:
        return state, ref, message
    return HealthState.FAILED, ref, f"{live.get('kind')}: deleted before it finished ({message})"


def assess(live: Manifest | None, now: datetime, rules: Rules = NO_RULES) -> Health:
    """The health record of one live object (None: not in the cluster)."""
    state, ref, message = _seen_of(live, now, rules)
    return Health(state=state, assessed_render_ref=ref, message=message, observed_at=now)


def observe(
    inventory: ReleaseInventory,
    deployer: Deployer,
    now: datetime,
    rules: Rules = NO_RULES,
    memo: Memo | None = None,
    *,
    recall: bool = True,
) -> ReleaseInventory:
    """A new inventory whose every entry carries the health seen now (by ``rules`` for
    the kinds they name); the rest is unchanged. ``memo``: what the Release's objects
    were seen as, remembered across ticks (see the module doc); ``recall=False`` reads
    and assesses every object, and remembers what it saw."""
    if not inventory.entries:
        return inventory
    keys = [e.key for e in inventory.entries if not e.hook_deleted]
    seen = _seen_now(inventory.release, keys, deployer, now, rules, memo, recall)
    not_found = _seen_of(None, now, rules)
    entries = tuple(
        entry
        if entry.hook_deleted  # deleted on purpose: it keeps the health it finished with
        or _finished_and_gone(entry, seen.get(entry.key.identity(), not_found))
        else _with_health(entry, seen.get(entry.key.identity(), not_found), now)
        for entry in inventory.entries
    )
    if entries == inventory.entries:
        return inventory
    return inventory.model_copy(update={"entries": entries})


def _finished_and_gone(entry: InventoryEntry, seen: Seen) -> bool:
    """A hook seen finished (Current or Failed) for the render it was applied for, and
    now gone (its TTL, or a person): it keeps the health it finished with, as a hook its
    delete policy deleted does (hooks run once per render)."""
    health = entry.health
    return (
        seen[0] == HealthState.NOT_FOUND
        and is_hook_phase(entry.wave)
        and health is not None
        and health.state in FINISHED
        and health.assessed_render_ref is not None
        and health.assessed_render_ref == entry.applied_render_ref
    )


def _seen_now(
    release: str,
    keys: list[ObjectKey],
    deployer: Deployer,
    now: datetime,
    rules: Rules,
    memo: Memo | None,
    recall: bool,
) -> dict[Identity, Seen]:
    """What each object is seen as (by identity: a deployer may report another version),
    recalled from ``memo`` where it can be, else read and assessed (and remembered)."""
    seen: dict[Identity, Seen] = {}
    signature = recalled = None
    if memo is not None and _is_versioned(deployer):
        signature = _signature(keys, deployer.versions(keys), rules)
        recalled = _recalled(memo.get(release, signature), len(keys)) if recall else None
        if recalled is not None:
            found = zip(keys, recalled, strict=True)
            seen = {key.identity(): item for key, item in found if item is not None}
    unseen = [key for key in keys if key.identity() not in seen]
    clock: set[Identity] = set()
    for key, live in deployer.get_many(unseen).items() if unseen else ():
        seen[key.identity()] = _seen_of(live, now, rules)
        if _tells_time(live, rules):
            clock.add(key.identity())
    if memo is not None and signature is not None and recalled is None:
        remembered = [
            list(seen[i]) if i in seen and i not in clock else None
            for i in (key.identity() for key in keys)
        ]
        memo.put(release, signature, remembered)
    return seen


def _is_versioned(deployer: Deployer) -> TypeGuard[Versioned]:
    """``isinstance(deployer, Versioned)``, answered once per class (a protocol's
    ``isinstance`` looks its methods up each time, about 5 us a Release)."""
    return _versioned(type(deployer))


@cache
def _versioned(cls: type) -> bool:
    """Key: the class; a class's methods do not change."""
    return issubclass(cls, Versioned)


@cache
def _builtin_code() -> bytes:
    """The built-in rules' code (a memo made by other code is not trusted); when it cannot
    be read, a value of this process alone (what it remembers holds for itself only)."""
    try:
        return hashlib.blake2b(Path(health.__file__).read_bytes(), digest_size=16).digest()
    except OSError:
        return os.urandom(16)


def _signature(keys: list[ObjectKey], versions: dict[ObjectKey, str | None], rules: Rules) -> str:
    """The memo's signature (see the module doc)."""
    digest = hashlib.blake2b(_builtin_code(), digest_size=16)
    for kind, rule in sorted(rules.by_kind.items()):
        digest.update(f"{kind}\n".encode() + rule.signature + b"\n")
    for key in keys:
        digest.update(f"{'/'.join(key.identity())} {versions.get(key) or '-'}\n".encode())
    return digest.hexdigest()


def _tells_time(live: Manifest | None, rules: Rules) -> bool:
    """The object's health may depend on ``now`` as well: a kind of ``CLOCK_KINDS`` that
    no rule of the Release's assesses."""
    if live is None or rules.find(live) is not None:
        return False
    return health.kind_key(live)[0] in health.CLOCK_KINDS


def _recalled(data: Any, count: int) -> list[Seen | None] | None:
    """What each of ``count`` objects was seen as, from a memo's entry (None: assessed
    each time); None when there is no such entry (never trusted half-read)."""
    if not (isinstance(data, list) and len(data) == count):
        return None
    recalled: list[Seen | None] = []
    for item in data:
        if item is None:
            recalled.append(None)
            continue
        if not (isinstance(item, list) and len(item) == 3):
            return None
        state, ref, message = item
        if not (isinstance(ref, str | None) and isinstance(message, str)):
            return None
        try:
            recalled.append((HealthState(state), ref, message))
        except ValueError:
            return None
    return recalled


def _with_health(entry: InventoryEntry, seen: Seen, now: datetime) -> InventoryEntry:
    """``observedAt`` is when this health was first seen: an unchanged health keeps its
    time, so a quiet tick leaves the inventory (and its file) as it was."""
    state, ref, message = seen
    old = entry.health
    if old is not None and (old.state, old.assessed_render_ref, old.message) == (
        state,
        ref,
        message,
    ):
        return entry
    health = Health(state=state, assessed_render_ref=ref, message=message, observed_at=now)
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
