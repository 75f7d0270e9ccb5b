"""Carrying out a decided :class:`~convoy_batch.intents.Step`: apply its objects, record
them in the inventory, prune. One executor for ``stage_sync``, ``apply_last_healthy`` and
the completion of a write-ahead record. I/O only through the deployer it is given.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from convoy_batch.deployers.base import Deployer
from convoy_batch.errors import ConvoyError
from convoy_batch.intents import Step
from convoy_batch.models import ObjectKey, ReleaseInventory
from convoy_batch.render import Render, RenderedObject
from convoy_batch.rollout import Outcome
from convoy_batch.stages.inventory import Claimants, no_claimants, prune, record_applied

BeforeChange = Callable[[Step, Outcome, ReleaseInventory], None]
"""Called with the step, the outcome and the inventory it gives when it succeeds, right
before the step changes the cluster (the write-ahead record is written there)."""


def no_record(_step: Step, _expected: Outcome, _inventory: ReleaseInventory) -> None:
    """A :data:`BeforeChange` that records nothing (``plan``, tests)."""


Record = Callable[[ReleaseInventory], None]
"""Writes a Release's inventory (durably) before the step's first request."""


@dataclass(frozen=True)
class Acted:
    inventory: ReleaseInventory
    deleted: tuple[ObjectKey, ...] = ()
    errors: tuple[str, ...] = ()
    """Prune errors."""
    failure: ConvoyError | None = None
    """The apply's error: the step stopped there (its objects stay in the inventory)."""
    sent: bool = False
    """An apply was attempted: an object of the render may be live (SPEC 4 ``applied``)."""


def _applied_objects(render: Render, step: Step) -> list[RenderedObject]:
    if step.phases is None:
        return [o for o in render.objects if o.hook is None]
    return [o for phase in step.phases for o in render.by_phase(phase)]


def _kept(render: Render, step: Step) -> Sequence[RenderedObject]:
    """The objects the inventory keeps after a prune: the whole render, or (a rollback,
    which applies no hooks) what was applied."""
    return render.objects if step.phases is not None else _applied_objects(render, step)


def _record(inventory: ReleaseInventory, render: Render, step: Step) -> ReleaseInventory:
    applied = {o.key.identity() for o in _applied_objects(render, step)}
    return record_applied(inventory, _kept(render, step), applied, render.ref)


def expected_inventory(inventory: ReleaseInventory, render: Render, step: Step) -> ReleaseInventory:
    """The inventory once ``step`` has succeeded (every prune confirmed)."""
    recorded = _record(inventory, render, step)
    if not step.prune:
        return recorded
    keep = {o.key.identity() for o in _kept(render, step)}
    entries = tuple(e for e in recorded.entries if e.key.identity() in keep)
    if entries == recorded.entries:
        return recorded
    return ReleaseInventory(release=recorded.release, entries=entries)


def carry_out(
    deployer: Deployer,
    inventory: ReleaseInventory,
    render: Render,
    step: Step,
    record: Record,
    claimants: Claimants = no_claimants,
) -> Acted:
    """Apply the step's objects phase by phase, record them, then prune when the step
    says so (sparing what ``claimants`` shows another Release owns). Inventory before
    apply: every object of the step is in the inventory (``record``) before the first
    request that may create it, so an apply that fails or is killed half-way leaves
    nothing that later ticks cannot prune."""
    present = record_applied(inventory, _kept(render, step), (), render.ref)
    if present != inventory:
        record(present)
    batches = (
        [_applied_objects(render, step)]
        if step.phases is None
        else [render.by_phase(phase) for phase in step.phases]
    )
    for objects in batches:
        try:
            deployer.apply([o.manifest for o in objects])
        except ConvoyError as exc:
            # Even a failed apply may have created some of its objects before it stopped.
            return Acted(present, failure=exc, sent=True)
    recorded = _record(inventory, render, step)
    if not step.prune:
        return Acted(recorded)
    keep = (o.key.identity() for o in _kept(render, step))
    pruned = prune(deployer, recorded, keep, step.prune_enabled, claimants)
    return Acted(pruned.inventory, pruned.deleted, pruned.errors)
