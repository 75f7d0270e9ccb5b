"""Sync windows, the pure part (``rollout/windows.py``): when a window is active, Argo
CD's rules over several, the next opening, what does not parse, and daylight saving time
in a real zone, pinned (a start in the skipped hour moves to its end; a repeated hour
starts one slot, not two)."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from convoy_batch.models import Release, SyncWindow, parse_model
from convoy_batch.rollout.windows import Window, is_open, parse_window, window_state
from convoy_batch.timefmt import zone
from tests.rollout.test_models import release_data
from tests.support.scenario import CLUSTER, FAILURE_POLICY, Scenario

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


# --- through the CLI, on the directory cluster --------------------------------------------

FREEZE = (
    "  interval: 24h\n"  # only the window's opening makes it due between these ticks
    "  syncWindows: [{name: freeze, kind: deny, schedule: '0 13 * * *', duration: 2h}]\n"
)
"""A deny from 13:00 to 15:00 UTC every day (the scenario's clock starts at 12:00)."""


def image(s: Scenario, name: str = "web") -> str:
    spec = s.live(name, "deployment.apps", name)["spec"]["template"]["spec"]
    return str(spec["containers"][0]["image"])


def settled(s: Scenario) -> None:
    """web under FREEZE, 1.0 rolled out and Succeeded before the freeze (12:00, 12:01)."""
    s.app("web", spec_extra=FAILURE_POLICY + FREEZE)
    assert s.reconcile(minutes=0).code == 0
    s.deployment_ready("web")
    s.reconcile(minutes=1)


def test_a_closed_window_holds_a_new_render_until_it_opens(scenario: Scenario) -> None:
    s = scenario
    settled(s)
    s.app("web", image="2.0", spec_extra=FAILURE_POLICY + FREEZE)

    held = s.reconcile(minutes=70)  # 13:10, inside the freeze

    assert held.code == 0, held.err
    attempt = s.status()["lastAttempted"]
    assert attempt["reason"] == "WaitingForSyncWindow"
    assert attempt["message"] == "sync window closed (freeze); opens at 2026-11-29T15:00:00Z"
    assert image(s) == "example/web:1.0"
    head = s.head()
    for minutes in (100, 110):  # still closed, ticks with nothing new: no commit
        assert s.reconcile(minutes=minutes).code == 0
    assert s.head() == head

    opened = s.reconcile(minutes=180)  # 15:00: due because the window opened

    assert opened.code == 0, opened.err
    assert image(s) == "example/web:2.0"
    assert s.status()["lastAttempted"]["reason"] == "Synced"


def test_a_release_in_sync_changes_no_status_when_a_window_closes(scenario: Scenario) -> None:
    s = scenario
    settled(s)
    head = s.head()

    result = s.reconcile("web", minutes=70)  # inside the freeze, nothing new

    assert result.code == 0 and s.head() == head


@pytest.mark.parametrize(("manual", "passes"), [(True, True), (False, False)])
def test_a_forced_sync_passes_only_windows_that_allow_a_manual_sync(
    scenario: Scenario, manual: bool, passes: bool
) -> None:
    s = scenario
    spec = FREEZE.replace("duration: 2h}", f"duration: 2h, manualSync: {str(manual).lower()}}}")
    s.app("web", spec_extra=FAILURE_POLICY + spec)
    s.reconcile(minutes=0)
    s.app("web", image="2.0", spec_extra=FAILURE_POLICY + spec)

    forced = s.reconcile("web", minutes=70, extra=("--force",))

    assert forced.code == 0, forced.err
    assert (image(s) == "example/web:2.0") == passes
    message = s.status()["lastAttempted"]["message"]
    if passes:
        assert message.endswith("forced past the sync window (freeze)"), message
        body = str(s.repo.head.commit.message).split("\n\n", 1)[1]
        assert body.strip() == "Forced sync: forced past the sync window (freeze)."
    else:
        assert message.startswith("sync window closed (freeze)"), message


def test_a_window_that_does_not_parse_fails_closed_for_its_releases_only(
    scenario: Scenario,
) -> None:
    s = scenario
    bad = "  syncWindows: [{kind: deny, schedule: 'at noon', duration: 2h}]\n"
    s.app("web", spec_extra=FAILURE_POLICY + bad)
    s.app("api")

    result = s.reconcile(minutes=0)

    assert result.code == 1
    assert result.err.splitlines() == [
        "web: InvalidSyncWindow: releases/web.yaml: spec.syncWindows[0].schedule: 'at noon' "
        "is not a 5-field cron schedule"
    ]
    assert not s.object_path("web", "deployment.apps", "web").exists()  # nothing applied
    assert s.object_path("api", "deployment.apps", "api").exists()


def test_a_cluster_s_windows_cover_each_of_its_releases(scenario: Scenario) -> None:
    s = scenario
    cluster = CLUSTER + (
        "  syncWindows: [{kind: allow, schedule: '0 2 * * *', duration: 2h,"
        " timeZone: Europe/Berlin}]\n"
    )
    s.commit({"clusters/staging.yaml": cluster})
    s.app("web")

    result = s.reconcile(minutes=0)  # 12:00 UTC: outside 02:00-04:00 in Berlin

    assert result.code == 0, result.err
    assert s.status()["lastAttempted"]["message"] == (
        "sync window closed (allow '0 2 * * *'); opens at 2026-11-30T01:00:00Z"
    )
    assert not s.object_path("web", "deployment.apps", "web").exists()
    assert s.reconcile(minutes=13 * 60 + 5).code == 0  # 01:05 UTC, 02:05 in Berlin: open
    assert s.object_path("web", "deployment.apps", "web").exists()


def test_a_rollback_is_not_held_by_a_window_and_says_it_ran_inside(scenario: Scenario) -> None:
    s = scenario
    settled(s)
    s.app("web", image="2.0", spec_extra=FAILURE_POLICY + FREEZE)
    s.reconcile(minutes=5)  # open: 2.0 is applied
    assert image(s) == "example/web:2.0"
    s.deployment_failed("web")

    result = s.reconcile("web", minutes=70)  # inside the freeze: 2.0 failed

    assert result.code == 0, result.err
    assert image(s) == "example/web:1.0"
    status = s.status()
    assert status["rollout"]["state"] == "RolledBack"
    assert status["lastAttempted"]["message"].endswith(
        "; rolled back inside the sync window (freeze)"
    )
    head = s.head()
    assert s.reconcile("web", minutes=75).code == 0 and s.head() == head  # held, quiet


def test_daylight_saving_time_through_the_cli(scenario: Scenario) -> None:
    # Berlin, 2026-10-25: 02:30 happens twice. An allow window of 30 minutes at 02:30
    # opens once, at the first (00:30 UTC); the second 02:30 (01:30 UTC) is closed.
    s = scenario
    night = (
        "  syncWindows: [{name: night, kind: allow, schedule: '30 2 * * *', duration: 30m,"
        " timeZone: Europe/Berlin}]\n"
    )
    s.app("web", spec_extra=night)

    second = s.cli("reconcile", "--now", "2026-10-25T01:45:00Z")
    assert second.code == 0, second.err
    assert s.status()["lastAttempted"]["message"] == (
        "sync window closed (night); opens at 2026-10-26T01:30:00Z"
    )
    first = s.cli("reconcile", "--now", "2026-10-26T01:40:00Z")  # 02:40 CET: open

    assert first.code == 0, first.err
    assert image(s) == "example/web:1.0"


def test_plan_and_status_show_the_windows_in_force(scenario: Scenario) -> None:
    s = scenario
    s.app("web", spec_extra=FAILURE_POLICY + FREEZE)
    s.app("api")
    s.reconcile(minutes=0)
    s.app("web", image="2.0", spec_extra=FAILURE_POLICY + FREEZE)

    open_plan = s.cli("plan", "web", "--now", "2026-11-29T12:30:00Z")
    closed_plan = s.cli("plan", "web", "--now", "2026-11-29T13:30:00Z")
    s.reconcile(minutes=90)
    status = s.cli("status", "--output", "json", "--now", "2026-11-29T13:30:00Z")

    assert open_plan.out.rstrip().endswith("; sync windows freeze (deny): open")
    assert closed_plan.out.rstrip().endswith(
        "stopped by WaitingForSyncWindow: sync window closed (freeze); opens at "
        "2026-11-29T15:00:00Z"
    )
    rows = {row["name"]: row for row in json.loads(status.out)}
    assert rows["web"]["syncWindows"].startswith("sync window closed (freeze); opens at")
    assert rows["api"]["syncWindows"] is None
