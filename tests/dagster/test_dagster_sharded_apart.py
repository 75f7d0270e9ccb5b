"""The job ``convoy_sharded_tick`` with a remote (``$CONVOY_REPO_URL``): a real bare
repository in the test's folder, the tick's clone a folder of its own, and each shard op
(the multiprocess executor, a process each) in a clone of its own that pushes its own
status commits. The instance is a sqlite one in the test's folder: the multiprocess
executor needs one that outlives a process, and the git remote is what is tested here."""

import subprocess
from pathlib import Path

import dagster as dg
import pytest

from convoy_batch.defs.sharded import IO_DIR_ENV
from convoy_batch.status.remote import BUNDLE, URL_ENV
from tests.dagster.test_dagster_sharded import (
    WAVES,
    _quiet_beta_warnings,
    in_wave_order,
    run_job,
    two,
)
from tests.engine.test_shards import fleet, outcome, outcome_at
from tests.support.gitfixtures import status_commits
from tests.support.scenario import Scenario

__all__ = ["_quiet_beta_warnings", "two"]  # the fixtures, shared with the job's other test

PERSON_NOTE = "a person's note"
PERSON_PUSHES_ONCE = """[ -e '{mark}' ] && exit 0
touch '{mark}'
# Out of this push's quarantine: the person's push is a push of its own.
unset GIT_DIR GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
git clone -q '{remote}' '{person}' && cd '{person}' && echo note > notes.md && git add notes.md
git -c user.name=person -c user.email=person@localhost commit -q -m "a person's note"
git push -q origin HEAD:main
"""
"""The hook's part for the first push it sees: a person's commit pushed meanwhile (the
push it interrupts then finds its ref moved, as when the person's push came first)."""


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def bare_remote(scenario: Scenario, folder: Path) -> Path:
    """``scenario``'s repository pushed to a new bare remote in ``folder``."""
    remote = folder / "origin.git"
    git(folder, "init", "-q", "--bare", "-b", "main", str(remote))
    git(scenario.root, "push", "-q", str(remote), "main")
    return remote


def on_push(remote: Path, log: Path, then: str = "") -> None:
    """A ``pre-receive`` hook of ``remote`` that appends each push's ref updates to
    ``log``, then runs ``then`` (its exit status decides)."""
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\ncat >> '{log}'\n{then}")
    hook.chmod(0o755)


def pushes(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def remote_order(remote: Path) -> list[str]:
    """The subjects of the remote's commits, oldest first, ``convoy-batch `` dropped."""
    subjects = git(remote, "log", "--reverse", "--format=%s", "main")
    return [line.removeprefix("convoy-batch ") for line in subjects.splitlines()]


def released(order: list[str]) -> list[str]:
    """The Releases of the status commits among ``order``, oldest first."""
    names = {n for wave in WAVES for n in wave}
    return [s.split(":")[0] for s in order if s.split(":")[0] in names]


def checkout(remote: Path, folder: Path) -> Path:
    git(remote.parent, "clone", "-q", str(remote), str(folder))
    return folder


def fsck(remote: Path) -> None:
    done = subprocess.run(
        ["git", "-C", str(remote), "fsck", "--strict", "--no-progress"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def instance(folder: Path) -> dg.DagsterInstance:
    """A sqlite instance in ``folder / "dagster"``."""
    (folder / "dagster").mkdir()
    return dg.DagsterInstance.local_temp(str(folder / "dagster"))


def assert_nothing_left_behind(state: Path) -> None:
    assert not (state / BUNDLE).exists()
    assert not list((state / "intents").glob("*.json"))


def test_shards_in_clones_of_their_own_push_each_status_once_in_wave_order(
    two: tuple[Scenario, Scenario], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, sharded = two
    for s in two:
        fleet(s)
    assert one.reconcile(minutes=0).code == 1  # ghost: ClusterNotFound
    remote = bare_remote(sharded, tmp_path)
    log = tmp_path / "pushes"
    on_push(remote, log)
    tick = tmp_path / "pods" / "tick" / "repo"
    io = tmp_path / "io"  # the ops' outputs, as on the state volume of deploy/
    with monkeypatch.context() as env, instance(tmp_path) as i:
        env.setenv(URL_ENV, str(remote))
        env.setenv(IO_DIR_ENV, str(io))
        first = run_job(i, sharded, env, minutes=0, stages=4, repo=tick, shared_io=True)
        head, pushed = git(remote, "rev-parse", "main"), pushes(log)
        again = run_job(i, sharded, env, minutes=0, stages=4, repo=tick, all_releases=True)

    assert not first.success and not again.success  # ghost's error fails each run
    outputs = {p.parent.name for p in (io / first.run_id).rglob("*") if p.is_file()}
    assert {"plan_waves", "wave_1", "wave_2", "wave_3"} <= outputs
    assert status_commits(remote, "main") == dict.fromkeys(
        ["web", "api", "shop", "blog", "ghost"], 1
    )
    assert in_wave_order(released(remote_order(remote)))
    assert sorted(p.name for p in tick.parent.iterdir()) == ["repo", "repo-shard0", "repo-shard1"]
    fsck(remote)
    assert outcome_at(checkout(remote, tmp_path / "check"), sharded.state) == outcome(one)
    assert_nothing_left_behind(sharded.state)
    # The second tick reconciled every Release again and changed nothing: no push.
    assert (git(remote, "rev-parse", "main"), pushes(log)) == (head, pushed)
    assert one.reconcile(minutes=0, extra=("--all",)).code == 1
    assert status_commits(remote, "main") == status_commits(one.repo)


def test_a_push_rejected_because_a_person_pushed_meanwhile_is_rebased_and_retried(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sharded = Scenario(tmp_path / "sharded", capsys)
    fleet(sharded)
    remote = bare_remote(sharded, tmp_path)
    person, mark, log = tmp_path / "person", tmp_path / "refused", tmp_path / "pushes"
    # The first push of the tick (a shard's) finds that a person pushed after its fetch:
    # the hook pushes the person's commit, so the ref the shard expected has moved.
    on_push(remote, log, PERSON_PUSHES_ONCE.format(mark=mark, remote=remote, person=person))
    tick = tmp_path / "pods" / "tick" / "repo"
    with monkeypatch.context() as env, instance(tmp_path) as i:
        env.setenv(URL_ENV, str(remote))
        result = run_job(i, sharded, env, minutes=0, stages=4, repo=tick)

    assert not result.success  # ghost's error, once all is recorded
    assert mark.exists(), "no push was refused"
    refused, person_push, *_ = (line.split()[0] for line in log.read_text().splitlines())
    assert refused == person_push  # both from where the shard fetched; the person's landed
    order = remote_order(remote)
    assert order.count(PERSON_NOTE) == 1
    # The refused shard's commit (the lowest wave's: ghost's) went on top of the person's.
    ghost = next(i for i, subject in enumerate(order) if subject.startswith("ghost:"))
    assert order.index(PERSON_NOTE) < ghost
    assert status_commits(remote, "main") == dict.fromkeys(
        ["web", "api", "shop", "blog", "ghost"], 1
    )
    assert in_wave_order(released(order))
    assert git(remote, "show", "main:notes.md") == "note"
    fsck(remote)
    assert_nothing_left_behind(sharded.state)
