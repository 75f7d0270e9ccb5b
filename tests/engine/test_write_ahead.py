"""Crash safety at the points that matter most (issue findings 1-4 and 6): a tick process
that dies right after it changed the cluster, or half-way through moving the branch; a
person committing in the same checkout while statuses are written; lock files left
behind; ``status/`` committed as a symlink.

A tick is killed by ending its process with ``os._exit`` at one of our own seams (right
after the step that changed the cluster, or after git moved the branch): no ``finally``
runs, as with SIGKILL. The exhaustive kills at every system call are in the crash suite.
"""

import os
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from convoy_batch.status import gitwrite
from convoy_batch.ticks.wakeups import work_waiting
from tests.engine.test_scenarios import succeed_first_render
from tests.support.scenario import T0, Scenario

ROOT = Path(__file__).resolve().parents[2]

# Patches applied in the child before the CLI runs; each ends the process like SIGKILL.
KILL_AFTER_CLUSTER_CHANGE = """
from convoy_batch.engine.stages import act, last_healthy, sync
real = act.carry_out
def carry_out(*args, **kwargs):
    real(*args, **kwargs)
    os._exit(137)
last_healthy.carry_out = sync.carry_out = carry_out
"""
KILL_AFTER_BRANCH_MOVED = """
from convoy_batch.status import gitwrite
real = gitwrite.GitWriter._move
def _move(self, old, new, message, then):
    real(self, old, new, message, then=lambda: os._exit(137))  # before the index is replaced
gitwrite.GitWriter._move = _move
"""


def killed_tick(s: Scenario, patch: str, minutes: float, *names: str) -> int:
    """Run ``reconcile`` in a child process with ``patch`` applied; its exit code."""
    args = ["--repo", str(s.root), "--state", str(s.state), "reconcile", *names]
    args += ["--now", f"2026-11-29T12:{int(minutes):02d}:00Z"]
    script = "import os, sys\n" + textwrap.dedent(patch)
    script += f"from convoy_batch.cli import main\nsys.exit(main({args!r}))\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", script], env=env, check=False).returncode


def git(s: Scenario, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=s.root, capture_output=True, text=True, check=check)


def test_a_rollback_decided_before_a_crash_is_completed_not_undone(scenario: Scenario) -> None:
    s = scenario
    succeed_first_render(s)
    s.app(image="2.0")
    assert s.reconcile("web", minutes=2).code == 0
    s.deployment_failed()
    # The tick decides RolledBack, applies 1.0 again, and dies before any commit.
    assert killed_tick(s, KILL_AFTER_CLUSTER_CHANGE, 3, "web") == 137
    assert s.status()["rollout"]["state"] == "Progressing"  # nothing committed yet
    assert s.deployment_image() == "example/web:1.0"
    # The tick schedule launches a run for it, whether or not web is due.
    assert "web (unfinished)" in work_waiting(s.root, s.state, T0 + timedelta(minutes=3))

    result = s.reconcile("web", minutes=4)
    assert result.code == 0, result.err
    status = s.status()
    assert status["rollout"]["state"] == "RolledBack"
    assert status["rollout"]["reason"] == "Unhealthy"
    assert s.deployment_image() == "example/web:1.0"  # 2.0 was never applied again
    assert "Progressing -> RolledBack (Unhealthy)" in s.status_log()[0]
    assert not (s.state / "intents" / "web.json").exists()


