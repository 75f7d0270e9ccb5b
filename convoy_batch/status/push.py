"""Pushing the status commits (SPEC 10): a rejected push is fetched, the local commits
are replayed onto the remote's branch with git's plumbing (no checkout of a foreign
state), and the push is tried again a bounded number of times. Status files conflict
only with themselves, and our newer status wins. Does git I/O, through git processes.
"""

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import git

from convoy_batch.state.locks import Locks
from convoy_batch.status.gitwrite import (
    BOT_NAME,
    MARKER_FILE,
    GitError,
    GitWriter,
    HeadMoved,
    scratch_dir,
)

log = logging.getLogger("convoy_batch")

STATUS_DIR = "status"


@dataclass(frozen=True)
class PushResult:
    pushed: bool
    attempts: int
    warning: str | None


class Pusher:
    """Pushes HEAD's branch of ``repo`` to its upstream (else ``origin``)."""

    def __init__(self, writer: GitWriter, locks: Locks, attempts: int = 3) -> None:
        self.writer = writer
        self.repo: git.Repo = writer.repo
        self.locks = locks
        self.push_attempts = max(1, attempts)
        self.git = writer.git

    @classmethod
    def open(cls, repo: git.Repo, locks: Locks, attempts: int = 3) -> "Pusher":
        """The pusher of ``repo``, its git writes marked in the state directory's locks."""
        return cls(GitWriter(repo, locks.root / MARKER_FILE), locks, attempts)

    def push(self) -> PushResult:
        """Push the branch; a rejected push is fetched, rebased and retried (never raises)."""
        target = self.target()
        if target is None:
            return PushResult(pushed=False, attempts=0, warning=None)
        remote, branch = target
        with self.locks.repo():
            for attempt in range(1, self.push_attempts + 1):
                error = self._try_push(remote, branch)
                if error is None:
                    return PushResult(pushed=True, attempts=attempt, warning=None)
                if attempt == self.push_attempts:
                    break
                try:
                    self._integrate(remote, branch)
                except GitError as exc:
                    error = str(exc)
                    break
        warning = f"push to {remote} {branch} failed ({error}); the commits stay local"
        return PushResult(pushed=False, attempts=attempt, warning=warning)

    def target(self) -> tuple[str, str] | None:
        """(remote, remote branch): the branch's upstream, else ``origin`` and the same name."""
        if self.repo.head.is_detached:
            return None
        branch = self.repo.active_branch
        tracking = branch.tracking_branch()
        if tracking is not None and tracking.remote_name != ".":
            return tracking.remote_name, tracking.remote_head
        if "origin" in [r.name for r in self.repo.remotes]:
            return "origin", branch.name
        return None

    def _try_push(self, remote: str, branch: str) -> str | None:
        try:
            self.git("push", remote, f"HEAD:refs/heads/{branch}")
        except GitError as exc:
            return str(exc)
        return None

    def _integrate(self, remote: str, branch: str) -> None:
        """Fetch the remote branch and rebase the local commits onto it."""
        upstream = self.fetch(remote, branch)
        head = self.git("rev-parse", "--verify", "HEAD")
        new_head = self.replay(head, upstream)
        if new_head != head:
            self.move_head(head, new_head)

    def pull(self) -> None:
        """Bring the branch up to the remote's, the local commits replayed on top (a
        fetch and the push's own rebase); nothing without a remote. The caller holds the
        repo lock."""
        target = self.target()
        if target is not None:
            self._integrate(*target)

    def fetch(self, remote: str, branch: str) -> str:
        """Fetch the remote branch into its remote-tracking ref; its commit."""
        tracking = f"refs/remotes/{remote}/{branch}"
        self.git("fetch", "--no-tags", remote, f"+refs/heads/{branch}:{tracking}")
        return self.git("rev-parse", "--verify", f"{tracking}^{{commit}}")

    def replay(self, tip: str, onto: str) -> str:
        """The commits of ``tip`` that ``onto`` lacks, replayed onto it in order; the new
        tip (no ref moves). Status paths conflict only with themselves: ours wins."""
        new_tip = onto
        commits = self.git("rev-list", "--reverse", "--topo-order", "--no-merges", f"{onto}..{tip}")
        for commit in commits.split():
            new_tip = self._pick(commit, new_tip)
        return new_tip

    def _pick(self, commit: str, onto: str) -> str:
        """Replay ``commit`` onto ``onto`` (three-way, in a temp index); status: ours wins."""
        parents = self.git("rev-list", "--parents", "-n", "1", commit).split()[1:]
        if parents == [onto]:
            return commit  # already on top of ``onto``: keep it as it is
        base = parents[0] if parents else self.git("mktree", input=b"")
        with scratch_dir(Path(self.repo.git_dir)) as tmp:
            env = {"GIT_INDEX_FILE": str(tmp / "index")}
            self.git("read-tree", "-m", "--aggressive", base, onto, commit, env=env)
            self._resolve_conflicts(env)
            tree = self.git("write-tree", env=env)
        fields = self.git("show", "-s", "--date=raw", "--format=%an%n%ae%n%ad%n%cn%n%ce", commit)
        keys = ("AUTHOR_NAME", "AUTHOR_EMAIL", "AUTHOR_DATE", "COMMITTER_NAME", "COMMITTER_EMAIL")
        ident = {f"GIT_{k}": v for k, v in zip(keys, fields.split("\n"), strict=True)}
        message = self.git("show", "-s", "--format=%B", commit, strip=False)
        return self.git(
            "commit-tree", "--no-gpg-sign", tree, "-p", onto, input=message.encode(), env=ident
        )

    def _resolve_conflicts(self, env: dict[str, str]) -> None:
        """Status paths take the replayed commit's side (stage 3); others cannot be merged."""
        stages: dict[str, dict[int, tuple[str, str]]] = {}
        for line in filter(
            None, self.git("ls-files", "-u", "-z", env=env, strip=False).split("\0")
        ):
            info, path = line.split("\t", 1)
            mode, sha, stage = info.split()
            stages.setdefault(path, {})[int(stage)] = (mode, sha)
        for path, entries in stages.items():
            if not path.startswith(f"{STATUS_DIR}/"):
                raise GitError(f"{path}: changed both locally and on the remote")
            if 3 in entries:
                mode, sha = entries[3]
                self.git("update-index", "--cacheinfo", f"{mode},{sha},{path}", env=env)
            else:
                self.git("update-index", "--force-remove", "--", path, env=env)

    def move_head(self, old: str, new: str) -> None:
        """Move the branch to ``new``, carrying the user's uncommitted changes like a
        checkout (the working tree and index move with it, under index.lock)."""
        paths = self.git("diff", "--name-only", "-z", old, new, strip=False).split("\0")
        message = f"{BOT_NAME}: rebase onto the remote"
        moved = [p for p in paths if p]

        def build(head: str | None) -> str:
            if head != old:
                raise HeadMoved("the branch moved while the remote's commits were replayed")
            return new

        landed = self.writer.move_branch(build, message, moved, partial(_two_way, self.writer))
        if landed.problem is not None:  # the branch moved; its index was put back after
            log.warning("moved onto the remote, then: %s", landed.problem)


def _two_way(
    writer: GitWriter, old: str | None, new: str, _paths: Sequence[str], env: Mapping[str, str]
) -> None:
    """``read-tree -m -u old new`` into the locked index: a fast-forward that keeps the
    user's uncommitted changes, refused (nothing written) when they are in the way."""
    writer.git("update-index", "-q", "--refresh", env=env, check=False)
    writer.git("read-tree", "-m", "-u", old or "", new, env=env)
