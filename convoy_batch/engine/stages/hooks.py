"""Hooks beyond their phases (Argo CD's semantics): SyncFail hooks, applied once when a
sync of their render fails, and the delete policies HookSucceeded and HookFailed. I/O
only through the deployer it is given.

Decided:

- A sync fails when an apply fails (``ApplyFailed``) or when its render's rollout turns
  Failed or RolledBack (a wave timeout, or an unhealthy verdict such as a failed hook).
  The render's SyncFail hooks are then applied once: the inventory records them applied
  for the render, and a later tick does not apply them again. A failed apply of them is
  logged; the outcome stays the sync's failure.
- A hook whose delete policy matches its health for its render (HookSucceeded: Current,
  HookFailed: Failed) is deleted in the sync path of the tick after the observer saw
  it so, once the last phase that names it is over for the render: started (its
  ``status.waves`` entry for the render exists) and each hook of that phase finished
  (Current or Failed for it), a phase applied by this very tick's step aside: the health
  the observer read before the sync is that of objects this tick may have created or
  created again (a hook phase applied again after a sync that failed half-way, its Job
  re-created), so such a phase is over at the earliest on the next tick, as the wave
  gate holds a phase just applied. A ServiceAccount hook of PreSync and PostSync thus
  outlives the PostSync Job that uses it; a hook of one phase waits for the others of
  its phase, as Helm deletes a phase's hooks once the phase succeeded. A SyncFail hook,
  no phase of a sync, is judged by its own health alone.
- On a Kubernetes Cluster every hook is created holding the finalizer
  ``convoy.dev/hook-finalizer``, removed once the hook's end (Current or Failed for the
  render it was applied for) is in the inventory on disk (:func:`let_go_finished`, before
  anything of the tick's decision is carried out), or right after convoy-batch deletes
  it. A Job that deletes itself once finished (``ttlSecondsAfterFinished: 0``, the TTL
  controller; Argo CD's fix, gitops-engine #646) is thus read finished; once gone it
  keeps the end it was seen with (``health/observer.py``), and is not created again for
  the render.
- The deleted hook's inventory entry is marked ``hookDeleted`` and written before the
  delete: it keeps the health it finished with (the verdict and the wave gate read
  that), the observer leaves it alone, and a delete that was not confirmed is sent
  again on a later tick while the object is still there for that render.
"""

import logging
from collections.abc import Collection, Mapping, Sequence

from convoy_batch.deployers.base import Deployer, HoldsHooks, Manifest
from convoy_batch.engine.stages.act import Record, carry_out
from convoy_batch.errors import ConvoyError, Forbidden
from convoy_batch.models import (
    ANNOTATION_RENDER,
    SYNC_FAIL,
    HealthState,
    Identity,
    InventoryEntry,
    ObjectKey,
    Phase,
    ReleaseInventory,
    Rollout,
    RolloutState,
    WaveStatus,
    is_hook_phase,
)
from convoy_batch.renderers.pipeline import Render
from convoy_batch.rollout.step import Step

log = logging.getLogger("convoy_batch")


def let_go_finished(deployer: Deployer, inventory: ReleaseInventory, record: Record) -> None:
    """Remove the hook finalizer from the hooks whose end is on record: the inventory that
    says so is written first (a write only when it changed)."""
    if not isinstance(deployer, HoldsHooks):
        return
    keys = [
        e.key
        for e in inventory.entries
        if is_hook_phase(e.wave) and _ended(e, e.applied_render_ref or "")
    ]
    if keys:
        record(inventory)
        deployer.let_go(keys)


def deleted_hooks(render: Render, inventory: ReleaseInventory) -> set[Identity]:
    """The hooks their delete policy deleted for this render: never created again for it."""
    return {
        e.key.identity()
        for e in inventory.entries
        if e.hook_deleted and e.applied_render_ref == render.ref
    }


def dry_run_objects(render: Render, inventory: ReleaseInventory) -> list[Manifest]:
    """What the dry run checks: every object a sync of the render may apply. SyncFail
    hooks are left out (applied only when a sync fails, they would cost a request on every
    quiet tick; they are checked when applied), and so are hooks deleted by their policy
    for this render (never created again for it)."""
    deleted = deleted_hooks(render, inventory)
    return [
        o.manifest
        for o in render.objects
        if o.hook != SYNC_FAIL and o.key.identity() not in deleted
    ]


def rollout_failed(rollout: Rollout | None, render: Render) -> bool:
    """The render's rollout is Failed or RolledBack: its sync failed."""
    return (
        rollout is not None
        and rollout.render_ref == render.ref
        and rollout.state in (RolloutState.FAILED, RolloutState.ROLLED_BACK)
    )


