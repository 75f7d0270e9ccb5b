"""Carrying out a decided :class:`~convoy_batch.rollout.step.Step`: apply its objects, record
them in the inventory, prune. One executor for ``stage_sync``, ``apply_last_healthy`` and
the completion of a write-ahead record. I/O only through the deployer it is given.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from convoy_batch.deployers.base import Deployer
from convoy_batch.engine.stages.inventory import (
    Claimants,
    no_claimants,
    prune,
    record_applied,
)
from convoy_batch.errors import ConvoyError
from convoy_batch.manifests.drift import NO_RULES, Rules
from convoy_batch.models import SYNC_FAIL, Identity, ObjectKey, ReleaseInventory
from convoy_batch.renderers.pipeline import Render, RenderedObject
from convoy_batch.rollout import Outcome
from convoy_batch.rollout.step import Step

BeforeChange = Callable[[Step, Outcome, ReleaseInventory], None]
"""Called with the step, the outcome and the inventory it gives when it succeeds, right
before the step changes the cluster (the write-ahead record is written there)."""


def no_record(_step: Step, _expected: Outcome, _inventory: ReleaseInventory) -> None:
    """A :data:`BeforeChange` that records nothing (``plan``, tests)."""


Record = Callable[[ReleaseInventory], None]
"""Writes a Release's inventory (durably) before the step's first request."""


@dataclass(frozen=True)
class Writes:
    """What one Release's step writes on the way, carried as one value through the
    stages, in the order "decide, write, then act" wants: the write-ahead record of the
    decided step and its outcome right before the cluster changes (``ahead``), the
    inventory before the first request that may create an object (``record``), and who
    else claims an object, which prune spares (``claimants``). Made per Release by
    :meth:`~convoy_batch.engine.tick.Tick.writes`."""

    ahead: BeforeChange
    record: Record
    claimants: Claimants


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
    written: int = 0
    """Objects the applies wrote (created or changed): 0 when all were as rendered."""


def _applied_objects(render: Render, step: Step) -> list[RenderedObject]:
    """The step's objects, phase by phase: a hook of two of its phases comes twice (read
    as identities; a step without phases, a rollback, has no hooks)."""
    if step.phases is None:
        return [o for o in render.objects if o.hook is None]
    return [o for phase in step.phases for o in render.by_phase(phase)]


def _kept(render: Render, step: Step) -> Sequence[RenderedObject]:
    """The objects the inventory records: the render's (its SyncFail hooks only once a
    step applies them), or (a rollback, which applies no hooks) what was applied."""
    if step.phases is None:
        return _applied_objects(render, step)
    if SYNC_FAIL in step.phases:
        return render.objects
    return [o for o in render.objects if o.hook != SYNC_FAIL]


def _keep(inventory: ReleaseInventory, render: Render, step: Step) -> set[Identity]:
    """What a prune leaves alone: the render's objects, and the SyncFail hooks that ran
    (a rollback keeps those of the failed render: they run because it failed)."""
    if step.phases is not None:
        return {o.key.identity() for o in render.objects}
    keep = {o.key.identity() for o in _applied_objects(render, step)}
    keep.update(e.key.identity() for e in inventory.entries if e.wave == SYNC_FAIL)
    return keep


def _record(inventory: ReleaseInventory, render: Render, step: Step) -> ReleaseInventory:
    applied = {o.key.identity() for o in _applied_objects(render, step)}
    return record_applied(inventory, _kept(render, step), applied, render.ref)


def expected_inventory(inventory: ReleaseInventory, render: Render, step: Step) -> ReleaseInventory:
    """The inventory once ``step`` has succeeded (every prune confirmed)."""
    recorded = _record(inventory, render, step)
    if not step.prune:
        return recorded
    keep = _keep(inventory, render, step)
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
    rules: Rules = NO_RULES,
) -> Acted:
    """Apply the step's objects phase by phase, record them, then prune when the step
    says so (sparing what ``claimants`` shows another Release owns). ``rules``: the
    Release's drift rules (the paths an existing object keeps); the step's ``leave`` are
    not sent. Inventory before
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
    written = 0
    leave = {key.identity() for key in step.leave}
    for objects in batches:
        try:
            sent = [o.manifest for o in objects if o.key.identity() not in leave]
            written += deployer.apply(sent, rules)
        except ConvoyError as exc:
            # Even a failed apply may have created some of its objects before it stopped.
            return Acted(present, failure=exc, sent=True)
    recorded = _record(inventory, render, step)
    if not step.prune:
        return Acted(recorded, written=written)
    keep = _keep(inventory, render, step)
    spared = {key.identity() for key in render.ignored}
    pruned = prune(deployer, recorded, keep, step.prune_enabled, claimants, spared)
    return Acted(pruned.inventory, pruned.deleted, pruned.errors, written=written)
