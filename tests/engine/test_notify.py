"""Notifications: Alerts in the repository, providers of the operator, an outbox that
delivers each event once, against a real HTTP receiver on loopback (down, then up), and
real tick processes killed between their status commits and the outbox."""

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import git
import pytest

from convoy_batch.notify import notifier
from convoy_batch.notify.alerts import Alert, ReleaseFacts
from convoy_batch.notify.event import Event, Severity
from convoy_batch.notify.outbox import MAX_ATTEMPTS, backoff_schedule
from convoy_batch.notify.payloads import commit_state
from convoy_batch.timefmt import format_time
from convoy_batch.views import history
from tests.crash import harness as h
from tests.support.gitfixtures import status_changes
from tests.support.receiver import Receiver, Silent
from tests.support.scenario import PROJECT, T0, Scenario

ALL = ""  # an Alert of every event


def alert_yaml(name: str, provider: str, spec: str = ALL) -> str:
    return (
        "apiVersion: convoy.dev/v1alpha1\nkind: Alert\n"
        f"metadata: {{name: {name}}}\nspec:\n  provider: {provider}\n{spec}"
    )


def providers(scenario: Scenario, text: str) -> None:
    scenario.state.mkdir(exist_ok=True)
    (scenario.state / "providers.yaml").write_text(text)


def generic(receiver: Receiver, name: str = "hooks", extra: str = "") -> str:
    return f"  {name}: {{type: generic, url: '{receiver.url()}'{extra}}}\n"


def status_commits(repo: git.Repo, since: str | None = None) -> list[str]:
    """``<commit>/<release>`` of each status commit on HEAD's history, oldest first: the
    notifications' ids."""
    changes = status_changes(repo, f"{since}..HEAD" if since else "HEAD")
    return [f"{commit}/{name}" for commit, name in changes]


