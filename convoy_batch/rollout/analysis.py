"""Verification by metrics: what a render's measurements conclude, and when the next one
is due (README "Verification").

Pure: measurements and times come in as values; the engine takes the measurements
(``engine.stages.verify``) and keeps them in the state directory.

An analysis, as Argo Rollouts judges one: ``failed > failureLimit`` is Failed;
``inconclusive > inconclusiveLimit`` is Inconclusive (held: a forced sync promotes it);
``count`` judged measurements within those limits are Successful; anything else is
Running. A measurement that errs (the provider or the condition failed) is judged
neither way: it never counts toward a verdict, so a metrics outage holds the render and
never rolls it back. A verification is its analyses together: Failed when one failed,
else Inconclusive when one is, else Successful when all are, else Running.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from convoy_batch.models import (
    Analysis,
    AnalysisPhase,
    AnalysisStatus,
    Verification,
    VerificationStatus,
)
from convoy_batch.reasons import Reason
from convoy_batch.rollout.verdict import Verdict, VerdictResult


class Judged(StrEnum):
    """What one measurement says."""

    SUCCESSFUL = "Successful"
    FAILED = "Failed"
    INCONCLUSIVE = "Inconclusive"
    ERROR = "Error"


@dataclass(frozen=True)
class Measurement:
    at: datetime
    judged: Judged
    value: str | None = None
    """The result as text (None: there was none, the provider failed)."""
    message: str = ""


def conclude(analysis: Analysis, measurements: Sequence[Measurement]) -> AnalysisStatus:
    """The analysis's phase and counts from its measurements, oldest first."""
    count = {j: sum(1 for m in measurements if m.judged == j) for j in Judged}
    in_a_row = 0
    for m in reversed(measurements):
        if m.judged != Judged.ERROR:
            break
        in_a_row += 1
    values = [m.value for m in measurements if m.value is not None]
    last = values[-1] if values else None
    judged = count[Judged.SUCCESSFUL] + count[Judged.FAILED] + count[Judged.INCONCLUSIVE]
    failed, inconclusive = count[Judged.FAILED], count[Judged.INCONCLUSIVE]
    if failed > analysis.failure_limit:
        phase = AnalysisPhase.FAILED
        shown = ", ".join(str(m.value) for m in measurements if m.judged == Judged.FAILED)
        message = (
            f"{analysis.name}: {failed} of {judged} measurements failed "
            f"(failureLimit {analysis.failure_limit}), failed values {shown}"
        )
    elif inconclusive > analysis.inconclusive_limit:
        phase = AnalysisPhase.INCONCLUSIVE
        message = (
            f"{analysis.name}: {inconclusive} of {judged} measurements inconclusive "
            f"(inconclusiveLimit {analysis.inconclusive_limit}), last value {last}"
        )
    elif judged >= analysis.count:
        phase = AnalysisPhase.SUCCESSFUL
        message = f"{analysis.name}: {judged} measurements, last value {last}"
    else:  # a message that stays while it runs: a status changes with the phase only
        phase = AnalysisPhase.RUNNING
        message = f"{analysis.name}: Running, {analysis.count} measurements to conclude"
        if in_a_row:
            message = f"{analysis.name}: Running, measurements fail: {measurements[-1].message}"
    return AnalysisStatus(
        name=analysis.name,
        phase=phase,
        successful=count[Judged.SUCCESSFUL],
        failed=failed,
        inconclusive=inconclusive,
        errors=count[Judged.ERROR],
        errors_in_a_row=in_a_row,
        last_value=last,
        message=message,
    )


def next_due(
    analysis: Analysis,
    measurements: Sequence[Measurement],
    started_at: datetime,
    polled: datetime | None = None,
) -> datetime | None:
    """When the analysis's next measurement is due (None: it has concluded):
    ``initialDelay`` after every object became Current, then every ``interval`` after
    the last measurement, or the last look that found nothing to measure (``polled``)."""
    if conclude(analysis, measurements).phase != AnalysisPhase.RUNNING:
        return None
    last = max([m.at for m in measurements[-1:]] + ([polled] if polled else []), default=None)
    if last is None:
        return started_at + analysis.initial_delay
    return last + analysis.interval


