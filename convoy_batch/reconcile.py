"""``reconcile`` (SPEC 4) and ``sync_handler`` (SPEC 10) for one Release.

The five steps read as the seed's: ``stage_render``, plan, ``apply_last_healthy``,
``stage_gates``, ``stage_sync``. Typed errors from the I/O edges become outcome
reasons here, in one place. The new status is assembled in ``sync_handler`` only.
"""

import logging
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime

from convoy_batch.errors import ConvoyError, InvalidRelease
from convoy_batch.models import (
    ANNOTATION_FORCE_SYNC,
    Release,
    ReleaseInventory,
    ReleaseStatus,
)
from convoy_batch.rollout import (
    Action,
    Outcome,
    Plan,
    RenderId,
    Verdict,
    assemble_status,
    commit_message,
    pinned_plan,
    plan_rollout,
    render_verdict,
)
from convoy_batch.stages.act import BeforeChange, no_record
from convoy_batch.stages.gates import stage_gates
from convoy_batch.stages.last_healthy import apply_last_healthy
from convoy_batch.stages.render import stage_render
from convoy_batch.stages.sync import REASON_ROLLED_BACK, stage_sync
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


def reconcile(
    tick: Tick,
    release: Release,
    status: ReleaseStatus,
    inventory: ReleaseInventory,
    force_pending: bool,
    before_change: BeforeChange = no_record,
) -> tuple[Outcome, ReleaseInventory]:
    """At most one rollout transition for one Release (SPEC 4). ``before_change`` gets
    the decided step and its outcome right before the cluster changes."""
    try:
        rendered = stage_render(tick, release)
    except ConvoyError as exc:
        return Outcome(rollout=None, applied=False, reason=exc.reason, message=str(exc)), inventory
    render = rendered.render
    rid = RenderId(ref=render.ref, revision=render.revision)
    plan = _plan(tick, release, status, render.ref, inventory)
    try:
        deployer = tick.deployer(rendered.cluster)
        if plan.action == Action.APPLY_LAST_HEALTHY:
            cause = plan.rollout.message if plan.rollout is not None else ""

            def holding(back: RenderId) -> Outcome:
                message = f"holding last healthy render: {cause}"
                return Outcome(plan.rollout, True, REASON_ROLLED_BACK, message, back)

            back = apply_last_healthy(
                tick, release, status, deployer, inventory, holding, before_change, render
            )
            if back.applied and back.render is not None:
                return holding(back.render), back.inventory
            failed = Outcome(plan.rollout, False, REASON_ROLLED_BACK, back.message, rid)
            return failed, back.inventory
        stop = stage_gates(tick, release, rendered.cluster, render, force_pending)
        if stop is not None:
            return Outcome(plan.rollout, False, stop.reason, stop.message, rid), inventory
        result = stage_sync(tick, release, render, plan, status, deployer, inventory, before_change)
        return result.outcome, result.inventory
    except ConvoyError as exc:
        return Outcome(plan.rollout, False, exc.reason, str(exc), rid), inventory


@dataclass(frozen=True)
class Handled:
    """What ``sync_handler`` did with one outcome."""

    name: str
    outcome: Outcome
    status: ReleaseStatus
    committed: "Future[str | None] | None"
    """The status commit, made in the background during a tick."""

    @property
    def commit(self) -> str | None:
        """The status commit's SHA (waits for it); None when nothing changed."""
        return self.committed.result() if self.committed is not None else None


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
    return Handled(name=name, outcome=outcome, status=status, committed=commit)


def describe(handled: Handled) -> str:
    """One line a person reads: name, state, reason, render, since."""
    status, outcome = handled.status, handled.outcome
    rollout = status.rollout
    state = rollout.state.value if rollout is not None else "-"
    ref = outcome.render.ref.removeprefix("sha256:")[:12] if outcome.render else "-"
    since = format_time(rollout.started_at) if rollout is not None else "-"
    line = f"{handled.name}: {state} {outcome.reason} render={ref} since={since}"
    return f"{line} ({outcome.message})" if outcome.message else line