def outbox_entries(scenario: Scenario) -> list[dict[str, object]]:
    folder = scenario.state / "outbox"
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return [json.loads(p.read_text()) for p in files if p.name != "cursor.json"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


# --- delivery ------------------------------------------------------------------------------


def test_each_event_arrives_once_in_order_across_a_receiver_outage(
    scenario: Scenario, receiver: Receiver
) -> None:
    providers(scenario, "providers:\n" + generic(receiver))
    scenario.commit({"alerts/all.yaml": alert_yaml("all", "hooks")})
    scenario.app("web")
    scenario.app("api")
    assert scenario.reconcile(minutes=0).code == 0  # the receiver is down
    assert receiver.requests == []
    waiting = outbox_entries(scenario)
    assert sorted(e["attempts"] for e in waiting) == [0, 1]  # the second waits behind
    modes = {p.stat().st_mode & 0o777 for p in (scenario.state / "outbox").iterdir()}
    assert modes == {0o600}
    [held] = [e["event"]["release"] for e in waiting if e["attempts"]]  # type: ignore[index]
    other = "web" if held == "api" else "api"

    scenario.deployment_ready("web")
    scenario.deployment_ready("api")
    scenario.reconcile(minutes=1)  # still down: the first is tried again, then at 12:03
    scenario.app(held, image="2.0")
    receiver.up()
    scenario.reconcile(minutes=2)  # up: the other's go; the held one's wait for 12:03
    assert [i.split("/")[1] for i in receiver.ids()] == [other, other]

    scenario.reconcile(minutes=3)
    scenario.reconcile(minutes=4)
    expected = status_commits(scenario.repo)
    assert len(expected) == 5
    assert sorted(receiver.ids()) == sorted(expected)  # each once
    for name in ("web", "api"):  # in order per Release
        assert [i for i in receiver.ids() if i.endswith(f"/{name}")] == [
            i for i in expected if i.endswith(f"/{name}")
        ]
    assert outbox_entries(scenario) == []


def test_a_quiet_tick_sends_nothing_again(scenario: Scenario, receiver: Receiver) -> None:
    receiver.up()
    providers(scenario, "providers:\n" + generic(receiver))
    scenario.commit({"alerts/all.yaml": alert_yaml("all", "hooks")})
    scenario.app("web", spec_extra="")
    scenario.reconcile(minutes=0)
    for minute in (1, 6, 11):
        scenario.reconcile("web", minutes=minute)
    assert receiver.ids() == status_commits(scenario.repo)
    assert len(receiver.requests) == 1


def test_an_event_is_given_up_after_bounded_attempts_reported_once_and_kept(
    scenario: Scenario, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.status = 500
    receiver.up()
    providers(scenario, "providers:\n" + generic(receiver))
    scenario.commit({"alerts/all.yaml": alert_yaml("all", "hooks")})
    scenario.app("web", spec_extra="")
    minute = 0.0
    with caplog.at_level(logging.INFO, logger="convoy_batch"):
        scenario.reconcile(minutes=minute)
        for wait in backoff_schedule():
            scenario.reconcile(minutes=minute + wait.total_seconds() / 60 - 0.5)  # not yet
            minute += wait.total_seconds() / 60
            scenario.reconcile(minutes=minute)
        scenario.reconcile(minutes=minute + 120)
    assert len(receiver.requests) == MAX_ATTEMPTS
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "given up after 10 attempts (HTTP 500)" in errors[0]
    assert outbox_entries(scenario) == []
    [kept] = (scenario.state / "outbox" / "failed").iterdir()
    assert json.loads(kept.read_text())["attempts"] == MAX_ATTEMPTS


def test_a_receiver_that_never_answers_holds_a_tick_no_longer_than_the_budget(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notifier, "SEND_BUDGET_S", 1.0)
    took: list[float] = []
    deliver = notifier.Notifier.deliver

    def timed(self: notifier.Notifier) -> None:
        start = time.monotonic()
        deliver(self)
        took.append(time.monotonic() - start)

    monkeypatch.setattr(notifier.Notifier, "deliver", timed)
    silent = Silent()
    try:
        providers(scenario, f"providers:\n  hooks: {{type: generic, url: '{silent.url()}'}}\n")
        scenario.commit({"alerts/all.yaml": alert_yaml("all", "hooks")})
        for name in ("web", "api", "db"):
            scenario.app(name, spec_extra="")
        assert scenario.reconcile(minutes=0).code == 0
    finally:
        silent.close()
    [seconds] = took
    assert 1.0 <= seconds < 3.0
    entries = outbox_entries(scenario)
    assert len(entries) == 3
    assert [e["lastError"] for e in entries if e["attempts"]] == ["timed out"]


def test_events_of_commits_replayed_onto_the_remote_by_a_push_are_not_sent_twice(
    scenario: Scenario, receiver: Receiver, tmp_path: Path
) -> None:
    receiver.up()
    providers(scenario, "providers:\n" + generic(receiver))
    scenario.commit({"alerts/all.yaml": alert_yaml("all", "hooks")})
    remote = tmp_path / "remote.git"
    git.Repo.clone_from(scenario.root, remote, bare=True)
    scenario.repo.create_remote("origin", str(remote))
    scenario.repo.git.push("--set-upstream", "origin", "main")
    scenario.app("web")
    scenario.reconcile(minutes=0)  # pushed
    person = git.Repo.clone_from(remote, tmp_path / "person")
    (tmp_path / "person" / "notes.txt").write_text("notes\n")
    person.index.add(["notes.txt"])
    person.index.commit("a person's commit")
    person.git.push("origin", "main")
    remote.rename(tmp_path / "away.git")
    scenario.deployment_ready("web")
    assert "push to origin" in scenario.reconcile(minutes=1).err  # sent, not pushed
    (tmp_path / "away.git").rename(remote)
    scenario.app("web", image="2.0")
    scenario.reconcile(minutes=2)  # the push replays minute 1's commit onto the person's
    assert "a person's commit" in scenario.repo.git.log("--format=%s")
    scenario.reconcile(minutes=3)
    told = [(r.body["previousState"], r.body["state"], r.body["reason"]) for r in receiver.requests]
    logged = [(c.before, c.after, c.reason) for c in history.history(scenario.root, "web")]
    assert told == logged
    assert len(told) >= 3


# --- a tick killed between its status commits and the outbox ----------------------------------

KILLER = """
import os, signal, sys
from convoy_batch.notify import outbox, send

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

point = sys.argv[1]
if point == "before-the-entries":
    outbox.Outbox.add = die
elif point == "before-the-cursor":  # the cursor that moves past the tick's commits
    save = outbox.Outbox.save_cursor
    outbox.Outbox.save_cursor = lambda self, cursor: die() if cursor.seq else save(self, cursor)
elif point == "before-the-send":
    send.send = die
from convoy_batch.cli import main
sys.exit(main(sys.argv[2:]))
"""


def tick_process(
    case: Path, minutes: float, point: str = "none"
) -> subprocess.CompletedProcess[str]:
    """``reconcile`` over ``case/repo`` in a process of its own, killed (SIGKILL) at
    ``point`` of its notifications."""
    now = format_time(T0 + timedelta(minutes=minutes))
    args = ["--repo", str(case / "repo"), "--state", str(case / "state"), "reconcile", "--now", now]
    return subprocess.run(
        [sys.executable, "-c", KILLER, point, *args],
        env={**os.environ, "PYTHONPATH": str(PROJECT)}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


def crash_world(base: Path, receiver: Receiver) -> None:
    """``base/repo`` and ``base/state``: web and api rolled out (no Alerts yet); committed
    for the next tick: an Alert, api's new render, web's Deployment ready."""
    s = Scenario(base, h._NoCapture())  # type: ignore[arg-type]
    providers(s, "providers:\n" + generic(receiver))
    s.app("web")
    s.app("api")
    h._quiet(s, minutes=0)
    s.deployment_ready("web")
    s.app("api", image="2.0")
    s.commit({"alerts/all.yaml": alert_yaml("all", "hooks")})
    s.repo.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("point", "entries"),
    [("before-the-entries", 0), ("before-the-cursor", 2), ("before-the-send", 2)],
)
def test_a_tick_killed_after_its_status_commits_delivers_each_event_once(
    point: str, entries: int, tmp_path: Path, receiver: Receiver
) -> None:
    crash_world(tmp_path, receiver)
    repo = git.Repo(tmp_path / "repo")
    before = repo.head.commit.hexsha
    receiver.up()
    killed = tick_process(tmp_path, 1, point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert len(status_commits(repo, before)) == 2, "the kill was to come after the commits"
    assert len(list((tmp_path / "state" / "outbox").glob("*.*.*.json"))) == entries
    assert receiver.requests == []

    for minute in (2, 3):
        assert tick_process(tmp_path, minute).returncode == 0
    assert receiver.ids() == status_commits(repo, before)
    assert len(receiver.ids()) == 2


# --- what each provider is sent -------------------------------------------------------------


def test_slack_gets_the_text_and_generic_the_event_with_its_token(
    scenario: Scenario, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver.up()
    monkeypatch.setenv("HOOK_TOKEN", "t0ken-of-the-hook")
    slack = f"  chat: {{type: slack, url: '{receiver.url('/slack')}'}}\n"
    providers(
        scenario, "providers:\n" + slack + generic(receiver, extra=", token: {env: HOOK_TOKEN}")
    )
    scenario.commit(
        {
            "alerts/chat.yaml": alert_yaml("chat", "chat"),
            "alerts/hooks.yaml": alert_yaml("hooks", "hooks"),
        }
    )
    scenario.app("web")
    scenario.reconcile(minutes=0)
    chat, hook = sorted(receiver.requests, key=lambda r: r.path != "/slack")
    assert chat.path == "/slack"
    assert chat.body == {
        "text": "web (staging): none -> Progressing (NewRender): 2 objects applied"
    }
    assert "Authorization" not in chat.headers
    assert hook.headers["Authorization"] == "Bearer t0ken-of-the-hook"
    assert hook.headers["Content-Type"] == "application/json"
    [commit] = status_commits(scenario.repo)
    status = scenario.status()
    assert hook.body == {
        "id": commit,
        "severity": "info",
        "summary": chat.body["text"],
        "commit": commit.split("/")[0],
        "release": "web",
        "cluster": "staging",
        "previousState": "none",
        "state": "Progressing",
        "reason": "NewRender",
        "outcome": "Synced",
        "message": "2 objects applied",
        "renderRef": status["rollout"]["renderRef"],
        "revision": status["lastAttempted"]["revision"],
        "time": "2026-11-29T12:00:00Z",
    }


@pytest.mark.parametrize(
    ("kind", "base", "header"),
    [("github", "/api/v3", "Bearer gh-t0ken"), ("gitea", "/api/v1", "token gt-t0ken")],
)
def test_commit_statuses_go_to_the_source_revision_with_the_token(
    kind: str,
    base: str,
    header: str,
    scenario: Scenario,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    receiver.up()
    token = tmp_path / "token"
    token.write_text(header.split()[1] + "\n")
    providers(
        scenario,
        f"providers:\n  forge: {{type: {kind}, repository: acme/gitops, "
        f"url: '{receiver.url(base)}', token: {{file: {token}}}}}\n",
    )
    scenario.commit({"alerts/forge.yaml": alert_yaml("forge", "forge")})
    good = scenario.app("web")
    scenario.reconcile(minutes=0)
    scenario.deployment_ready()
    scenario.reconcile(minutes=1)
    bad = scenario.app("web", image="2.0")
    scenario.reconcile(minutes=2)
    scenario.deployment_failed()
    scenario.reconcile(minutes=3)  # rolled back: the failure is on 2.0's revision
    told = [(r.path, r.body["state"]) for r in receiver.requests]
    statuses = f"{base}/repos/acme/gitops/statuses"
    assert told == [
        (f"{statuses}/{good}", "pending"),
        (f"{statuses}/{good}", "success"),
        (f"{statuses}/{bad}", "pending"),
        (f"{statuses}/{bad}", "failure"),
    ]
    assert {r.headers["Authorization"] for r in receiver.requests} == {header}
    assert {r.body["context"] for r in receiver.requests} == {"convoy-batch/web/staging"}
    assert all(len(r.body["description"]) <= 140 for r in receiver.requests)


# --- Alerts and providers that are not right --------------------------------------------------


def test_a_bad_alert_file_is_one_line_and_the_other_alerts_and_releases_go_on(
    scenario: Scenario, receiver: Receiver
) -> None:
    receiver.up()
    providers(scenario, "providers:\n" + generic(receiver))
    scenario.commit(
        {
            "alerts/bad.yaml": alert_yaml("bad", "hooks", "  sevrity: error\n"),
            "alerts/good.yaml": alert_yaml("good", "hooks"),
            "alerts/nowhere.yaml": alert_yaml("nowhere", "pager"),
        }
    )
    scenario.app("web")
    result = scenario.cli_process("reconcile", "--now", format_time(T0))
    assert result.code == 0, result.err
    lines = result.err.splitlines()
    assert lines == [
        "ERROR alerts/bad.yaml: spec.sevrity: unknown field",
        "ERROR alerts/nowhere.yaml: spec.provider: 'pager' is not defined in "
        "<state>/providers.yaml",
    ]
    assert scenario.status()["rollout"]["state"] == "Progressing"
    assert receiver.ids() == status_commits(scenario.repo)


def test_a_bad_providers_file_is_one_line_naming_the_file_and_field(
    scenario: Scenario,
) -> None:
    providers(scenario, "providers:\n  forge: {type: github, token: {env: X}}\n")
    scenario.commit({"alerts/forge.yaml": alert_yaml("forge", "forge")})
    scenario.app("web")
    result = scenario.cli_process("reconcile", "--now", format_time(T0))
    assert result.code == 0
    assert result.err.splitlines() == [
        "ERROR notifications: <state>/providers.yaml: providers.forge: "
        "github: repository: give owner/name"
    ]


def test_no_token_or_url_is_ever_in_the_output_the_statuses_the_commits_or_the_outbox(
    scenario: Scenario, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver.status = 401
    receiver.up()
    secret_path = "/services/T0SECRET/B0SECRET/x0secret"
    monkeypatch.setenv("CHAT_URL", receiver.url(secret_path))
    monkeypatch.setenv("FORGE_TOKEN", "f0rge-t0ken-value")
    monkeypatch.setenv("DOWN_TOKEN", "d0wn-t0ken-value")
    closed = Receiver()  # never up: connections refused
    try:
        providers(
            scenario,
            "providers:\n  chat: {type: slack, url: {env: CHAT_URL}}\n"
            f"  forge: {{type: github, repository: a/b, url: '{receiver.url('/gh-b4se')}', "
            "token: {env: FORGE_TOKEN}}\n"
            f"  down: {{type: generic, url: '{closed.url('/d0wn-secret-path')}', "
            "token: {env: DOWN_TOKEN}}\n"
            "  unset: {type: generic, url: {env: NOT_SET_ANYWHERE}}\n",
        )
        scenario.commit(
            {f"alerts/{p}.yaml": alert_yaml(p, p) for p in ("chat", "forge", "down", "unset")}
        )
        scenario.app("web")
        result = scenario.cli_process("-v", "reconcile", "--now", format_time(T0))
    finally:
        closed.close()
    assert result.code == 0, result.err
    assert "not sent (HTTP 401)" in result.err, result.err
    assert "connection refused" in result.err, result.err
    assert "not sent (cannot connect (connection refused))" in result.err
    assert "url: environment variable NOT_SET_ANYWHERE is not set" in result.err
    assert len(receiver.requests) == 2  # chat and forge answered 401
    seen = [result.out, result.err, scenario.repo.git.log("-p", "--all")]
    seen += [p.read_text() for p in scenario.state.rglob("*.json")]
    for text in seen:
        for secret in ("t0ken-value", "SECRET", "d0wn-secret-path", "gh-b4se", "127.0.0.1:"):
            assert secret not in text


@pytest.mark.parametrize(
    ("source", "written", "where"),
    [
        ("file", "t0ken-line\r\nX-Injected: 1\n", "token: <state>/hook-token"),
        ("file", "t0ken-nul\x00rest\n", "token: <state>/hook-token"),
        ("env", "t0ken-env\nX-Injected: 1", "token: environment variable HOOK_TOKEN"),
        ("url", "http://127.0.0.1:1/h\r\nX-Injected: 1\n", "url: <state>/hook-url"),
    ],
    ids=["crlf-in-a-token-file", "nul-in-a-token-file", "lf-in-a-variable", "crlf-in-a-url"],
)
def test_a_token_or_url_with_a_control_character_is_refused_in_one_line_naming_it(
    scenario: Scenario,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    written: str,
    where: str,
) -> None:
    receiver.up()
    scenario.state.mkdir(exist_ok=True)
    if source == "env":
        monkeypatch.setenv("HOOK_TOKEN", written)
        hook = generic(receiver, extra=", token: {env: HOOK_TOKEN}")
    elif source == "file":
        (scenario.state / "hook-token").write_text(written)
        hook = generic(receiver, extra=", token: {file: hook-token}")
    else:
        (scenario.state / "hook-url").write_text(written)
        hook = "  hooks: {type: generic, url: {file: hook-url}}\n"
    providers(scenario, "providers:\n" + hook)
    scenario.commit({"alerts/all.yaml": alert_yaml("all", "hooks")})
    scenario.app("web")
    result = scenario.cli_process("-v", "reconcile", "--now", format_time(T0))
    assert result.code == 0, result.err
    assert receiver.requests == []
    [line] = [line for line in result.err.splitlines() if "not sent" in line]
    assert f"not sent ({where}: holds a " in line, line
    assert "Traceback" not in result.err and str(scenario.state) not in result.err
    seen = [result.out, result.err, scenario.repo.git.log("-p", "--all")]
    seen += [p.read_text() for p in scenario.state.rglob("*.json")]
    for text in seen:
        assert "X-Injected" not in text and "t0ken-" not in text


# --- matching -------------------------------------------------------------------------------


def event(**fields: str) -> Event:
    base = {
        "commit": "c" * 40,
        "release": "api",
        "cluster": "prod",
        "previous_state": "Progressing",
        "state": "Succeeded",
        "reason": "Healthy",
        "outcome": "Synced",
        "time": "2026-11-29T12:00:00Z",
    }
    return Event.model_validate(base | fields)


def alert(spec: str) -> Alert:
    import yaml

    data = yaml.safe_load(alert_yaml("a", "p", spec))
    return Alert.model_validate(data)


API = ReleaseFacts("api", "prod", {"team": "shop", "tier": "1"})
ROLLED_BACK = {"state": "RolledBack", "reason": "Unhealthy", "outcome": "RolledBack"}


@pytest.mark.parametrize(
    ("spec", "fields", "wanted"),
    [
        ("", {}, True),
        ("  releases: [{name: api}]\n", {}, True),
        ("  releases: [{name: web}]\n", {}, False),
        ("  releases: [{name: web}, {cluster: prod}]\n", {}, True),
        ("  releases: [{name: api, cluster: staging}]\n", {}, False),
        ("  releases: [{matchLabels: {team: shop}}]\n", {}, True),
        ("  releases: [{matchLabels: {team: shop, tier: '2'}}]\n", {}, False),
        ("  severity: error\n", {}, False),
        ("  severity: error\n", ROLLED_BACK, True),
        ("  severity: error\n", {"outcome": "ApplyFailed"}, True),
        ("  states: [RolledBack, Failed]\n", {}, False),
        ("  states: [RolledBack, Failed]\n", ROLLED_BACK, True),
        ("  reasons: [Unhealthy]\n", ROLLED_BACK, True),
        ("  reasons: [ApplyFailed]\n", {"outcome": "ApplyFailed"}, True),
        ("  reasons: [ApplyFailed]\n", {}, False),
    ],
    ids=[
        "every-event", "by-name", "another-name", "any-selector", "all-fields-of-one",
        "by-label", "every-label", "error-only-skips-info", "rollback-is-error",
        "error-reason-is-error", "state-filter-skips", "state-filter-takes",
        "transition-reason", "outcome-reason", "reason-filter-skips",
    ],
)  # fmt: skip
def test_an_alert_takes_the_events_its_selectors_and_filters_name(
    spec: str, fields: dict[str, str], wanted: bool
) -> None:
    assert alert(spec).wants(event(**fields), API) is wanted


def test_a_release_whose_file_is_gone_matches_only_by_name() -> None:
    gone = ReleaseFacts("api")
    assert alert("  releases: [{name: api}]\n").wants(event(), gone)
    assert not alert("  releases: [{cluster: prod}]\n").wants(event(), gone)


NEW = {"previous_state": "none", "state": "Progressing", "reason": "NewRender"}
ERRORED = {"outcome": "RenderFailed", "previous_state": "Succeeded"}
NO_ROLLOUT = {"state": "-", "previous_state": "-"}


@pytest.mark.parametrize(
    ("fields", "severity", "state"),
    [
        ({}, Severity.INFO, "success"),
        (NEW, Severity.INFO, "pending"),
        (ROLLED_BACK, Severity.ERROR, "failure"),
        ({"state": "Failed", "reason": "ProgressDeadlineExceeded"}, Severity.ERROR, "failure"),
        (ERRORED, Severity.ERROR, "error"),
        (NO_ROLLOUT | {"outcome": "WaitingForManualSync"}, Severity.INFO, "pending"),
        (NO_ROLLOUT | {"outcome": "WaveTimeout"}, Severity.INFO, "failure"),
        (NO_ROLLOUT | {"previous_state": "none"}, Severity.INFO, "success"),
    ],
    ids=["succeeded", "progressing", "rolled-back", "failed", "error-reason", "waiting",
         "wave-timeout", "synced-without-rollout"],
)  # fmt: skip
def test_severity_and_commit_state_of_an_event(
    fields: dict[str, str], severity: Severity, state: str
) -> None:
    e = event(**fields)
    assert e.severity == severity
    assert commit_state(e) == state


def test_without_alerts_a_tick_has_no_outbox(scenario: Scenario) -> None:
    scenario.app("web")
    scenario.reconcile(minutes=0)
    assert not (scenario.state / "outbox").exists()
    assert "outbox.lock" not in os.listdir(scenario.state / "locks")


def test_a_new_render_while_progressing_is_told_by_new_render_in_events_and_history(
    scenario: Scenario, receiver: Receiver
) -> None:
    receiver.up()
    providers(scenario, "providers:\n" + generic(receiver))
    scenario.commit({"alerts/all.yaml": alert_yaml("all", "hooks")})
    scenario.app("web")
    scenario.reconcile(minutes=0)
    scenario.app("web", image="2.0")  # before 1.0 was healthy
    scenario.reconcile(minutes=1)
    told = [(r.body["previousState"], r.body["state"], r.body["reason"]) for r in receiver.requests]
    assert told[-1] == ("Progressing", "Progressing", "NewRender")
    logged = [(c.before, c.after, c.reason) for c in history.history(scenario.root, "web")]
    assert logged == told


def test_an_outbox_that_leads_out_of_the_state_directory_is_one_line_and_never_written(
    scenario: Scenario, receiver: Receiver, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    providers(scenario, "providers:\n" + generic(receiver))
    scenario.commit({"alerts/all.yaml": alert_yaml("all", "hooks")})
    scenario.app("web")
    outside = tmp_path / "outside"
    outside.mkdir()
    (scenario.state / "outbox").symlink_to(outside)
    with caplog.at_level(logging.WARNING, logger="convoy_batch"):
        assert scenario.reconcile(minutes=0).code == 0
    assert list(outside.iterdir()) == []
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "outbox: a symlink leading out of" in errors[0]
    assert scenario.status()["rollout"]["state"] == "Progressing"


def test_a_retirement_is_told_to_the_alerts_of_its_cluster(
    scenario: Scenario, receiver: Receiver
) -> None:
    receiver.up()
    providers(scenario, "providers:\n" + generic(receiver))
    spec = "  releases: [{cluster: staging}]\n  reasons: [DeletionBlocked, Deleted]\n"
    scenario.commit({"alerts/retired.yaml": alert_yaml("retired", "hooks", spec)})
    for name in ("web", "api", "db"):
        scenario.app(name)
    scenario.reconcile(minutes=0)
    scenario.commit({"releases/web.yaml": None, "releases/api.yaml": None}, "remove two")
    scenario.reconcile(minutes=1)  # held by the guard: one event per Release
    blocked = [r.body for r in receiver.requests]
    scenario.commit({"notes.txt": "x"}, "allow\n\nConvoy-Allow-Delete: web\n")

    scenario.reconcile(minutes=2)

    assert sorted((e["release"], e["outcome"]) for e in blocked) == [
        ("api", "DeletionBlocked"),
        ("web", "DeletionBlocked"),
    ]
    deleted = receiver.requests[-1].body
    assert len(receiver.requests) == 3
    assert (deleted["release"], deleted["cluster"], deleted["state"]) == (
        "web",
        "staging",
        "Deleted",
    )
    assert deleted["previousState"] == "Progressing"
    assert deleted["message"] == "2 objects deleted, 0 kept"
    assert deleted["summary"] == (
        "web (staging): Progressing -> Deleted (Deleted): 2 objects deleted, 0 kept"
    )
