"""The reasons a status carries (SPEC 4-7), as one enum.

Pure: no I/O, imports nothing of the project, so ``rollout/``, the stages and the typed
errors of :mod:`convoy_batch.errors` share it. A member is a ``str``: status files,
JSON and YAML hold its value, the same text as before it was an enum.
"""

from enum import StrEnum


class Reason(StrEnum):
    """Outcome reasons (``lastAttempted.reason``) and rollout reasons (``rollout.reason``)."""

    # Outcome reasons that are not errors (SPEC 4).
    SYNCED = "Synced"
    ROLLED_BACK = "RolledBack"
    WAITING_FOR_WAVE_HEALTH = "WaitingForWaveHealth"
    WAITING_FOR_MANUAL_SYNC = "WaitingForManualSync"
    WAITING_FOR_CLUSTER_WAVE = "WaitingForClusterWave"
    WAVE_TIMEOUT = "WaveTimeout"
    """Also the rollout reason of a wave timeout (SPEC 7)."""
    WAITING_FOR_SYNC_WINDOW = "WaitingForSyncWindow"
    """A closed sync window holds the Release's render (README, "Sync windows")."""
    WAITING_FOR_DEPENDENCY = "WaitingForDependency"
    """A dependency (``dependsOn``) is not ready: the Release's new render waits."""
    WAITING_FOR_MAX_IN_FLIGHT = "WaitingForMaxInFlight"
    """A ReleaseSet member's new render waits: ``maxInFlight`` members of its Cluster
    wave are rolling out (README, "ReleaseSets")."""
    WAITING_FOR_VERIFICATION = "WaitingForVerification"
    """Every object is Current, the analyses have not concluded (or are inconclusive,
    held until a forced sync promotes the render; README, "Verification")."""
    DELETION_BLOCKED = "DeletionBlocked"
    """A removed Release held by the mass-deletion guard (README, "Deleting a Release")."""
    DELETED = "Deleted"
    """A removed Release's objects deleted (or adopted), its status file removed."""
    ORPHANED = "Orphaned"
    """A removed Release's objects left as they are, its status file removed."""

    # Error reasons: one per typed error of ``convoy_batch.errors`` (exit 1).
    INVALID_RELEASE = "InvalidRelease"
    SOURCE_FAILED = "SourceFailed"
    RENDER_FAILED = "RenderFailed"
    CLUSTER_NOT_FOUND = "ClusterNotFound"
    CLUSTER_UNAVAILABLE = "ClusterUnavailable"
    FORBIDDEN = "Forbidden"
    OWNERSHIP_CONFLICT = "OwnershipConflict"
    DRY_RUN_FAILED = "DryRunFailed"
    APPLY_FAILED = "ApplyFailed"
    PRUNE_FAILED = "PruneFailed"
    STATE_FAILED = "StateFailed"
    DELETION_PENDING = "DeletionPending"
    INVALID_SYNC_WINDOW = "InvalidSyncWindow"

    # Reasons of a status change that moved only the drift fields (README, "Drift
    # rules"): a commit's subject, a notification's reason; never an outcome's.
    DRIFTED = "Drifted"
    DRIFT_RESOLVED = "DriftResolved"
    DRIFT_CORRECTED = "DriftCorrected"

    # Rollout reasons only (SPEC 5, 6.1).
    NEW_RENDER = "NewRender"
    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"
    PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
    VERIFICATION_FAILED = "VerificationFailed"
    """An analysis failed beyond its ``failureLimit`` (README, "Verification")."""


ERROR_REASONS: frozenset[Reason] = frozenset(
    {
        Reason.INVALID_RELEASE,
        Reason.SOURCE_FAILED,
        Reason.RENDER_FAILED,
        Reason.CLUSTER_NOT_FOUND,
        Reason.CLUSTER_UNAVAILABLE,
        Reason.FORBIDDEN,
        Reason.OWNERSHIP_CONFLICT,
        Reason.DRY_RUN_FAILED,
        Reason.APPLY_FAILED,
        Reason.PRUNE_FAILED,
        Reason.STATE_FAILED,
        Reason.DELETION_PENDING,
        Reason.INVALID_SYNC_WINDOW,
    }
)
"""The outcome reasons that are errors: exactly the ``reason`` of each typed error (a
test ties the two together)."""

ROLLOUT_ONLY_REASONS: frozenset[Reason] = frozenset(
    {
        Reason.NEW_RENDER,
        Reason.HEALTHY,
        Reason.UNHEALTHY,
        Reason.PROGRESS_DEADLINE_EXCEEDED,
        Reason.VERIFICATION_FAILED,
    }
)
"""Reasons of ``rollout`` and its condition that are never an outcome's."""

DRIFT_REASONS: frozenset[Reason] = frozenset(
    {Reason.DRIFTED, Reason.DRIFT_RESOLVED, Reason.DRIFT_CORRECTED}
)
"""Reasons of a change of the drift fields alone: a commit's and an event's, never an
outcome's."""

OUTCOME_REASONS: frozenset[Reason] = frozenset(Reason) - ROLLOUT_ONLY_REASONS - DRIFT_REASONS
"""Every reason an outcome (``lastAttempted.reason``) may carry (SPEC 4)."""

GATE_REASONS: frozenset[Reason] = frozenset(
    {
        Reason.WAITING_FOR_MANUAL_SYNC,
        Reason.WAITING_FOR_CLUSTER_WAVE,
        Reason.WAITING_FOR_WAVE_HEALTH,
        Reason.WAVE_TIMEOUT,
        Reason.WAITING_FOR_SYNC_WINDOW,
        Reason.WAITING_FOR_DEPENDENCY,
        Reason.WAITING_FOR_MAX_IN_FLIGHT,
    }
)
"""Outcome reasons of a gate that stopped or held the sync (SPEC 6.2, 7)."""
