"""Verification by metrics (README "Verification"): once every object of the render a
Release rolls out is Current, one measurement per analysis when it is due, kept in the
state directory before anything is decided from it; and what those measurements say,
for the plan and the status. Does I/O (the providers, the state directory)."""

import logging
from datetime import datetime
from functools import partial
from pathlib import Path

from convoy_batch.deployers.base import Deployer
from convoy_batch.engine.run import ReleaseRun
from convoy_batch.errors import StateFailed
from convoy_batch.metrics.base import Context, MetricError
from convoy_batch.metrics.providers import measure
from convoy_batch.models import (
    AnalysisPhase,
    Release,
    ReleaseStatus,
    RolloutState,
    Verification,
    VerificationStatus,
)
from convoy_batch.renderers.pipeline import variables_for
from convoy_batch.rollout.analysis import (
    Verified,
    in_error,
    next_due,
    time_in_error,
    verify,
)
from convoy_batch.rollout.verdict import entries_healthy
from convoy_batch.state.measurements import Measurements, MeasurementStore, begun, polling

log = logging.getLogger("convoy_batch")


def verifying(release: Release, status: ReleaseStatus) -> str | None:
    """The render whose verification is under way: the one rolling out (None: nothing
    to verify)."""
    rollout = status.rollout
    if release.spec.verification is None or release.spec.pin is not None or rollout is None:
        return None
    if rollout.state != RolloutState.PROGRESSING:
        return None
    return rollout.render_ref


def take_measurements(run: ReleaseRun) -> None:
    """The measurements due now, each kept before the next is taken: once every object
    of the render is Current, ``initialDelay`` after that, then every ``interval``, one
    per analysis per tick at most. A measurement that cannot be kept is not taken again
    this tick (a warning; the next tick measures)."""
    release, status, inventory, now = run.release, run.status, run.inventory, run.now
    ref = verifying(release, status)
    spec = release.spec.verification
    if ref is None or spec is None:
        return
    if not inventory.entries or not entries_healthy(inventory.entries, ref):
        return
    store = MeasurementStore(run.stores.state_dir)
    record = store.load(release.name)
    try:
        if record is None or record.render_ref != ref:
            record = begun(release.name, ref, now)
            store.save(record)
        for analysis in spec.analyses:
            polled = record.polled.get(analysis.name)
            due = next_due(analysis, record.of(analysis.name), record.started_at, polled)
            if due is None or now < due:
                continue
            made = measure(analysis, now, _context(run, ref))
            if made is None:  # its Job runs: look again an interval later
                record = polling(record, analysis.name, now)
            else:
                record = record.adding(analysis.name, made)
            store.save(record)
    except StateFailed as exc:
        log.warning("%s: measurement not kept: %s", release.name, exc)


def _context(run: ReleaseRun, ref: str) -> Context:
    """The Release's variables (its Cluster's too, when it is known) and the render's
    ``revision`` and ``renderRef``, for a provider's query; the Release's source files
    and its Cluster's deployer, through the run."""
    release, status = run.release, run.status
    cluster = run.snapshot.clusters.get(release.spec.cluster)
    variables = dict(variables_for(release, cluster)) if cluster is not None else {}
    records = [r for r in (status.last_successful, *status.history) if r is not None]
    revision = next((r.revision for r in records if r.render_ref == ref and r.revision), "")
    variables.update(revision=revision, renderRef=ref)
    return Context(
        release=release,
        ref=ref,
        variables=variables,
        state_dir=run.stores.state_dir,
        source_file=partial(run.sources.file_text, release),
        deployer=partial(_deployer, run),
    )


def _deployer(run: ReleaseRun) -> Deployer:
    """The tick's deployer of the Release's Cluster (MetricError: there is none)."""
    name = run.release.spec.cluster
    cluster = run.snapshot.clusters.get(name)
    if cluster is None:
        raise MetricError(f"clusters/{name}.yaml: no such Cluster")
    return run.deployer_of(cluster)


def _kept(
    state_dir: Path, release: Release, status: ReleaseStatus
) -> tuple[Verification, str, Measurements | None] | None:
    """The verification under way, its render, and the measurements kept of that render
    (None: a record of another render, or none); None: nothing to verify."""
    ref = verifying(release, status)
    spec = release.spec.verification
    if ref is None or spec is None:
        return None
    record = MeasurementStore(state_dir).load(release.name)
    return spec, ref, record if record is not None and record.render_ref == ref else None


def next_measurement(state_dir: Path, release: Release, status: ReleaseStatus) -> datetime | None:
    """When the next measurement of the render under verification is due (None: none is
    to come, or the verification has not begun: every object Current begins it, and that
    is a change of health, which wakes the Release anyway)."""
    kept = _kept(state_dir, release, status)
    if kept is None:
        return None
    spec, _, record = kept
    if record is None:
        return None
    times = [
        next_due(a, record.of(a.name), record.started_at, record.polled.get(a.name))
        for a in spec.analyses
    ]
    due = [t for t in times if t is not None]
    return min(due) if due else None


def verified(
    state_dir: Path, release: Release, status: ReleaseStatus, now: datetime, promote: bool
) -> Verified | None:
    """What the kept measurements say of the render under way (None: no verification;
    a :class:`Verified` without status: not begun)."""
    kept = _kept(state_dir, release, status)
    if kept is None:
        return None
    spec, ref, record = kept
    if record is None:
        return Verified(None, promote=promote)
    measurements = record.all()
    return Verified(
        verify(spec, ref, measurements),
        in_error(measurements),
        promote,
        time_in_error(measurements, now),
    )


def status_block(prior: ReleaseStatus, now_verified: Verified | None) -> VerificationStatus | None:
    """``status.verification``: what the measurements say, written when its phase (or
    render) changes, so the status is committed at each phase, not each measurement;
    the block of a render no longer rolling out stays until the next one begins. A run
    of measurement errors is a change too (it begins, it ends): the status says so."""
    block = now_verified.status if now_verified is not None else None
    before = prior.verification
    if block is None:
        return before
    if (
        before is not None
        and before.render_ref == block.render_ref
        and before.phase == block.phase
        and _erring(before) == _erring(block)
    ):
        return before
    if block.phase == AnalysisPhase.RUNNING and before is None and not _counted(block):
        return None  # nothing measured yet: no block
    return block


def _counted(block: VerificationStatus) -> bool:
    return any(a.successful + a.failed + a.inconclusive + a.errors for a in block.analyses)


def _erring(block: VerificationStatus) -> bool:
    return any(a.errors_in_a_row for a in block.analyses)
