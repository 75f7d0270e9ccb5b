"""SourceResolver: committed source files at a ref, the last-change revision, and the
paths that leave the repository. Real git repositories in tmp_path."""

import hashlib
import json
from pathlib import Path
from typing import Any

import git
import pytest

from convoy_batch.errors import SourceFailed
from convoy_batch.models import Release
from convoy_batch.repo import source
from convoy_batch.repo.gitops import GitOpsRepo
from convoy_batch.repo.source import SourceResolver, SourceSnapshot
from convoy_batch.state.locks import Locks
from tests.support.gitfixtures import (
    commit_files,
    commit_symlink,
    make_repo,
    remove_files,
    write_files,
)

JSON_CM = '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}'
CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\n"


def release(path: str = "apps/web", **source: Any) -> Release:
    pin = source.pop("pin", None)
    return Release.model_validate(
        {
            "apiVersion": "convoy.dev/v1alpha1",
            "kind": "Release",
            "metadata": {"name": "web"},
            "spec": {"cluster": "staging", "source": {"path": path, **source}, "pin": pin},
        }
    )


def fetch(repo: git.Repo, state: Path, rel: Release) -> SourceSnapshot:
    return SourceResolver(GitOpsRepo(Path(repo.working_tree_dir or "")), state).fetch(rel)


def texts(snapshot: SourceSnapshot) -> dict[str, str]:
    return {f.path: f.text for f in snapshot.files}


@pytest.fixture
def gitops(tmp_path: Path) -> git.Repo:
    return make_repo(
        tmp_path / "gitops",
        {
            "apps/web/b.yaml": CM.format(name="b"),
            "apps/web/a/z.yml": CM.format(name="z"),
            "apps/web/c.json": JSON_CM,
            "apps/web/README.md": "not a manifest\n",
            "apps/api/x.yaml": CM.format(name="x"),
        },
    )


def test_source_without_url_is_the_committed_head_of_the_gitops_repo(
    gitops: git.Repo, tmp_path: Path
) -> None:
    write_files(gitops, {"apps/web/new.yaml": CM.format(name="new"), "apps/web/b.yaml": "changed"})
    snapshot = fetch(gitops, tmp_path / "state", release())
    assert [f.path for f in snapshot.files] == [
        "apps/web/a/z.yml",
        "apps/web/b.yaml",
        "apps/web/c.json",
    ]
    assert texts(snapshot)["apps/web/b.yaml"] == CM.format(name="b")
    assert snapshot.revision == gitops.head.commit.hexsha


def test_revision_is_the_last_commit_that_changed_the_path(
    gitops: git.Repo, tmp_path: Path
) -> None:
    first = gitops.head.commit.hexsha
    commit_files(gitops, {"apps/api/x.yaml": CM.format(name="x2"), "status/web.yaml": "{}"})
    assert fetch(gitops, tmp_path / "s", release()).revision == first
    changed = commit_files(gitops, {"apps/web/a/z.yml": CM.format(name="z2")})
    commit_files(gitops, {"README.md": "elsewhere"})
    assert fetch(gitops, tmp_path / "s", release()).revision == changed
    removed = remove_files(gitops, ["apps/web/c.json"])
    assert fetch(gitops, tmp_path / "s", release()).revision == removed
    assert fetch(gitops, tmp_path / "s", release("apps/api")).revision != removed


def test_a_status_commit_is_no_revision_of_a_source(gitops: git.Repo, tmp_path: Path) -> None:
    # The repository root holds status/: its revision is the last commit that changed
    # anything else, so the statuses a tick commits never look like a source change.
    changed = commit_files(gitops, {"apps/api/x.yaml": CM.format(name="x2")})
    commit_files(gitops, {"status/web.yaml": "{}"})
    assert fetch(gitops, tmp_path / "s", release(".")).revision == changed


