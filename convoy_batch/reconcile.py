"""One Release's reconcile in a tick (SPEC 4), told in one place.

:func:`handle_release` is what the tick calls, under the Release's lock: a write-ahead
record a killed tick left is completed first (:func:`complete_intent`), then
:func:`reconcile`, then the inventory, the status commit (``engine.handler.sync_handler``)
and the tick record. ``reconcile`` reads as the seed's five steps (``stage_render``, plan,
``apply_last_healthy``, ``stage_gates``, ``stage_sync``), split where deciding ends:
:func:`decide` changes nothing (the ``plan`` command calls it alone), :func:`act` carries
the decision out: decide, write, then act. The decided render goes to the render store
first, whether or not it is then applied (a gate, a failed dry run or an unreachable
cluster stops it, and its status names it all the same), and is durable before the
write-ahead record (right before the cluster changes) and before the status is queued
for its commit; a render that cannot be stored is the Release's StateFailed, and its
status then names no render the store lacks (``engine.stages.outcome.not_stored``).
Typed errors of the I/O edges become outcomes through ``engine.stages.outcome.failed``.

Does I/O through the tick's stores and deployers.
"""

import logging
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial

from convoy_batch.engine.handler import (
    Handled,
)
from convoy_batch.engine.run import ReleaseRun
from convoy_batch.engine.stages.act import BeforeChange, carry_out, no_record
from convoy_batch.engine.stages.drift import rules_of
from convoy_batch.engine.stages.gates import stage_gates, windows_of
from convoy_batch.engine.stages.hooks import let_go_finished
from convoy_batch.engine.stages.last_healthy import apply_last_healthy, expected_rollback
from convoy_batch.engine.stages.outcome import failed, not_stored
from convoy_batch.engine.stages.render import stage_render
from convoy_batch.engine.stages.sync import decide_sync, dry_run, stage_sync
from convoy_batch.engine.stages.verify import take_measurements, verified
from convoy_batch.engine.tick import Tick
from convoy_batch.errors import (
    ClusterNotFound,
    ConvoyError,
    InvalidRelease,
    PruneFailed,
    RenderFailed,
    StateFailed,
)
from convoy_batch.health.observer import unknown_health
from convoy_batch.models import (
    ANNOTATION_FORCE_SYNC,
    Cluster,
    Release,
    ReleaseInventory,
    ReleaseStatus,
    RolloutState,
    TickRecord,
)
from convoy_batch.reasons import Reason
from convoy_batch.renderers import watched_revision
from convoy_batch.renderers.charts import ChartResolver
from convoy_batch.renderers.pipeline import Render, load_render
from convoy_batch.renderers.sops import unseal
from convoy_batch.repo.gitops import ReleaseEntry
from convoy_batch.repo.source import SourceResolver
from convoy_batch.rollout import (
    Action,
    Outcome,
    Plan,
    RenderId,
    RollBack,
    Verdict,
    commit_message,
    pinned_plan,
    plan_rollout,
)
from convoy_batch.rollout.analysis import PROMOTED, WAITING
from convoy_batch.rollout.due import health_snapshot
from convoy_batch.rollout.status import with_note
from convoy_batch.rollout.step import Step
from convoy_batch.rollout.windows import WindowState, window_state
from convoy_batch.state.intents import Intent
from convoy_batch.store import RenderStore
from convoy_batch.timefmt import parse_time

log = logging.getLogger("convoy_batch")

FORCED_IN_SYNC = "forced sync: nothing to write, every object already as rendered"


def pending_force_sync(
    release: Release, status: ReleaseStatus, now: datetime, forced: bool
) -> datetime | None:
    """The time of a pending forced sync (SPEC 9): ``now`` for ``--force`` or a manual run
    (``forced``), else the annotation's time when newer than ``lastHandledForceSyncAt``."""
    if forced:
        return now
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


def _plan(run: ReleaseRun, ref: str) -> Plan:
    release = run.release
    if release.spec.pin is not None:
        return pinned_plan()
    state_dir, status, now = run.stores.state_dir, run.status, run.now
    checked = verified(state_dir, release, status, now, promote=run.force_pending)
    return plan_rollout(release.spec, status, ref, run.inventory.entries, now, checked)


