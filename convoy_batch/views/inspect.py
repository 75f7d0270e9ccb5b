"""Read-only views for the CLI: ``status`` rows and ``plan`` (what the next tick would
do). Reads the repository and the state directory; writes nothing.
"""

from collections.abc import Collection, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from git import Repo

from convoy_batch.engine.removed import gone_names
from convoy_batch.engine.retire import (
    RetireOptions,
    decide_retirements,
    planned_message,
)
from convoy_batch.engine.stages.gates import window_note
from convoy_batch.engine.stages.render import resolve_cluster
from convoy_batch.engine.stages.verify import next_measurement, verified
from convoy_batch.engine.tick import Tick
from convoy_batch.errors import ConvoyError
from convoy_batch.health.cel import rules_for
from convoy_batch.health.observer import observe
from convoy_batch.models import Cluster, Release, ReleaseStatus
from convoy_batch.reasons import GATE_REASONS, Reason
from convoy_batch.reconcile import begin, decide, pending_force_sync, waiting_for_verification
from convoy_batch.repo.gitops import GitOpsSnapshot, ReleaseEntry, SetEntry
from convoy_batch.rollout import Outcome
from convoy_batch.rollout.glance import drift_note, verification_note
from convoy_batch.rollout.retire import WAITING
from convoy_batch.rollout.status import short_ref, state_name
from convoy_batch.ticks.runner import select
from convoy_batch.timefmt import format_time


def status_row(
    name: str,
    status: ReleaseStatus,
    error: str | None,
    commit: str | None = None,
    release_set: str | None = None,
) -> dict[str, Any]:
    """What ``status`` prints of one Release: the fields of the Dagster materialization
    (state, reason, message, renderRef, revision, applied, commit) and since, lastHealthy;
    ``drift`` and ``lastDriftCorrection`` as the status file has them (paths, never a
    value), null when unset; ``releaseSet``, the set a member is of (null: none)."""
    attempt, rollout = status.last_attempted, status.rollout
    since = rollout.started_at if rollout else (attempt.time if attempt else None)
    drift, correction = status.drift, status.last_drift_correction
    return {
        "name": name,
        "state": rollout.state.value if rollout else None,
        "reason": attempt.reason if attempt else None,
        "message": attempt.message if attempt else (error or ""),
        "renderRef": attempt.render_ref if attempt else None,
        "revision": attempt.revision if attempt else None,
        "applied": attempt.applied if attempt else False,
        "commit": commit,
        "since": format_time(since) if since else None,
        "lastHealthy": status.last_healthy.render_ref if status.last_healthy else None,
        "drift": drift.model_dump(mode="json", by_alias=True) if drift else None,
        "lastDriftCorrection": (
            correction.model_dump(mode="json", by_alias=True) if correction else None
        ),
        "releaseSet": release_set,
        "verification": (
            status.verification.model_dump(mode="json", by_alias=True)
            if status.verification
            else None
        ),
    }


def last_status_commits(repo: Repo, names: Collection[str]) -> dict[str, str]:
    """Release -> the last commit on HEAD that changed its status file (one ``git log``)."""
    wanted = {f"status/{n}.yaml": n for n in names}
    found: dict[str, str] = {}
    commit = ""
    log = repo.git.log("--format=%H", "--name-only", "HEAD", "--", "status/")
    for line in log.splitlines():
        if len(line) == 40 and "/" not in line:
            commit = line
        elif line in wanted and wanted[line] not in found:
            found[wanted[line]] = commit
    return found


