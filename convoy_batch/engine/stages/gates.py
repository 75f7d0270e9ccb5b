"""``stage_gates`` (SPEC 6.2): the manual sync gate, the dependency gate, the sync
window gate, the cluster wave gate, then a ReleaseSet's ``maxInFlight``.

A gate that stops the reconcile is a value (a ``GateDecision`` that stops: reason and
message), not an exception.
Reads the run's snapshot and the statuses of this tick (``engine/run.py``); the dependency
gate also a dependency's render of the tick (``run.render_of``, made once a tick), and a
window's zone comes from the zone database (``timefmt.zone``).
"""

from datetime import datetime

from convoy_batch.engine.run import ReleaseRun
from convoy_batch.errors import ConvoyError, InvalidSyncWindow
from convoy_batch.models import (
    Cluster,
    Release,
    ReleaseStatus,
    RolloutState,
    SyncMode,
)
from convoy_batch.reasons import Reason
from convoy_batch.renderers.pipeline import Render
from convoy_batch.repo.gitops import GitOpsSnapshot
from convoy_batch.rollout import GateDecision, GateKind
from convoy_batch.rollout.depends import missing
from convoy_batch.rollout.windows import Window, WindowState, parse_window, window_state
from convoy_batch.timefmt import zone


def manual_gate(
    release: Release, force_pending: bool, status: ReleaseStatus, render: Render
) -> GateDecision | None:
    """A Manual Release applies only on a forced sync. Once one synced R, it is in sync
    (the outcome that sync gave, so the status does not change) until a new render
    arrives, which waits for the next forced sync."""
    if release.spec.sync_policy.mode != SyncMode.MANUAL or force_pending:
        return None
    attempt = status.last_attempted
    if attempt is not None and _synced(status, render):
        return _stop(Reason.SYNCED, attempt.message, applied=True)
    return _stop(
        Reason.WAITING_FOR_MANUAL_SYNC, "syncPolicy.mode is Manual: waiting for a forced sync"
    )


def dependency_gate(run: ReleaseRun, render: Render) -> GateDecision | None:
    """A new render (a first rollout included) waits until every dependency is ready:
    Succeeded (or an accepted state) at its render of this tick. Re-applying the render
    the Release already synced (drift correction) is not held."""
    release, status = run.release, run.status
    if not release.spec.depends_on or _synced(status, render):
        return None
    waiting = []
    for dependency in release.spec.depends_on:
        entry = run.snapshot.releases.get(dependency.name)
        other = entry.release if entry is not None else None
        if other is None:
            waiting.append(f"{dependency.name} is not a valid Release")
            continue
        try:
            ref = run.render_of(other).render.ref
        except ConvoyError as exc:
            waiting.append(f"{dependency.name} cannot be rendered ({exc.reason})")
            continue
        policy = other.spec.failure_policy is not None
        why = missing(dependency, run.shared.status_of(dependency.name), ref, policy)
        if why is not None:
            waiting.append(why)
    if not waiting:
        return None
    return _stop(Reason.WAITING_FOR_DEPENDENCY, "waiting for dependencies: " + "; ".join(waiting))


def _synced(status: ReleaseStatus, render: Render) -> bool:
    """The last attempt applied this render (its sync succeeded)."""
    attempt = status.last_attempted
    return (
        attempt is not None
        and attempt.applied
        and attempt.reason == Reason.SYNCED
        and attempt.render_ref == render.ref
    )


def windows_of(release: Release, cluster: Cluster) -> list[Window]:
    """The sync windows of the Release and its Cluster, read; InvalidSyncWindow (one line
    naming the file and field) when one does not parse."""
    found = [
        (f"clusters/{cluster.name}.yaml: spec.syncWindows[{i}]", raw)
        for i, raw in enumerate(cluster.spec.sync_windows)
    ]
    found += [
        (f"releases/{release.name}.yaml: spec.syncWindows[{i}]", raw)
        for i, raw in enumerate(release.spec.sync_windows)
    ]
    try:
        return [parse_window(raw, where, zone) for where, raw in found]
    except ValueError as exc:
        raise InvalidSyncWindow(str(exc)) from None


def window_note(release: Release, cluster: Cluster, now: datetime) -> str | None:
    """The sync windows in force for ``plan`` and ``status``: each window and whether the
    Release may sync now, else when it opens (None: no window)."""
    try:
        windows = windows_of(release, cluster)
    except InvalidSyncWindow as exc:
        return str(exc)
    if not windows:
        return None
    state = window_state(windows, now)
    names = ", ".join(f"{w.label} ({w.kind})" if w.name else w.label for w in windows)
    return f"sync windows {names}: open" if state.open else state.message()


