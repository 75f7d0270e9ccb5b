"""One Release's reconcile inside a tick: a write-ahead record a killed tick left is
completed first, then the reconcile (its own write-ahead record before the cluster
changes), then its inventory, status commit and tick record.

Called by :mod:`convoy_batch.runner` under the Release's lock. Does I/O (through the
tick's stores and deployers).
"""

import logging

from convoy_batch.due import health_snapshot
from convoy_batch.errors import (
    ClusterNotFound,
    ConvoyError,
    InvalidRelease,
    PruneFailed,
    RenderFailed,
    StateFailed,
)
from convoy_batch.gitops import ReleaseEntry
from convoy_batch.intents import Intent
from convoy_batch.models import Release, ReleaseInventory, TickRecord
from convoy_batch.reasons import Reason
from convoy_batch.reconcile import (
    Handled,
    commit_status,
    next_status,
    pending_force_sync,
    reconcile,
    sync_handler,
)
from convoy_batch.render import load_render
from convoy_batch.rollout import Outcome, RenderId, commit_message
from convoy_batch.rollout.step import Step
from convoy_batch.stages.act import carry_out
from convoy_batch.stages.outcome import failed
from convoy_batch.tick import Tick

log = logging.getLogger("convoy_batch")


def source_revision(tick: Tick, entry: ReleaseEntry) -> str | None:
    """The revision of the Release's source as the repository shows it now (None: it
    cannot be read, which the reconcile reports)."""
    if entry.release is None:
        return None
    try:
        return tick.sources.listing(entry.release).revision
    except ConvoyError:
        return None


def handle_release(tick: Tick, entry: ReleaseEntry) -> Handled:
    """Reconcile one Release and hand the outcome to ``sync_handler``; a write-ahead
    record left by a killed tick is completed first."""
    release = entry.release
    if release is None:
        outcome = failed(InvalidRelease(entry.error or "invalid"))
        empty = ReleaseInventory(release=entry.name)
        return sync_handler(tick, entry.name, None, outcome, empty, None)
    try:
        intent = tick.stores.intents.load(release.name)
        if intent is not None:
            complete_intent(tick, release, intent)
        status = tick.status(release.name)
        inventory = tick.inventory(release.name)
        force_at = pending_force_sync(tick, release, status)
    except (InvalidRelease, StateFailed) as exc:
        outcome = failed(exc)
        empty = ReleaseInventory(release=release.name)
        return sync_handler(tick, release.name, release, outcome, empty, None)

    def write_ahead(step: Step, expected: Outcome, expected_inventory: ReleaseInventory) -> None:
        decided = next_status(tick, release.name, release, expected, expected_inventory, force_at)
        if decided != status:  # a decision a crash could lose
            message = commit_message(release.name, status, decided)
            tick.stores.intents.save(
                Intent(
                    release=release.name,
                    cluster=release.spec.cluster,
                    step=step,
                    status=decided,
                    message=message,
                )
            )

    outcome, new_inventory = reconcile(
        tick, release, status, inventory, force_at is not None, write_ahead
    )
    tick.note_inventory(new_inventory)
    try:
        settle_render(tick, release.name)
        tick.save_inventory(release.name)
    except StateFailed as exc:
        outcome = failed(
            exc, rollout=outcome.rollout, render=outcome.render, applied=outcome.applied
        )
    handled = sync_handler(tick, release.name, release, outcome, new_inventory, force_at)
    rendered = tick.rendered.get(release.name)
    tick.stores.ticks.save(
        release.name,
        TickRecord(
            last_reconcile_at=tick.now,
            release_blob=entry.blob,
            # What the repository shows now: after a rollback the outcome's render is the
            # last healthy one, whose older revision would look like a change every tick.
            source_revision=source_revision(tick, entry),
            health=health_snapshot(new_inventory),
            render_key=rendered.key if rendered else None,
            render_ref=rendered.render.ref if rendered else None,
        ),
    )
    return handled


def settle_render(tick: Tick, name: str) -> None:
    """The render this tick made for ``name`` is durable before its status names it
    (its write may still be in the background when no step changed the cluster);
    StateFailed when it cannot be stored."""
    rendered = tick.rendered.get(name)
    if rendered is not None:
        tick.stores.renders.settle(rendered.render.ref)


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
        render = load_render(blob, name, step.revision)
        deployer = tick.deployer(cluster)
        record, claimants = tick.recorder(name), tick.claimants(name)
        acted = carry_out(deployer, inventory, render, step, record, claimants)
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
        commit_status(tick, name, done, intent.status, intent.message)
        return
    rid = RenderId(ref=step.render_ref, revision=step.revision)
    outcome = failed(failure, rollout=intent.status.rollout, render=rid)
    sync_handler(tick, name, release, outcome, tick.inventory(name), None)
