"""Helpers that build real git repositories in a test's temporary folder."""

import os
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

import git


def make_repo(path: Path, files: Mapping[str, str] | None = None, branch: str = "main") -> git.Repo:
    """A new repository on ``branch`` with a committer configured; ``files`` (path ->
    text) are committed as the first commit when given."""
    repo = git.Repo.init(path, initial_branch=branch)
    with repo.config_writer() as config:
        config.set_value("user", "name", "Test")
        config.set_value("user", "email", "test@example.com")
        config.set_value("commit", "gpgsign", "false")
        config.set_value("tag", "gpgsign", "false")
    if files:
        commit_files(repo, files, "initial")
    return repo


def write_files(repo: git.Repo, files: Mapping[str, str]) -> None:
    """Write files into the working tree without committing them."""
    root = Path(repo.working_tree_dir or "")
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def commit_files(repo: git.Repo, files: Mapping[str, str], message: str = "update") -> str:
    """Write and commit ``files``; returns the new commit's SHA."""
    write_files(repo, files)
    repo.git.add("--", *files)
    return _commit(repo, message)


def remove_files(repo: git.Repo, paths: Iterable[str], message: str = "remove") -> str:
    repo.git.rm("-r", "--quiet", "--", *paths)
    return _commit(repo, message)


def commit_symlink(repo: git.Repo, link: str, target: str, message: str = "link") -> str:
    """Commit a symlink at ``link`` pointing to ``target`` (as written, not resolved)."""
    path = Path(repo.working_tree_dir or "") / link
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)
    repo.git.add("--", link)
    return _commit(repo, message)


def _commit(repo: git.Repo, message: str) -> str:
    repo.git.commit("--quiet", "--allow-empty", "-m", message)
    return repo.head.commit.hexsha


def status_changes(repo: git.Repo | Path, rev: str = "HEAD") -> list[tuple[str, str]]:
    """(commit, Release) for each status file each commit of ``rev`` changed (a branch, or
    a range such as ``<commit>..HEAD``), oldest first."""
    repo = repo if isinstance(repo, git.Repo) else git.Repo(repo)
    out = repo.git.log("--reverse", "--format=%x00%H", "--name-only", rev, "--", "status/")
    changes = []
    for chunk in filter(None, out.split("\0")):
        commit, *paths = chunk.split()
        changes += [(commit, Path(path).stem) for path in paths]
    return changes


def status_commits(repo: git.Repo | Path, rev: str = "HEAD") -> Counter[str]:
    """How many commits of ``rev`` changed each Release's status (a commit may carry
    several Releases' statuses)."""
    return Counter(name for _, name in status_changes(repo, rev))
