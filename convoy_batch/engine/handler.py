"""``sync_handler`` (SPEC 10): the status one outcome gives, assembled in one function
(the pure ``rollout.assemble_status``), and its commit when it changed, at the tick's
:class:`StatusDesk`; what a tick reports of each Release (:class:`Handled`,
:func:`describe`).

Does I/O through the tick's status store (the commit is queued for the tick's batch).
"""

import logging
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from convoy_batch.engine.shared import Shared
from convoy_batch.engine.stages.verify import status_block, verified
from convoy_batch.models import Release, ReleaseInventory, ReleaseStatus
from convoy_batch.reasons import Reason
from convoy_batch.rollout import Outcome, Verdict, assemble_status, commit_message, render_verdict
from convoy_batch.rollout.status import NO_VALUE, drifted_line, short_ref, state_of, with_note
from convoy_batch.state.operator_files import without_state_dir
from convoy_batch.status.store import StatusStore
from convoy_batch.timefmt import format_time

log = logging.getLogger("convoy_batch")


@dataclass(frozen=True)
class Committed:
    """A status commit once its batch is written: what its Future gives, as plain data
    (a report that crosses a process boundary)."""

    sha: str | None

    def result(self) -> str | None:
        return self.sha


@dataclass(frozen=True)
class Handled:
    """What ``sync_handler`` did with one outcome."""

    name: str
    outcome: Outcome
    status: ReleaseStatus
    committed: "Future[str | None] | Committed | None"
    """The status commit, made in the background during a tick."""
    prior: ReleaseStatus = field(default_factory=ReleaseStatus)
    """The status before this reconcile."""

    @property
    def changed(self) -> bool:
        """The status changed and its commit was written: a transition, an apply, a new
        error. Waits for the commit (ask once the tick's batch is written): a status that
        another tick committed first, or whose batch was not written, did not change."""
        return self.commit is not None

    @property
    def commit(self) -> str | None:
        """The status commit's SHA (waits for it); None when nothing changed."""
        return self.committed.result() if self.committed is not None else None

    def settled(self) -> "Handled":
        """This outcome with its commit known (waits for it): plain data, picklable."""
        if self.committed is None or isinstance(self.committed, Committed):
            return self
        return replace(self, committed=Committed(self.committed.result()))


def shown_outcome(state_dir: Path, outcome: Outcome) -> Outcome:
    """``outcome`` with the state directory's absolute path in its message written
    ``<state>``: a status, its commit and stderr never say where the state directory is
    (whatever edge made the message: a file of the state directory that failed, say)."""
    message = without_state_dir(outcome.message, state_dir)
    return outcome if message == outcome.message else replace(outcome, message=message)


@dataclass(frozen=True)
class StatusDesk:
    """Where a tick's new statuses are assembled and committed (SPEC 10): the statuses of
    this tick (:attr:`shared`: HEAD's as opened, and those committed since), the status
    store whose batch holds the commits, the state directory (never named in a status)
    and ``now``. One per tick (``Tick.desk``); called from each Release's own thread for
    its own Release (the status store guards its batch)."""

    shared: Shared
    store: StatusStore
    state_dir: Path
    now: datetime

    def next_status(
        self,
        name: str,
        release: Release | None,
        outcome: Outcome,
        inventory: ReleaseInventory,
        force_at: datetime | None,
    ) -> ReleaseStatus:
        """The status that ``outcome`` gives (SPEC 10), from the Release's current one."""
        outcome = shown_outcome(self.state_dir, outcome)
        prior, now = self.shared.status_of(name), self.now
        forced = force_at is not None
        checked = verified(self.state_dir, release, prior, now, forced) if release else None
        healthy = (
            release is not None
            and outcome.render is not None
            and render_verdict(
                release.spec, prior, outcome.render.ref, inventory.entries, now, checked
            ).verdict
            == Verdict.HEALTHY
        )
        status = assemble_status(
            prior,
            outcome,
            failure_policy_set=release is None or release.spec.failure_policy is not None,
            attempt_healthy=healthy,
            force_sync_at=force_at,
            now=now,
        )
        block = status_block(prior, checked)
        return (
            status
            if block == status.verification
            else status.model_copy(update={"verification": block})
        )

    def sync_handler(
        self,
        name: str,
        release: Release | None,
        outcome: Outcome,
        inventory: ReleaseInventory,
        force_at: datetime | None,
    ) -> Handled:
        """Assemble the new status (SPEC 10) and commit it when it changed."""
        outcome = shown_outcome(self.state_dir, outcome)
        status = self.next_status(name, release, outcome, inventory, force_at)
        if outcome.is_error:
            log.error("%s: %s: %s", name, outcome.reason, outcome.message)
        return self.commit_status(name, outcome, status, None)

    def commit_status(
        self, name: str, outcome: Outcome, status: ReleaseStatus, message: str | None
    ) -> Handled:
        """Commit ``status`` when it differs from the Release's current one (``message``:
        the commit message, else the one SPEC 10 gives)."""
        prior = self.shared.status_of(name)
        commit = None
        if status != prior:
            message = message or with_note(commit_message(name, prior, status), outcome.note)
            commit = self.store.commit_later(name, status, message)
            self.shared.decide(name, status)
        else:  # the one the tick holds already (10,000 unchanged statuses: 20 MiB held twice)
            status = prior
        return Handled(name=name, outcome=outcome, status=status, committed=commit, prior=prior)


def describe(handled: Handled) -> str:
    """One line a person reads: name, state, reason, render, since."""
    status, outcome = handled.status, handled.outcome
    if outcome.reason in (Reason.DELETED, Reason.ORPHANED):  # its status file removed
        before = state_of(handled.prior)
        return f"{handled.name}: {before} -> {outcome.reason} ({outcome.message})"
    rollout = status.rollout
    ref = short_ref(outcome.render.ref if outcome.render else None)
    since = format_time(rollout.started_at) if rollout is not None else NO_VALUE
    state = state_of(status)
    line = f"{handled.name}: {state} {outcome.reason} render={ref} since={since}"
    # Nothing written this tick: say so, not what the sync that applied R once did.
    message = "in sync" if outcome.written == 0 else outcome.message
    drift = outcome.drift
    if drift is not None and drift.objects:
        told = drifted_line(drift.objects)
        message = f"{message}; {'drifted' if drift.report else 'corrected drift'}: {told}"
    return f"{line} ({message})" if message else line