def verify(
    spec: Verification, render_ref: str, measurements: Mapping[str, Sequence[Measurement]]
) -> VerificationStatus:
    """The verification of ``render_ref``: each analysis concluded, and all together."""
    analyses = tuple(conclude(a, measurements.get(a.name, ())) for a in spec.analyses)
    phases = {a.phase for a in analyses}
    for phase in (AnalysisPhase.FAILED, AnalysisPhase.INCONCLUSIVE):
        if phase in phases:
            message = "; ".join(a.message for a in analyses if a.phase == phase)
            return VerificationStatus(
                render_ref=render_ref, phase=phase, analyses=analyses, message=message
            )
    if phases == {AnalysisPhase.SUCCESSFUL}:
        phase = AnalysisPhase.SUCCESSFUL
    else:
        phase = AnalysisPhase.RUNNING
    message = "; ".join(a.message for a in analyses)
    return VerificationStatus(
        render_ref=render_ref, phase=phase, analyses=analyses, message=message
    )


def time_in_error(measurements: Mapping[str, Sequence[Measurement]], now: datetime) -> timedelta:
    """How long, all told, the latest measurement of an analysis was an error: from an
    error to the next measurement that was not, or to ``now`` (the longest of the
    analyses'): an observer outage, which the progress deadline does not count."""
    longest = timedelta(0)
    for ms in measurements.values():
        total, since = timedelta(0), None
        for m in ms:
            erred = m.judged == Judged.ERROR
            if erred and since is None:
                since = m.at
            elif not erred and since is not None:
                total += m.at - since
                since = None
        if since is not None:
            total += now - since
        longest = max(longest, total)
    return longest


def in_error(measurements: Mapping[str, Sequence[Measurement]]) -> bool:
    """The latest measurement of some analysis erred: an observer outage, during which
    the progress deadline does not run out."""
    return any(ms and ms[-1].judged == Judged.ERROR for ms in measurements.values())


@dataclass(frozen=True)
class Verified:
    """What the state directory holds of a render's verification."""

    status: VerificationStatus | None
    """None: not begun (its objects were never all Current at once)."""
    erring: bool = False
    """The latest measurement of an analysis erred (see :func:`in_error`)."""
    promote: bool = False
    """A forced sync promotes an Inconclusive verification."""
    error_time: timedelta = timedelta(0)
    """How long the latest measurement has been an error, all told (see
    :func:`time_in_error`): the progress deadline is that much later."""


WAITING = "waiting for verification"
PROMOTED = "promoted by a forced sync"


def judge(
    result: VerdictResult,
    spec: Verification | None,
    verified: Verified | None,
    deadline_passed: bool,
) -> VerdictResult:
    """verdict(R) with the verification: a Healthy render is Healthy once its analyses
    succeeded (or a forced sync promoted them, inconclusive), Unhealthy
    (``VerificationFailed``) once one failed, else Pending, or Unhealthy
    (``ProgressDeadlineExceeded``) past the deadline unless the latest measurement erred."""
    if spec is None or result.verdict != Verdict.HEALTHY:
        return result
    status = verified.status if verified is not None else None
    phase = status.phase if status is not None else AnalysisPhase.RUNNING
    if phase == AnalysisPhase.SUCCESSFUL:
        return result
    message = status.message if status is not None else "not begun"
    if phase == AnalysisPhase.FAILED:
        return VerdictResult(Verdict.UNHEALTHY, Reason.VERIFICATION_FAILED, message)
    if phase == AnalysisPhase.INCONCLUSIVE and verified is not None and verified.promote:
        return VerdictResult(Verdict.HEALTHY, message=f"{PROMOTED}: {message}")
    if deadline_passed and not (verified is not None and verified.erring):
        cause = Reason.PROGRESS_DEADLINE_EXCEEDED
        return VerdictResult(Verdict.UNHEALTHY, cause, f"verification by the deadline: {message}")
    return VerdictResult(Verdict.PENDING, message=f"{WAITING}: {message}")
