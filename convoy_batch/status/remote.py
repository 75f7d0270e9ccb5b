"""The repository as a clone of a remote: ``$CONVOY_REPO_URL`` names the remote, and the
repository folder (``--repo``, ``$CONVOY_REPO``) is convoy-batch's own clone of it, which
may be new on every run (a pod per run on Kubernetes). Does git and file I/O.

- Before a tick (:func:`tick_clone`) the clone is made when missing, else fetched, and
  its branch is set to the remote's, with the status commits that a failed push kept in
  the state directory (``<state>/unpushed.bundle``) replayed on top. Local commits that
  the bundle does not hold are dropped: the clone is convoy-batch's, and a tick killed
  before its push left write-ahead records that decide again.
- After the tick's push (:func:`finish`): when it landed, the bundle goes; when it did
  not, the commits the remote lacks become the bundle. So a status commit that could not
  be pushed outlives the clone and goes with the next push (SPEC 10), and the write-ahead
  records of the tick stay until one of the two has happened (:mod:`convoy_batch.ticks.runner`).
- A tick holds ``<state>/locks/remote.lock`` from its fetch to its push: ticks that share
  a state directory take turns, each starting from what the one before pushed or kept.
- Between ticks (:func:`fetch_for_reading`, the Dagster sensors) the clone is fetched with
  its local commits replayed on top, as a rejected push does; the bundle is left to the
  next tick.

The state directory must not be inside the clone (it is what outlives it). Messages never
show credentials of the URL.
"""

import contextlib
import logging
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import git

from convoy_batch.errors import StateFailed, UsageError
from convoy_batch.repo.source import redact
from convoy_batch.state.files import atomic_write, inside, read_file, real_root
from convoy_batch.state.locks import LockBusy, Locks
from convoy_batch.status.gitwrite import GitError, scratch_dir
from convoy_batch.status.push import Pusher, PushResult
from convoy_batch.store import open_state

log = logging.getLogger("convoy_batch")

URL_ENV = "CONVOY_REPO_URL"
BUNDLE = "unpushed.bundle"
REMOTE = "origin"
REMOTE_WAIT = 60.0
"""Seconds a tick waits for another tick on the same state directory's clone to end."""


def remote_url() -> str | None:
    """``$CONVOY_REPO_URL``; None when unset (the repository is used as it is)."""
    return os.environ.get(URL_ENV) or None


@dataclass(frozen=True)
class Clone:
    """A tick's clone, once brought up to date; the bundle is in ``state_dir``."""

    state_dir: Path


@contextlib.contextmanager
def tick_clone(repo: Path, state_dir: Path) -> Iterator[Clone | None]:
    """Around a tick: the clone brought up to date, under the remote lock; None without
    ``$CONVOY_REPO_URL``. UsageError (one line) when the remote cannot be fetched."""
    url = remote_url()
    if url is None:
        yield None
        return
    locks = _locks(repo, state_dir)
    with _remote_lock(locks):
        with locks.repo(), _one_line():
            pusher = _open(repo, url, locks)
            upstream = pusher.fetch(*_target(pusher))
            tip = _with_kept(pusher, state_dir, upstream)
            head = pusher.writer.head()
            if head is not None and head != tip:
                pusher.move_head(head, tip)
        yield Clone(state_dir)


@contextlib.contextmanager
def shard_clone(repo: Path, state_dir: Path) -> Iterator[Clone | None]:
    """Around a shard that runs apart from its tick (a process or pod of its own, a clone
    of its own): the clone made or fetched and set to the remote's branch under the remote
    lock, which is then let go, so the shards of a wave run side by side. Its own commits
    that an earlier push could not deliver are in the bundle already (:func:`push_apart`),
    which the tick's last step replays. None without ``$CONVOY_REPO_URL``."""
    url = remote_url()
    if url is None:
        yield None
        return
    locks = _locks(repo, state_dir)
    with _remote_lock(locks), locks.repo(), _one_line():
        pusher = _open(repo, url, locks)
        upstream = pusher.fetch(*_target(pusher))
        head = pusher.writer.head()
        if head is not None and head != upstream:
            pusher.move_head(head, upstream)
    yield Clone(state_dir)


def push_apart(pusher: Pusher, clone: Clone) -> tuple[str | None, bool]:
    """The end of a shard run apart: under the remote lock, its commits replayed onto the
    remote's branch with the bundle's on it (so a bundle another shard wrote is never
    replaced without its commits), then :func:`finish`: pushed (retried, rebased), else
    all of them kept in the bundle."""
    locks = pusher.locks
    with _remote_lock(locks):
        try:
            with locks.repo():
                remote, branch = _target(pusher)
                upstream = pusher.fetch(remote, branch)
                onto = _with_kept(pusher, clone.state_dir, upstream)
                head = pusher.git("rev-parse", "--verify", "HEAD")
                tip = pusher.replay(head, onto)
                if tip != head:
                    pusher.move_head(head, tip)
        except GitError as exc:
            log.warning("status commits not pushed: %s", redact(str(exc)))
            return None, False
        return finish(pusher, clone)


