"""The last change of a path (SPEC 3 step 7): the first commit in ``git log`` order,
from a commit, whose diff touches a file under it. Does I/O: runs one lazy ``git log``
per repository and commit (:class:`ChangeLog`, ended by :meth:`ChangeLog.close` or when
it is garbage collected), ``git merge-base`` and ``git log`` for the commits made since
the last tick, and reads and writes ``<state>/cache/last-change.json``.

:class:`Remembered` keeps the GitOps repository's answers across ticks: key, one commit
C of the repository; value, for each path a tick asked, its last change at C outside
``status/``; invariant, that answer holds at a descendant D of C for every path that no
commit of ``C..D`` changed (outside ``status/``). Written at a reconciling tick's end,
not durably: a lost file costs a full log.
"""

import contextlib
import json
import os
import posixpath
import subprocess
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import git

from convoy_batch.errors import SourceFailed
from convoy_batch.repo.gitops import GitOpsRepo
from convoy_batch.state.files import atomic_write

STATUS_FOLDER = "status"
"""Where the ticks commit statuses: no source's revision is a status commit."""


class ChangeLog:
    """``git log --name-only`` from one commit, read lazily and shared by every path:
    the first commit seen that touched a path or a file under it. ``skip``: folders
    whose commits are not changes of any source (the GitOps repository's ``status/``,
    where every tick commits: a log that listed them would read one commit per status
    change of the fleet before it reached an app's)."""

    def __init__(self, git_dir: str, commit: str, skip: tuple[str, ...] = ()) -> None:
        config = ("log.showRoot=true", "log.showSignature=false", "diff.relative=false")
        command = ["git", "--git-dir", git_dir]
        command += [arg for setting in config for arg in ("-c", setting)]
        command += ["log", "-z", "--no-color", "--name-only", "--no-renames"]
        command += ["--format=%x01%H", commit, "--"]
        if skip:  # git prunes the commits that touch only these: they are never listed
            command += [".", *(f":(exclude){folder}" for folder in skip)]
        self._process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._finalizer = weakref.finalize(self, _end, self._process)
        assert self._process.stdout is not None
        self._entries = _log_entries(self._process.stdout)
        self._first: dict[str, str] = {}
        self._exhausted = False

    def last_change(self, path: str) -> str | None:
        while path not in self._first and not self._exhausted:
            entry = next(self._entries, None)
            if entry is None:
                self._finish()
                break
            self._index(*entry)
        return self._first.get(path)

    def _index(self, sha: str, files: list[str]) -> None:
        for file in files:
            prefix = file
            # Shorter prefixes of a known prefix are known too: stop at the first one.
            while prefix not in self._first:
                self._first[prefix] = sha
                if not prefix:
                    break
                prefix = posixpath.dirname(prefix)

    def _finish(self) -> None:
        self._exhausted = True
        code = self._process.wait()
        if code != 0:
            raise SourceFailed(f"git log failed with exit {code}")

    def close(self) -> None:
        self._finalizer()


