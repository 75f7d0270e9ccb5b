"""One vocabulary: the error reasons of the outcome are exactly the reasons of the typed
errors, one class each; the CLI reference (docs/reference/cli.md) lists every outcome
reason; the enums keep the texts that status files, JSON, YAML and wake-up keys hold."""

import json
import re
from pathlib import Path

import yaml

import convoy_batch
from convoy_batch import errors
from convoy_batch.models import Attempt, ReleaseStatus
from convoy_batch.reasons import (
    DRIFT_REASONS,
    ERROR_REASONS,
    GATE_REASONS,
    OUTCOME_REASONS,
    Reason,
)
from convoy_batch.rollout import Outcome, RenderId, RollBack
from convoy_batch.rollout.due import DueReason
from convoy_batch.ticks.wakeups import WAKE_REASONS
from convoy_batch.timefmt import parse_time

DOCS = Path(__file__).resolve().parents[2] / "docs"
CLI_REFERENCE = DOCS / "reference" / "cli.md"
DRIFT_GUIDE = DOCS / "guides" / "drift.md"


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def _documented_reasons() -> set[str]:
    listed = CLI_REFERENCE.read_text().split("- Outcome reasons:", 1)[1].split("\n- ", 1)[0]
    return set(re.findall(r"`(\w+)`", listed))


def test_the_error_reasons_are_the_reasons_of_the_typed_errors() -> None:
    classes = _subclasses(errors.ConvoyError)
    reasons = [cls.reason for cls in classes]

    assert all(isinstance(reason, Reason) for reason in reasons)
    assert len(set(reasons)) == len(classes), "two error classes share a reason"
    assert set(reasons) == ERROR_REASONS


def test_every_outcome_that_is_an_error_has_an_error_reason() -> None:
    for reason in Reason:
        assert Outcome(None, False, reason).is_error == (reason in ERROR_REASONS)


def test_the_cli_reference_lists_every_outcome_reason() -> None:
    assert _documented_reasons() >= {str(reason) for reason in OUTCOME_REASONS}


def test_gate_reasons_are_outcome_reasons_and_not_errors() -> None:
    assert GATE_REASONS <= OUTCOME_REASONS - ERROR_REASONS


def test_a_reason_is_stored_as_its_plain_text() -> None:
    attempt = Attempt(time=parse_time("2026-11-29T12:00:00Z"), reason=Reason.ROLLED_BACK)
    dumped = ReleaseStatus(last_attempted=attempt).dump_status()

    assert type(attempt.reason) is str
    assert type(dumped["lastAttempted"]["reason"]) is str
    assert "reason: RolledBack\n" in yaml.safe_dump(dumped)
    assert json.dumps(Reason.WAVE_TIMEOUT) == '"WaveTimeout"'


def test_the_reason_texts_are_unchanged() -> None:
    assert {str(r) for r in Reason} == {
        "Synced", "RolledBack", "WaitingForWaveHealth", "WaitingForManualSync",
        "WaitingForClusterWave", "WaveTimeout", "InvalidRelease", "SourceFailed",
        "RenderFailed", "ClusterNotFound", "ClusterUnavailable", "Forbidden", "OwnershipConflict",
        "DryRunFailed",
        "ApplyFailed", "PruneFailed", "StateFailed", "NewRender", "Healthy", "Unhealthy",
        "ProgressDeadlineExceeded", "DeletionPending", "DeletionBlocked", "Deleted", "Orphaned",
        "WaitingForSyncWindow", "InvalidSyncWindow", "WaitingForDependency",
        "WaitingForMaxInFlight", "WaitingForVerification", "VerificationFailed",
        "Drifted", "DriftResolved", "DriftCorrected",
    }  # fmt: skip


def test_drift_reasons_are_no_outcome_s_and_the_drift_guide_names_them() -> None:
    assert not DRIFT_REASONS & OUTCOME_REASONS
    section = DRIFT_GUIDE.read_text().split("# Drift rules", 1)[1]
    assert all(f"`{reason}`" in section for reason in DRIFT_REASONS)


def test_the_wake_up_causes_keep_their_texts() -> None:
    assert {str(r) for r in WAKE_REASONS} == {
        "health changed", "deadline passed", "release changed", "source changed",
        "forced sync", "never reconciled", "sync window opened", "dependency changed",
        "member in flight changed", "measurement due",
    }  # fmt: skip
    assert {str(r) for r in set(DueReason) - WAKE_REASONS} == {
        "full resync", "interval", "invalid release file", "invalid force-sync annotation",
    }  # fmt: skip
    assert f"{DueReason.FORCED_SYNC}:x" == "forced sync:x"  # as in a wake-up key


def test_the_rolled_back_outcome_is_built_in_one_place() -> None:
    package = Path(convoy_batch.__file__).parent
    builders = {
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "Reason.ROLLED_BACK" in path.read_text()
    }
    assert builders == {"rollout/status.py"}


def test_a_failed_rollback_keeps_r_as_the_attempt_and_says_why() -> None:
    r, back = RenderId("sha256:r", "rev-r"), RenderId("sha256:good", "rev-good")
    hold = RollBack(None, r, "holding last healthy render: Unhealthy")
    timeout = RollBack(None, r, "wave 1 not healthy", cause="wave 1 not healthy", persisted=r)

    assert (hold.applied(back).render, hold.applied(back).applied) == (back, True)
    assert hold.failed("rollback failed: x") == Outcome(
        None, False, Reason.ROLLED_BACK, "rollback failed: x", r
    )
    assert timeout.failed("rollback failed: x").message == "wave 1 not healthy; rollback failed: x"
    assert timeout.failed("rollback failed: x").persisted == r