def test_last_changes_remembered_across_ticks_hold_until_a_commit_changes_the_path(
    gitops: git.Repo, tmp_path: Path
) -> None:
    state = tmp_path / "s"

    def revisions(*paths: str) -> dict[str, str]:
        resolver = SourceResolver(GitOpsRepo(Path(gitops.working_tree_dir or "")), state)
        try:
            return {p: resolver.fetch(release(p)).revision for p in paths}
        finally:
            resolver.remember()  # a reconciling tick's end: what it learnt is kept
            resolver.close()

    first = gitops.head.commit.hexsha
    assert revisions("apps/web", "apps/api") == {"apps/web": first, "apps/api": first}
    assert (state / "cache" / "last-change.json").is_file()
    changed = commit_files(gitops, {"apps/api/x.yaml": CM.format(name="x2")})
    commit_files(gitops, {"status/web.yaml": "{}"})
    assert revisions("apps/web", "apps/api") == {"apps/web": first, "apps/api": changed}
    # Rewritten history (a commit that does not descend from the remembered one).
    gitops.git.reset("-q", "--hard", first)
    again = commit_files(gitops, {"apps/web/b.yaml": CM.format(name="b3")})
    assert revisions("apps/web", "apps/api") == {"apps/web": again, "apps/api": first}
    assert revisions("apps/web") == {"apps/web": again}
    # What is remembered is what a tick answers (no log is read for it).
    head = gitops.head.commit.hexsha
    cache = state / "cache" / "last-change.json"
    assert json.loads(cache.read_text())["commit"] == head
    cache.write_text(json.dumps({"format": 1, "commit": head, "paths": {"apps/web": "f" * 40}}))
    assert revisions("apps/web") == {"apps/web": "f" * 40}


