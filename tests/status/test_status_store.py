"""Status files in the GitOps repository (SPEC 10): load, write, commit alone, push.

Real git repositories in tmp_path; the remote is a local bare repository.
"""

import logging
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import git
import pytest

from convoy_batch.models import (
    Attempt,
    Condition,
    ConditionStatus,
    ReleaseStatus,
    RenderRecord,
    Rollout,
    RolloutState,
    WaveStatus,
)
from convoy_batch.state.locks import Locks
from convoy_batch.status import text as status_text
from convoy_batch.status.store import PushResult, StatusStore
from tests.support.status_keys import STATUS_KEYS

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
REF = "sha256:" + "a" * 64
REF_OLD = "sha256:" + "b" * 64
REV = "c" * 40
RELEASE = "apiVersion: convoy.dev/v1alpha1\nkind: Release\nmetadata: {name: web}\n"


# --- git helpers --------------------------------------------------------------------------


def run_git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.rstrip("\n")


def configure(path: Path) -> None:
    run_git(path, "config", "user.name", "Dev")
    run_git(path, "config", "user.email", "dev@example.com")
    run_git(path, "config", "commit.gpgsign", "false")


def commit_files(path: Path, files: dict[str, str], message: str = "change") -> str:
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
        run_git(path, "add", rel)
    run_git(path, "commit", "-q", "-m", message)
    return run_git(path, "rev-parse", "HEAD")


def new_repo(path: Path) -> Path:
    path.mkdir()
    run_git(path, "init", "-q", "-b", "main")
    configure(path)
    commit_files(path, {"releases/web.yaml": RELEASE, "README.md": "ops\n"}, "init")
    return path


def store_of(path: Path, state: Path | None = None) -> StatusStore:
    return StatusStore(git.Repo(path), Locks(state or path.parent / f"{path.name}-state"))


def head(path: Path) -> str:
    return run_git(path, "rev-parse", "HEAD")


def comments(text: str) -> list[tuple[str, str]]:
    """(key on the same line or "", comment) of every comment, in order."""
    found = []
    for line in text.splitlines():
        if "#" in line:
            code, _, comment = line.partition("#")
            found.append((code.split(":")[0].strip(), comment.strip()))
    return found


def porcelain(path: Path) -> list[str]:
    return run_git(path, "status", "--porcelain").splitlines()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return new_repo(tmp_path / "repo")


@pytest.fixture
def origin(tmp_path: Path, repo: Path) -> Path:
    """A bare remote holding ``repo``'s main branch, set as its upstream."""
    bare = tmp_path / "origin.git"
    run_git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    run_git(repo, "remote", "add", "origin", str(bare))
    run_git(repo, "push", "-q", "-u", "origin", "main")
    return bare


def clone(origin: Path, dest: Path) -> Path:
    run_git(origin.parent, "clone", "-q", str(origin), str(dest))
    configure(dest)
    return dest


# --- statuses -----------------------------------------------------------------------------


def status(reason: str = "Synced", ref: str = REF, message: str = "") -> ReleaseStatus:
    rollout = Rollout(
        state=RolloutState.PROGRESSING, render_ref=ref, started_at=T0, reason="NewRender"
    )
    attempt = Attempt(
        render_ref=ref, revision=REV, time=T0, applied=True, reason=reason, message=message
    )
    return ReleaseStatus(rollout=rollout, last_attempted=attempt)


FULL = ReleaseStatus(
    rollout=Rollout(state=RolloutState.SUCCEEDED, render_ref=REF, started_at=T0, reason="Healthy"),
    last_attempted=Attempt(render_ref=REF, revision=REV, time=T0, applied=True, reason="Synced"),
    last_successful=RenderRecord(render_ref=REF, revision=REV, time=T0),
    last_healthy=RenderRecord(render_ref=REF, revision=REV, time=T0 + timedelta(minutes=3)),
    waves=(
        WaveStatus(wave="PreSync", render_ref=REF, started_at=T0),
        WaveStatus(wave=0, render_ref=REF, started_at=T0),
        WaveStatus(wave=1, render_ref=REF, started_at=T0 + timedelta(minutes=1)),
    ),
    history=(
        RenderRecord(render_ref=REF, revision=REV, time=T0),
        RenderRecord(render_ref=REF_OLD, revision=None, time=T0 - timedelta(days=1)),
    ),
    conditions=(
        Condition(
            type="RolloutSucceeded",
            status=ConditionStatus.TRUE,
            reason="Healthy",
            last_transition_time=T0,
        ),
    ),
    last_handled_force_sync_at=T0 - timedelta(hours=1),
)


