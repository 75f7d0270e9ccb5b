"""A Release's status file (SPEC 10): the rollout, attempts, renders, waves and phases,
conditions, drift and verification. Pure."""

from collections.abc import Collection, Sequence
from enum import StrEnum
from typing import Any, Final, Literal

from convoy_batch.models.base import Model, Time


class RolloutState(StrEnum):
    PROGRESSING = "Progressing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    ROLLED_BACK = "RolledBack"


class Rollout(Model):
    state: RolloutState
    render_ref: str
    started_at: Time
    reason: str
    message: str = ""


class Attempt(Model):
    render_ref: str | None = None
    revision: str | None = None
    time: Time
    applied: bool = False
    reason: str
    message: str = ""

    def same_attempt(self, other: "Attempt | None") -> bool:
        """Equal but for the time: the same attempt seen on a later tick."""
        return other is not None and self.model_copy(update={"time": other.time}) == other


class RenderRecord(Model):
    render_ref: str
    revision: str | None = None
    time: Time


PhaseName = Literal["PreSync", "Sync", "PostSync", "SyncFail"]
"""The hook phases (SPEC 7): PreSync, Sync and PostSync run in that order around the
waves; SyncFail only when a sync fails."""
Phase = int | PhaseName
PRE_SYNC: Final = "PreSync"
SYNC: Final = "Sync"
POST_SYNC: Final = "PostSync"
SYNC_FAIL: Final = "SyncFail"


def is_hook_phase(phase: Phase) -> bool:
    """A hook phase (PreSync, Sync, PostSync, SyncFail), not a sync wave."""
    return isinstance(phase, str)


def phase_label(phase: Phase) -> str:
    return f"wave {phase}" if isinstance(phase, int) else f"{phase} hooks"


def order_phases(waves: Sequence[int], hooks: Collection[Phase]) -> tuple[Phase, ...]:
    """PreSync, Sync, the sorted distinct waves, PostSync: the phases of a sync, the hook
    phases among ``hooks`` (SyncFail is never one)."""
    phases: list[Phase] = [p for p in (PRE_SYNC, SYNC) if p in hooks]
    phases.extend(sorted(set(waves)))
    if POST_SYNC in hooks:
        phases.append(POST_SYNC)
    return tuple(phases)


class WaveStatus(Model):
    wave: Phase
    render_ref: str
    started_at: Time


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(Model):
    type: str
    status: ConditionStatus
    reason: str
    message: str = ""
    last_transition_time: Time


class DriftedObject(Model):
    """One object whose live state differs from what convoy-batch applied: the paths
    (RFC 6901 pointers; ``""`` the whole object, gone), never a value."""

    kind: str
    namespace: str | None = None
    name: str
    paths: tuple[str, ...]

    def describe(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where} {', '.join(p or '(deleted)' for p in self.paths)}"


class DriftReport(Model):
    """``status.drift`` (Report mode): what drifted and is left as it is, since when."""

    objects: tuple[DriftedObject, ...]
    since: Time


class DriftCorrection(Model):
    """``status.lastDriftCorrection`` (Correct mode): the first correction of the last
    drift episode (ticks in a row that found drift), and what it corrected then."""

    time: Time
    objects: tuple[DriftedObject, ...]


DRIFT_FIELDS = frozenset({"drift", "lastDriftCorrection"})


class AnalysisPhase(StrEnum):
    """Where an analysis (and a verification, all of its analyses) stands."""

    RUNNING = "Running"
    SUCCESSFUL = "Successful"
    FAILED = "Failed"
    INCONCLUSIVE = "Inconclusive"


class AnalysisStatus(Model):
    name: str
    phase: AnalysisPhase
    successful: int = 0
    failed: int = 0
    inconclusive: int = 0
    errors: int = 0
    errors_in_a_row: int = 0
    last_value: str | None = None
    message: str = ""


class VerificationStatus(Model):
    """The verification of ``renderRef``: its phase and each analysis's counts, as they
    were when the phase last changed (the state directory keeps every measurement)."""

    render_ref: str
    phase: AnalysisPhase
    analyses: tuple[AnalysisStatus, ...] = ()
    message: str = ""


WHEN_SET_FIELDS = DRIFT_FIELDS | {"verification"}
"""Status keys written only when set (the others: every key, null when unset)."""
"""Status keys written only when set (README, "Drift rules"), after SPEC 10's."""


class ReleaseStatus(Model):
    rollout: Rollout | None = None
    last_attempted: Attempt | None = None
    last_successful: RenderRecord | None = None
    last_healthy: RenderRecord | None = None
    waves: tuple[WaveStatus, ...] = ()
    history: tuple[RenderRecord, ...] = ()
    conditions: tuple[Condition, ...] = ()
    last_handled_force_sync_at: Time | None = None
    drift: DriftReport | None = None
    last_drift_correction: DriftCorrection | None = None
    verification: VerificationStatus | None = None

    def dump_status(self) -> dict[str, Any]:
        """The stored form: every key of SPEC 10, in its order, ``null`` when unset; the
        drift and verification keys only when set."""
        data = self.model_dump(mode="json", by_alias=True)
        return {k: v for k, v in data.items() if v is not None or k not in WHEN_SET_FIELDS}