def test_a_first_rollout_decided_before_a_crash_is_committed_by_the_next_tick(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app()
    assert killed_tick(s, KILL_AFTER_CLUSTER_CHANGE, 0, "web") == 137
    assert not s.has_status()
    assert (s.state / "intents" / "web.json").exists()
    # A plain tick: the record makes web due, and its decision is committed as decided.
    result = s.reconcile(minutes=1)
    assert result.code == 0, result.err
    assert s.status()["rollout"]["state"] == "Progressing"
    assert s.status()["rollout"]["startedAt"] == "2026-11-29T12:00:00Z"
    assert s.status_log() == [
        "web: none -> Progressing (NewRender) "
        + s.status()["rollout"]["renderRef"].removeprefix("sha256:")[:12]
    ]
    assert not (s.state / "intents" / "web.json").exists()


def test_a_tick_killed_after_moving_the_branch_leaves_nothing_a_commit_could_revert(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app()
    s.app("api")
    assert killed_tick(s, KILL_AFTER_BRANCH_MOVED, 0) == 137
    assert s.has_status("web") and s.has_status("api")  # the branch moved
    # A person's commit now fails with git's own message: the index is locked.
    (s.root / "notes.txt").write_text("mine\n")
    git(s, "add", "notes.txt", check=False)
    refused = git(s, "commit", "-m", "notes", check=False)
    assert refused.returncode != 0 and "index.lock" in refused.stderr
    # The next tick clears the lock it recognises as its own and repairs the index.
    assert s.reconcile(minutes=1).code == 0
    assert git(s, "status", "--porcelain", "--", "status/").stdout == ""
    statuses = git(s, "ls-tree", "HEAD", "status/").stdout
    git(s, "add", "notes.txt")
    git(s, "commit", "-q", "-m", "notes")
    assert git(s, "ls-tree", "HEAD", "status/").stdout == statuses


def test_a_person_committing_while_statuses_are_written_waits_and_loses_nothing(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the status commits are written, a person's ``git commit`` fails with git's
    own message (the index is locked); a writer that ignores the index lock and moves
    the branch makes the commits be built again on its commit."""
    s = scenario
    for name in ("web", "api", "db"):
        s.app(name)
    (s.root / "notes.txt").write_text("mine\n")
    git(s, "add", "notes.txt")
    real = gitwrite.GitWriter._fast_import
    seen: list[str] = []

    def meanwhile(self: gitwrite.GitWriter, *args: Any) -> list[str]:
        if not seen:
            refused = git(s, "commit", "-q", "-m", "a person's commit", check=False)
            seen.append(refused.stderr)
            tree = git(s, "rev-parse", "HEAD^{tree}").stdout.strip()
            moved = git(s, "commit-tree", tree, "-p", "HEAD", "-m", "moved").stdout.strip()
            git(s, "update-ref", "HEAD", moved)  # ignores the index lock
            seen.append(moved)
        return real(self, *args)

    monkeypatch.setattr(gitwrite.GitWriter, "_fast_import", meanwhile)
    assert s.reconcile(minutes=0).code == 0
    assert "index.lock" in seen[0]
    assert all(s.has_status(n) for n in ("web", "api", "db"))
    assert seen[1] in git(s, "log", "--format=%H").stdout
    git(s, "commit", "-q", "-m", "a person's commit")  # now it goes through
    assert all(s.has_status(n) for n in ("web", "api", "db"))
    assert git(s, "status", "--porcelain").stdout == ""


def test_lock_files_a_killed_convoy_batch_left_are_cleared(scenario: Scenario) -> None:
    s = scenario
    s.app()
    assert s.reconcile(minutes=0).code == 0
    # What a tick killed while git held its locks leaves: the locks and our marker.
    (s.root / ".git" / "refs" / "heads" / "main.lock").write_text("")
    (s.root / ".git" / "index.lock").write_text("")
    (s.state / "locks" / "git-write.json").write_text('{"format": 1, "old": null}')
    s.deployment_ready()
    result = s.reconcile(minutes=1)
    assert result.code == 0, result.err
    assert s.status()["rollout"]["state"] == "Succeeded"
    assert not (s.root / ".git" / "index.lock").exists()
    assert not (s.root / ".git" / "refs" / "heads" / "main.lock").exists()


def test_a_lock_another_git_process_holds_is_one_line_and_the_decision_waits(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gitwrite, "_LOCK_WAIT", 0.2)
    s = scenario
    s.app()
    lock = s.root / ".git" / "refs" / "heads" / "main.lock"
    lock.write_text("")  # not ours: no marker
    result = s.reconcile(minutes=0)
    assert result.code == 1
    assert "Traceback" not in result.err
    line = next(ln for ln in result.err.splitlines() if "status commits not written" in ln)
    assert "refs/heads/main.lock" in line
    assert not s.has_status()
    assert (s.state / "intents" / "web.json").exists()  # the decision is kept
    lock.unlink()
    assert s.reconcile(minutes=1).code == 0
    assert s.status_log()[-1].startswith("web: none -> Progressing (NewRender)")
    assert not (s.state / "intents" / "web.json").exists()


def test_no_temporary_file_is_left_in_the_working_tree(scenario: Scenario) -> None:
    s = scenario
    s.app()
    assert s.reconcile(minutes=0).code == 0
    s.deployment_ready()
    assert s.reconcile(minutes=1).code == 0
    untracked = git(s, "status", "--porcelain", "--ignored", "--untracked-files=all").stdout
    assert untracked == ""
    assert sorted(p.name for p in (s.root / "status").iterdir()) == ["web.yaml"]


def test_a_status_folder_committed_as_a_symlink_is_refused_in_one_line(
    scenario: Scenario, tmp_path: Path
) -> None:
    s = scenario
    s.app()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (s.root / "status").symlink_to(elsewhere)
    git(s, "add", "status")
    git(s, "commit", "-q", "-m", "status elsewhere")
    result = s.reconcile(minutes=0)
    assert result.code == 2
    assert "Traceback" not in result.err
    assert [ln for ln in result.err.splitlines() if ln] == [
        "convoy-batch: status: committed as a symlink, not a folder; "
        "convoy-batch reads and writes no status through it"
    ]
    assert list(elsewhere.iterdir()) == []
    assert not (s.state / "clusters" / "staging").exists()  # nothing applied either


def test_a_quiet_tick_writes_no_record(scenario: Scenario) -> None:
    s = scenario
    succeed_first_render(s)
    intents = s.state / "intents"
    before = sorted(intents.iterdir()) if intents.exists() else []
    assert before == []
    assert s.reconcile("web", minutes=2).code == 0  # re-applies web, decides nothing new
    assert not intents.exists() or list(intents.iterdir()) == []


def test_the_render_a_record_applies_survives_the_render_gc(scenario: Scenario) -> None:
    s = scenario
    s.app()
    assert killed_tick(s, KILL_AFTER_CLUSTER_CHANGE, 0, "web") == 137
    record = (s.state / "intents" / "web.json").read_text()
    # Another Release's tick runs the GC while web's record is pending.
    s.app("api")
    assert s.reconcile("api", minutes=1).code == 0
    ref = next(p.stem for p in (s.state / "renders").iterdir() if p.stem in record)
    assert (s.state / "renders" / f"{ref}.json").exists()
    assert s.reconcile("web", minutes=2).code == 0
    assert s.status()["rollout"]["renderRef"] == f"sha256:{ref}"


def test_a_decision_whose_step_fails_when_completed_is_still_committed(
    scenario: Scenario,
) -> None:
    s = scenario
    succeed_first_render(s)
    healthy = s.status()["lastHealthy"]["renderRef"].removeprefix("sha256:")
    s.app(image="2.0")
    assert s.reconcile("web", minutes=2).code == 0
    s.deployment_failed()
    assert killed_tick(s, KILL_AFTER_CLUSTER_CHANGE, 3, "web") == 137
    (s.state / "renders" / f"{healthy}.json").unlink()  # the step cannot be done again
    result = s.reconcile("web", minutes=4)
    assert result.code == 0, result.err  # RolledBack counts as reconciled
    status = s.status()
    assert status["rollout"]["state"] == "RolledBack"  # the decision stands
    completed, held = s.status_log()[1], s.status_log()[0]
    assert completed.startswith("web: Progressing -> RolledBack (Unhealthy)")
    # The same tick then holds the rollback, which cannot apply without the blob either.
    assert held == "web: RolledBack"
    assert status["lastAttempted"]["applied"] is False
    assert "no valid blob for last healthy" in status["lastAttempted"]["message"]
    assert not (s.state / "intents" / "web.json").exists()


@pytest.mark.parametrize("refs", ["loose", "packed", "detached", "read-again"])
def test_a_tick_skips_a_release_whose_status_another_tick_committed_since(
    scenario: Scenario, refs: str
) -> None:
    """Two ticks read HEAD; the second commits web's status first. The first, when it
    comes to web, decides nothing from the status it read: web is skipped, no commit.
    However git keeps HEAD's commit (a loose ref, packed refs, a detached HEAD), the
    move is seen, also after the tick read HEAD again for an earlier Release's commit
    (``read-again``: what its texts' thread does within the batch)."""
    from convoy_batch.engine.tick import Tick
    from convoy_batch.ticks import runner

    s = scenario
    s.app()
    if refs == "packed":
        subprocess.run(["git", "pack-refs", "--all"], cwd=s.root, check=True)
        assert not (s.root / ".git" / "refs" / "heads" / "main").exists()
    if refs == "detached":
        subprocess.run(["git", "checkout", "-q", "--detach"], cwd=s.root, check=True)
    slow = Tick.open(s.root, s.state, T0)
    assert s.reconcile().code == 0  # the other tick: web none -> Progressing
    head = s.head()

    report = runner.TickReport()
    with slow.status_store.batch():
        if refs == "read-again":
            slow.status_store.load("web")  # HEAD's status files read again, at the new HEAD
        options = runner.TickOptions(names=("web",))
        runner._reconcile_due(slow, runner.select(slow, ["web"]), options, report)
    slow.close()

    assert report.skipped == {"web": runner.RACED}
    assert report.handled == []
    assert s.head() == head and len(s.status_log()) == 1
