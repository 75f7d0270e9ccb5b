"""A removed Release's retirement in a tick (README, "Deleting a Release"): what the pure
decision (:mod:`convoy_batch.rollout.retire`) makes of each Release a commit removed (which
ones, and what the history says of them: :mod:`.removed`), and carrying it out. Does I/O
through the tick's stores and deployers.

A Release is *gone* when its status file is at HEAD and no file under ``releases/`` is
that Release. Its Cluster and ``deletionPolicy`` are its last committed version's (the
file in the parent of the commit that removed it). Decide, write, then act: a decided
retirement is recorded (``<state>/retiring/<name>.json``, its fate and the commit message)
before the first request; the objects are deleted (or handed over, or left); the status
file is removed in one commit; once that commit has landed the record, the inventory and
the tick record go (:func:`forget_retired`). A tick that finds a record completes it.

The entry points take the tick; the rest takes what it reads (one removed Release's
:class:`Retirement`, the snapshot, the repository). What the tick keeps of the pass is
one value, :class:`~convoy_batch.engine.tick.Retired`, given to it whole: where the
removed Releases were (:func:`decide_retirements`, before any deployer is made), then
whose status file goes (:func:`retire_removed`).
"""

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from concurrent.futures import Future
from dataclasses import dataclass, replace
from functools import partial
from types import MappingProxyType
from typing import Literal

from convoy_batch.deployers.base import Deployer, ListsNamespaces
from convoy_batch.engine.handler import Handled
from convoy_batch.engine.ownership import Ownership
from convoy_batch.engine.removed import (
    LAST_TICK_FILE,
    deletions_allowed,
    first_unreadable,
    gone_names,
    last_head,
    last_releases,
    last_snapshot,
    last_versions,
    set_of,
    uncertain,
    unknown_why,
)
from convoy_batch.engine.stages.inventory import prune
from convoy_batch.engine.stages.render import stage_render
from convoy_batch.engine.tick import Tick
from convoy_batch.errors import ConvoyError, DeletionPending, StateFailed
from convoy_batch.models import (
    LABEL_RELEASE,
    Cluster,
    Identity,
    InventoryEntry,
    ObjectKey,
    Release,
    ReleaseInventory,
    ReleaseStatus,
)
from convoy_batch.reasons import Reason
from convoy_batch.renderers.pipeline import Rendered
from convoy_batch.rollout import Outcome
from convoy_batch.rollout.depends import in_order
from convoy_batch.rollout.retire import (
    ALLOW_DELETE_TRAILER,
    WAITING,
    Fate,
    Gone,
    parse_retired,
    retire,
    retired_subject,
)
from convoy_batch.rollout.status import state_of
from convoy_batch.state.files import atomic_write, real_root
from convoy_batch.state.intents import Retiring, RetiringStore
from convoy_batch.store import Inventories

log = logging.getLogger("convoy_batch")

_ACTED: dict[Fate, Literal["Delete", "Orphan", "Adopted"]] = {
    Fate.DELETE: "Delete",
    Fate.ORPHAN: "Orphan",
    Fate.ADOPTED: "Adopted",
}


@dataclass(frozen=True)
class RetireOptions:
    """What the command line asks of the retirement pass."""

    names: tuple[str, ...] = ()
    """Act on these removed Releases only (none: every one)."""
    orphan: bool = False
    """End the named ones as Orphaned, sending nothing to their Cluster (``--orphan``)."""
    allow_deletions: bool = False
    """Let the mass-deletion guard's deletions through (``--allow-deletions``)."""


@dataclass(frozen=True)
class Decided:
    """What becomes of one removed Release this tick."""

    name: str
    fate: Fate
    message: str = ""
    """Why it waits or is held (Pending, Blocked)."""
    cluster: str | None = None
    adopted_by: str | None = None
    removed_in: str | None = None
    """The commit that removed its file."""
    record: Retiring | None = None
    """The decision of an earlier tick, to complete."""
    namespace: str | None = None
    """The namespace its ``createNamespace`` made (None: it made none)."""


@dataclass(frozen=True)
class Retirement:
    """What one removed Release's retirement reads, made once for it (to carry it out,
    or to tell what carrying it out would do): its decision and status, and the tick's
    handles it goes through, each used only when its fate needs it (an Orphan makes no
    deployer and reads no claims)."""

    decided: Decided
    prior: ReleaseStatus
    """Its status as the tick holds it."""
    clusters: Mapping[str, Cluster]
    """The snapshot's Clusters (its own: the one its decision names, if still there)."""
    inventories: Inventories
    """Its inventory, and its adopter's (read once a tick, stored when changed)."""
    owners: Callable[[], Ownership]
    """Which Release each object belongs to (made on first use)."""
    deployers: Callable[[Cluster], Deployer]
    """The tick's deployer of a Cluster (made when first asked)."""