@contextlib.contextmanager
def _remote_lock(locks: Locks) -> Iterator[None]:
    """The remote lock held (a busy one: the usage error of one line)."""
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(locks.remote(REMOTE_WAIT))
        except LockBusy as exc:
            raise UsageError(f"{exc}: another tick works from a clone of the remote") from None
        yield


def fetch_for_reading(repo: Path, state_dir: Path) -> None:
    """The clone made or fetched for a reader between ticks (a sensor); nothing without
    ``$CONVOY_REPO_URL``. UsageError (one line) when the remote cannot be fetched."""
    url = remote_url()
    if url is None:
        return
    locks = _locks(repo, state_dir)
    with locks.repo(), _one_line():
        _open(repo, url, locks).pull()


def finish(pusher: Pusher, clone: Clone) -> tuple[str | None, bool]:
    """The end of a tick in a clone: the push when HEAD holds commits the remote lacks
    (this tick's, a completed write-ahead record's, the bundle's), then the bundle removed
    when they landed, else written of them (durably). The push's warning, and whether
    every commit is kept, on the remote or in the bundle."""
    bundle = clone.state_dir / BUNDLE
    try:
        remote, branch = _target(pusher)
        ahead = pusher.git("rev-list", "-n", "1", f"refs/remotes/{remote}/{branch}..HEAD")
    except GitError as exc:
        log.warning("status commits not pushed: %s", redact(str(exc)))
        return None, False
    pushed = pusher.push() if ahead else PushResult(pushed=True, attempts=0, warning=None)
    if pushed.pushed:
        bundle.unlink(missing_ok=True)
        return None, True
    return pushed.warning, _keep(pusher, bundle, f"refs/remotes/{remote}/{branch}")


def _keep(pusher: Pusher, bundle: Path, behind: str) -> bool:
    """The commits after ``behind`` written to ``bundle``; False (a warning) when not."""
    try:
        with scratch_dir(pusher.writer.git_dir) as tmp:
            pusher.git("bundle", "create", "-q", str(tmp / BUNDLE), f"{behind}..HEAD")
            data = (tmp / BUNDLE).read_bytes()
        atomic_write(bundle, data, root=real_root(bundle.parent))
    except (GitError, OSError, StateFailed) as exc:
        log.warning("status commits not kept in %s: %s", bundle, redact(str(exc)))
        return False
    return True


def _locks(repo: Path, state_dir: Path) -> Locks:
    """The state directory's locks, once it is ready and outside the clone."""
    if inside(state_dir.resolve(), repo.resolve()):
        raise UsageError(
            f"state directory {state_dir} is inside the clone {repo}: with {URL_ENV} it "
            "must be a folder of its own (it outlives the clone)"
        )
    open_state(state_dir)
    return Locks(state_dir)


@contextlib.contextmanager
def _one_line() -> Iterator[None]:
    """git's failures as the usage error of one line (credentials hidden)."""
    try:
        yield
    except GitError as exc:
        raise UsageError(f"{URL_ENV}: {redact(str(exc))}") from None


def _open(repo: Path, url: str, locks: Locks) -> Pusher:
    """The clone's pusher; the clone made first when missing, its remote set to ``url``."""
    if not (repo / ".git").exists():
        _clone(url, repo)
    pusher = Pusher.open(git.Repo(repo), locks)
    if pusher.git("remote", "get-url", REMOTE, check=False) != url:
        known = REMOTE in pusher.git("remote").split()
        pusher.git("remote", "set-url" if known else "add", REMOTE, url)
    return pusher


def _clone(url: str, repo: Path) -> None:
    if repo.exists() and (not repo.is_dir() or any(repo.iterdir())):
        raise UsageError(f"{repo}: not a git repository and not empty: {URL_ENV} clones into it")
    done = subprocess.run(
        ["git", "clone", "--quiet", "--", url, str(repo)],
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        why = lines[-1] if lines else f"exit {done.returncode}"
        raise GitError(f"git clone {url}: {why}")


def _target(pusher: Pusher) -> tuple[str, str]:
    target = pusher.target()
    if target is None:
        raise GitError("the clone's HEAD is not on a branch of the remote")
    return target


def _with_kept(pusher: Pusher, state_dir: Path, upstream: str) -> str:
    """``upstream`` with the bundle's commits replayed on top (``upstream`` itself when
    there is none). A bundle git cannot read is moved aside with a warning, and kept."""
    bundle = state_dir / BUNDLE
    data = read_file(bundle, real_root(state_dir))
    if data is None:
        return upstream
    try:
        with scratch_dir(pusher.writer.git_dir) as tmp:
            (tmp / BUNDLE).write_bytes(data)
            pusher.git("fetch", "--no-tags", str(tmp / BUNDLE), "HEAD")
        kept = pusher.git("rev-parse", "--verify", "FETCH_HEAD^{commit}")
        return pusher.replay(kept, upstream)
    except GitError as exc:
        aside = bundle.with_name(f"unpushed-{time.strftime('%Y%m%dT%H%M%S')}.bundle")
        bundle.rename(aside)
        log.warning("%s: not replayed, moved to %s: %s", bundle, aside.name, redact(str(exc)))
        return upstream
