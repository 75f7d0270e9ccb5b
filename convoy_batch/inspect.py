"""Read-only views for the CLI: ``status`` rows and ``plan`` (what the next tick would
do). Reads the repository and the state directory; writes nothing.
"""

from datetime import datetime
from pathlib import Path
from typing import Any

from convoy_batch.errors import ConvoyError
from convoy_batch.models import ReleaseStatus
from convoy_batch.observer import observe
from convoy_batch.reconcile import pending_force_sync
from convoy_batch.rollout import pinned_plan, plan_rollout
from convoy_batch.runner import select
from convoy_batch.stages.gates import stage_gates
from convoy_batch.stages.render import stage_render
from convoy_batch.tick import Tick
from convoy_batch.timefmt import format_time


def _short(ref: str | None) -> str:
    return ref.removeprefix("sha256:")[:12] if ref else "-"


def status_row(name: str, status: ReleaseStatus, error: str | None) -> dict[str, Any]:
    attempt, rollout = status.last_attempted, status.rollout
    since = rollout.started_at if rollout else (attempt.time if attempt else None)
    return {
        "name": name,
        "state": rollout.state.value if rollout else None,
        "reason": attempt.reason if attempt else None,
        "message": attempt.message if attempt else (error or ""),
        "renderRef": attempt.render_ref if attempt else None,
        "since": format_time(since) if since else None,
        "lastHealthy": status.last_healthy.render_ref if status.last_healthy else None,
    }


def status_rows(
    repo: Path, state: Path, now: datetime, name: str | None
) -> tuple[list[dict[str, Any]], list[str]]:
    tick = Tick.open(repo, state, now)
    rows = [
        status_row(e.name, tick.status(e.name), e.error)
        for e in select(tick, [name] if name else [])
    ]
    lines = [
        f"{r['name']:<24} {r['state'] or '-':<12} {r['reason'] or 'never reconciled':<22} "
        f"render={_short(r['renderRef'])} since={r['since'] or '-'}"
        for r in rows
    ]
    return rows, lines


def plan_release(repo: Path, state: Path, now: datetime, name: str) -> tuple[dict[str, Any], str]:
    """The plan and gate the next reconcile of ``name`` would make, computed without
    applying, committing or saving anything."""
    tick = Tick.open(repo, state, now)
    entry = select(tick, [name])[0]
    if entry.release is None:
        return {"name": name, "error": entry.error}, f"{name}: InvalidRelease: {entry.error}"
    release, status = entry.release, tick.status(name)
    try:
        rendered = stage_render(tick, release)
        inventory = tick.stores.inventories.load(name)
        if inventory.entries:
            inventory = observe(inventory, tick.deployer(rendered.cluster), now)
        ref = rendered.render.ref
        plan = (
            pinned_plan()
            if release.spec.pin
            else plan_rollout(release.spec, status, ref, inventory.entries, now)
        )
        force = pending_force_sync(tick, release, status) is not None
        gate = stage_gates(tick, release, rendered.cluster, rendered.render, force)
    except ConvoyError as exc:
        return {
            "name": name,
            "error": str(exc),
            "reason": exc.reason,
        }, f"{name}: {exc.reason}: {exc}"
    before = status.rollout.state.value if status.rollout else "none"
    after = plan.rollout.state.value if plan.rollout else "none"
    reason = plan.rollout.reason if plan.rollout else ""
    row = {
        "name": name,
        "row": plan.row,
        "action": plan.action.value,
        "from": before,
        "to": after,
        "reason": reason,
        "renderRef": ref,
        "gate": gate.reason if gate else None,
    }
    line = f"{name}: {plan.action.value} {before} -> {after}"
    line += f" ({reason})" if reason else ""
    line += f" render={_short(ref)} [row {plan.row}]"
    line += f"; stopped by {gate.reason}: {gate.message}" if gate else ""
    return row, line