@dataclass(frozen=True)
class _Waits:
    """A retirement that waits: the outcome its status says, over its inventory."""

    outcome: Outcome
    inventory: ReleaseInventory


def remember_head(tick: Tick) -> None:
    """Record the commit this tick read, when it is not the one recorded (a hint: a
    lost write makes the next tick read a trailer twice, or count over HEAD)."""
    state_dir = tick.stores.state_dir
    commit = tick.snapshot.commit
    if last_head(state_dir) == commit:
        return
    data = json.dumps({"format": 1, "commit": commit}).encode()
    try:
        atomic_write(state_dir / LAST_TICK_FILE, data, durable=False, root=real_root(state_dir))
    except (OSError, StateFailed) as exc:
        log.warning("%s: not recorded: %s", state_dir / LAST_TICK_FILE, exc)


def decide_retirements(tick: Tick, options: RetireOptions = RetireOptions()) -> list[Retirement]:
    """The retirement of every removed Release (of the named ones, with names), its fate
    decided; changes nothing but the tick's knowledge of where they were
    (``tick.retired.gone``, given before any deployer is made: a Kubernetes deployer
    lists their objects too)."""
    snapshot, repo, state_dir = tick.snapshot, tick.repo, tick.stores.state_dir
    gone = gone_names(snapshot, tick.opened)
    if not gone:
        return []
    cache = tick.cache("repo")
    # Read from the commit the tick reads (HEAD; ``diff``: the revision).
    versions = last_versions(repo, snapshot.commit, gone, cache)
    members = {n: set_of(v) for n, v in versions.items()}
    last = last_snapshot(repo, snapshot, state_dir, cache)
    where = {n: v.release.spec.cluster for n, v in versions.items() if v and v.release is not None}
    tick.retired = replace(tick.retired, gone=MappingProxyType(where))
    unreadable = first_unreadable(snapshot)
    records = {name: tick.stores.retiring.load(name) for name in gone}
    entries = snapshot.releases.values()
    newcomers = [e.release for e in entries if e.release and e.release.name not in tick.opened]
    render = partial(stage_render, tick)
    decided: dict[str, Decided] = {}
    candidates: list[Gone] = []
    for name in gone:
        version, record = versions[name], records[name]
        removed_in = version.removed_in if version else None
        if options.orphan and name in options.names:
            cluster = version.release.spec.cluster if version and version.release else None
            decided[name] = Decided(name, Fate.ORPHAN, cluster=cluster, removed_in=removed_in)
        elif record is not None:
            fate = Fate.PENDING if unreadable else Fate(record.fate)
            message = f"deletion waits: {unreadable}" if unreadable else ""
            decided[name] = Decided(name, fate, message, record.cluster, record.adopted_by,
                                    removed_in, record)  # fmt: skip
        elif version is None or version.release is None:
            decided[name] = Decided(name, Fate.PENDING, unknown_why(name, version))
        elif (why := uncertain(snapshot, members.get(name))) is not None:
            cluster = version.release.spec.cluster
            decided[name] = Decided(name, Fate.PENDING, why, cluster, None, removed_in)
        else:
            release = version.release
            adopter = None
            if not unreadable:
                adopter = _adopter(release, _held(tick.inventories, name), newcomers, render)
            candidates.append(
                Gone(name, release.spec.cluster, release.spec.deletes, adopter, members.get(name))
            )
    allowed = deletions_allowed(repo, snapshot.commit, state_dir, options.allow_deletions)
    fates = retire(
        candidates,
        unreadable=unreadable,
        last_releases=last_releases(last, snapshot) if len(candidates) > 1 else {},
        allowed=allowed,
        last_sets={n: e.members for n, e in last.sets.items()} if last is not None else {},
    )
    by_name = {g.name: g for g in candidates}
    created = {
        name: v.release.spec.namespace
        for name, v in versions.items()
        if v and v.release and v.release.spec.sync_policy.create_namespace
    }
    for retirement in fates:
        g = by_name[retirement.name]
        message = retirement.message
        if retirement.fate == Fate.BLOCKED:
            message = (
                f"{message}; a commit with '{ALLOW_DELETE_TRAILER}: all' (or their names) or "
                "'reconcile --allow-deletions' lets it through"
            )
        version = versions[g.name]
        removed_in = version.removed_in if version else None
        decided[g.name] = Decided(
            g.name,
            retirement.fate,
            message,
            g.cluster,
            g.adopted_by,
            removed_in,
            namespace=created.get(g.name),
        )
    # Dependents' objects go before their dependencies' (dependsOn, as last committed).
    graph = {
        n: [d.name for d in v.release.spec.depends_on]
        for n, v in versions.items()
        if v is not None and v.release is not None
    }
    chosen = [decided[name] for name in reversed(in_order(gone, graph))]
    if options.names:
        chosen = [d for d in chosen if d.name in options.names]
    clusters, inventories = snapshot.clusters, tick.inventories
    return [
        Retirement(d, tick.status(d.name), clusters, inventories, tick.owners, tick.deployer)
        for d in chosen
    ]