# --- writing ------------------------------------------------------------------------------


STATUSES = {
    "empty": ReleaseStatus(),
    "every-key": FULL,
    "yaml-1.1-lookalikes": status(reason="no", message="1:20"),
    "keyword-strings": status(reason="True", message="null"),
    "colon-and-hash": status(message="web.yaml: spec: x # not a comment"),
    "multi-line": status(message="line one\n  line two: 'quoted' \"too\""),
    "blank-line-and-dash": status(message="line one\n\nafter a blank line\n- not: a key"),
    "time-like-message": status(message="2026-11-29T12:00:00Z"),
    "long-message": status(message="x" * 5000),
    "dash-first": status(ref=REF_OLD, message="- a dash first"),
    "number-like-strings": status(reason="0x1F", message="12e3"),
    "token-like-strings": status(reason="zq0p", message="zq1t zq0p"),
    "quote-and-trailing-space": status(reason="'quoted'", message="trailing "),
    "unicode": status(message="déployé ✓"),
    "quotes-inside": status(message="spec.cluster: no Cluster named 'web' in clusters/"),
}


@pytest.mark.parametrize("written", list(STATUSES.values()), ids=list(STATUSES))
def test_a_written_status_reloads_equal(repo: Path, written: ReleaseStatus) -> None:
    store = store_of(repo)
    store.commit("web", written, "web: Synced")
    assert store.load("web") == written
    assert store.load_all() == {"web": written}


FITS_A_LINE = {k: v for k, v in STATUSES.items() if k != "long-message"}


@pytest.mark.parametrize("written", list(FITS_A_LINE.values()), ids=list(FITS_A_LINE))
def test_a_new_status_file_is_laid_out_as_ruamel_s_round_trip_writes_it(
    repo: Path, written: ReleaseStatus
) -> None:
    """A fresh file is written by PyYAML's emitter (twice as fast); its text is what the
    round trip that updates a file with comments writes for a new document. Only a value
    longer than a line (4,096 characters) may fold at another place."""
    fresh = status_text._fresh(written.dump_status())
    expected = status_text._dump(status_text._rt_yaml(), fresh)
    assert store_of(repo).render_text("web", written) == expected


def test_a_new_status_file_has_every_key_in_spec_order_and_quoted_times(repo: Path) -> None:
    text = store_of(repo).render_text("web", FULL)
    top = [line.split(":")[0] for line in text.splitlines() if line[:1].isalpha()]
    assert top == STATUS_KEYS
    assert '  startedAt: "2026-11-29T12:00:00Z"\n' in text
    assert 'lastHandledForceSyncAt: "2026-11-29T11:00:00Z"\n' in text


def test_unset_keys_are_written_as_null(repo: Path) -> None:
    text = store_of(repo).render_text("web", ReleaseStatus())
    assert text.splitlines() == [
        "rollout: null",
        "lastAttempted: null",
        "lastSuccessful: null",
        "lastHealthy: null",
        "waves: []",
        "history: []",
        "conditions: []",
        "lastHandledForceSyncAt: null",
    ]


def test_comments_in_a_status_file_survive_an_update(repo: Path) -> None:
    store = store_of(repo)
    store.commit("web", FULL, "web: Synced")
    text = (repo / "status/web.yaml").read_text()
    text = "# hand-written note on top\n" + text.replace(
        "lastHealthy:", "lastHealthy:  # the rollback target"
    ).replace("history:", "# kept for the audit\nhistory:")
    commit_files(repo, {"status/web.yaml": text}, "annotate")

    updated = FULL.model_copy(update={"last_healthy": None, "waves": FULL.waves[1:]})
    store.commit("web", updated, "web: Synced")
    after = (repo / "status/web.yaml").read_text()
    assert after.startswith("# hand-written note on top\n")
    assert ("lastHealthy", "the rollback target") in comments(after)
    assert "# kept for the audit\nhistory:" in after
    assert store.load("web") == updated


