"""One notification event: what one status commit says about one Release.

Pure: built from the status before and after the commit (no I/O, no clock). The event
is what the outbox stores and what every provider's payload is made from; it holds no
URL and no token.
"""

from enum import StrEnum

from convoy_batch.models import Model, ReleaseStatus, RolloutState
from convoy_batch.reasons import DRIFT_REASONS, ERROR_REASONS, Reason
from convoy_batch.rollout.retire import parse_retired
from convoy_batch.rollout.status import drift_lines, state_of, transition, written_at
from convoy_batch.timefmt import format_time


class Severity(StrEnum):
    """``info``: every event; ``error``: a rollback, a failed rollout, an error reason."""

    INFO = "info"
    ERROR = "error"


_FAILED_STATES = {RolloutState.ROLLED_BACK.value, RolloutState.FAILED.value}
_ERRORS = {r.value for r in ERROR_REASONS}


class Event(Model):
    """A status commit of one Release, as the notifications tell it."""

    commit: str
    """The status commit's SHA."""
    release: str
    cluster: str | None = None
    """The Release's Cluster (None: the Release file is gone or invalid)."""
    previous_state: str
    """The rollout state before: a state name, ``-`` (no rollout) or ``none`` (no status)."""
    state: str
    reason: str
    """The rollout's reason on a transition (a new state or a new render), else the
    outcome's."""
    outcome: str
    """The outcome reason of the attempt (``lastAttempted.reason``)."""
    message: str = ""
    render_ref: str | None = None
    """The rollout's render, else the attempt's."""
    revision: str | None = None
    """The source revision of that render (a rolled-back render's own, not the last
    healthy one that was applied again)."""
    time: str
    """When the tick that wrote the status ran."""

    @property
    def id(self) -> str:
        """The same for every provider and every attempt: receivers may drop repeats."""
        return f"{self.commit}/{self.release}"

    @property
    def transition(self) -> bool:
        return self.previous_state != self.state

    @property
    def severity(self) -> Severity:
        failed = self.transition and self.state in _FAILED_STATES
        return Severity.ERROR if failed or self.outcome in _ERRORS else Severity.INFO

    def summary(self) -> str:
        """One line a person reads (the Slack text, a commit status's description)."""
        where = f"{self.release} ({self.cluster})" if self.cluster else self.release
        if self.reason in DRIFT_REASONS and not self.transition:  # the drift alone
            head = f"{where}: {self.reason}"
        elif self.transition or self.reason != self.outcome:
            head = f"{where}: {self.previous_state} -> {self.state} ({self.reason})"
        else:
            head = f"{where}: {self.outcome}"
        return f"{head}: {self.message}" if self.message else head


def event_of(
    commit: str,
    release: str,
    cluster: str | None,
    before: ReleaseStatus | None,
    after: ReleaseStatus,
    fallback_time: str,
) -> Event:
    """The event of the status commit ``commit`` that changed ``before`` into ``after``."""
    old, new, reason = transition(before, after)
    attempt, rollout = after.last_attempted, after.rollout
    written = written_at(after)
    message = attempt.message if attempt else ""
    if reason in DRIFT_REASONS:  # a change of the drift fields alone: what drifted
        message = "; ".join(drift_lines(after, Reason(reason))) or "no drift left"
    return Event(
        commit=commit,
        release=release,
        cluster=cluster,
        previous_state=old,
        state=new,
        reason=reason,
        outcome=attempt.reason if attempt else "-",
        message=message,
        render_ref=rollout.render_ref if rollout else attempt.render_ref if attempt else None,
        revision=_revision(after),
        time=format_time(written) if written else fallback_time,
    )


def _revision(status: ReleaseStatus) -> str | None:
    """The revision of the rollout's render (found among the status's records), else
    the attempt's."""
    attempt, rollout = status.last_attempted, status.rollout
    if rollout is None:
        return attempt.revision if attempt else None
    records = [attempt, status.last_successful, status.last_healthy, *status.history]
    for record in records:
        if record is not None and record.render_ref == rollout.render_ref:
            return record.revision
    return None


def retired_event(
    commit: str,
    release: str,
    cluster: str | None,
    before: ReleaseStatus | None,
    subject: str,
    time: str,
) -> Event | None:
    """The event of ``commit``, which removed a retired Release's status file
    (``Deleted`` or ``Orphaned``, read from its ``subject``); None for another removal."""
    found = parse_retired(subject)
    if found is None:
        return None
    state, detail = found
    return Event(
        commit=commit,
        release=release,
        cluster=cluster,
        previous_state=state_of(before),
        state=state,
        reason=state,
        outcome=state,
        message=detail,
        time=time,
    )
