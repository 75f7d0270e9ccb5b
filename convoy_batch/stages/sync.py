"""``stage_sync`` (SPEC 4 step 5, 7): dry run, persist, hooks and waves under the wave
gate, prune, inventory; then SyncFail hooks when the sync failed and hook deletions by
policy (``stages/hooks.py``).

The "which phases next" decision is pure (``rollout.plan_waves``); this module only
carries it out. I/O through the stores and the deployer; deployer errors propagate as
typed errors for the reconcile to map.
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from convoy_batch.deployers.base import Deployer
from convoy_batch.errors import ApplyFailed
from convoy_batch.intents import Step
from convoy_batch.models import (
    SYNC_FAIL,
    InventoryEntry,
    Phase,
    Release,
    ReleaseInventory,
    ReleaseStatus,
)
from convoy_batch.render import Render
from convoy_batch.rollout import GateKind, Outcome, Plan, RenderId, plan_waves
from convoy_batch.stages.act import BeforeChange, carry_out, expected_inventory, no_record
from convoy_batch.stages.hooks import (
    apply_sync_fail,
    delete_finished_hooks,
    dry_run_objects,
    rollout_failed,
)
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
    before_change: BeforeChange = no_record,
) -> SyncResult:
    rid = RenderId(ref=render.ref, revision=render.revision)
    tick.owners().check(release.name, (o.key for o in render.objects))
    deployer.dry_run(dry_run_objects(render, inventory))
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
        message = gate.message

        def rolled_back(back: RenderId) -> Outcome:
            return Outcome(gate.rollout, True, REASON_ROLLED_BACK, message, back, waves.waves, rid)

        back = apply_last_healthy(
            tick, release, status, deployer, inventory, rolled_back, before_change, render
        )
        if back.applied:
            return SyncResult(rolled_back(back.render or rid), back.inventory)
        failed = Outcome(
            rollout=gate.rollout,
            applied=False,
            reason=REASON_ROLLED_BACK,
            message=f"{gate.message}; {back.message}",
            render=rid,
            waves=waves.waves,
            persisted=rid,
        )
        return SyncResult(failed, back.inventory)
    rollout = gate.rollout if gate is not None and gate.rollout is not None else plan.rollout

    def outcome(reason: str, message: str) -> Outcome:
        return Outcome(
            rollout=rollout,
            applied=bool(waves.waves),
            reason=reason,
            message=message,
            render=rid,
            waves=waves.waves,
            persisted=rid,
        )

    step = Step(
        render_ref=render.ref,
        revision=render.revision,
        phases=tuple(waves.apply),
        prune=gate is None,
        prune_enabled=release.spec.sync_policy.prune,
    )
    if gate is not None:
        expected = outcome(gate.reason, gate.message)
    else:
        applied = sum(1 for o in render.objects if o.hook != SYNC_FAIL)
        expected = outcome(REASON_SYNCED, f"{applied} objects applied")
    if step.phases or step.prune:  # the step changes the cluster: record it first
        tick.stores.renders.settle(render.ref)  # what the record points at is durable first
        before_change(step, expected, expected_inventory(inventory, render, step))
    record = tick.recorder(release.name)
    acted = carry_out(deployer, inventory, render, step, record, tick.claimants(release.name))
    after = acted.inventory
    if isinstance(acted.failure, ApplyFailed) or rollout_failed(rollout, render):
        after = apply_sync_fail(deployer, after, render, record)
    if acted.failure is not None:
        failure = acted.failure
        return SyncResult(Outcome(rollout, acted.sent, failure.reason, str(failure), rid), after)
    after, errors = delete_finished_hooks(deployer, after, render, record)
    errors = acted.errors + errors
    if errors:
        return SyncResult(outcome(REASON_PRUNE_FAILED, errors[0]), after)
    if acted.deleted:
        log.info("%s: pruned %s", release.name, ", ".join(map(str, acted.deleted)))
    return SyncResult(expected, after)
