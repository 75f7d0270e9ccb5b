"""``reconcile`` (SPEC 4) and ``sync_handler`` (SPEC 10) for one Release.

The five steps read as the seed's: ``stage_render``, plan, ``apply_last_healthy``,
``stage_gates``, ``stage_sync``, split at the point where deciding ends: ``decide``
changes nothing (the ``plan`` command calls it alone), ``act`` carries the decision out.
Typed errors from the I/O edges become outcome reasons here, in one place. The new
status is assembled in ``sync_handler`` only.
"""

import logging
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import datetime

from convoy_batch.deployers.base import Deployer
from convoy_batch.errors import ConvoyError, InvalidRelease
from convoy_batch.models import (
    ANNOTATION_FORCE_SYNC,
    Release,
    ReleaseInventory,
    ReleaseStatus,
)
from convoy_batch.observer import unknown_health
from convoy_batch.render import Render
from convoy_batch.rollout import (
    Action,
    Outcome,
    Plan,
    RenderId,
    RollBack,
    Verdict,
    assemble_status,
    commit_message,
    pinned_plan,
    plan_rollout,
    render_verdict,
)
from convoy_batch.rollout.status import NO_VALUE, short_ref, state_of
from convoy_batch.rollout.step import Step
from convoy_batch.stages.act import BeforeChange, no_record
from convoy_batch.stages.gates import stage_gates
from convoy_batch.stages.last_healthy import expected_rollback, roll_back
from convoy_batch.stages.outcome import failed
from convoy_batch.stages.render import stage_render
from convoy_batch.stages.sync import decide_sync, persist, stage_sync
from convoy_batch.tick import Tick
from convoy_batch.timefmt import format_time, parse_time

log = logging.getLogger("convoy_batch")


def pending_force_sync(tick: Tick, release: Release, status: ReleaseStatus) -> datetime | None:
    """The time of a pending forced sync (SPEC 9): now for ``--force`` or a manual run,
    else the annotation's time when newer than ``lastHandledForceSyncAt``."""
    if release.name in tick.forced:
        return tick.now
    value = release.metadata.annotations.get(ANNOTATION_FORCE_SYNC)
    if value is None:
        return None
    try:
        at = parse_time(value)
    except ValueError as exc:
        raise InvalidRelease(
            f"releases/{release.name}.yaml: metadata.annotations.{ANNOTATION_FORCE_SYNC}: {exc}"
        ) from None
    handled = status.last_handled_force_sync_at
    return at if handled is None or at > handled else None


def _plan(
    tick: Tick, release: Release, status: ReleaseStatus, ref: str, inv: ReleaseInventory
) -> Plan:
    if release.spec.pin is not None:
        return pinned_plan()
    return plan_rollout(release.spec, status, ref, inv.entries, tick.now)


@dataclass(frozen=True)
class Decision:
    """What one reconcile decided before it changes anything (SPEC 4 steps 1-4 and the
    wave gate of step 5): ``act`` carries it out, the ``plan`` command shows it."""

    outcome: Outcome
    """The outcome when what was decided succeeds; the final one when nothing is to do."""
    plan: Plan | None = None
    """None when the render failed."""
    render: Render | None = None
    deployer: Deployer | None = None
    persist: bool = False
    """Dry run and persist R first (``stage_sync``)."""
    then: Step | RollBack | None = None
    """R's step, or a rollback to the last healthy render; None: nothing to carry out."""


def decide(
    tick: Tick,
    release: Release,
    status: ReleaseStatus,
    inventory: ReleaseInventory,
    force_pending: bool,
) -> Decision:
    """Render, plan, gates and the wave gate: what the reconcile does, computed without
    changing a cluster, a store or git (reads the source and the render store)."""
    try:
        rendered = stage_render(tick, release)
    except ConvoyError as exc:
        return Decision(failed(exc))
    render = rendered.render
    rid = RenderId(ref=render.ref, revision=render.revision)
    plan = _plan(tick, release, status, render.ref, inventory)
    try:
        deployer = tick.deployer(rendered.cluster)
        if plan.action == Action.APPLY_LAST_HEALTHY:
            cause = plan.rollout.message if plan.rollout is not None else ""
            rollback = RollBack(plan.rollout, rid, f"holding last healthy render: {cause}")
            return Decision(
                expected_rollback(rollback, status), plan, render, deployer, then=rollback
            )
        stop = stage_gates(tick, release, rendered.cluster, render, force_pending)
        if stop is not None:
            return Decision(
                Outcome(
                    plan.rollout,
                    stop.applied,
                    stop.reason,
                    stop.message,
                    rid,
                    written=0 if stop.applied else None,
                ),
                plan,
                render,
            )
        tick.owners().check(release.name, (o.key for o in render.objects))
        sync = decide_sync(release, render, plan, status, inventory, tick.now)
        expected = sync.expected
        if not isinstance(sync.then, RollBack) and (rule := unknown_health(inventory)):
            # A health rule that fails holds R back unseen: the status says which one.
            expected = replace(expected, message=f"{expected.message}; {rule}")
        return Decision(expected, plan, render, deployer, persist=True, then=sync.then)
    except ConvoyError as exc:
        return Decision(failed(exc, rollout=plan.rollout, render=rid), plan, render)


