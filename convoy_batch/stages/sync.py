"""``stage_sync`` (SPEC 4 step 5, 7): dry run, persist, hooks and waves under the wave
gate, prune, inventory.

The "which phases next" decision is pure (``rollout.plan_waves``); this module only
carries it out. I/O through the stores and the deployer; deployer errors propagate as
typed errors for the reconcile to map.
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from convoy_batch.deployers.base import Deployer
from convoy_batch.models import InventoryEntry, Phase, Release, ReleaseInventory, ReleaseStatus
from convoy_batch.render import Render
from convoy_batch.rollout import GateKind, Outcome, Plan, RenderId, plan_waves
from convoy_batch.stages.inventory import prune, record_applied
from convoy_batch.stages.last_healthy import apply_last_healthy
from convoy_batch.tick import Tick

log = logging.getLogger("convoy_batch")

REASON_SYNCED = "Synced"
REASON_ROLLED_BACK = "RolledBack"
REASON_PRUNE_FAILED = "PruneFailed"


@dataclass(frozen=True)
class SyncResult:
    outcome: Outcome
    inventory: ReleaseInventory


def entries_by_phase(
    render: Render, inventory: ReleaseInventory
) -> dict[Phase, Sequence[InventoryEntry]]:
    """The inventory entries of R's objects, grouped by phase."""
    by_id = {e.key.identity(): e for e in inventory.entries}
    grouped: dict[Phase, list[InventoryEntry]] = {}
    for obj in render.objects:
        entry = by_id.get(obj.key.identity())
        placeholder = InventoryEntry(key=obj.key, wave=obj.phase)
        grouped.setdefault(obj.phase, []).append(entry or placeholder)
    return dict(grouped)


def stage_sync(
    tick: Tick,
    release: Release,
    render: Render,
    plan: Plan,
    status: ReleaseStatus,
    deployer: Deployer,
    inventory: ReleaseInventory,
) -> SyncResult:
    rid = RenderId(ref=render.ref, revision=render.revision)
    deployer.dry_run([o.manifest for o in render.objects])
    tick.stores.renders.put(render.ref, render.canonical)
    waves = plan_waves(
        render.phases(),
        entries_by_phase(render, inventory),
        spec=release.spec,
        status=status,
        render_ref=render.ref,
        pinned=release.spec.pin is not None,
        now=tick.now,
    )
    gate = waves.gate
    if gate is not None and gate.kind == GateKind.ROLL_BACK:
        back = apply_last_healthy(tick, release, status, deployer, inventory)
        outcome = Outcome(
            rollout=gate.rollout,
            applied=back.applied,
            reason=REASON_ROLLED_BACK,
            message=gate.message if back.applied else f"{gate.message}; {back.message}",
            render=back.render if back.applied else rid,
            waves=waves.waves,
            persisted=rid,
        )
        return SyncResult(outcome, back.inventory)
    applied: set[tuple[str, str, str, str]] = set()
    for phase in waves.apply:
        objects = render.by_phase(phase)
        deployer.apply([o.manifest for o in objects])
        applied.update(o.key.identity() for o in objects)
    recorded = record_applied(inventory, render.objects, applied, render.ref)
    rollout = gate.rollout if gate is not None and gate.rollout is not None else plan.rollout

    def done(reason: str, message: str, inventory: ReleaseInventory) -> SyncResult:
        outcome = Outcome(
            rollout=rollout,
            applied=bool(waves.waves),
            reason=reason,
            message=message,
            render=rid,
            waves=waves.waves,
            persisted=rid,
        )
        return SyncResult(outcome, inventory)

    if gate is not None:
        return done(gate.reason, gate.message, recorded)
    keep = (o.key.identity() for o in render.objects)
    pruned = prune(deployer, recorded, keep, release.spec.sync_policy.prune)
    if pruned.errors:
        return done(REASON_PRUNE_FAILED, pruned.errors[0], pruned.inventory)
    if pruned.deleted:
        log.info("%s: pruned %s", release.name, ", ".join(map(str, pruned.deleted)))
    return done(REASON_SYNCED, f"{len(render.objects)} objects applied", pruned.inventory)
