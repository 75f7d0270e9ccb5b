"""Go-style durations and RFC 3339 UTC times (SPEC 1): parsing, refusals, round-trips."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from convoy_batch.timefmt import format_duration, format_time, parse_duration, parse_time


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("5m", timedelta(minutes=5)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("0", timedelta(0)),
        ("0s", timedelta(0)),
        ("1.5h", timedelta(hours=1, minutes=30)),
        ("250ms", timedelta(milliseconds=250)),
        ("2h0m5s", timedelta(hours=2, seconds=5)),
        (0, timedelta(0)),
    ],
    ids=str,
)
def test_go_durations_parse(text: str | int, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "5", "5 m", "-5m", "5x", "m", "1h-30m", "five minutes", "1d", 5, 1.5, True],
    ids=repr,
)
def test_bad_durations_are_refused_with_go_syntax_hint(text: object) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)  # type: ignore[arg-type]


def test_a_negative_timedelta_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        parse_duration(timedelta(seconds=-1))


@pytest.mark.parametrize(
    ("value", "printed"),
    [
        (timedelta(seconds=90), "1m30s"),
        (timedelta(minutes=5), "5m"),
        (timedelta(hours=1, minutes=30), "1h30m"),
        (timedelta(0), "0"),
        (timedelta(hours=49), "49h"),
        (timedelta(seconds=1, milliseconds=500), "1.5s"),
        (timedelta(seconds=59, microseconds=123456), "59.123456s"),
    ],
    ids=str,
)
def test_durations_print_in_their_shortest_go_form(value: timedelta, printed: str) -> None:
    assert format_duration(value) == printed


@given(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=1000)))
def test_printing_a_duration_round_trips(value: timedelta) -> None:
    assert parse_duration(format_duration(value)) == value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-29T12:00:00Z", datetime(2026, 11, 29, 12, 0, tzinfo=UTC)),
        ("2026-11-29T12:00:00z", datetime(2026, 11, 29, 12, 0, tzinfo=UTC)),
        ("2026-11-29T14:30:00+02:00", datetime(2026, 11, 29, 12, 30, tzinfo=UTC)),
        ("2026-11-29T00:30:00-01:00", datetime(2026, 11, 29, 1, 30, tzinfo=UTC)),
        ("2026-11-29T12:00:00.999999Z", datetime(2026, 11, 29, 12, 0, tzinfo=UTC)),
    ],
    ids=["zulu", "lower-z", "plus-offset", "minus-offset", "fraction-truncated"],
)
def test_times_parse_to_utc_truncated_to_the_second(text: str, expected: datetime) -> None:
    parsed = parse_time(text)

    assert parsed == expected
    assert parsed.utcoffset() == timedelta(0)
    assert parsed.microsecond == 0


@pytest.mark.parametrize(
    "text",
    ["2026-11-29T12:00:00", "2026-11-29", "yesterday", "", "12:00:00Z"],
    ids=["naive", "date-only", "words", "empty", "time-only"],
)
def test_times_without_a_zone_or_malformed_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_time(text)


def test_a_naive_datetime_value_is_taken_as_utc() -> None:
    assert parse_time(datetime(2026, 11, 29, 12, 0, 0, 500)) == datetime(
        2026, 11, 29, 12, 0, tzinfo=UTC
    )


def test_times_print_as_utc_with_z_to_the_second() -> None:
    plus_two = timezone(timedelta(hours=2))

    assert format_time(datetime(2026, 11, 29, 14, 0, 7, 900, tzinfo=plus_two)) == (
        "2026-11-29T12:00:07Z"
    )


@given(st.datetimes(timezones=st.just(UTC)))
def test_printing_a_time_round_trips_to_the_second(value: datetime) -> None:
    assert parse_time(format_time(value)) == value.replace(microsecond=0)
