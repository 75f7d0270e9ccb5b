"""A tick's notifications: the events of its status commits, put in the outbox once the
commits have landed, then sent. Does I/O (git, the state directory, the network).

:meth:`Notifier.open` runs when the tick opens (it reads the Alerts at HEAD and the
operator's providers, reports what is wrong with them, and starts the cursor the first
time, at the commit the tick starts from); :meth:`Notifier.deliver` runs when the tick's
commits are written and pushed. Neither raises: a notification problem is one line in
the log and never the tick's failure, and sending stops after :data:`SEND_BUDGET_S`.
"""

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import git
import urllib3

from convoy_batch.errors import one_line
from convoy_batch.httpclient import pool
from convoy_batch.notify import payloads, send
from convoy_batch.notify.alerts import Alert, Alerts, ReleaseFacts, load_alerts
from convoy_batch.notify.commits import CursorGone, StatusBlobs, StatusChange, status_changes
from convoy_batch.notify.event import Event, event_of, retired_event
from convoy_batch.notify.outbox import MAX_ATTEMPTS, Cursor, Entry, Outbox
from convoy_batch.notify.providers import Provider, load_providers, providers_path
from convoy_batch.state.caches import ParseCache
from convoy_batch.state.locks import LockBusy, Locks
from convoy_batch.state.operator_files import shown
from convoy_batch.timefmt import format_time

log = logging.getLogger("convoy_batch")

SEND_BUDGET_S = 5.0
"""The longest a tick spends sending (every request's time-out included)."""


@dataclass(frozen=True)
class TickFacts:
    """What a tick's notifications know of the tick: the facts, not the tick."""

    repo: git.Repo
    start: str
    """The commit the tick starts from (its Alerts; where a new cursor starts)."""
    state_dir: Path
    locks: Locks
    now: datetime
    releases: Mapping[str, ReleaseFacts]
    """What the Alerts' selectors read of each Release at ``start``."""
    cache: ParseCache | None = None
    """Parsed files of the repository by blob (the Alerts)."""