@dataclass(frozen=True)
class Decision:
    """What one reconcile decided before it changes anything (SPEC 4 steps 1-4 and the
    wave gate of step 5): ``act`` carries it out, the ``plan`` command shows it."""

    outcome: Outcome
    """The outcome when what was decided succeeds; the final one when nothing is to do."""
    plan: Plan | None = None
    """None when the render failed."""
    render: Render | None = None
    cluster: Cluster | None = None
    """Where R goes, its deployer made and its target checked (the tick's, once a tick):
    set when there is something to carry out."""
    dry_run: bool = False
    """Dry run R first (``stage_sync``)."""
    then: Step | RollBack | None = None
    """R's step, or a rollback to the last healthy render; None: nothing to carry out."""


def begin(
    tick: Tick,
    release: Release,
    inventory: ReleaseInventory,
    force_at: datetime | None,
    ahead: BeforeChange = no_record,
) -> ReleaseRun:
    """The run of one reconcile of ``release`` in ``tick``: its status as the tick knows
    it, ``inventory`` as observed, the pending forced sync (``force_at``), its writes
    (``ahead``: the write-ahead record), and the tick's handles it reads through."""
    return ReleaseRun(
        release=release,
        status=tick.status(release.name),
        inventory=inventory,
        now=tick.now,
        force_at=force_at,
        writes=tick.writes(release.name, ahead),
        rules=rules_of(tick.snapshot.clusters, release),
        stores=tick.stores,
        snapshot=tick.snapshot,
        shared=tick.shared,
        owners=tick.owners,
        sources=tick.sources,
        render_of=partial(stage_render, tick),
        deployer_of=tick.deployer,
    )


def decide(run: ReleaseRun) -> Decision:
    """Render, plan, gates and the wave gate: what the reconcile does, computed without
    changing a cluster, a store or git (reads the source and the render store)."""
    release, status, inventory, now = run.release, run.status, run.inventory, run.now
    try:
        rendered = run.render_of(release)
    except ConvoyError as exc:
        return Decision(failed(exc))
    render = rendered.render
    rid = RenderId(ref=render.ref, revision=render.revision)
    plan = _plan(run, render.ref)
    try:
        run.deployer_of(rendered.cluster)  # its target checked before anything is decided
        # Read once; a window that does not parse stops every apply (a rollback too).
        windows = window_state(windows_of(release, rendered.cluster), now)
        if plan.action == Action.APPLY_LAST_HEALTHY:
            plan = _inside_window(plan, status, windows)
            cause = plan.rollout.message if plan.rollout is not None else ""
            rollback = RollBack(plan.rollout, rid, f"holding last healthy render: {cause}")
            return Decision(
                expected_rollback(rollback, status), plan, render, rendered.cluster, then=rollback
            )
        stop = stage_gates(run, rendered.cluster, render, windows)
        if stop is not None:
            return Decision(
                Outcome(
                    plan.rollout,
                    stop.applied,
                    stop.reason or Reason.SYNCED,
                    stop.message,
                    rid,
                    written=0 if stop.applied else None,
                ),
                plan,
                render,
            )
        run.owners().check(release.name, (o.key for o in render.objects))
        sync = decide_sync(run, render, plan)
        expected = sync.expected
        if not isinstance(sync.then, RollBack) and (rule := unknown_health(inventory)):
            # A health rule that fails holds R back unseen: the status says which one.
            expected = replace(expected, message=f"{expected.message}; {rule}")
        if not windows.open:  # closed, yet the window gate let it through: forced
            forced = f"forced past the sync window ({windows.labels()})"
            message = f"{expected.message}; {forced}".lstrip("; ")
            expected = replace(expected, message=message, note=f"Forced sync: {forced}.")
        return Decision(expected, plan, render, rendered.cluster, dry_run=True, then=sync.then)
    except ConvoyError as exc:
        return Decision(failed(exc, rollout=plan.rollout, render=rid), plan, render)


def _inside_window(plan: Plan, status: ReleaseStatus, windows: WindowState) -> Plan:
    """A rollback is not held by a closed sync window (it restores what ran before); the
    rollout it starts says it ran inside one (its message, which later holds repeat)."""
    before, after = status.rollout, plan.rollout
    rolled = RolloutState.ROLLED_BACK
    if after is None or after.state != rolled or (before is not None and before.state == rolled):
        return plan
    if windows.open:
        return plan
    message = f"{after.message}; rolled back inside the sync window ({windows.labels()})"
    return replace(plan, rollout=after.model_copy(update={"message": message}))


