"""``apply_last_healthy`` (SPEC 8): the first rollback, the hold, and the rollback
after a wave timeout, in one code path.

Applies the verified blob of ``status.lastHealthy`` in one pass (no waves, dry run or
hooks), prunes, and records the inventory. A failed step logs and gives the decided
rollback's failed outcome; it never raises. The ``RolledBack`` outcome comes from the
decided :class:`~convoy_batch.rollout.RollBack`. I/O through the stores and the deployer.
"""

import logging
from dataclasses import replace

from convoy_batch.deployers.base import Deployer
from convoy_batch.engine.run import ReleaseRun
from convoy_batch.engine.stages.act import carry_out, expected_inventory
from convoy_batch.engine.stages.drift import check_drift
from convoy_batch.engine.stages.hooks import apply_sync_fail, delete_finished_hooks
from convoy_batch.models import ReleaseInventory, ReleaseStatus
from convoy_batch.renderers.pipeline import Render, load_render
from convoy_batch.renderers.sops import unseal
from convoy_batch.rollout import Outcome, RenderId, RollBack
from convoy_batch.rollout.step import Step

log = logging.getLogger("convoy_batch")

NO_LAST_HEALTHY = "no last healthy render to roll back to"


def apply_last_healthy(
    run: ReleaseRun, deployer: Deployer, rollback: RollBack, failed: Render | None = None
) -> tuple[Outcome, ReleaseInventory]:
    """Carry out a decided rollback: its ``RolledBack`` outcome (``rollback.applied``,
    handed to ``writes.ahead`` before the cluster changes) and the new inventory.
    ``failed``: the render rolled back from, whose SyncFail hooks are applied first
    (once) and whose finished hooks are deleted by their policy (``stages/hooks.py``)."""
    release, status, inventory, writes = run.release, run.status, run.inventory, run.writes
    record = writes.record
    if failed is not None:
        inventory = apply_sync_fail(deployer, inventory, failed, record)
    healthy = status.last_healthy
    if healthy is None:
        return rollback.failed(NO_LAST_HEALTHY), inventory
    blob = run.stores.renders.get(healthy.render_ref)
    if blob is None:
        message = f"render store has no valid blob for last healthy {healthy.render_ref}"
        log.warning("%s: %s", release.name, message)
        return rollback.failed(message), inventory
    stored = load_render(blob, release.name, healthy.revision)
    render = unseal(stored, release, run.stores.state_dir)  # decrypted in memory only
    rendered = RenderId(ref=render.ref, revision=healthy.revision)
    drift = check_drift(run, deployer, render, inventory)
    step = Step(
        render_ref=render.ref,
        revision=healthy.revision,
        prune=True,
        prune_enabled=release.spec.sync_policy.prune,
        leave=drift.leave,
    )
    applied = replace(rollback.applied(rendered), drift=drift.seen)
    run.stores.renders.settle(render.ref)  # what the record points at is durable first
    writes.ahead(step, applied, expected_inventory(inventory, render, step))
    acted = carry_out(deployer, inventory, render, step, record, writes.claimants, run.rules)
    if acted.failure is not None:
        log.warning("%s: rollback apply failed: %s", release.name, acted.failure)
        message = f"rollback failed: {acted.failure}"
        return rollback.failed(message), acted.inventory
    if acted.errors:
        log.warning("%s: rollback prune failed: %s", release.name, acted.errors[0])
        return rollback.failed(f"rollback failed: {acted.errors[0]}"), acted.inventory
    if failed is None:
        return applied, acted.inventory
    after, errors = delete_finished_hooks(deployer, acted.inventory, failed, record, status.waves)
    for error in errors:
        log.warning("%s: hook not deleted: %s", release.name, error)
    return applied, after


def expected_rollback(rollback: RollBack, status: ReleaseStatus) -> Outcome:
    """The outcome ``rollback`` gives when its apply succeeds, decided without reading
    the render store."""
    healthy = status.last_healthy
    if healthy is None:
        return rollback.failed(NO_LAST_HEALTHY)
    return rollback.applied(RenderId(ref=healthy.render_ref, revision=healthy.revision))