def status_rows(
    repo: Path, state: Path, now: datetime, name: str | None
) -> tuple[list[dict[str, Any]], list[str]]:
    tick = Tick.open(repo, state, now)
    release_set = tick.snapshot.sets.get(name or "")
    if release_set is not None:  # a ReleaseSet: its members
        entries = select(tick, release_set.members) if release_set.members else []
        gone = []
    else:
        entries = select(tick, [name] if name else [])
        # A removed Release is listed while its status file is there (its deletion waits).
        gone = [n for n in gone_names(tick.snapshot, tick.opened) if name in (None, n)]
    commits = last_status_commits(tick.repo.repo, [e.name for e in entries] + gone)
    statuses = {n: tick.status(n) for n in [e.name for e in entries] + gone}
    errors = {e.name: e.error for e in entries}
    rows = [
        status_row(n, s, errors.get(n), commits.get(n), tick.snapshot.set_of(n))
        for n, s in statuses.items()
    ]
    notes = {e.name: _windows(tick.snapshot.clusters, tick.now, e) for e in entries}
    for row in rows:
        row["syncWindows"] = notes.get(row["name"])
    lines = [
        f"{r['name']:<24} {r['state'] or '-':<12} {r['reason'] or 'never reconciled':<22} "
        f"render={short_ref(r['renderRef'])} since={r['since'] or '-'}"
        + (f" ({r['syncWindows']})" if r["syncWindows"] else "")
        + (f" ({note})" if (note := drift_note(statuses[r["name"]])) else "")
        + (f" ({note})" if (note := verification_note(statuses[r["name"]])) else "")
        for r in rows
    ]
    if release_set is not None:
        lines = [_set_line(name or "", release_set), *lines, *release_set.refused]
    return rows, lines


def _set_line(name: str, entry: SetEntry) -> str:
    """``web: ReleaseSet of 2 members (releases/web.yaml)``, and its generation failure."""
    line = f"{name}: ReleaseSet of {len(entry.members)} members ({entry.path})"
    return f"{line}; GenerationFailed: {entry.failed}" if entry.failed else line


def _windows(clusters: Mapping[str, Cluster], now: datetime, entry: ReleaseEntry) -> str | None:
    """The sync windows in force for a Release (None: none, or no Cluster to read)."""
    release = entry.release
    cluster = clusters.get(release.spec.cluster) if release else None
    return window_note(release, cluster, now) if release and cluster else None


def _gate(outcome: Outcome) -> Outcome | None:
    """The outcome when a gate stops or holds the sync (SPEC 6.2, 7)."""
    return outcome if outcome.reason in GATE_REASONS else None


def plan_release(repo: Path, state: Path, now: datetime, name: str) -> tuple[dict[str, Any], str]:
    """What the next reconcile of ``name`` would decide: ``reconcile``'s own ``decide``,
    without ``act``, so nothing is applied, committed or saved."""
    tick = Tick.open(repo, state, now)
    try:
        entries = select(tick, [name])
        return plan_entry(tick, entries[0]) if entries else plan_retirement(tick, name)
    finally:
        tick.sources.close()  # its exports; nothing of the tick is saved


def plan_entry(tick: Tick, entry: ReleaseEntry) -> tuple[dict[str, Any], str]:
    """``plan`` for one Release of ``tick``'s snapshot (``diff`` plans at a revision)."""
    name = entry.name
    if entry.release is None:
        return {"name": name, "error": entry.error}, f"{name}: InvalidRelease: {entry.error}"
    release, status = entry.release, tick.status(name)
    try:
        inventory = tick.inventory(name)
        if inventory.entries:
            cluster = resolve_cluster(tick, release)
            rules = rules_for(release, cluster, tick.programs, tick.health_memo(cluster))
            inventory = observe(
                inventory, tick.deployer(cluster), tick.now, rules, tick.observed_memo(cluster)
            )
        force_at = pending_force_sync(release, status, tick.now, release.name in tick.forced)
    except ConvoyError as exc:
        return _error(name, exc.reason, str(exc))
    decision = decide(begin(tick, release, inventory, force_at))
    outcome, plan = waiting_for_verification(decision.plan, decision.outcome), decision.plan
    if outcome.is_error or plan is None or decision.render is None:
        return _error(name, outcome.reason, outcome.message)
    ref = decision.render.ref
    before = state_name(status.rollout)
    # The rollout the status would get, by the reconcile's own status assembly.
    rollout = tick.desk.next_status(name, release, outcome, inventory, force_at).rollout
    after = state_name(rollout)
    reason = str(rollout.reason) if rollout else ""
    gate = _gate(outcome)
    windows = window_note(release, resolve_cluster(tick, release), tick.now)
    # The render this reconcile sends: the outcome's (a rollback's is the last healthy one).
    applies = outcome.render.ref if outcome.render is not None else ref
    row = {
        "name": name,
        "row": plan.row,
        "condition": plan.condition,
        "applies": applies,
        "action": plan.action.value,
        "from": before,
        "to": after,
        "fromRender": status.rollout.render_ref if status.rollout else None,
        "toRender": rollout.render_ref if rollout else None,
        "reason": reason,
        "renderRef": ref,
        "gate": gate.reason.value if gate else None,
        "outcome": outcome.reason.value,
        "message": outcome.message,
        "syncWindows": windows,
    }
    line = f"{name}: {plan.action.value} {before} -> {after}"
    line += f" ({reason})" if reason else ""
    line += f" render={short_ref(applies)}"
    if applies != ref:
        line += f" (instead of {short_ref(ref)})"
    line += f", because {plan.condition} (row {plan.row})"
    if gate is not None:
        line += f"; stopped by {gate.reason}: {gate.message}"
    else:
        line += f"; outcome {outcome.reason}: {outcome.message}"
    if windows is not None and (gate is None or gate.reason != Reason.WAITING_FOR_SYNC_WINDOW):
        line += f"; {windows}"
    row["verification"], line = _verification(
        tick.stores.state_dir, tick.now, release, status, line
    )
    row["generatedBy"] = generated_by(tick.snapshot, entry)
    if row["generatedBy"] is not None:
        line += f"; {row['generatedBy']}"
    return row, line