def retire_removed(
    tick: Tick, options: RetireOptions = RetireOptions()
) -> tuple[list[Handled], dict[str, str]]:
    """Decide the fate of every removed Release and carry it out; the status commits
    are queued in the tick's batch. The Releases handled, and those whose deletes are
    not over yet (with why: a later tick finishes them). The tick is then given whose
    status file goes (``tick.retired.removed``)."""
    handled: list[Handled] = []
    skipped: dict[str, str] = {}
    removed: set[str] = set()
    for run in decide_retirements(tick, options):
        name = run.decided.name
        done = _carry_out(run, tick.stores.retiring)
        if isinstance(done, _Waits):  # its status says why
            handled.append(tick.desk.sync_handler(name, None, done.outcome, done.inventory, None))
        elif isinstance(done, Retiring):  # its status file goes, in the tick's batch
            removed.add(name)
            handled.append(_retired(run, done, tick.status_store.remove_later(name, done.message)))
        else:
            skipped[name] = done
    tick.retired = replace(tick.retired, removed=tick.retired.removed | removed)
    return handled, skipped


def forget_retired(tick: Tick, handled: Sequence[Handled]) -> None:
    """Once the commits that removed their status files have landed: drop each retired
    Release's inventory, tick record and write-ahead record (the record last: a kill
    before it is completed by the next tick as a record whose status is gone). Also
    drops the records a killed tick left whose commit had landed, and those of Releases
    whose file is back."""
    records = tick.stores.retiring.names()
    for name in records & set(tick.snapshot.releases):
        tick.stores.retiring.clear(name)  # its file is back: it is reconciled again
    done = {h.name for h in handled if h.outcome.reason in (Reason.DELETED, Reason.ORPHANED)}
    done |= {n for n in records if n not in tick.opened}
    for name in sorted(done - set(tick.snapshot.releases)):
        if name in tick.opened and name not in tick.retired.removed:
            continue
        try:
            tick.inventories.drop(name)
        except StateFailed as exc:
            log.warning("%s: inventory not removed: %s", name, exc)
            continue
        tick.stores.ticks.forget(name)
        tick.stores.retiring.clear(name)


def _carry_out(run: Retirement, ahead: RetiringStore) -> Retiring | _Waits | str:
    """The retirement carried out, as its record (its status file goes), or why it
    waits (its status says so), or (a string) why it is not over yet with nothing to
    commit. ``ahead``: where the decision is recorded before anything is sent."""
    decided = run.decided
    name = decided.name
    try:
        inventory = run.inventories.get(name)
    except StateFailed as exc:
        return _waiting(name, Reason.DELETION_PENDING, str(exc))
    if decided.fate in WAITING:
        return _waiting(name, WAITING[decided.fate], decided.message, inventory)
    try:
        record = decided.record or _write_ahead(run, inventory, ahead)
        _act(run, record, inventory)
    except ConvoyError as exc:
        return _waiting(name, Reason.DELETION_PENDING, str(exc), inventory)
    except StillDeleting as exc:
        return str(exc)
    return record


def _retired(run: Retirement, record: Retiring, commit: "Future[str | None]") -> Handled:
    """The retirement carried out: Deleted (adopted or not) or Orphaned, as ``record``
    says, its status file removed by ``commit``."""
    reason = Reason.ORPHANED if record.fate == "Orphan" else Reason.DELETED
    found = parse_retired(record.message.splitlines()[0])
    outcome = Outcome(None, record.fate == "Delete", reason, found[1] if found else "")
    return Handled(run.decided.name, outcome, ReleaseStatus(), commit, run.prior)