def test_a_remembered_revision_is_given_without_listing_the_folder_until_it_changes(
    gitops: git.Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "s"

    def resolver() -> SourceResolver:
        return SourceResolver(GitOpsRepo(Path(gitops.working_tree_dir or "")), state)

    first = gitops.head.commit.hexsha
    learnt = resolver()
    assert learnt.revision(release()) == learnt.listing(release()).revision == first
    learnt.remember()
    learnt.close()
    commit_files(gitops, {"apps/api/x.yaml": CM.format(name="x2")})  # not apps/web
    listed: list[str] = []
    real = source._list_files

    def counting(*args: Any) -> Any:
        listed.append(args[2])
        return real(*args)

    monkeypatch.setattr(source, "_list_files", counting)
    quiet = resolver()
    assert quiet.revision(release()) == first
    assert listed == []  # remembered: no file listed
    assert quiet.revision(release("apps/api")) == gitops.head.commit.hexsha
    assert listed == ["apps/api"]  # changed since: listed and looked for
    quiet.close()
    removed = remove_files(gitops, ["apps/web/b.yaml", "apps/web/c.json"])
    changed = resolver()
    assert changed.revision(release()) == removed  # the folder changed: looked for again
    changed.remember()
    changed.close()
    remove_files(gitops, ["apps/web/a/z.yml", "apps/web/README.md"])
    gone = resolver()
    with pytest.raises(SourceFailed, match="not found"):
        gone.revision(release())  # a folder removed since is listed, and is missing
    gone.close()


def test_revision_through_a_merge_matches_git_log_of_the_path(
    gitops: git.Repo, tmp_path: Path
) -> None:
    gitops.git.checkout("-q", "-b", "side")
    commit_files(gitops, {"apps/web/b.yaml": CM.format(name="side")})
    gitops.git.checkout("-q", "main")
    commit_files(gitops, {"apps/api/x.yaml": CM.format(name="main")})
    gitops.git.merge("-q", "--no-edit", "side")
    expected = gitops.git.log("-1", "--format=%H", "--", "apps/web")
    assert fetch(gitops, tmp_path / "s", release()).revision == expected


def test_releases_of_one_tick_share_one_view_of_head_while_status_is_committed(
    gitops: git.Repo, tmp_path: Path
) -> None:
    resolver = SourceResolver(GitOpsRepo(Path(gitops.working_tree_dir or "")), tmp_path / "s")
    before = resolver.fetch(release())
    commit_files(gitops, {"apps/web/b.yaml": CM.format(name="during-the-tick")})
    assert resolver.fetch(release()) == before
    assert resolver.fetch(release("apps/api")).revision == before.revision


def test_ref_selects_another_branch_of_the_gitops_repo(gitops: git.Repo, tmp_path: Path) -> None:
    gitops.git.checkout("-q", "-b", "next")
    on_next = commit_files(gitops, {"apps/web/b.yaml": CM.format(name="next")})
    gitops.git.checkout("-q", "main")
    snapshot = fetch(gitops, tmp_path / "s", release(ref="next"))
    assert snapshot.revision == on_next
    assert texts(snapshot)["apps/web/b.yaml"] == CM.format(name="next")


@pytest.mark.parametrize("pin_kind", ["tag", "annotated-tag", "commit", "short-commit"])
def test_pin_selects_a_tag_or_commit_and_overrides_ref(
    gitops: git.Repo, tmp_path: Path, pin_kind: str
) -> None:
    pinned = gitops.head.commit.hexsha
    gitops.git.tag("v1") if pin_kind == "tag" else gitops.git.tag("-a", "v1", "-m", "v1")
    commit_files(gitops, {"apps/web/b.yaml": CM.format(name="later")})
    pin = {"tag": "v1", "annotated-tag": "v1", "commit": pinned, "short-commit": pinned[:10]}
    snapshot = fetch(gitops, tmp_path / "s", release(ref="main", pin=pin[pin_kind]))
    assert snapshot.revision == pinned
    assert texts(snapshot)["apps/web/b.yaml"] == CM.format(name="b")


@pytest.fixture
def upstream(tmp_path: Path) -> git.Repo:
    repo = make_repo(tmp_path / "upstream", {"deploy/cm.yaml": CM.format(name="up")})
    repo.git.checkout("-q", "-b", "release")
    commit_files(repo, {"deploy/cm.yaml": CM.format(name="release-branch")})
    repo.git.checkout("-q", "main")
    return repo


def test_url_fetches_another_local_repository_at_its_head_or_at_a_ref(
    gitops: git.Repo, upstream: git.Repo, tmp_path: Path
) -> None:
    url = str(upstream.working_tree_dir)
    resolver = SourceResolver(GitOpsRepo(Path(gitops.working_tree_dir or "")), tmp_path / "s")
    at_head = resolver.fetch(release("deploy", url=url))
    assert at_head.revision == upstream.commit("main").hexsha
    assert texts(at_head) == {"deploy/cm.yaml": CM.format(name="up")}
    at_ref = resolver.fetch(release("deploy", url=url, ref="release"))
    assert at_ref.revision == upstream.commit("release").hexsha
    cache = tmp_path / "s" / "sources" / hashlib.sha256(url.encode()).hexdigest()[:16]
    assert git.Repo(cache).bare


def test_a_remote_is_fetched_once_per_tick_and_again_on_the_next_tick(
    gitops: git.Repo, upstream: git.Repo, tmp_path: Path
) -> None:
    url = str(upstream.working_tree_dir)
    repo = GitOpsRepo(Path(gitops.working_tree_dir or ""))
    tick = SourceResolver(repo, tmp_path / "s")
    first = tick.fetch(release("deploy", url=url))
    newer = commit_files(upstream, {"deploy/cm.yaml": CM.format(name="newer")})
    assert tick.fetch(release("deploy", url=url)) == first
    next_tick = SourceResolver(repo, tmp_path / "s").fetch(release("deploy", url=url))
    assert next_tick.revision == newer
    assert texts(next_tick) == {"deploy/cm.yaml": CM.format(name="newer")}


def test_a_fetch_waits_for_the_source_cache_lock_of_the_state_directory(
    gitops: git.Repo, upstream: git.Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = str(upstream.working_tree_dir)
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    monkeypatch.setattr(source, "_FETCH_LOCK_TIMEOUT_S", 0.2)
    held = Locks(tmp_path / "s").source(digest, timeout=0)  # another fetch into that cache
    with held, pytest.raises(SourceFailed, match=r"the source cache is locked$"):
        fetch(gitops, tmp_path / "s", release("deploy", url=url))
    assert fetch(gitops, tmp_path / "s", release("deploy", url=url)).files


def test_a_relative_url_is_relative_to_the_gitops_repository(
    gitops: git.Repo, upstream: git.Repo, tmp_path: Path
) -> None:
    snapshot = fetch(gitops, tmp_path / "s", release("deploy", url="../upstream"))
    assert snapshot.revision == upstream.head.commit.hexsha


@pytest.mark.parametrize("how", ["cached-clone", "link-to-it", "state-itself", "file-url"])
def test_a_url_that_resolves_into_the_state_directory_is_refused_before_any_fetch(
    gitops: git.Repo, upstream: git.Repo, tmp_path: Path, how: str
) -> None:
    """The source cache holds other Releases' remotes: no source is read from the state
    directory, however its path is written; the message names it as ``<state>``."""
    state = tmp_path / "s"
    fetch(gitops, state, release("deploy", url=str(upstream.working_tree_dir)))  # cached
    (cached,) = (state / "sources").iterdir()
    (tmp_path / "innocent").symlink_to(cached)
    url = {
        "cached-clone": str(cached),
        "link-to-it": str(tmp_path / "innocent"),
        "state-itself": "../s",
        "file-url": f"file://{cached}",
    }[how]
    with pytest.raises(SourceFailed) as raised:
        fetch(gitops, state, release("deploy", url=url))
    shown = "<state>" if how == "state-itself" else f"<state>/sources/{cached.name}"
    assert str(raised.value) == (
        f"spec.source.url {shown!r}: a repository inside the state directory is never a source"
    )
    assert list((state / "sources").iterdir()) == [cached]  # nothing fetched


def test_a_symlink_to_a_file_inside_the_repository_is_followed(
    gitops: git.Repo, tmp_path: Path
) -> None:
    commit_symlink(gitops, "apps/web/shared.yaml", "../api/x.yaml")
    commit_symlink(gitops, "apps/web/notes.txt", "../../README")
    files = texts(fetch(gitops, tmp_path / "s", release()))
    assert files["apps/web/shared.yaml"] == CM.format(name="x")
    assert "apps/web/notes.txt" not in files


ESCAPES = [
    pytest.param("../outside", None, None, "leaves the repository", id="dot-dot"),
    pytest.param("apps/../../outside", None, None, "leaves the repository", id="inner-dot-dot"),
    pytest.param("/etc", None, None, "absolute", id="absolute"),
    pytest.param("apps/web", "apps/web/evil.yaml", "../../../secret.yaml", "leaves", id="link-out"),
    pytest.param("apps/web", "apps/web/evil.yaml", "/etc/passwd", "leaves", id="link-absolute"),
    pytest.param("apps/web", "apps/web/x.txt", "../../..", "leaves", id="non-manifest-link-out"),
    pytest.param("apps/web", "apps/web/d.yaml", "../api", "directory", id="link-to-directory"),
    pytest.param("apps/web", "apps/web/d.yaml", "missing.yaml", "missing", id="dangling-link"),
    pytest.param("apps/link", "apps/link", "web", "not a directory", id="path-is-a-symlink"),
]


@pytest.mark.parametrize(("path", "link", "target", "message"), ESCAPES)
def test_a_path_that_leaves_the_repository_is_refused(
    gitops: git.Repo, tmp_path: Path, path: str, link: str | None, target: str, message: str
) -> None:
    if link is not None:
        commit_symlink(gitops, link, target)
    with pytest.raises(SourceFailed, match=message):
        fetch(gitops, tmp_path / "s", release(path))


FAILURES = [
    pytest.param({"ref": "nope"}, "apps/web", "has no ref 'nope'", id="unknown-ref"),
    pytest.param({"pin": "f" * 40}, "apps/web", "has no ref", id="unknown-commit"),
    pytest.param({}, "apps/none", "'apps/none': not found", id="path-missing"),
    pytest.param({}, "apps/web/b.yaml", "not a directory", id="path-is-a-file"),
    pytest.param({"url": "/no/such/repo"}, "apps/web", "fetch failed", id="remote-missing"),
    pytest.param({"url": "--upload-pack=x"}, "apps/web", "not a repository", id="option-url"),
    pytest.param(
        {"url": "file://user:secret@localhost/no/such"},
        "apps/web",
        r"'file://\*\*\*@localhost",
        id="credentials-hidden",
    ),
]


@pytest.mark.parametrize(("source", "path", "message"), FAILURES)
def test_a_source_that_cannot_be_fetched_is_a_one_line_source_failure(
    gitops: git.Repo, tmp_path: Path, source: dict[str, str], path: str, message: str
) -> None:
    with pytest.raises(SourceFailed, match=message) as raised:
        fetch(gitops, tmp_path / "s", release(path, **source))
    assert "\n" not in str(raised.value)
    assert "secret" not in str(raised.value)


def test_a_path_present_only_at_a_later_commit_is_missing_at_an_older_pin(
    gitops: git.Repo, tmp_path: Path
) -> None:
    old = gitops.head.commit.hexsha
    commit_files(gitops, {"apps/new/x.yaml": CM.format(name="x")})
    with pytest.raises(SourceFailed, match="not found"):
        fetch(gitops, tmp_path / "s", release("apps/new", pin=old))


def test_the_repository_root_and_dotted_paths_are_accepted(
    gitops: git.Repo, tmp_path: Path
) -> None:
    root = fetch(gitops, tmp_path / "s", release("."))
    assert "apps/api/x.yaml" in texts(root)
    assert root.revision == gitops.head.commit.hexsha
    dotted = fetch(gitops, tmp_path / "s", release("./apps/web/"))
    assert dotted == fetch(gitops, tmp_path / "s", release("apps/web"))