COMMENTED = """\
# top of the file
lastHealthy:  # the rollback target
  renderRef: sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
  time: "2026-11-29T12:00:00Z"
# below lastHealthy
waves: []
# above history
history:  # newest first
  - renderRef: sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
    time: "2026-11-29T12:00:00Z"
# below history
lastHandledForceSyncAt: null
# end of the file
"""


def test_comments_stay_in_place_when_values_empty_and_fill_again(repo: Path) -> None:
    store = store_of(repo)
    commit_files(repo, {"status/web.yaml": COMMENTED}, "hand-written status")
    for written in (FULL, ReleaseStatus(), FULL):
        store.commit("web", written, "web: Synced")
        text = (repo / "status/web.yaml").read_text()
        assert comments(text) == comments(COMMENTED)
        assert store.load("web") == written
    assert store.commit("web", FULL, "web: Synced") is None


def test_keys_missing_from_an_existing_file_are_added_in_spec_order(repo: Path) -> None:
    commit_files(repo, {"status/web.yaml": "# mine\nwaves: []\n"}, "partial status")
    text = store_of(repo).render_text("web", FULL)
    assert text.startswith("# mine\n")
    assert [line.split(":")[0] for line in text.splitlines() if line[:1].isalpha()] == STATUS_KEYS


# --- committing ---------------------------------------------------------------------------


def test_commit_creates_one_commit_touching_only_the_status_file(repo: Path) -> None:
    before = head(repo)
    sha = store_of(repo).commit("web", FULL, "web: none -> Progressing (NewRender) aaaaaaaaaaaa")
    assert sha == head(repo)
    assert run_git(repo, "rev-parse", f"{sha}^") == before
    assert run_git(repo, "show", "--name-only", "--format=", sha) == "status/web.yaml"
    assert run_git(repo, "show", "-s", "--format=%an <%ae>|%cn <%ce>|%B", sha) == (
        "convoy-batch <convoy-batch@localhost>|convoy-batch <convoy-batch@localhost>|"
        "web: none -> Progressing (NewRender) aaaaaaaaaaaa"
    )
    assert porcelain(repo) == []
    # The branch's and HEAD's reflogs record the move, as `git update-ref -m` would.
    for ref in ("HEAD", "main"):
        assert run_git(repo, "reflog", "-1", "--format=%H %gs", ref) == (
            f"{sha} convoy-batch: web: none -> Progressing (NewRender) aaaaaaaaaaaa"
        )


def test_an_unchanged_status_commits_nothing(repo: Path) -> None:
    store = store_of(repo)
    first = store.commit("web", FULL, "web: Synced")
    assert store.commit("web", FULL, "web: Synced") is None
    assert head(repo) == first


def test_user_changes_are_neither_committed_nor_lost(repo: Path) -> None:
    (repo / "releases/web.yaml").write_text(RELEASE + "spec: {}\n")
    run_git(repo, "add", "releases/web.yaml")
    (repo / "README.md").write_text("ops, edited\n")
    (repo / "notes.txt").write_text("untracked\n")

    sha = store_of(repo).commit("web", FULL, "web: Synced")
    assert run_git(repo, "show", "--name-only", "--format=", sha) == "status/web.yaml"
    assert sorted(porcelain(repo)) == [" M README.md", "?? notes.txt", "M  releases/web.yaml"]
    assert (repo / "README.md").read_text() == "ops, edited\n"
    assert run_git(repo, "show", ":releases/web.yaml") == RELEASE + "spec: {}"


def test_a_removal_is_one_commit_and_leaves_the_user_s_changes(repo: Path) -> None:
    store = store_of(repo)
    store.commit("web", FULL, "web: Synced")
    store.commit("api", FULL, "api: Synced")
    (repo / "releases/web.yaml").write_text(RELEASE + "spec: {}\n")
    run_git(repo, "add", "releases/web.yaml")
    (repo / "README.md").write_text("ops, edited\n")
    before = head(repo)

    with store.batch():
        done = store.remove_later("web", "web: Succeeded -> Deleted (2 objects deleted, 0 kept)")
        none = store.remove_later("nothing", "nothing: has no status file")
    sha = done.result()

    assert sha == head(repo) and none.result() is None
    assert run_git(repo, "rev-parse", f"{sha}^") == before
    assert run_git(repo, "show", "--name-status", "--format=", sha) == "D\tstatus/web.yaml"
    assert not (repo / "status/web.yaml").exists() and (repo / "status/api.yaml").exists()
    assert sorted(porcelain(repo)) == [" M README.md", "M  releases/web.yaml"]
    assert store_of(repo).load_all().keys() == {"api"}