def planned_message(run: Retirement) -> str:
    """What carrying ``run`` out would do, in one line (``plan``, ``diff``): why it
    waits or is held, else its commit message's first line."""
    decided = run.decided
    if decided.fate in (Fate.PENDING, Fate.BLOCKED):
        return decided.message
    if decided.record is not None:
        return decided.record.message.splitlines()[0]
    inventory = run.inventories.get(decided.name)
    kept = _kept_entries(run, inventory)
    return _message(decided, run.prior, inventory, kept).splitlines()[0]


def _waiting(
    name: str, reason: Reason, message: str, inventory: ReleaseInventory | None = None
) -> _Waits:
    """The removed Release stays: its status says what stops the retirement."""
    outcome = Outcome(None, False, reason, message)
    empty = ReleaseInventory(release=name)
    return _Waits(outcome, inventory or empty)


def _write_ahead(run: Retirement, inventory: ReleaseInventory, ahead: RetiringStore) -> Retiring:
    """The decision, durable before anything is sent: its commit message and what a
    Delete leaves (a tick that completes it spares the same objects)."""
    decided = run.decided
    kept = _kept_entries(run, inventory)
    record = Retiring(
        release=decided.name,
        cluster=decided.cluster,
        fate=_ACTED[decided.fate],
        adopted_by=decided.adopted_by,
        message=_message(decided, run.prior, inventory, kept),
        namespace=decided.namespace if decided.fate == Fate.DELETE else None,
        kept=tuple(e.key for e in kept) if decided.fate == Fate.DELETE else (),
    )
    ahead.save(record)
    return record


def _kept_entries(run: Retirement, inventory: ReleaseInventory) -> list[InventoryEntry]:
    """The entries whose objects the retirement leaves in place (all but for a Delete)."""
    fate = run.decided.fate
    if fate == Fate.ADOPTED:
        return []
    if fate != Fate.DELETE:
        return list(inventory.entries)
    keeping = retired_kept(run, inventory)
    return [e for e in inventory.entries if e.key.identity() in keeping]


def _message(
    decided: Decided,
    prior: ReleaseStatus,
    inventory: ReleaseInventory,
    kept: Sequence[InventoryEntry],
) -> str:
    """``<name>: <old state> -> Deleted (N objects deleted, M kept)`` (or ``Orphaned (N
    objects kept)``, ``Deleted (adopted by <new>)``), the commit that removed the file,
    and the objects ``kept``."""
    name, old = decided.name, state_of(prior)
    if decided.fate == Fate.ADOPTED:
        head = retired_subject(name, old, Reason.DELETED, f"adopted by {decided.adopted_by}")
    elif decided.fate == Fate.ORPHAN:
        head = retired_subject(name, old, Reason.ORPHANED, f"{len(kept)} objects kept")
    else:
        detail = f"{len(inventory.entries) - len(kept)} objects deleted, {len(kept)} kept"
        head = retired_subject(name, old, Reason.DELETED, detail)
    where = f"releases/{name}.yaml removed" + (
        f" in {decided.removed_in}" if decided.removed_in else ""
    )
    lines = [head, "", f"{where}."]
    if kept:
        lines += ["", "Kept:", *(f"- {e.key}" for e in kept)]
    return "\n".join(lines)


def retired_kept(run: Retirement, inventory: ReleaseInventory) -> set[Identity]:
    """The objects a Delete leaves: kept by their annotation (``prune: false``, Argo CD's
    ``Delete=false``), claimed by another Release on the Cluster, and a Namespace of the
    inventory that still holds one of those or anything not of this Release (deleting it
    would delete what it holds)."""
    decided = run.decided
    owners = run.owners()
    kept = {
        e.key.identity()
        for e in inventory.entries
        if not e.prune or e.retain or owners.claimants(decided.name, e.key, decided.cluster)
    }
    spaces = [e.key for e in inventory.entries if _is_namespace(e.key)]
    spaces = [key for key in spaces if key.identity() not in kept]
    if spaces:
        ours = {e.key.identity() for e in inventory.entries}
        holding = {e.key.namespace for e in inventory.entries if e.key.identity() in kept}
        for key in spaces:
            if key.name in holding or _holds_others(run, key.name, ours):
                kept.add(key.identity())
    return kept


def _is_namespace(key: ObjectKey) -> bool:
    return key.kind == "Namespace" and key.group == ""


