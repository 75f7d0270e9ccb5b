"""Runs that each work in a clone of their own (``$CONVOY_REPO_URL``), as pods of a
Kubernetes deployment do: the remote is a real bare repository in the test's folder, the
state directory is shared, and every "pod" is a folder of its own (new, or kept)."""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from convoy_batch.cli import main
from convoy_batch.state.locks import Locks
from convoy_batch.status import remote as clone
from convoy_batch.ticks.wakeups import release_names, wake_keys
from convoy_batch.timefmt import format_time
from tests.support.scenario import PROJECT, T0, Result, Scenario


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


class Fleet:
    """A person's repository pushed to a bare remote, and runs in clones of it."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.person = Scenario(tmp_path, capsys)
        self.person.app("web")
        self.remote = tmp_path / "origin.git"
        git(tmp_path, "init", "-q", "--bare", "-b", "main", str(self.remote))
        git(self.person.root, "remote", "add", "origin", str(self.remote))
        git(self.person.root, "push", "-q", "-u", "origin", "main")
        self.pods = tmp_path / "pods"
        self.state = self.person.state
        self.capsys = capsys

    def pod(self, name: str) -> Path:
        return self.pods / name / "repo"

    def argv(self, pod: str, *args: str, minutes: float = 0) -> list[str]:
        now = format_time(T0 + timedelta(minutes=minutes))
        return ["--repo", str(self.pod(pod)), "--state", str(self.state), *args, "--now", now]

    def run(self, pod: str, *args: str, minutes: float = 0) -> Result:
        self.capsys.readouterr()
        code = main(self.argv(pod, "reconcile", *args, minutes=minutes))
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def status_log(self) -> list[str]:
        """The status commits on the remote, newest first."""
        return git(self.remote, "log", "--format=%s", "main", "--", "status/").splitlines()

    def person_adds(self, app: str) -> None:
        """A person pulls (the runs pushed), commits a new Release and pushes."""
        git(self.person.root, "pull", "-q", "--rebase", "origin", "main")
        self.person.app(app)
        git(self.person.root, "push", "-q", "origin", "main")

    def refuse_pushes(self, hook: str = "echo no pushes today >&2\nexit 1\n") -> Path:
        path = self.remote / "hooks" / "pre-receive"
        path.write_text("#!/bin/sh\n" + hook)
        path.chmod(0o755)
        return path


@pytest.fixture
def fleet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Fleet:
    fleet = Fleet(tmp_path, capsys)
    monkeypatch.setenv(clone.URL_ENV, str(fleet.remote))
    return fleet


def test_a_run_clones_the_remote_into_a_new_folder_and_pushes_its_status_commits(
    fleet: Fleet,
) -> None:
    result = fleet.run("a")

    assert result.code == 0, result.err
    assert [line.split(" (")[0] for line in fleet.status_log()] == ["web: none -> Progressing"]
    assert git(fleet.pod("a"), "rev-parse", "HEAD") == git(fleet.remote, "rev-parse", "main")
    assert not (fleet.state / clone.BUNDLE).exists()
    assert not list((fleet.state / "intents").glob("*.json"))


def test_a_run_in_a_new_folder_starts_from_what_the_last_run_pushed(fleet: Fleet) -> None:
    fleet.run("a")
    fleet.person.deployment_ready()

    result = fleet.run("b", "web", minutes=1)

    assert result.code == 0, result.err
    assert [line.split(" (")[0] for line in fleet.status_log()] == [
        "web: Progressing -> Succeeded",
        "web: none -> Progressing",
    ]


def test_a_run_in_a_kept_folder_fetches_what_a_person_pushed(fleet: Fleet) -> None:
    fleet.run("a")
    fleet.person.deployment_ready()
    fleet.run("a", "web", minutes=1)
    fleet.person_adds("api")

    result = fleet.run("a", minutes=2)

    assert result.code == 0, result.err
    assert fleet.status_log()[0].startswith("api: none -> Progressing")
    assert git(fleet.pod("a"), "rev-parse", "HEAD") == git(fleet.remote, "rev-parse", "main")


def test_a_push_that_fails_keeps_the_commits_in_the_state_directory_for_the_next_run(
    fleet: Fleet,
) -> None:
    hook = fleet.refuse_pushes()

    refused = fleet.run("a")

    assert refused.code == 0, refused.err
    assert "no pushes today" in refused.err and "the commits stay local" in refused.err
    assert fleet.status_log() == []
    assert (fleet.state / clone.BUNDLE).is_file()
    assert not (fleet.state / "intents" / "web.json").exists()  # the bundle keeps it

    hook.unlink()
    fleet.person.deployment_ready()
    result = fleet.run("b", minutes=1)

    assert result.code == 0, result.err
    assert [line.split(" (")[0] for line in fleet.status_log()] == [
        "web: Progressing -> Succeeded",
        "web: none -> Progressing",
    ]
    assert not (fleet.state / clone.BUNDLE).exists()
    assert not list((fleet.state / "intents").glob("*.json"))


def test_a_bundle_kept_by_a_failed_push_is_replayed_onto_what_the_remote_got_since(
    fleet: Fleet,
) -> None:
    hook = fleet.refuse_pushes()
    fleet.run("a")
    hook.unlink()
    fleet.person_adds("api")

    result = fleet.run("b", "api", minutes=1)

    assert result.code == 0, result.err
    log = fleet.status_log()
    assert [line.split(":")[0] for line in log] == ["api", "web"]
    assert git(fleet.remote, "log", "-1", "--format=%s", "main~2") == "api 1.0"


def test_a_run_killed_during_its_push_leaves_its_decisions_to_the_next_run(
    fleet: Fleet, tmp_path: Path
) -> None:
    pushing = tmp_path / "pushing"
    hook = fleet.refuse_pushes(f"touch {pushing}\nsleep 60\nexit 1\n")
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    argv = [sys.executable, "-m", "convoy_batch.cli", *fleet.argv("a", "reconcile")]
    process = subprocess.Popen(argv, env=env, start_new_session=True, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not pushing.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pushing.exists(), "the run never pushed"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    hook.unlink()
    assert not (fleet.state / clone.BUNDLE).exists()
    assert (fleet.state / "intents" / "web.json").is_file()

    result = fleet.run("b", minutes=1)

    assert result.code == 0, result.err
    assert [line.split(" (")[0] for line in fleet.status_log()] == ["web: none -> Progressing"]
    assert not list((fleet.state / "intents").glob("*.json"))


def test_a_sharded_run_works_in_one_clone_and_pushes_once(fleet: Fleet) -> None:
    fleet.person_adds("api")

    result = fleet.run("a", "--jobs", "2")

    assert result.code == 0, result.err
    assert sorted(line.split(":")[0] for line in fleet.status_log()) == ["api", "web"]
    assert git(fleet.pod("a"), "rev-parse", "HEAD") == git(fleet.remote, "rev-parse", "main")


def test_the_sensors_read_a_clone_fetched_for_them(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVOY_STATE", str(fleet.state))
    sensors = fleet.pod("code-server")

    assert release_names(sensors) == ["web"]
    fleet.person_adds("api")
    assert release_names(sensors) == ["api", "web"]
    assert set(wake_keys(sensors, fleet.state, T0)) == {"api", "web"}


def test_a_tick_waits_its_turn_on_the_clone_of_the_state_directory(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clone, "REMOTE_WAIT", 0.2)

    with Locks(fleet.state).remote():
        result = fleet.run("a")

    assert result.code == 2
    assert "another tick works from a clone of the remote" in result.err
    assert fleet.status_log() == []


def test_a_bundle_git_cannot_read_is_moved_aside_and_the_run_goes_on(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    fleet.state.mkdir(mode=0o700)
    (fleet.state / clone.BUNDLE).write_text("not a bundle\n")

    result = fleet.run("a")

    assert result.code == 0, result.err
    assert "not replayed, moved to unpushed-" in caplog.text
    assert [p.name.startswith("unpushed-") for p in fleet.state.glob("unpushed*")] == [True]
    assert len(fleet.status_log()) == 1


def test_a_state_directory_inside_the_clone_is_refused(fleet: Fleet) -> None:
    code = main(["--repo", str(fleet.pod("a")), "reconcile", "--now", format_time(T0)])

    assert code == 2
    assert "must be a folder of its own" in fleet.capsys.readouterr().err
    assert not fleet.pod("a").exists()


def test_a_folder_that_is_neither_empty_nor_a_repository_is_refused(fleet: Fleet) -> None:
    fleet.pod("a").mkdir(parents=True)
    (fleet.pod("a") / "notes.txt").write_text("mine\n")

    result = fleet.run("a")

    assert result.code == 2
    assert "not a git repository and not empty" in result.err
    assert (fleet.pod("a") / "notes.txt").read_text() == "mine\n"


def test_a_remote_out_of_reach_is_one_line_that_never_shows_the_credentials(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(clone.URL_ENV, "http://convoy:s3cret@127.0.0.1:9/gitops.git")

    result = fleet.run("a")

    assert result.code == 2
    assert result.err.count("\n") == 1 and "CONVOY_REPO_URL" in result.err
    assert "s3cret" not in result.err and "***@127.0.0.1:9" in result.err