def test_commit_works_on_a_branch_with_no_commit_yet(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    path.mkdir()
    run_git(path, "init", "-q", "-b", "main")
    sha = store_of(path).commit("web", FULL, "web: Synced")
    assert run_git(path, "ls-tree", "-r", "--name-only", sha) == "status/web.yaml"
    assert porcelain(path) == []


def test_many_commits_in_one_batch_write_trees_git_accepts(repo: Path) -> None:
    # Names that sort around each other and around other folders ("status" vs "status.d").
    commit_files(repo, {"status.d/keep.txt": "x\n", "statusx": "y\n"}, "neighbours")
    names = ["web", "web-1", "web.1", "a", "zz", "m-0", *(f"app-{i:03d}" for i in range(40))]
    store = store_of(repo)
    with store.batch():
        futures = [store.commit_later(n, status(message=n), f"{n}: Synced") for n in names]
    assert all(f.result() for f in futures)
    run_git(repo, "fsck", "--strict", "--no-dangling")
    listed = run_git(repo, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
    assert sorted(listed) == sorted(
        ["README.md", "releases/web.yaml", "status.d/keep.txt", "statusx"]
        + [f"status/{n}.yaml" for n in names]
    )
    assert run_git(repo, "rev-list", "--count", "HEAD") == str(len(names) + 2)
    assert porcelain(repo) == []


def test_commits_follow_a_packed_branch_ref_and_a_detached_head(repo: Path) -> None:
    run_git(repo, "pack-refs", "--all")  # the branch now lives in packed-refs only
    store = store_of(repo)
    first = store.commit("web", FULL, "web: Synced")
    assert first == head(repo) == run_git(repo, "rev-parse", "refs/heads/main")
    run_git(repo, "checkout", "-q", "--detach")
    second = store.commit("web", status(message="detached"), "web: Synced")
    assert second == head(repo)
    assert run_git(repo, "rev-parse", "refs/heads/main") == first  # the branch stays
    assert run_git(repo, "rev-parse", f"{second}^") == first


# --- reading ------------------------------------------------------------------------------


def test_load_all_reads_every_status_and_an_invalid_one_is_empty_with_a_warning(
    repo: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = store_of(repo)
    store.commit("web", FULL, "web")
    store.commit("db", status(), "db")
    commit_files(
        repo,
        {
            "status/bad.yaml": "rollout: {state: Sideways}\n",
            "status/broken.yaml": "rollout: [\n",
            "status/README.md": "not a status\n",
        },
    )
    with caplog.at_level(logging.WARNING, logger="convoy_batch"):
        loaded = store.load_all()
    assert loaded == {
        "web": FULL,
        "db": status(),
        "bad": ReleaseStatus(),
        "broken": ReleaseStatus(),
    }
    messages = sorted(r.getMessage() for r in caplog.records)
    assert len(messages) == 2
    assert messages[0].startswith("status/bad.yaml: rollout.state")
    assert messages[1].startswith("status/broken.yaml: line 2: invalid YAML")
    assert all("\n" not in m for m in messages)


def test_statuses_are_read_from_head_not_the_working_tree(repo: Path) -> None:
    store = store_of(repo)
    store.commit("web", FULL, "web")
    (repo / "status/web.yaml").write_text("rollout: null\n")
    assert store.load("web") == FULL
    assert store.load_all() == {"web": FULL}


def test_a_release_without_a_status_file_has_an_empty_status(repo: Path) -> None:
    store = store_of(repo)
    assert store.load_all() == {}
    assert store.load("web") == ReleaseStatus()


# --- pushing ------------------------------------------------------------------------------


def test_push_without_a_remote_does_nothing(repo: Path) -> None:
    store = store_of(repo)
    store.commit("web", FULL, "web")
    assert store.push() == PushResult(pushed=False, attempts=0, warning=None)


def test_push_sends_the_status_commits_to_the_remote(repo: Path, origin: Path) -> None:
    store = store_of(repo)
    sha = store.commit("web", FULL, "web")
    assert store.push() == PushResult(pushed=True, attempts=1, warning=None)
    assert run_git(origin, "rev-parse", "main") == sha


@pytest.mark.parametrize(
    ("path", "text"),
    [
        pytest.param("status/db.yaml", "rollout: null\n", id="another-release-status"),
        pytest.param("README.md", "ops, by a colleague\n", id="a-non-status-file"),
    ],
)
def test_a_push_rejected_because_the_remote_moved_is_rebased_and_retried(
    tmp_path: Path, repo: Path, origin: Path, path: str, text: str
) -> None:
    store = store_of(repo)
    store.commit("web", FULL, "web: Synced")
    other = clone(origin, tmp_path / "other")
    theirs = commit_files(other, {path: text}, "colleague")
    run_git(other, "push", "-q", "origin", "main")
    (repo / "releases/web.yaml").write_text(RELEASE + "# draft\n")  # the user's unstaged edit

    assert store.push() == PushResult(pushed=True, attempts=2, warning=None)
    assert run_git(origin, "rev-parse", "main") == head(repo)
    assert run_git(repo, "rev-parse", "HEAD^") == theirs
    assert run_git(origin, "show", f"main:{path}") == text.rstrip("\n")
    assert run_git(origin, "show", "main:status/web.yaml") == store.render_text("web", FULL).rstrip(
        "\n"
    )
    assert (repo / path).read_text() == text
    assert porcelain(repo) == [" M releases/web.yaml"]


def test_a_conflicting_remote_change_to_the_same_status_file_loses_to_ours(
    tmp_path: Path, repo: Path, origin: Path
) -> None:
    ours = store_of(repo)
    ours.commit("web", FULL, "web: ours")
    other = clone(origin, tmp_path / "other")
    theirs = store_of(other)
    theirs.commit("web", status(reason="ApplyFailed"), "web: theirs")
    assert theirs.push().pushed

    assert ours.push() == PushResult(pushed=True, attempts=2, warning=None)
    assert run_git(origin, "log", "--format=%s", "main") == "web: ours\nweb: theirs\ninit"
    run_git(other, "pull", "-q", "--ff-only")
    assert theirs.load("web") == FULL
    assert porcelain(repo) == []


def test_a_push_that_keeps_failing_is_a_warning_and_the_commits_stay_local(
    repo: Path, origin: Path
) -> None:
    store = store_of(repo)
    sha = store.commit("web", FULL, "web")
    shutil.rmtree(origin)
    result = store.push()
    assert not result.pushed
    assert result.warning is not None
    assert "origin" in result.warning
    assert "\n" not in result.warning
    assert head(repo) == sha


def test_a_remote_that_rejects_every_push_is_tried_a_bounded_number_of_times(
    repo: Path, origin: Path
) -> None:
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho no pushes today >&2\nexit 1\n")
    hook.chmod(0o755)
    store = StatusStore(git.Repo(repo), Locks(repo.parent / "state"), push_attempts=2)
    sha = store.commit("web", FULL, "web")
    result = store.push()
    assert (result.pushed, result.attempts) == (False, 2)
    assert result.warning is not None
    assert "no pushes today" in result.warning
    assert head(repo) == sha


def test_a_local_commit_that_conflicts_outside_status_is_a_warning_and_stays_local(
    tmp_path: Path, repo: Path, origin: Path
) -> None:
    store = store_of(repo)
    commit_files(repo, {"README.md": "ops, mine\n"}, "my readme")
    sha = store.commit("web", FULL, "web")
    other = clone(origin, tmp_path / "other")
    commit_files(other, {"README.md": "ops, theirs\n"}, "their readme")
    run_git(other, "push", "-q", "origin", "main")

    result = store.push()
    assert not result.pushed
    assert result.warning is not None
    assert "README.md" in result.warning
    assert head(repo) == sha
    assert porcelain(repo) == []