def _holds_others(run: Retirement, namespace: str, ours: Set[Identity]) -> bool:
    """Whether ``namespace`` holds an object that is not one of ``ours`` (True when that
    cannot be told: the namespace is then kept)."""
    cluster = run.clusters.get(run.decided.cluster or "")
    if cluster is None:
        return True
    deployer = run.deployers(cluster)
    if not isinstance(deployer, ListsNamespaces):
        return True
    return any(k.identity() not in ours for k in deployer.namespace_objects(namespace))


def _act(run: Retirement, record: Retiring, inventory: ReleaseInventory) -> None:
    """Carry the recorded fate out: delete the objects in reverse sync-wave order (as
    prune does), hand them over, or leave them. DeletionPending when the Cluster cannot
    be used or a delete is not confirmed (the record stays for the next tick)."""
    name = record.release
    if record.fate == "Orphan":
        return
    if record.fate == "Adopted":
        assert record.adopted_by is not None
        _hand_over(run, inventory, record.adopted_by)
        return
    cluster = run.clusters.get(record.cluster or "")
    if cluster is None:
        raise DeletionPending(
            f"clusters/{record.cluster}.yaml: no such Cluster to delete from; "
            f"'reconcile {name} --orphan' ends it without deleting"
        )
    deployer = run.deployers(cluster)
    owners = run.owners()
    pruned = prune(
        deployer,
        inventory,
        (),
        True,
        lambda key: owners.claimants(name, key, record.cluster),
        spared={key.identity() for key in record.kept},
    )
    run.inventories.note(pruned.inventory)
    run.inventories.save(name)
    left = len(pruned.inventory.entries)
    if pruned.errors:
        raise DeletionPending(f"{left} objects not deleted yet: {pruned.errors[0]}")
    if left:  # deletes accepted, not finished (a Namespace terminating): the next tick
        raise StillDeleting(f"{left} objects still being deleted")
    if record.namespace is not None:
        _delete_namespace(deployer, name, record.namespace)


class StillDeleting(Exception):
    """The retirement's deletes were accepted and are not over yet: not an error; the
    Release is reported skipped and a later tick finishes (nothing is committed now)."""


def _delete_namespace(deployer: Deployer, name: str, namespace: str) -> None:
    """Delete the namespace ``createNamespace`` made for the Release, when convoy-batch
    made it (its label names the Release) and nothing else is in it; else leave it."""
    key = ObjectKey(api_version="v1", kind="Namespace", name=namespace)
    live = deployer.get(key)
    labels = ((live or {}).get("metadata") or {}).get("labels") or {}
    if live is None or labels.get(LABEL_RELEASE) != name:
        return
    held = deployer.namespace_objects(namespace) if isinstance(deployer, ListsNamespaces) else None
    if held is None or held:
        what = f"it holds {held[0]}" if held else "what it holds cannot be read"
        log.warning("%s: namespace %s kept: %s", name, namespace, what)
        return
    if not deployer.delete(key):
        log.info("%s: namespace %s is being deleted", name, namespace)


def _hand_over(run: Retirement, inventory: ReleaseInventory, adopter: str) -> None:
    """The removed Release's inventory joins its adopter's (nothing is sent: the
    adopter's next sync applies the objects it renders and prunes the others); the
    ownership index learns the adopter's new inventory."""
    theirs = run.inventories.get(adopter)
    held = {e.key.identity() for e in theirs.entries}
    moved = [e for e in inventory.entries if e.key.identity() not in held]
    if moved:
        joined = ReleaseInventory(release=adopter, entries=(*theirs.entries, *moved))
        run.inventories.note(joined)
        run.owners().note_inventory(joined)
        run.inventories.save(adopter)


def _held(inventories: Inventories, name: str) -> set[Identity]:
    """The objects of the removed Release's inventory (none when it cannot be read)."""
    try:
        return {e.key.identity() for e in inventories.get(name).entries}
    except StateFailed:
        return set()


def _adopter(
    release: Release,
    held: Set[Identity],
    newcomers: Iterable[Release],
    render: Callable[[Release], Rendered],
) -> str | None:
    """A Release on the same Cluster, new in the repository (``newcomers``: no status
    yet), whose render holds an object of the removed Release's inventory (``held``): a
    rename, or a move."""
    if not held:
        return None
    for other in newcomers:
        if other.spec.cluster != release.spec.cluster:
            continue
        try:
            rendered = render(other)
        except ConvoyError:
            continue  # its reconcile reports it
        if any(o.key.identity() in held for o in rendered.render.objects):
            return other.name
    return None