def _verification(
    state_dir: Path, now: datetime, release: Release, status: ReleaseStatus, line: str
) -> tuple[dict[str, Any] | None, str]:
    """The analysis of the render under verification as the kept measurements have it
    now (counts, last value, the next measurement), and the plan's line with it."""
    checked = verified(state_dir, release, status, now, promote=False)
    if checked is None or checked.status is None:
        return None, line
    block = checked.status.model_dump(mode="json", by_alias=True)
    at = next_measurement(state_dir, release, status)
    block["nextMeasurement"] = format_time(at) if at is not None else None
    counts = ", ".join(
        f"{a.name} {a.successful} successful {a.failed} failed {a.inconclusive} "
        f"inconclusive {a.errors} errors (last value {a.last_value})"
        for a in checked.status.analyses
    )
    line += f"; verification {checked.status.phase}: {counts}"
    line += f", next measurement at {block['nextMeasurement']}" if at is not None else ""
    return block, line


def generated_by(snapshot: GitOpsSnapshot, entry: ReleaseEntry) -> str | None:
    """How a ReleaseSet member came to be: ``generated by ReleaseSet web
    (releases/web.yaml) for Cluster eu1``; None for a hand-written Release."""
    set_name = snapshot.set_of(entry.name)
    if set_name is None or entry.release is None:
        return None
    cluster = entry.release.spec.cluster
    text = f"generated by ReleaseSet {set_name} ({entry.path}) for Cluster {cluster}"
    failed = snapshot.sets[set_name].failed
    return f"{text}; its generation failed: {failed}" if failed else text


def plan_retirement(tick: Tick, name: str) -> tuple[dict[str, Any], str]:
    """``plan`` for a removed Release: what the next tick does with it (the retirement
    pass's own decision, nothing carried out). A retirement that waits is told by the
    reason its status gets (``DeletionBlocked``, ``DeletionPending``), one that goes by
    its fate and commit subject."""
    run = decide_retirements(tick, RetireOptions(names=(name,)))[0]
    decided = run.decided
    try:
        planned = planned_message(run)
    except ConvoyError as exc:
        return _error(name, exc.reason, str(exc))
    before = state_name(run.prior.rollout)
    held = WAITING.get(decided.fate)
    row = {
        "name": name,
        "action": "Retire",
        "fate": decided.fate.value,
        "from": before,
        "reason": held.value if held is not None else None,
        "message": planned,
    }
    return row, f"{name}: removed from releases/: {held or decided.fate}: {planned}"


def _error(name: str, reason: Reason, message: str) -> tuple[dict[str, Any], str]:
    row = {"name": name, "error": message, "reason": reason.value}
    return row, f"{name}: {reason}: {message}"
