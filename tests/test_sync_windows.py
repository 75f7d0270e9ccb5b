"""Sync windows, the pure part (``rollout/windows.py``): when a window is active, Argo
CD's rules over several, the next opening, what does not parse, and daylight saving time
in a real zone, pinned (a start in the skipped hour moves to its end; a repeated hour
starts one slot, not two)."""

from datetime import UTC, datetime, timedelta

import pytest

from convoy_batch.models import Release, SyncWindow, parse_model
from convoy_batch.rollout.windows import Window, is_open, parse_window, window_state
from convoy_batch.timefmt import zone
from tests.test_models import release_data

WHERE = "releases/web.yaml: spec.syncWindows[0]"


def window(kind: str, schedule: str, duration: str, tz: str = "UTC", **extra: object) -> Window:
    raw = SyncWindow.model_validate(
        {"kind": kind, "schedule": schedule, "duration": duration, "timeZone": tz, **extra}
    )
    return parse_window(raw, WHERE, zone)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


NIGHT = window("allow", "0 2 * * *", "2h")  # 02:00-04:00 UTC every day
FRIDAY = window("deny", "0 18 * * 5", "62h", name="weekend-freeze")  # Fri 18:00 -> Mon 08:00


def test_a_window_is_active_from_its_start_until_its_duration_has_passed() -> None:
    assert not NIGHT.active(at("2026-12-02T01:59:59+00:00"))
    assert NIGHT.active(at("2026-12-02T02:00:00+00:00"))
    assert NIGHT.active(at("2026-12-02T03:59:59+00:00"))
    assert not NIGHT.active(at("2026-12-02T04:00:00+00:00"))


def test_no_window_is_always_open() -> None:
    assert window_state((), at("2026-12-02T12:00:00+00:00")).open


def test_an_allow_window_opens_only_while_active_and_names_the_next_opening() -> None:
    state = window_state([NIGHT], at("2026-12-02T12:00:00+00:00"))

    assert not state.open
    assert state.closing == (NIGHT,)
    assert state.next_open == at("2026-12-03T02:00:00+00:00")
    assert state.message() == (
        "sync window closed (allow '0 2 * * *'); opens at 2026-12-03T02:00:00Z"
    )
    assert window_state([NIGHT], at("2026-12-03T02:30:00+00:00")).open


def test_an_active_deny_closes_whatever_the_allows_say() -> None:
    always = window("allow", "* * * * *", "1m")  # every minute, a minute: always active
    friday_night = at("2026-12-04T20:00:00+00:00")  # a Friday

    opened, closing = is_open([always, FRIDAY], friday_night)
    state = window_state([always, FRIDAY], friday_night)

    assert (opened, closing) == (False, (FRIDAY,))
    assert state.next_open == at("2026-12-07T08:00:00+00:00")  # Monday 08:00
    assert state.message().startswith("sync window closed (weekend-freeze); opens at ")


def test_the_next_opening_needs_an_allow_active_and_no_deny() -> None:
    # The allow slot of Saturday night lies inside the freeze: the next opening is the
    # first allow slot after the freeze ends, Tuesday 02:00.
    state = window_state([NIGHT, FRIDAY], at("2026-12-05T12:00:00+00:00"))

    assert state.closing == (FRIDAY,)
    assert state.next_open == at("2026-12-08T02:00:00+00:00")


def test_a_window_is_read_on_its_own_zone_s_wall_clock() -> None:
    berlin = window("allow", "0 9 * * *", "1h", "Europe/Berlin")

    assert berlin.active(at("2026-12-02T08:30:00+00:00"))  # 09:30 in Berlin (UTC+1)
    assert berlin.active(at("2026-07-02T07:30:00+00:00"))  # 09:30 in Berlin (UTC+2)
    assert not berlin.active(at("2026-07-02T08:30:00+00:00"))


def test_a_start_in_the_skipped_hour_is_at_its_end() -> None:
    # 2026-03-29 in Berlin: 02:00 becomes 03:00. A 02:30 start is at 03:00 (01:00 UTC).
    skipped = window("allow", "30 2 * * *", "1h", "Europe/Berlin")

    assert skipped.start_at_or_before(at("2026-03-29T01:10:00+00:00")) == at(
        "2026-03-29T03:00:00+02:00"
    )
    assert skipped.active(at("2026-03-29T01:59:00+00:00"))
    assert not skipped.active(at("2026-03-29T02:00:00+00:00"))
    assert skipped.active(at("2026-03-28T01:45:00+00:00"))  # the day before: 02:30 CET


def test_a_repeated_hour_starts_one_slot_not_two() -> None:
    # 2026-10-25 in Berlin: 03:00 becomes 02:00 again. 02:30 happens twice; the window
    # starts at the first (00:30 UTC) only.
    repeated = window("deny", "30 2 * * *", "30m", "Europe/Berlin")

    assert repeated.active(at("2026-10-25T00:45:00+00:00"))
    assert not repeated.active(at("2026-10-25T01:45:00+00:00"))  # the second 02:30: none
    assert repeated.start_after(at("2026-10-25T00:40:00+00:00")) == at("2026-10-26T02:30:00+01:00")


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("schedule", "0 2 * * * *", "schedule: '0 2 * * * *' is not a 5-field cron schedule"),
        ("schedule", "61 2 * * *", "schedule: '61 2 * * *' is not a 5-field cron schedule"),
        ("timeZone", "Mars/Olympus", "timeZone: 'Mars/Olympus' is not an IANA time zone"),
        ("duration", "two hours", "duration: not a duration: 'two hours'"),
        ("duration", "0", "duration: '0' is not longer than 0"),
    ],
)
def test_a_window_that_does_not_parse_names_its_field(field: str, value: str, problem: str) -> None:
    data = {"kind": "deny", "schedule": "0 2 * * *", "duration": "1h", field: value}

    with pytest.raises(ValueError) as raised:
        parse_window(SyncWindow.model_validate(data), WHERE, zone)

    assert str(raised.value).startswith(f"{WHERE}.{problem}")


def test_windows_are_read_from_a_release_and_left_out_of_its_dump_when_unset() -> None:
    data = release_data(syncWindows=[{"kind": "deny", "schedule": "0 18 * * 5", "duration": "62h"}])
    release = parse_model(Release, data, "r.yaml")
    plain = parse_model(Release, release_data(), "r.yaml")

    assert release.spec.sync_windows[0].time_zone == "UTC"
    assert "syncWindows" not in plain.spec.model_dump(by_alias=True)
    assert (
        window_state(
            [parse_window(w, WHERE, zone) for w in release.spec.sync_windows],
            datetime(2026, 12, 5, tzinfo=UTC) + timedelta(hours=1),
        )
        .closing[0]
        .kind
        == "deny"
    )