def act(run: ReleaseRun, decision: Decision) -> tuple[Outcome, ReleaseInventory]:
    """Carry out ``decision``: store R, dry run it, then R's step or the rollback, writing
    on the way what ``run.writes`` says (the write-ahead record first)."""
    plan, render, cluster, then = decision.plan, decision.render, decision.cluster, decision.then
    inventory = run.inventory
    if render is not None:
        try:
            store_render(run.stores.renders, render, durable=isinstance(then, RollBack))
        except StateFailed as exc:
            return not_stored(exc, decision.outcome, render.ref, acted=False), inventory
    if plan is None or render is None or cluster is None or then is None:
        return decision.outcome, inventory
    try:
        deployer = run.deployer_of(cluster)  # the one decide made (one per Cluster per tick)
        let_go_finished(deployer, inventory, run.writes.record)  # their end on record first
        # Decrypted in memory here, right before the deployer sees it; stored encrypted.
        render = unseal(render, run.release, run.stores.state_dir)
        if decision.dry_run:
            dry_run(run, deployer, render)
        if isinstance(then, RollBack):
            return apply_last_healthy(run, deployer, then, render)
        return stage_sync(run, deployer, render, then, decision.outcome)
    except ConvoyError as exc:
        rid = RenderId(ref=render.ref, revision=render.revision)
        return failed(exc, rollout=plan.rollout, render=rid), inventory


def store_render(renders: RenderStore, render: Render, *, durable: bool) -> None:
    """R's blob to the render store, before anything of the decision is carried out: a
    status names R whether or not it is applied. The write lands in the background (the
    step waits for it before its write-ahead record, the Release before its status);
    ``durable``: wait for it now (a rollback's record names R, and it sends no R to wait
    behind). StateFailed when the store cannot hold it."""
    renders.put(render.ref, render.canonical)
    if durable:
        renders.settle(render.ref)


def reconcile(run: ReleaseRun) -> tuple[Outcome, ReleaseInventory]:
    """At most one rollout transition for one Release (SPEC 4): ``decide``, then
    ``act``. ``run.writes.ahead`` gets the decided step and its outcome right before the
    cluster changes (the write-ahead record). The measurements due are taken first
    (verification by metrics): they are kept before anything is decided from them."""
    take_measurements(run)
    decision = decide(run)
    outcome, after = act(run, decision)
    waiting = waiting_for_verification(decision.plan, outcome)
    promoted = decision.plan.verdict if decision.plan is not None else None
    if promoted is not None and promoted.message.startswith(PROMOTED):
        note = f"Promoted by a forced sync: {promoted.message.removeprefix(PROMOTED + ': ')}"
        waiting = replace(waiting, note=f"{waiting.note}\n{note}" if waiting.note else note)
    if waiting is outcome and run.force_pending and outcome.reason == Reason.SYNCED:
        if outcome.written == 0:
            outcome = replace(outcome, message=FORCED_IN_SYNC)  # not an earlier sync's
        return outcome, after
    return waiting, after


def waiting_for_verification(plan: Plan | None, outcome: Outcome) -> Outcome:
    """A Synced outcome whose render waits for its verification says so
    (``WaitingForVerification``, the analyses' message); any other as it is."""
    result = plan.verdict if plan is not None else None
    if (
        outcome.reason != Reason.SYNCED
        or result is None
        or result.verdict != Verdict.PENDING
        or not result.message.startswith(WAITING)
    ):
        return outcome
    return replace(outcome, reason=Reason.WAITING_FOR_VERIFICATION, message=result.message)


def source_revision(
    entry: ReleaseEntry, sources: SourceResolver, charts: ChartResolver
) -> str | None:
    """The revision of the Release's source as the repository shows it now (None: it
    cannot be read, which the reconcile reports)."""
    if entry.release is None:
        return None
    try:
        return watched_revision(entry.release, sources, charts)
    except ConvoyError:
        return None


