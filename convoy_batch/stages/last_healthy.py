"""``apply_last_healthy`` (SPEC 8): the first rollback, the hold, and the rollback
after a wave timeout, in one code path.

Applies the verified blob of ``status.lastHealthy`` in one pass (no waves, dry run or
hooks), prunes, and records the inventory. A failed step logs and returns a result
with ``applied=False``; it never raises. I/O through the stores and the deployer.
"""

import logging
from dataclasses import dataclass

from convoy_batch.deployers.base import Deployer
from convoy_batch.errors import ConvoyError
from convoy_batch.models import Release, ReleaseInventory, ReleaseStatus
from convoy_batch.render import load_render
from convoy_batch.rollout import RenderId
from convoy_batch.stages.inventory import prune, record_applied
from convoy_batch.tick import Tick

log = logging.getLogger("convoy_batch")


@dataclass(frozen=True)
class LastHealthyResult:
    applied: bool
    render: RenderId | None
    inventory: ReleaseInventory
    message: str


def apply_last_healthy(
    tick: Tick,
    release: Release,
    status: ReleaseStatus,
    deployer: Deployer,
    inventory: ReleaseInventory,
) -> LastHealthyResult:
    healthy = status.last_healthy
    if healthy is None:
        return LastHealthyResult(False, None, inventory, "no last healthy render to roll back to")
    blob = tick.stores.renders.get(healthy.render_ref)
    if blob is None:
        message = f"render store has no valid blob for last healthy {healthy.render_ref}"
        log.warning("%s: %s", release.name, message)
        return LastHealthyResult(False, None, inventory, message)
    render = load_render(blob, release.name, healthy.revision)
    objects = [o for o in render.objects if o.hook is None]
    try:
        deployer.apply([o.manifest for o in objects])
    except ConvoyError as exc:
        log.warning("%s: rollback apply failed: %s", release.name, exc)
        return LastHealthyResult(False, None, inventory, f"rollback failed: {exc}")
    applied = {o.key.identity() for o in objects}
    recorded = record_applied(inventory, objects, applied, render.ref)
    pruned = prune(deployer, recorded, applied, release.spec.sync_policy.prune)
    rendered = RenderId(ref=render.ref, revision=healthy.revision)
    if pruned.errors:
        log.warning("%s: rollback prune failed: %s", release.name, pruned.errors[0])
        return LastHealthyResult(
            False, None, pruned.inventory, f"rollback failed: {pruned.errors[0]}"
        )
    return LastHealthyResult(True, rendered, pruned.inventory, "")
