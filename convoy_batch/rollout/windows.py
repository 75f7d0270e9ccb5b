"""Sync windows (issue: order between Releases and in time): whether a Release may be
synced at ``now``, which windows keep it closed, and when it next opens. Pure: the clock
is the tick's ``now``; the cron arithmetic is croniter's; a zone is looked up by the
caller (``timefmt.zone`` reads the zone database) and handed in.

A window's ``schedule`` is a 5-field cron expression read on the wall clock of its
``timeZone``; each start opens a slot of ``duration`` elapsed time: the window is active
while ``start <= now < start + duration``. Rules as Argo CD's: no window, always open; with
any allow window, open only while one is active; an active deny closes, whatever the allows
say.

Daylight saving time, as croniter reads a wall clock, pinned by tests: a start in the hour
that is skipped (spring) is at the first instant after it (02:30 is 03:00); a start in the
hour that is repeated (autumn) is its first occurrence only (croniter would start a second
slot an hour later: that one is dropped, so no window is doubled).

A window that does not parse (a schedule that is not 5 valid cron fields, an unknown zone,
a duration that is no Go duration) is a ``ValueError`` of one line naming the field: the
caller fails closed.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

from croniter import croniter

from convoy_batch.models import SyncWindow
from convoy_batch.timefmt import format_time, parse_duration

HORIZON = 2000
"""Window edges looked at, at most, for the next opening (beyond: none is found)."""


@dataclass(frozen=True)
class Window:
    """A sync window, parsed."""

    name: str | None
    kind: str
    """``allow`` or ``deny``."""
    schedule: str
    duration: timedelta
    zone: tzinfo
    manual_sync: bool

    @property
    def label(self) -> str:
        """How messages name it: its name, else its kind and schedule."""
        return self.name or f"{self.kind} {self.schedule!r}"

    def start_at_or_before(self, now: datetime) -> datetime:
        """The latest start of a slot at or before ``now`` (in UTC: a slot's duration is
        elapsed time, not wall-clock time)."""
        local = (now + timedelta(seconds=1)).astimezone(self.zone)
        start: datetime = croniter(self.schedule, local).get_prev(datetime)
        while _repeated(start, self.zone):
            start = croniter(self.schedule, start).get_prev(datetime)
        return start.astimezone(UTC)

    def start_after(self, now: datetime) -> datetime:
        """The first start of a slot after ``now`` (in UTC)."""
        start: datetime = croniter(self.schedule, now.astimezone(self.zone)).get_next(datetime)
        while _repeated(start, self.zone):
            start = croniter(self.schedule, start).get_next(datetime)
        return start.astimezone(UTC)

    def active(self, now: datetime) -> bool:
        start = self.start_at_or_before(now)
        return start <= now < start + self.duration


def _repeated(start: datetime, zone: tzinfo) -> bool:
    """``start`` is the second occurrence of a wall-clock time that repeats (the hour
    daylight saving time gives back): its first occurrence is the start."""
    local = start.astimezone(zone)
    first = local.replace(fold=0)
    return first.utcoffset() != local.utcoffset()


def parse_window(raw: SyncWindow, where: str, zone_of: Callable[[str], tzinfo]) -> Window:
    """``raw`` read, its zone looked up by ``zone_of`` (ValueError when there is none);
    ValueError (one line, ``where``: the file and the field) when its schedule, zone or
    duration does not parse."""
    fields = raw.schedule.split()
    if len(fields) != 5 or not croniter.is_valid(raw.schedule):
        raise ValueError(f"{where}.schedule: {raw.schedule!r} is not a 5-field cron schedule")
    try:
        zone = zone_of(raw.time_zone)
    except ValueError as exc:
        raise ValueError(f"{where}.timeZone: {exc}") from None
    try:
        duration = parse_duration(raw.duration)
    except ValueError as exc:
        raise ValueError(f"{where}.duration: {exc}") from None
    if duration <= timedelta(0):
        raise ValueError(f"{where}.duration: {raw.duration!r} is not longer than 0")
    return Window(raw.name, raw.kind, " ".join(fields), duration, zone, raw.manual_sync)


@dataclass(frozen=True)
class WindowState:
    """Whether a Release may be synced at a time, and why not."""

    open: bool
    closing: tuple[Window, ...] = ()
    """What keeps it closed: each active deny, or (no allow active) each allow."""
    next_open: datetime | None = None
    """When it opens next (closed only; None: not within the horizon)."""

    def labels(self) -> str:
        """The windows that keep it closed, as messages name them."""
        return ", ".join(w.label for w in self.closing)

    def message(self) -> str:
        """One line: the windows that keep it closed and when it opens."""
        when = format_time(self.next_open) if self.next_open else "not within the horizon"
        return f"sync window closed ({self.labels()}); opens at {when}"


def is_open(windows: Sequence[Window], now: datetime) -> tuple[bool, tuple[Window, ...]]:
    """Argo CD's rules at ``now``: open or not, and the windows that keep it closed."""
    denies = tuple(w for w in windows if w.kind == "deny" and w.active(now))
    if denies:
        return False, denies
    allows = tuple(w for w in windows if w.kind == "allow")
    if allows and not any(w.active(now) for w in allows):
        return False, allows
    return True, ()


def window_state(windows: Sequence[Window], now: datetime) -> WindowState:
    """The state at ``now``; when closed, the first instant after it that is open: past
    the latest end of the active denies, else at the next start of an allow, again and
    again, up to :data:`HORIZON` steps."""
    opened, closing = is_open(windows, now)
    if opened:
        return WindowState(True)
    at = now
    for _ in range(HORIZON):
        denies = [w for w in windows if w.kind == "deny" and w.active(at)]
        if denies:
            at = max(w.start_at_or_before(at) + w.duration for w in denies)
        else:
            at = min(w.start_after(at) for w in windows if w.kind == "allow")
        if is_open(windows, at)[0]:
            return WindowState(False, closing, at)
    return WindowState(False, closing, None)