def handle_release(tick: Tick, entry: ReleaseEntry) -> Handled:
    """Reconcile one Release and hand the outcome to ``sync_handler``; a write-ahead
    record left by a killed tick is completed first."""
    release = entry.release
    if release is None:
        outcome = failed(InvalidRelease(entry.error or "invalid"))
        empty = ReleaseInventory(release=entry.name)
        return tick.desk.sync_handler(entry.name, None, outcome, empty, None)
    try:
        intent = tick.stores.intents.load(release.name)
        if intent is not None:
            complete_intent(tick, release, intent)
        status = tick.status(release.name)
        inventory = tick.inventory(release.name)
        force_at = pending_force_sync(release, status, tick.now, release.name in tick.forced)
    except (InvalidRelease, StateFailed) as exc:
        outcome = failed(exc)
        empty = ReleaseInventory(release=release.name)
        return tick.desk.sync_handler(release.name, release, outcome, empty, None)

    def write_ahead(step: Step, expected: Outcome, expected_inventory: ReleaseInventory) -> None:
        decided = tick.desk.next_status(
            release.name, release, expected, expected_inventory, force_at
        )
        if decided != status:  # a decision a crash could lose
            message = with_note(commit_message(release.name, status, decided), expected.note)
            tick.stores.intents.save(
                Intent(
                    release=release.name,
                    cluster=release.spec.cluster,
                    step=step,
                    status=decided,
                    message=message,
                )
            )

    run = begin(tick, release, inventory, force_at, write_ahead)
    outcome, new_inventory = reconcile(run)
    tick.note_inventory(new_inventory)
    outcome = settle_render(run, outcome)
    try:
        tick.save_inventory(release.name)
    except StateFailed as exc:
        outcome = failed(
            exc, rollout=outcome.rollout, render=outcome.render, applied=outcome.applied
        )
    # A forced sync a dependency refused is not handled: it must be asked again.
    refused = outcome.reason == Reason.WAITING_FOR_DEPENDENCY
    handled = tick.desk.sync_handler(
        release.name, release, outcome, new_inventory, None if refused else force_at
    )
    rendered = tick.shared.render_of(release.name)
    tick.stores.ticks.save(
        release.name,
        TickRecord(
            last_reconcile_at=tick.now,
            release_blob=entry.blob,
            # What the repository shows now: after a rollback the outcome's render is the
            # last healthy one, whose older revision would look like a change every tick.
            source_revision=source_revision(entry, tick.sources, tick.charts),
            health=health_snapshot(new_inventory),
            render_key=rendered.key if rendered else None,
            render_ref=rendered.render.ref if rendered else None,
            drifted=(
                bool(outcome.drift.objects)
                if outcome.drift is not None
                else tick.stores.ticks.load(release.name).drifted
            ),
        ),
    )
    return handled


def settle_render(run: ReleaseRun, outcome: Outcome) -> Outcome:
    """``outcome``, once the render this tick made for the run's Release is durable,
    before the status names it (its write may still be in the background when no step
    changed the cluster); when it cannot be stored, the StateFailed outcome that names it
    nowhere."""
    rendered = run.shared.render_of(run.name)
    if rendered is None:
        return outcome
    try:
        run.stores.renders.settle(rendered.render.ref)
    except StateFailed as exc:
        return not_stored(exc, outcome, rendered.render.ref)
    return outcome


def complete_intent(tick: Tick, release: Release, intent: Intent) -> None:
    """Finish what a killed tick decided: its step again, then its recorded status. When
    the step fails now, the status records the failure with the decided rollout, so the
    decision itself is never lost (the next tick plans from it)."""
    name = release.name
    if tick.status(name) == intent.status:
        return  # its commit landed; only the record was left
    step = intent.step
    inventory = tick.inventory(name)
    failure: ConvoyError | None
    try:
        cluster = tick.snapshot.clusters.get(intent.cluster)
        if cluster is None:
            raise ClusterNotFound(f"clusters/{intent.cluster}.yaml: no such Cluster")
        blob = tick.stores.renders.get(step.render_ref)
        if blob is None:
            raise RenderFailed(f"render store has no valid blob for {step.render_ref}")
        render = unseal(load_render(blob, name, step.revision), release, tick.stores.state_dir)
        deployer = tick.deployer(cluster)
        writes = tick.writes(name)
        rules = rules_of(tick.snapshot.clusters, release)
        acted = carry_out(deployer, inventory, render, step, writes.record, writes.claimants, rules)
    except ConvoyError as exc:
        failure = exc
    else:
        tick.note_inventory(acted.inventory)
        tick.save_inventory(name)
        failure = PruneFailed(acted.errors[0]) if acted.errors else None
        if acted.failure is not None:
            failure = acted.failure
    log.warning("%s: completing the decision of a killed tick (%s)", name, intent.message)
    if failure is None:
        attempt = intent.status.last_attempted
        reason = Reason(attempt.reason) if attempt else Reason.SYNCED
        done = Outcome(intent.status.rollout, True, reason)
        tick.desk.commit_status(name, done, intent.status, intent.message)
        return
    rid = RenderId(ref=step.render_ref, revision=step.revision)
    outcome = failed(failure, rollout=intent.status.rollout, render=rid)
    tick.desk.sync_handler(name, release, outcome, tick.inventory(name), None)
