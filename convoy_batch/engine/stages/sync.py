"""``stage_sync`` (SPEC 4 step 5, 7): dry run, hooks and waves under the wave gate,
prune, inventory; then SyncFail hooks when the sync failed and hook deletions by policy
(``stages/hooks.py``).

``decide_sync`` makes the decision without changing anything (the pure "which phases
next" of ``rollout.plan_waves``, the step, the outcome it gives); ``dry_run`` and
``stage_sync`` carry it out. R's blob is already on its way to the render store (the
reconcile stores every decided render first, ``reconcile.store_render``); the step waits
for it to be durable before its write-ahead record (a blob that cannot be stored stops
the step: ``outcome.not_stored``). I/O through the stores and the deployer; deployer
errors propagate as typed errors for the reconcile to map.
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from convoy_batch.deployers.base import Deployer
from convoy_batch.engine.run import ReleaseRun
from convoy_batch.engine.stages.act import carry_out, expected_inventory
from convoy_batch.engine.stages.drift import check_drift
from convoy_batch.engine.stages.hooks import (
    apply_sync_fail,
    delete_finished_hooks,
    dry_run_objects,
    rollout_failed,
)
from convoy_batch.engine.stages.last_healthy import expected_rollback
from convoy_batch.engine.stages.namespace import ensure_namespace
from convoy_batch.engine.stages.outcome import failed, not_stored
from convoy_batch.errors import ApplyFailed, StateFailed
from convoy_batch.models import (
    SYNC_FAIL,
    InventoryEntry,
    Phase,
    ReleaseInventory,
)
from convoy_batch.reasons import Reason
from convoy_batch.renderers.pipeline import Render
from convoy_batch.rollout import (
    GateKind,
    Outcome,
    Plan,
    RenderId,
    RollBack,
    plan_waves,
)
from convoy_batch.rollout.step import Step

log = logging.getLogger("convoy_batch")


@dataclass(frozen=True)
class SyncDecision:
    """What the sync of R does once R passed its dry run and is persisted."""

    expected: Outcome
    """The outcome when ``then`` succeeds."""
    then: Step | RollBack
    """R's step (phases to apply, prune or not), or the wave gate's rollback (SPEC 7)."""


def entries_by_phase(
    render: Render, inventory: ReleaseInventory
) -> dict[Phase, Sequence[InventoryEntry]]:
    """The inventory entries of R's objects, grouped by phase (a hook of several phases
    under each: the gate after each waits for it)."""
    by_id = {e.key.identity(): e for e in inventory.entries}
    grouped: dict[Phase, list[InventoryEntry]] = {}
    for obj in render.objects:
        entry = by_id.get(obj.key.identity()) or InventoryEntry(key=obj.key, wave=obj.phase)
        for phase in obj.phases:
            grouped.setdefault(phase, []).append(entry)
    return dict(grouped)


def decide_sync(run: ReleaseRun, render: Render, plan: Plan) -> SyncDecision:
    """The wave gate's decision for R (SPEC 7) and the outcome it gives; reads only the
    run's values (changes nothing)."""
    release, status, inventory, now = run.release, run.status, run.inventory, run.now
    rid = RenderId(ref=render.ref, revision=render.revision)
    waves = plan_waves(
        render.phases(),
        entries_by_phase(render, inventory),
        spec=release.spec,
        status=status,
        render_ref=render.ref,
        pinned=release.spec.pin is not None,
        now=now,
    )
    gate = waves.gate
    if gate is not None and gate.kind == GateKind.ROLL_BACK:
        rollback = RollBack(
            gate.rollout, rid, gate.message, cause=gate.message, waves=waves.waves, persisted=rid
        )
        return SyncDecision(expected_rollback(rollback, status), rollback)
    if gate is not None and gate.reason is not None:
        reason, message = gate.reason, gate.message
    else:
        applied = sum(1 for o in render.objects if o.hook != SYNC_FAIL)
        reason, message = Reason.SYNCED, f"{applied} objects applied"
    expected = Outcome(
        rollout=gate.rollout if gate is not None and gate.rollout is not None else plan.rollout,
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
    return SyncDecision(expected, step)


def dry_run(run: ReleaseRun, deployer: Deployer, render: Render) -> None:
    """The dry run of R's objects (``stages/hooks.dry_run_objects``: in the Release's
    namespace, created first when the Release asks for it)."""
    ensure_namespace(run.release, render, deployer)  # before the dry run, which needs it
    deployer.dry_run(dry_run_objects(render, run.inventory), run.rules)


def stage_sync(
    run: ReleaseRun, deployer: Deployer, render: Render, step: Step, expected: Outcome
) -> tuple[Outcome, ReleaseInventory]:
    """Carry out R's decided ``step`` (R passed its dry run, its blob is on its way to the
    render store): ``expected`` when it succeeds, with the drift the sync found
    (``stages/drift.py``); then R's SyncFail hooks when the sync failed, and its finished
    hooks deleted by their policy."""
    inventory, writes = run.inventory, run.writes
    drift = check_drift(run, deployer, render, inventory)
    expected, step = replace(expected, drift=drift.seen), drift.step(step)
    if step.phases or step.prune:  # the step changes the cluster: record it first
        try:
            run.stores.renders.settle(render.ref)  # what the record points at: durable first
        except StateFailed as exc:
            return not_stored(exc, expected, render.ref, acted=False), inventory
        writes.ahead(step, expected, expected_inventory(inventory, render, step))
    record = writes.record
    acted = carry_out(deployer, inventory, render, step, record, writes.claimants, run.rules)
    after = acted.inventory
    if isinstance(acted.failure, ApplyFailed) or rollout_failed(expected.rollout, render):
        after = apply_sync_fail(deployer, after, render, record)
    if acted.failure is not None:
        outcome = failed(
            acted.failure, rollout=expected.rollout, render=expected.render, applied=acted.sent
        )
        return outcome, after
    after, errors = delete_finished_hooks(
        deployer, after, render, record, expected.waves or (), step.phases or ()
    )
    errors = acted.errors + errors
    if errors:
        return replace(expected, reason=Reason.PRUNE_FAILED, message=errors[0]), after
    if acted.deleted:
        log.info("%s: pruned %s", run.name, ", ".join(map(str, acted.deleted)))
    return replace(expected, written=acted.written + len(acted.deleted)), after