class Remembered:
    """The last changes of the GitOps repository's paths, remembered across ticks in
    ``<state>/cache/last-change.json``, so that a tick reads only the commits made since
    the last one instead of the whole history.

    Key: a commit C of the repository. Value: for each path a tick asked, the last
    commit (at C) that changed it outside ``status/`` (what :class:`ChangeLog` finds).
    Invariant: for a descendant D of C, that answer holds at D for every path that no
    commit of ``C..D`` changed (outside ``status/``): git lists those commits' files once
    (``git log C..D``), and a path under one of them is looked for again. Another
    commit (not a descendant, history rewritten) is looked for in full. Lifetime: the
    file is written at the tick's end (not durably: a lost one costs a full log)."""

    def __init__(self, path: Path, gitops: GitOpsRepo) -> None:
        self._path = path
        self._gitops = gitops
        self._lock = threading.Lock()
        self._commit: str | None = None
        self._paths: dict[str, str] = {}
        self._loaded = False
        self._touched: dict[str, set[str] | None] = {}  # D -> prefixes changed in C..D
        self._new: dict[str, dict[str, str]] = {}  # D -> answers found this tick

    def get(self, commit: str, path: str) -> str | None:
        with self._lock:
            if path in self._new.get(commit, {}):
                return self._new[commit][path]
            self._load()
            if self._commit is None or path not in self._paths:
                return None
            touched = self._changed_since(commit)
            if touched is None or path in touched:
                return None
            self._new.setdefault(commit, {})[path] = self._paths[path]
            return self._paths[path]

    def put(self, commit: str, path: str, found: str) -> None:
        with self._lock:
            self._new.setdefault(commit, {})[path] = found

    def save(self) -> None:
        """Keep the answers of HEAD's commit (the one most Releases read)."""
        with self._lock:
            try:
                head = self._gitops.repo.head.commit.hexsha
            except (ValueError, git.GitCommandError):
                return
            answers = self._new.get(head)
            if not answers:
                return
            self._load()
            touched = self._changed_since(head) if self._commit is not None else None
            known = {
                p: v for p, v in self._paths.items() if touched is not None and p not in touched
            }
            data = {"format": 1, "commit": head, "paths": {**known, **answers}}
            # A lost cache costs a full log on the next tick, nothing else.
            with contextlib.suppress(OSError):
                atomic_write(self._path, json.dumps(data).encode(), durable=False)

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        try:
            data = json.loads(self._path.read_text())
        except (OSError, ValueError):
            return
        if isinstance(data, dict) and data.get("format") == 1:
            commit, paths = data.get("commit"), data.get("paths")
            if isinstance(commit, str) and isinstance(paths, dict):
                self._commit = commit
                self._paths = {str(k): str(v) for k, v in paths.items()}

    def _changed_since(self, commit: str) -> set[str] | None:
        """Every path with a file changed (outside ``status/``) in ``C..commit``, with its
        folders; None when ``commit`` does not descend from C."""
        if commit not in self._touched:
            self._touched[commit] = self._changes(commit)
        return self._touched[commit]

    def _changes(self, commit: str) -> set[str] | None:
        assert self._commit is not None
        if self._commit == commit:
            return set()
        repo = self._gitops.repo
        try:
            repo.git.merge_base("--is-ancestor", self._commit, commit)
            text: str = repo.git.log(
                "-z", "--no-renames", "--name-only", "--format=", f"{self._commit}..{commit}",
                "--", ".", f":(exclude){STATUS_FOLDER}",
            )  # fmt: skip
        except git.GitCommandError:
            return None  # not a descendant, or a commit git cannot read: a full log
        touched: set[str] = set()
        for name in filter(None, (t.strip("\n") for t in text.split("\0"))):
            prefix = name
            while prefix not in touched:
                touched.add(prefix)
                if not prefix:
                    break
                prefix = posixpath.dirname(prefix)
        return touched


def _end(process: "subprocess.Popen[bytes]") -> None:
    if process.poll() is None:
        process.kill()
    process.wait()
    if process.stdout is not None:
        process.stdout.close()


def _log_entries(stream: IO[bytes]) -> Iterator[tuple[str, list[str]]]:
    """(commit, files) from ``git log -z --name-only --format=%x01%H``: tokens end with
    NUL, a commit token starts with \\x01, its first file token with a newline."""
    sha: str | None = None
    files: list[str] = []
    for token in _tokens(stream):
        if token.startswith("\x01"):
            if sha is not None:
                yield sha, files
            sha, files = token[1:].strip(), []
        elif token:
            files.append(token[1:] if not files and token.startswith("\n") else token)
    if sha is not None:
        yield sha, files


def _tokens(stream: IO[bytes]) -> Iterator[str]:
    pending = b""
    # os.read returns what the pipe holds: tokens flow as git writes them.
    while chunk := os.read(stream.fileno(), 65536):
        *complete, pending = (pending + chunk).split(b"\0")
        for token in complete:
            yield token.decode("utf-8", "surrogateescape")
    if pending:
        yield pending.decode("utf-8", "surrogateescape")