def window_gate(
    state: WindowState, status: ReleaseStatus, render: Render, force_pending: bool
) -> GateDecision | None:
    """A closed sync window (``state``: the Release's windows at the tick's ``now``) holds
    the render (it stays pending: the Release is due when the window opens). A Release
    whose last attempt synced this render is in sync: the outcome it had, so its status
    does not change while the window is closed. A forced sync passes when every window
    that keeps it closed allows a manual sync."""
    if state.open:
        return None
    if force_pending and all(w.manual_sync for w in state.closing):
        return None
    attempt = status.last_attempted
    if attempt is not None and _synced(status, render):
        return _stop(Reason.SYNCED, attempt.message, applied=True)
    return _stop(Reason.WAITING_FOR_SYNC_WINDOW, state.message())


def cluster_wave_gate(run: ReleaseRun, cluster: Cluster, render: Render) -> GateDecision | None:
    """Every Release of the same convoy on a lower-wave Cluster must be healthy at R's
    revision."""
    release = run.release
    convoy = release.spec.convoy
    if convoy is None:
        return None
    for name, entry in sorted(run.snapshot.releases.items()):
        other = entry.release
        if other is None or name == release.name or other.spec.convoy != convoy:
            continue
        other_cluster = run.snapshot.clusters.get(other.spec.cluster)
        if other_cluster is None or other_cluster.spec.wave >= cluster.spec.wave:
            continue
        healthy = run.shared.status_of(name).last_healthy
        if healthy is None or healthy.revision != render.revision:
            return _stop(
                Reason.WAITING_FOR_CLUSTER_WAVE,
                f"convoy {convoy}: {name} (cluster wave {other_cluster.spec.wave}) is not yet "
                f"healthy at revision {(render.revision or '')[:12]}",
            )
    return None


def max_in_flight_gate(run: ReleaseRun, cluster: Cluster, render: Render) -> GateDecision | None:
    """A ReleaseSet member's new render (a first rollout included) starts only while
    fewer than ``maxInFlight`` other members of its set on Clusters of the same wave are
    in flight (:func:`_in_flight`) or started in this tick; one already rolling out this
    render goes on.
    A start takes its place under the tick's lock (members may reconcile side by side)."""
    release, snapshot, status_of = run.release, run.snapshot, run.shared.status_of
    set_name = snapshot.set_of(release.name)
    entry = snapshot.sets.get(set_name or "")
    if set_name is None or entry is None or entry.release_set.spec.max_in_flight is None:
        return None
    status = run.status
    if _synced(status, render) or _in_flight(status) == render.ref:
        return None
    wave = cluster.spec.wave
    peers = [m for m in entry.members if m != release.name and _wave_of(snapshot, m) == wave]
    limit = entry.release_set.spec.max_in_flight
    allowed = in_flight_limit(limit, len(peers) + 1)

    def flying(started: set[str]) -> list[str]:
        return sorted(m for m in peers if m in started or _in_flight(status_of(m)))

    found = run.shared.take_flight(set_name, release.name, flying, allowed)
    if found:
        return _stop(
            Reason.WAITING_FOR_MAX_IN_FLIGHT,
            f"ReleaseSet {set_name}: {len(found)} of {len(peers) + 1} members of "
            f"cluster wave {wave} not yet Succeeded (maxInFlight {limit}): " + ", ".join(found),
        )
    return None


def in_flight_limit(limit: int | str, members: int) -> int:
    """``maxInFlight`` as a number of members: a share is rounded down, at least 1."""
    if isinstance(limit, str):
        return max(1, members * int(limit.removesuffix("%")) // 100)
    return limit


def _wave_of(snapshot: GitOpsSnapshot, name: str) -> int | None:
    entry = snapshot.releases.get(name)
    if entry is None or entry.release is None:
        return None
    cluster = snapshot.clusters.get(entry.release.spec.cluster)
    return cluster.spec.wave if cluster is not None else None


def _in_flight(status: ReleaseStatus) -> str | None:
    """The render a Release holds a place of ``maxInFlight`` for: one it applied and is
    rolling out (a gate that held it before any apply is not), or one that rolled back or
    failed (a failure stops its wave, as a failed canary does, until a render succeeds)."""
    rollout, applied = status.rollout, status.last_successful
    if rollout is None:
        return None
    if rollout.state in (RolloutState.ROLLED_BACK, RolloutState.FAILED):
        return rollout.render_ref
    if rollout.state == RolloutState.PROGRESSING and applied is not None:
        return rollout.render_ref if applied.render_ref == rollout.render_ref else None
    return None


def _stop(reason: Reason, message: str, applied: bool = False) -> GateDecision:
    return GateDecision(GateKind.STOP, reason=reason, message=message, applied=applied)


def stage_gates(
    run: ReleaseRun, cluster: Cluster, render: Render, windows: WindowState
) -> GateDecision | None:
    """The first gate that stops the sync (None: it proceeds); ``windows``: the state of
    the Release's sync windows at the run's ``now`` (read once by its reconcile)."""
    force_pending = run.force_pending
    return (
        manual_gate(run.release, force_pending, run.status, render)
        or dependency_gate(run, render)
        or window_gate(windows, run.status, render, force_pending)
        or cluster_wave_gate(run, cluster, render)
        or max_in_flight_gate(run, cluster, render)
    )