class Notifier:
    """The notifications of one tick."""

    def __init__(
        self,
        facts: TickFacts,
        alerts: Sequence[Alert],
        providers: dict[str, Provider],
        providers_file: Path,
        *,
        collect: bool = True,
    ) -> None:
        self.facts = facts
        self.collect = collect
        """Whether the repository has Alerts (else only the entries left are sent)."""
        self.alerts = alerts
        """The Alerts whose provider is defined."""
        self.providers = providers
        self.providers_file = providers_file
        self.outbox = Outbox(facts.state_dir)
        self.budget = SEND_BUDGET_S

    @classmethod
    def open(cls, facts: TickFacts) -> "Notifier | None":
        """The tick's notifier; None when neither an Alert nor an entry waits."""
        try:
            return cls._open(facts)
        except Exception as exc:  # never the tick's failure
            _report("not started", exc)
            return None

    @classmethod
    def _open(cls, facts: TickFacts) -> "Notifier | None":
        found = load_alerts(facts.repo.commit(facts.start).tree, facts.cache)
        for error in found.errors:
            log.error("%s", error)
        outbox = Outbox(facts.state_dir)
        if not found.configured:
            outbox.drop_cursor()  # off: turned on again, it starts from then, not from now
            if not outbox.pending():
                return None
        path = providers_path(facts.state_dir)
        try:
            providers = load_providers(path, facts.state_dir)
        except ValueError as exc:
            log.error("notifications: %s", one_line(str(exc)))
            providers = None
        usable = _usable(found, providers, shown(path, facts.state_dir))
        notifier = cls(facts, usable, providers or {}, path, collect=found.configured)
        if found.configured and notifier._cursor() is None:
            # After the entries still waiting, so that none is overtaken.
            waiting = outbox.pending()
            seq = waiting[-1].seq + 1 if waiting else 0
            outbox.save_cursor(Cursor(commit=facts.start, seq=seq))
        return notifier

    def deliver(self) -> None:
        """Put the events of the status commits after the cursor in the outbox, move the
        cursor, then send what is due, oldest first."""
        try:
            with self.facts.locks.outbox():
                if self.collect:
                    self._collect()
                self._send()
        except LockBusy:
            log.info("notifications: another process holds the outbox; left to it")
        except Exception as exc:  # never the tick's failure
            _report("not delivered", exc)

    # filling the outbox

    def _cursor(self) -> Cursor | None:
        try:
            return self.outbox.cursor()
        except ValueError as exc:
            log.warning("notifications: %s; starting again from this tick", exc)
            return None

    def _collect(self) -> None:
        repo = self.facts.repo
        cursor = self._cursor() or Cursor(commit=self.facts.start)
        head = repo.head.commit.hexsha
        if cursor.commit == head:
            return
        if not self.alerts:  # nothing wants an event: only the cursor moves
            self.outbox.save_cursor(Cursor(commit=head, seq=cursor.seq))
            return
        try:
            changes = status_changes(repo, cursor.commit, head)
        except CursorGone:
            log.warning(
                "notifications: %s is no commit of the repository now; events from %s on",
                cursor.commit[:12],
                self.facts.start[:12],
            )
            changes = status_changes(repo, self.facts.start, head)
        entries = self._entries(changes, cursor.seq)
        self.outbox.add(entries)
        self.outbox.save_cursor(Cursor(commit=head, seq=cursor.seq + len(entries)))

    def _entries(self, changes: Sequence[StatusChange], seq: int) -> list[Entry]:
        blobs = StatusBlobs(self.facts.repo)
        entries = []
        for change in changes:
            facts = self._facts(change.release)
            committed = format_time(datetime.fromisoformat(change.committed_at))
            before = blobs.get(change.before, change.release)
            if change.after is None:  # the status file removed: the Release retired
                event = retired_event(
                    change.commit, change.release, facts.cluster, before, change.subject, committed
                )
                if event is None:
                    continue
            else:
                after = blobs.get(change.after, change.release)
                if after is None:
                    continue
                event = event_of(
                    change.commit, change.release, facts.cluster, before, after, committed
                )
            for provider, alert in self._routes(event, facts):
                entries.append(Entry(seq=seq, provider=provider, alert=alert, event=event))
                seq += 1
        return entries

    def _routes(self, event: Event, facts: ReleaseFacts) -> list[tuple[str, str]]:
        """(provider, Alert) for each provider that wants ``event``: the first Alert of a
        provider names it (an event goes to a provider once)."""
        routes: dict[str, str] = {}
        for alert in self.alerts:
            if alert.spec.provider not in routes and alert.wants(event, facts):
                routes[alert.spec.provider] = alert.name
        return list(routes.items())

    def _facts(self, name: str) -> ReleaseFacts:
        return self.facts.releases.get(name) or ReleaseFacts(name)

    # sending

    def _send(self) -> None:
        deadline = time.monotonic() + self.budget
        waiting: set[tuple[str, str]] = set()  # (Release, provider) with an older entry left
        down: set[str] = set()
        secrets: dict[str, tuple[str, str | None] | send.Failed] = {}
        http = pool()
        try:
            for entry in self.outbox.pending():
                key = (entry.event.release, entry.provider)
                if key in waiting or entry.provider in down or not entry.due(self.facts.now):
                    waiting.add(key)
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.info("notifications: time is up; the rest waits for the next tick")
                    return
                failed = self._attempt(entry, http, remaining, secrets)
                if failed is None:
                    self.outbox.sent(entry)
                    continue
                waiting.add(key)
                if not failed.answered:
                    down.add(entry.provider)
                self._failed(entry, failed.why)
        finally:
            http.clear()

    def _attempt(
        self,
        entry: Entry,
        http: urllib3.PoolManager,
        timeout: float,
        secrets: dict[str, tuple[str, str | None] | send.Failed],
    ) -> send.Failed | None:
        provider = self.providers.get(entry.provider)
        if provider is None:
            where = shown(self.providers_file, self.facts.state_dir)
            return send.Failed(f"no provider {entry.provider!r} in {where}")
        if entry.provider not in secrets:
            try:
                base = self.providers_file.parent
                secrets[entry.provider] = provider.resolve(base, self.facts.state_dir)
            except ValueError as exc:
                secrets[entry.provider] = send.Failed(one_line(str(exc)))
        resolved = secrets[entry.provider]
        if isinstance(resolved, send.Failed):
            return resolved
        request = payloads.build(provider, resolved[0], resolved[1], entry.event)
        if request is None:
            log.info("notifications: %s: no source revision to set a status on", entry.provider)
            return None
        failed = send.send(http, request, timeout)
        if failed is None:
            log.info("notifications: %s: sent %s", entry.provider, _what(entry))
        return failed

    def _failed(self, entry: Entry, why: str) -> None:
        failed = entry.failed(why, self.facts.now)
        if failed.attempts < MAX_ATTEMPTS:
            self.outbox.update(failed)
            when = format_time(failed.next_attempt_at) if failed.next_attempt_at else "-"
            log.info(
                "notifications: %s: %s not sent (%s); attempt %d, again at %s",
                entry.provider,
                _what(entry),
                why,
                failed.attempts,
                when,
            )
            return
        self.outbox.give_up(failed)
        log.error(
            "notifications: %s: %s given up after %d attempts (%s); kept in %s",
            entry.provider,
            _what(entry),
            failed.attempts,
            why,
            shown(self.outbox.root / "failed" / failed.file_name, self.facts.state_dir),
        )


def _what(entry: Entry) -> str:
    event = entry.event
    return f"{event.release} {event.previous_state} -> {event.state} ({event.commit[:12]})"


def _usable(found: Alerts, providers: dict[str, Provider] | None, path: str) -> list[Alert]:
    """The Alerts whose provider is defined; each other one is an error line (unless the
    providers file itself is the error, already told)."""
    usable = []
    for alert in found.alerts:
        if providers is not None and alert.spec.provider in providers:
            usable.append(alert)
        elif providers is not None:
            log.error(
                "alerts/%s.yaml: spec.provider: %r is not defined in %s",
                alert.name,
                alert.spec.provider,
                path,
            )
    return usable


def _report(what: str, exc: Exception) -> None:
    log.error("notifications: %s: %s", what, one_line(str(exc)) or type(exc).__name__)