def apply_sync_fail(
    deployer: Deployer, inventory: ReleaseInventory, render: Render, record: Record
) -> ReleaseInventory:
    """Apply the render's SyncFail hooks unless the inventory shows them applied for it."""
    hooks = render.by_phase(SYNC_FAIL)
    done = {e.key.identity() for e in inventory.entries if e.applied_render_ref == render.ref}
    if not hooks or any(o.key.identity() in done for o in hooks):
        return inventory
    step = Step(render_ref=render.ref, revision=render.revision, phases=(SYNC_FAIL,))
    acted = carry_out(deployer, inventory, render, step, record)
    if acted.failure is not None:
        log.warning("%s: SyncFail hooks not applied: %s", inventory.release, acted.failure)
    else:
        log.info("%s: SyncFail hooks applied for the failed sync", inventory.release)
    return acted.inventory


Policy = tuple[frozenset[HealthState], Phase]
"""A hook's delete policy: the health that deletes it, once its last phase is done."""
ENDED = frozenset({HealthState.CURRENT, HealthState.FAILED})


def _ended(entry: InventoryEntry | None, render_ref: str) -> bool:
    """Finished for the render: Current or Failed as the observer saw it for it."""
    health = entry.health if entry is not None else None
    if health is None:
        return False
    return health.assessed_render_ref == render_ref and health.state in ENDED


def _done_phases(
    render: Render,
    inventory: ReleaseInventory,
    waves: Sequence[WaveStatus],
    applied: Collection[Phase],
) -> set[Phase]:
    """The hook phases of R that are over: started for R (a ``status.waves`` entry), not
    applied by this tick (``applied``: its health predates what was just sent), with each
    of their hooks finished for R. SyncFail, applied once when a sync failed and no
    phase of it, always is."""
    by_id = {e.key.identity(): e for e in inventory.entries}
    started = {
        w.wave
        for w in waves
        if w.render_ref == render.ref and isinstance(w.wave, str) and w.wave not in applied
    }
    done: set[Phase] = {SYNC_FAIL}
    for phase in started:
        if all(_ended(by_id.get(o.key.identity()), render.ref) for o in render.by_phase(phase)):
            done.add(phase)
    return done


def _finished(
    entry: InventoryEntry, render: Render, policies: Mapping[Identity, Policy], done: set[Phase]
) -> bool:
    """The policy deletes the hook: its last phase is over and its own health is one
    the policy names."""
    policy = policies.get(entry.key.identity())
    health = entry.health
    return (
        policy is not None
        and policy[1] in done
        and not entry.hook_deleted
        and entry.applied_render_ref == render.ref
        and health is not None
        and health.assessed_render_ref == render.ref
        and health.state in policy[0]
    )


def delete_finished_hooks(
    deployer: Deployer,
    inventory: ReleaseInventory,
    render: Render,
    record: Record,
    waves: Sequence[WaveStatus],
    applied: Collection[Phase] = (),
) -> tuple[ReleaseInventory, tuple[str, ...]]:
    """Mark and delete the render's hooks whose delete policy matches their health once
    the last phase naming them is over for it (``waves``: the status's, telling which
    phases started; ``applied``: the phases this tick's step applied, none of them over
    yet; see module doc); returns the inventory and the errors of deletes that failed."""
    policies = {
        o.key.identity(): (o.delete_when, o.phases[-1]) for o in render.objects if o.delete_when
    }
    if not policies:
        return inventory, ()
    done = _done_phases(render, inventory, waves, applied)
    entries = tuple(
        e.model_copy(update={"hook_deleted": True}) if _finished(e, render, policies, done) else e
        for e in inventory.entries
    )
    if entries != inventory.entries:
        inventory = inventory.model_copy(update={"entries": entries})
        record(inventory)  # marked before the delete: a later tick knows it went on purpose
    doomed = [e.key for e in entries if e.hook_deleted and e.applied_render_ref == render.ref]
    return inventory, _delete(deployer, doomed, render)


def _delete(deployer: Deployer, keys: Sequence[ObjectKey], render: Render) -> tuple[str, ...]:
    if not keys:
        return ()
    errors = []
    for key, live in deployer.get_many(keys).items():
        if not _still_there(live, render):
            continue
        try:
            if deployer.delete(key):
                log.info("%s: hook deleted by its delete policy", key)
        except Forbidden:
            raise  # an outcome of its own
        except ConvoyError as exc:
            errors.append(str(exc))
    return tuple(errors)


def _still_there(live: Manifest | None, render: Render) -> bool:
    """Live, not being deleted, and created for this render (not a newer one's)."""
    if live is None:
        return False
    meta = live.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return not meta.get("deletionTimestamp") and annotations.get(ANNOTATION_RENDER) == render.ref