def act(
    tick: Tick,
    release: Release,
    status: ReleaseStatus,
    inventory: ReleaseInventory,
    decision: Decision,
    before_change: BeforeChange = no_record,
) -> tuple[Outcome, ReleaseInventory]:
    """Carry out ``decision``: persist R, then R's step or the rollback."""
    plan, render, deployer, then = decision.plan, decision.render, decision.deployer, decision.then
    if plan is None or render is None or deployer is None or then is None:
        return decision.outcome, inventory
    try:
        if decision.persist:
            persist(tick, release, render, deployer, inventory)
        if isinstance(then, RollBack):
            return roll_back(
                tick, release, status, deployer, inventory, then, before_change, render
            )
        result = stage_sync(
            tick, release, render, then, decision.outcome, deployer, inventory, before_change
        )
        return result.outcome, result.inventory
    except ConvoyError as exc:
        rid = RenderId(ref=render.ref, revision=render.revision)
        return failed(exc, rollout=plan.rollout, render=rid), inventory


def reconcile(
    tick: Tick,
    release: Release,
    status: ReleaseStatus,
    inventory: ReleaseInventory,
    force_pending: bool,
    before_change: BeforeChange = no_record,
) -> tuple[Outcome, ReleaseInventory]:
    """At most one rollout transition for one Release (SPEC 4): ``decide``, then
    ``act``. ``before_change`` gets the decided step and its outcome right before the
    cluster changes."""
    decision = decide(tick, release, status, inventory, force_pending)
    return act(tick, release, status, inventory, decision, before_change)


@dataclass(frozen=True)
class Committed:
    """A status commit once its batch is written: what its Future gives, as plain data
    (a report that crosses a process boundary)."""

    sha: str | None

    def result(self) -> str | None:
        return self.sha


@dataclass(frozen=True)
class Handled:
    """What ``sync_handler`` did with one outcome."""

    name: str
    outcome: Outcome
    status: ReleaseStatus
    committed: "Future[str | None] | Committed | None"
    """The status commit, made in the background during a tick."""
    prior: ReleaseStatus = field(default_factory=ReleaseStatus)
    """The status before this reconcile."""

    @property
    def changed(self) -> bool:
        """The status changed (and is committed): a transition, an apply, a new error."""
        return self.committed is not None

    @property
    def commit(self) -> str | None:
        """The status commit's SHA (waits for it); None when nothing changed."""
        return self.committed.result() if self.committed is not None else None

    def settled(self) -> "Handled":
        """This outcome with its commit known (waits for it): plain data, picklable."""
        if self.committed is None or isinstance(self.committed, Committed):
            return self
        return replace(self, committed=Committed(self.committed.result()))


def attempt_healthy(
    release: Release | None,
    status: ReleaseStatus,
    outcome: Outcome,
    inv: ReleaseInventory,
    now: datetime,
) -> bool:
    if release is None or outcome.render is None:
        return False
    result = render_verdict(release.spec, status, outcome.render.ref, inv.entries, now)
    return result.verdict == Verdict.HEALTHY


def next_status(
    tick: Tick,
    name: str,
    release: Release | None,
    outcome: Outcome,
    inventory: ReleaseInventory,
    force_at: datetime | None,
) -> ReleaseStatus:
    """The status that ``outcome`` gives (SPEC 10), from the Release's current one."""
    prior = tick.status(name)
    return assemble_status(
        prior,
        outcome,
        failure_policy_set=release is None or release.spec.failure_policy is not None,
        attempt_healthy=attempt_healthy(release, prior, outcome, inventory, tick.now),
        force_sync_at=force_at,
        now=tick.now,
    )


def sync_handler(
    tick: Tick,
    name: str,
    release: Release | None,
    outcome: Outcome,
    inventory: ReleaseInventory,
    force_at: datetime | None,
) -> Handled:
    """Assemble the new status (SPEC 10) and commit it when it changed."""
    status = next_status(tick, name, release, outcome, inventory, force_at)
    if outcome.is_error:
        log.error("%s: %s: %s", name, outcome.reason, outcome.message)
    return commit_status(tick, name, outcome, status, None)


def commit_status(
    tick: Tick, name: str, outcome: Outcome, status: ReleaseStatus, message: str | None
) -> Handled:
    """Commit ``status`` when it differs from the Release's current one (``message``:
    the commit message, else the one SPEC 10 gives)."""
    prior = tick.status(name)
    commit = None
    if status != prior:
        message = message or commit_message(name, prior, status)
        commit = tick.status_store.commit_later(name, status, message)
        tick.statuses[name] = status
    return Handled(name=name, outcome=outcome, status=status, committed=commit, prior=prior)


def describe(handled: Handled) -> str:
    """One line a person reads: name, state, reason, render, since."""
    status, outcome = handled.status, handled.outcome
    rollout = status.rollout
    ref = short_ref(outcome.render.ref if outcome.render else None)
    since = format_time(rollout.started_at) if rollout is not None else NO_VALUE
    state = state_of(status)
    line = f"{handled.name}: {state} {outcome.reason} render={ref} since={since}"
    # Nothing written this tick: say so, not what the sync that applied R once did.
    message = "in sync" if outcome.written == 0 else outcome.message
    return f"{line} ({message})" if message else line
