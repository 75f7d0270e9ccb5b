"""Go-style durations and RFC 3339 UTC times, parsed and printed one way everywhere.

Pure: no I/O, no clock. Durations print in their shortest Go-like form without zero
units (``1h30m``, ``90s`` prints as ``1m30s``, zero prints as ``0``); times print as
``YYYY-MM-DDTHH:MM:SSZ``, truncated to the second.
"""

import re
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_UNITS = {
    "ns": timedelta(microseconds=0.001),
    "us": timedelta(microseconds=1),
    "µs": timedelta(microseconds=1),
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


MAX_DURATION = timedelta(microseconds=(2**63 - 1) // 1000)
"""Go's longest duration (int64 nanoseconds, about 2562047h), as Kubernetes parses it."""


def parse_duration(text: str | int | timedelta) -> timedelta:
    """Parse a Go duration (``90s``, ``1h30m``, ``0``); negative durations are refused."""
    if isinstance(text, timedelta):
        if text < timedelta(0):
            raise ValueError(f"not a duration: {text!r} (negative durations are refused)")
        return text
    if isinstance(text, int) and not isinstance(text, bool) and text == 0:
        return timedelta(0)
    if not isinstance(text, str):
        raise ValueError(f"not a duration: {text!r} (use Go syntax such as 90s, 5m, 1h30m)")
    s = text.strip()
    if s == "0":
        return timedelta(0)
    pos, total = 0, timedelta(0)
    try:
        for m in _PART.finditer(s):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
    except OverflowError:
        pos, total = len(s), timedelta.max
    if pos != len(s) or not s:
        raise ValueError(f"not a duration: {text!r} (use Go syntax such as 90s, 5m, 1h30m)")
    if total > MAX_DURATION:
        raise ValueError(f"not a duration: {text!r} (longer than Go's longest, 2562047h)")
    return total


def format_duration(d: timedelta) -> str:
    """Print a duration as Go-style units without zero parts: ``1h30m``, ``5m``, ``0``.

    Integer microseconds, not float seconds, so that every duration round-trips exactly
    (``{:g}`` would keep only six significant digits).
    """
    micros = d // timedelta(microseconds=1)
    if micros == 0:
        return "0"
    whole, frac = divmod(micros, 1_000_000)
    hours, rest = divmod(whole, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = []
    if hours:
        parts.append(f"{hours}h")
    if minutes:
        parts.append(f"{minutes}m")
    if frac:
        parts.append(f"{seconds}.{frac:06d}".rstrip("0") + "s")
    elif seconds:
        parts.append(f"{seconds}s")
    return "".join(parts)


def parse_time(value: str | datetime) -> datetime:
    """Parse an RFC 3339 time into an aware UTC datetime truncated to the second."""
    if isinstance(value, datetime):
        return _in_utc(value)
    if isinstance(value, str):
        return _parse_text(value)
    raise ValueError(f"not an RFC 3339 time: {value!r}")


@lru_cache(maxsize=4096)
def _parse_text(value: str) -> datetime:
    """:func:`parse_time` of a string. Key: the string; a pure function of it, whose
    result is immutable. A tick reads the same few times many times over (each health
    observed at the tick's time), so it keeps the last few thousand."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not an RFC 3339 time: {value!r}") from None
    if "T" not in text.upper() or dt.tzinfo is None:
        raise ValueError(f"not an RFC 3339 time with zone: {value!r}")
    return _in_utc(dt)


def _in_utc(dt: datetime) -> datetime:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).replace(microsecond=0)


def format_time(dt: datetime) -> str:
    """Print a time as RFC 3339 UTC with ``Z``, to the second."""
    # isoformat, not strftime("%Y"): glibc does not zero-pad years before 1000.
    return parse_time(dt).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


def zone(name: str) -> tzinfo:
    """The IANA time zone ``name`` (``Europe/Berlin``), read from the system's or Python's
    zone database; ValueError when there is none of that name."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not an IANA time zone") from None
