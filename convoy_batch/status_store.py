"""``status/<name>.yaml`` in the GitOps repository (SPEC 10): read, write, commit, push.

Does git and file I/O. Statuses are read from the HEAD commit (never the working tree),
all files in one pass over the tree. A status is written with ruamel.yaml round-trip
so that an existing file keeps its comments and key order; it is committed alone,
built from HEAD's tree in a temporary index, so nothing the user staged or changed is
ever committed or lost. Pushing rebases the local commits onto a remote that moved,
with plumbing only (no checkout of a foreign state); status files conflict only with
themselves and our newer status wins.
"""

import bisect
import contextlib
import io
import json
import logging
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git
import yaml
from git.objects.fun import tree_entries_from_data, tree_to_stream
from git.refs.symbolic import SymbolicReference
from gitdb import IStream
from gitdb.db import LooseObjectDB
from gitdb.exc import BadObject
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.error import YAMLError as RuamelError
from ruamel.yaml.representer import RoundTripRepresenter
from ruamel.yaml.scalarstring import DoubleQuotedScalarString
from ruamel.yaml.tokens import CommentToken

from convoy_batch.models import ReleaseStatus, parse_model
from convoy_batch.store import Locks, ParseCache, atomic_write, check_file_name

log = logging.getLogger("convoy_batch")

STATUS_DIR = "status"
BOT_NAME = "convoy-batch"
BOT_EMAIL = "convoy-batch@localhost"
_FILE_MODE = 0o100644
_DIR_MODE = 0o040000
_BOT_ENV = {
    "GIT_AUTHOR_NAME": BOT_NAME,
    "GIT_AUTHOR_EMAIL": BOT_EMAIL,
    "GIT_COMMITTER_NAME": BOT_NAME,
    "GIT_COMMITTER_EMAIL": BOT_EMAIL,
}
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
_COMMIT_TRIES = 3


class GitError(Exception):
    """A git command failed; the message is one line."""


class _HeadMoved(GitError):
    """The branch moved between reading HEAD and updating it."""


@dataclass(frozen=True)
class PushResult:
    pushed: bool
    attempts: int
    warning: str | None


# --- Reading: PyYAML's C parser with the YAML 1.2 core scalars that ruamel writes ------


class _StatusLoader(yaml.CSafeLoader):
    """YAML 1.2 core schema (ruamel leaves ``no`` or ``1:20`` unquoted), at C speed."""


_StatusLoader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("int", r"^[-+]?[0-9]+$", list("-+0123456789")),
):
    _StatusLoader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), _first)
_StatusLoader.add_constructor("tag:yaml.org,2002:int", lambda _, node: int(node.value))


def parse_status(text: bytes | str, source: str) -> ReleaseStatus:
    """Parse a status file; ValueError with one line naming ``source`` and the field."""
    try:
        data = yaml.load(text, Loader=_StatusLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc
        raise ValueError(f"{source}: not valid YAML: {where}{problem}") from None
    return ReleaseStatus() if data is None else parse_model(ReleaseStatus, data, source)


# --- Writing: ruamel round trip, updated in place ---------------------------------------


class _StatusRepresenter(RoundTripRepresenter):
    """Writes ``null`` for unset keys (ruamel's default leaves the value empty)."""


_StatusRepresenter.add_representer(
    type(None), lambda rep, _: rep.represent_scalar("tag:yaml.org,2002:null", "null")
)


_THREAD = threading.local()


def _rt_yaml() -> YAML:
    """The round-trip YAML of this thread (an instance is not shared between threads)."""
    rt: YAML | None = getattr(_THREAD, "yaml", None)
    if rt is not None:
        return rt
    rt = _THREAD.yaml = YAML(typ="rt")
    rt.Representer = _StatusRepresenter
    rt.preserve_quotes = True
    rt.width = 4096  # a long message stays on one line
    rt.indent(mapping=2, sequence=4, offset=2)
    return rt


def render_status(old_text: str | None, status: ReleaseStatus) -> str:
    """The text of ``status``: ``old_text`` updated in place when it is a YAML mapping."""
    rt = _rt_yaml()
    new = status.dump_status()
    doc = None
    # Only a file with comments needs the (slow) round-trip load: without any, the fresh
    # document is what the update would give for every file convoy-batch wrote.
    if old_text is not None and "#" in old_text:
        try:
            doc = rt.load(old_text)
        except RuamelError:
            _THREAD.yaml = None  # not reused after a failure half-way
            rt = _rt_yaml()
            doc = None
    if isinstance(doc, CommentedMap):
        return _dump(rt, _merge(doc, new))
    return _TEMPLATES.emit(rt, new)


def _dump(rt: YAML, doc: Any) -> str:
    out = io.StringIO()
    try:
        rt.dump(doc, out)
    except BaseException:
        _THREAD.yaml = None  # not reused after a failure half-way
        raise
    return out.getvalue()


class _Templates:
    """Fresh status texts from templates.

    A block-style document writes each scalar on a line of its own, from its own text
    and position, so its text is the text of its *shape* (every string that ruamel writes
    as it is, i.e. plain or, for a time, in double quotes, replaced by a token) with the
    strings put back in the tokens' places. Statuses share a handful of shapes (the first
    rollout of any Release is one), so the slow round-trip emitter runs once per shape,
    and once per batch of strings not seen before, to learn how ruamel writes them."""

    SHAPES = 1_000  # templates kept, then start over
    STRINGS = 20_000  # strings whose writing is known, then start over
    LONGEST = 1_000  # characters: a longer string stays in the shape (no line folding)

    def __init__(self) -> None:
        self._templates: dict[str, tuple[str, ...] | None] = {}
        self._as_is: dict[str, bool] = {}  # string -> ruamel writes it as it is
        self._lock = threading.Lock()

    def emit(self, rt: YAML, new: Mapping[str, Any]) -> str:
        """The text of the new document ``new``: ruamel's dump of it, byte for byte."""
        found: list[str] = []
        _strings(new, found)
        with self._lock:
            as_is = {s: self._as_is[s] for s in found if s in self._as_is}
        if unknown := [s for s in dict.fromkeys(found) if s not in as_is]:
            as_is.update(learned := self._learn(rt, unknown))
            with self._lock:
                if len(self._as_is) > self.STRINGS:
                    self._as_is.clear()
                self._as_is.update(learned)
        values: list[str] = []
        shape = _shape(new, as_is, values)  # every string of ``new`` is in ``as_is``
        key = json.dumps(shape)
        with self._lock:
            pieces = self._templates.get(key, ())
        if pieces == ():
            pieces = _template(rt, shape, len(values))
            with self._lock:
                if len(self._templates) > self.SHAPES:
                    self._templates.clear()
                self._templates[key] = pieces
        if pieces is None:  # the shape's text did not show each token once, in order
            return _dump(rt, _fresh(new))
        out = [pieces[0]]
        for value, piece in zip(values, pieces[1:], strict=True):
            out += (value, piece)
        return "".join(out)

    def _learn(self, rt: YAML, strings: list[str]) -> dict[str, bool]:
        """Whether ruamel writes each string as it is: all in one dump, else one by one."""
        learned = {s: False for s in strings}
        candidates = [s for s in strings if len(s) <= self.LONGEST and "\n" not in s]

        def written(batch: list[str]) -> bool:
            doc = CommentedMap((f"k{i}", _fresh(s)) for i, s in enumerate(batch))
            expected = "".join(f"k{i}: {_as_written(s)}\n" for i, s in enumerate(batch))
            return _dump(rt, doc) == expected

        if candidates and written(candidates):
            learned.update(dict.fromkeys(candidates, True))
        elif len(candidates) > 1:
            learned.update((s, written([s])) for s in candidates)
        return learned


_TOKEN = re.compile(r"zq(\d+)([pt])")
"""A token of a shape: ``zq<index>p`` (a plain string) or ``zq<index>t`` (a time)."""


def _as_written(value: str) -> str:
    return f'"{value}"' if _TIME.match(value) else value


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def _shape(value: Any, as_is: Mapping[str, bool], values: list[str]) -> Any:
    """``value`` with each string written as it is replaced by the next token (its text
    appended to ``values``). A string that looks like a token is written as it is, so
    every token-like string of a shape is a token."""
    if isinstance(value, str):
        if not as_is.get(value):
            return value
        values.append(value)
        return f"zq{len(values) - 1}{'t' if _TIME.match(value) else 'p'}"
    if isinstance(value, Mapping):
        return {key: _shape(item, as_is, values) for key, item in value.items()}
    if isinstance(value, list):
        return [_shape(item, as_is, values) for item in value]
    return value


def _template(rt: YAML, shape: Any, tokens: int) -> tuple[str, ...] | None:
    """The shape's text cut at its tokens (len ``tokens`` + 1), or None when the text does
    not hold each token exactly once, in order."""
    parts = _TOKEN.split(_dump(rt, _token_doc(shape)))
    if parts[1::3] != [str(i) for i in range(tokens)]:
        return None
    return tuple(parts[::3])


def _token_doc(shape: Any) -> Any:
    """The document of a shape: its time tokens double-quoted, as the times they hold."""
    if isinstance(shape, str) and (token := _TOKEN.fullmatch(shape)):
        return DoubleQuotedScalarString(shape) if token.group(2) == "t" else shape
    if isinstance(shape, Mapping):
        return CommentedMap((k, _token_doc(v)) for k, v in shape.items())
    if isinstance(shape, list):
        return CommentedSeq(_token_doc(v) for v in shape)
    return _fresh(shape)


_TEMPLATES = _Templates()


def _fresh(value: Any) -> Any:
    """A new node; times become double-quoted strings (SPEC 1: quoted YAML strings)."""
    if isinstance(value, Mapping):
        return CommentedMap((k, _fresh(v)) for k, v in value.items())
    if isinstance(value, list):
        return CommentedSeq(_fresh(v) for v in value)
    if isinstance(value, str) and _TIME.match(value):
        return DoubleQuotedScalarString(value)
    return value


def _merge(node: Any, new: Any) -> Any:
    """``new`` written into ``node``, reusing nodes (and so their comments) where possible."""
    if isinstance(new, Mapping) and isinstance(node, CommentedMap):
        for key in [k for k in node if k not in new]:
            del node[key]
        for key, value in new.items():
            if key in node:
                _merge_entry(node, key, value)
            else:
                node.insert(_insert_at(node, list(new), key), key, _fresh(value))
        return node
    if isinstance(new, list) and isinstance(node, CommentedSeq) and node and new:
        del node[len(new) :]
        for i, value in enumerate(new):
            if i < len(node):
                _merge_entry(node, i, value)
            else:
                node.append(_fresh(value))
        return node
    return node if _same_scalar(node, new) else _fresh(new)


def _merge_entry(parent: Any, key: Any, value: Any) -> None:
    # ruamel keeps the comment lines below an entry on the deepest last node of its
    # value: lift them off and put them back after the merge, so they stay below it.
    tail = _take_tail(parent, key)
    parent[key] = _merge(parent[key], value)
    if tail is not None:
        _put_tail(parent, key, tail)


def _last(node: Any) -> Any:
    """The key or index of a collection's last entry; None for a scalar or empty one."""
    if isinstance(node, CommentedMap | CommentedSeq) and node:
        return list(node)[-1] if isinstance(node, CommentedMap) else len(node) - 1
    return None


def _take_tail(parent: Any, key: Any) -> str | None:
    """Detach the full comment lines that follow ``parent[key]`` (its inline comment stays)."""
    last = _last(parent[key])
    if last is not None:
        return _take_tail(parent[key], last)
    entry, slot = parent.ca.items.get(key), 2 if isinstance(parent, CommentedMap) else 0
    token = entry[slot] if entry else None
    if token is None or "\n" not in token.value.rstrip("\n"):
        return None
    inline, _, rest = token.value.partition("\n")
    entry[slot] = CommentToken(inline + "\n", CommentMark(token.column)) if inline else None
    return str(rest)


def _put_tail(parent: Any, key: Any, tail: str) -> None:
    value, last = parent[key], _last(parent[key])
    if last is not None:
        _put_tail(value, last, tail)
    elif isinstance(value, CommentedMap | CommentedSeq):
        # Below an empty ``[]`` ruamel would print it between the key and the value.
        keys = list(parent) if isinstance(parent, CommentedMap) else []
        following = keys[keys.index(key) + 1 :] if key in keys else []
        if following:
            entry = parent.ca.items.setdefault(following[0], [None] * 4)
            entry[1] = [CommentToken(tail, CommentMark(0)), *(entry[1] or [])]
    else:
        entry = parent.ca.items.setdefault(key, [None] * 4)
        slot = 2 if isinstance(parent, CommentedMap) else 0
        inline = entry[slot].value.rstrip("\n") if entry[slot] is not None else ""
        entry[slot] = CommentToken(f"{inline}\n{tail}", CommentMark(0))


def _insert_at(node: CommentedMap, order: list[str], key: str) -> int:
    """Right after the nearest key that precedes ``key`` in the SPEC order."""
    before = [k for k in order[: order.index(key)] if k in node]
    return list(node).index(before[-1]) + 1 if before else 0


def _same_scalar(old: Any, new: Any) -> bool:
    if isinstance(new, Mapping | list) or isinstance(old, Mapping | list):
        return False
    if isinstance(new, str) and _TIME.match(new) and not isinstance(old, DoubleQuotedScalarString):
        return False  # a time is always written double-quoted
    # A string read back is a ruamel str subclass that remembers its quotes: keep it.
    same_type = type(old) is type(new) or (isinstance(new, str) and isinstance(old, str))
    return same_type and old == new


# --- The store ----------------------------------------------------------------------------


class StatusStore:
    """Status files of the GitOps repository ``repo``: load from HEAD, commit, push."""

    def __init__(self, repo: git.Repo, locks: Locks, *, push_attempts: int = 3) -> None:
        # A Repo of its own: its git processes are not shared with the caller's threads.
        self.repo = git.Repo(repo.git_dir if repo.bare else repo.working_tree_dir)
        self.locks = locks
        self.push_attempts = max(1, push_attempts)
        self._trees: dict[bytes, list[tuple[bytes, int, str]]] = {}
        self._deferred: dict[str, str] | None = None
        self._committer: ThreadPoolExecutor | None = None
        self._roots: dict[str, bytes] = {}
        self._entry_bytes: dict[tuple[bytes, int, str], bytes] = {}
        self._loose = LooseObjectDB(os.path.join(self.repo.common_dir, "objects"))
        self.unreadable: set[str] = set()
        """Status files :meth:`load_all` could not read (their renders are unknown)."""

    # reading

    def load_all(self, cache: ParseCache | None = None) -> dict[str, ReleaseStatus]:
        """Every ``status/*.yaml`` of HEAD; an invalid file is a warning and an empty status.
        With ``cache``, a file whose blob was parsed before is not read again."""
        folder = self._head_entry(STATUS_DIR, "tree")
        if folder is None:
            return {}
        statuses = {}
        for blob in folder.blobs:
            if blob.name.endswith(".yaml"):
                name = blob.name.removesuffix(".yaml")
                status = _load_blob(blob, cache)
                if status is None:
                    self.unreadable.add(name)
                statuses[name] = status or ReleaseStatus()
        return statuses

    def load(self, name: str) -> ReleaseStatus:
        """The status of ``name`` at HEAD; empty when there is none or it is invalid."""
        text = self._head_text(name)
        return ReleaseStatus() if text is None else _parse_or_warn(text, _path(name))

    def render_text(self, name: str, status: ReleaseStatus) -> str:
        """The file text for ``status``: HEAD's file updated in place, else a new document."""
        return render_status(self._head_text(name), status)

    # committing

    def commit_later(self, name: str, status: ReleaseStatus, message: str) -> "Future[str | None]":
        """:meth:`commit`, on the background thread inside :meth:`batch`, else now."""
        if self._committer is not None:
            return self._committer.submit(self.commit, name, status, message)
        done: Future[str | None] = Future()
        done.set_result(self.commit(name, status, message))
        return done

    def commit(self, name: str, status: ReleaseStatus, message: str) -> str | None:
        """Commit ``status/<name>.yaml`` alone; the commit SHA, or None when unchanged."""
        with self.locks.repo():
            # A user committing at the same moment moves HEAD under us: build again on it.
            for _ in range(_COMMIT_TRIES - 1):
                with contextlib.suppress(_HeadMoved):
                    return self._commit_once(name, status, message)
            return self._commit_once(name, status, message)

    def _commit_once(self, name: str, status: ReleaseStatus, message: str) -> str | None:
        path = _path(name)
        head = self._head_sha()
        old_text = self._head_text(name, head)
        text = render_status(old_text, status)
        if text == old_text:
            return None
        blob, commit = self._commit_tree(head, path, text.encode(), message)
        if head is None:  # the branch's first commit: let git create the ref
            self._git("update-ref", "-m", f"{BOT_NAME}: {message}", "HEAD", commit, "")
        else:
            self._advance_head(commit, head, f"{BOT_NAME}: {message}")
        self._sync_worktree(path, text.encode(), blob)
        return commit

    def _advance_head(self, new: str, old: str, message: str) -> None:
        """``git update-ref HEAD new old`` in-process, by git's own protocol: the ref's
        ``.lock`` file taken exclusively (so git itself waits), the old value checked
        under it, then renamed into place, and the reflogs appended."""
        ref = self._head_ref()
        base = Path(self.repo.git_dir if ref == "HEAD" else self.repo.common_dir)
        path = base / ref
        lock = path.with_name(path.name + ".lock")
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise _HeadMoved(f"{ref} is locked by another git process") from None
        try:
            with os.fdopen(fd, "w") as out:
                if self._head_sha() != old:
                    raise _HeadMoved(f"{ref} moved")
                out.write(f"{new}\n")
            os.replace(lock, path)
        finally:
            lock.unlink(missing_ok=True)
        entry = f"{old} {new} {BOT_NAME} <{BOT_EMAIL}> {int(time.time())} +0000\t{message}\n"
        for log_path in {base / "logs" / ref, Path(self.repo.git_dir) / "logs" / "HEAD"}:
            with contextlib.suppress(FileNotFoundError):  # git keeps no reflog for it
                log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND)
                try:
                    os.write(log_fd, entry.encode())
                finally:
                    os.close(log_fd)

    def _commit_tree(
        self, head: str | None, path: str, data: bytes, message: str
    ) -> tuple[str, str]:
        """(blob, commit): HEAD's tree with only ``path`` replaced. The objects are written
        in-process (no git process per object), which keeps a tick that commits a
        thousand statuses from spending most of its time starting processes."""
        blob = self._store("blob", data)
        root = self._root_tree(head) if head is not None else None
        tree = self._replace(root, path.split("/"), bytes.fromhex(blob), _FILE_MODE)
        stamp = f"{int(time.time())} +0000"
        ident = f"{BOT_NAME} <{BOT_EMAIL}> {stamp}"
        lines = [f"tree {tree.hex()}", *([f"parent {head}"] if head else [])]
        lines += [f"author {ident}", f"committer {ident}", "", message.rstrip("\n"), ""]
        commit = self._store("commit", "\n".join(lines).encode())
        self._roots[commit] = tree
        return blob, commit

    def _root_tree(self, commit: str) -> bytes:
        """The root tree of ``commit``; known without a read for the commits made here."""
        if commit not in self._roots:
            if len(self._roots) > 16:
                self._roots.clear()
            self._roots[commit] = self.repo.commit(commit).tree.binsha
        return self._roots[commit]

    def _head_blob(self, path: str, head: str | None) -> bytes | None:
        """The content of ``path`` at ``head``, through the cached trees (reading the status
        folder's tree through GitPython for every commit would make a tick quadratic)."""
        if head is None:
            return None
        tree: bytes | None = self._root_tree(head)
        *folders, name = path.split("/")
        for part in folders:
            entries = self._entries(tree) if tree is not None else []
            tree = next((e[0] for e in entries if e[2] == part and e[1] == _DIR_MODE), None)
        if tree is None:
            return None
        found = next((e for e in self._entries(tree) if e[2] == name), None)
        if found is None or found[1] == _DIR_MODE:
            return None
        return self._read(found[0])

    def _read(self, binsha: bytes) -> bytes:
        """An object's content: loose objects in-process, packed ones through git."""
        try:
            return bytes(self._loose.stream(binsha).read())
        except BadObject:
            return bytes(self.repo.odb.stream(binsha).read())

    def _replace(self, tree: bytes | None, parts: list[str], binsha: bytes, mode: int) -> bytes:
        """The id of ``tree`` with the entry at ``parts`` set to (binsha, mode), written."""
        entries = self._entries(tree) if tree is not None else []
        name = parts[0]
        if len(parts) > 1:
            sub = next((e[0] for e in entries if e[2] == name and e[1] == _DIR_MODE), None)
            binsha, mode = self._replace(sub, parts[1:], binsha, mode), _DIR_MODE
        entries = [e for e in entries if e[2] != name]
        bisect.insort(entries, (binsha, mode, name), key=_git_order)
        written = bytes.fromhex(self._store("tree", b"".join(map(self._encoded, entries))))
        if len(self._trees) > 16:
            self._trees.clear()
        self._trees[written] = entries  # the next commit starts from this tree
        return written

    def _encoded(self, entry: tuple[bytes, int, str]) -> bytes:
        """One tree entry as git stores it, encoded once: a tree is its entries one after
        the other, and re-encoding (and re-validating) the whole status folder for every
        commit would make a tick quadratic."""
        found = self._entry_bytes.get(entry)
        if found is None:
            if len(self._entry_bytes) > 100_000:
                self._entry_bytes.clear()
            out = io.BytesIO()
            tree_to_stream([entry], out.write)
            found = self._entry_bytes[entry] = out.getvalue()
        return found

    def _entries(self, tree: bytes) -> list[tuple[bytes, int, str]]:
        """A tree's entries; the ones this store just wrote are not read back (parsing
        the status folder for every commit would make a tick quadratic)."""
        if tree not in self._trees:
            self._trees[tree] = list(tree_entries_from_data(self._read(tree)))
        return self._trees[tree]

    def _store(self, kind: str, data: bytes) -> str:
        """Write one loose object in-process (GitPython's default store runs
        ``git hash-object`` for each); its hex id."""
        return str(self._loose.store(IStream(kind, len(data), io.BytesIO(data))).hexsha.decode())

    def _sync_worktree(self, path: str, data: bytes, blob: str) -> None:
        """Make the working-tree file and the index entry match the commit (git status clean)."""
        work_tree = self.repo.working_tree_dir
        if work_tree is None:  # a bare repository has only the commit
            return
        try:
            # The commit is the durable record; this copy only keeps `git status` clean.
            atomic_write(Path(work_tree) / path, data, durable=False)
            if self._deferred is not None:
                self._deferred[path] = blob
            else:
                self._update_index({path: blob})
        except (OSError, GitError) as exc:
            log.warning("%s: committed, but the working tree was not updated: %s", path, exc)

    def _update_index(self, blobs: Mapping[str, str]) -> None:
        lines = "".join(f"100644 {blob}\t{path}\n" for path, blob in blobs.items())
        self._git("update-index", "--add", "--index-info", input=lines.encode())

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Within, :meth:`commit_later` commits on one background thread, in order, while
        the caller goes on (a tick overlaps its cluster's answers with its git work), and
        the index entries of committed files are updated once, at the end."""
        self._deferred = {}
        self._committer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="convoy-commit")
        try:
            yield
        finally:
            self._committer.shutdown(wait=True)
            self._committer = None
            deferred, self._deferred = self._deferred, None
            if deferred:
                try:
                    self._update_index(deferred)
                except GitError as exc:
                    log.warning("status files committed, but the index was not updated: %s", exc)

    # pushing

    def push(self) -> PushResult:
        """Push the branch; a rejected push is fetched, rebased and retried (never raises)."""
        target = self._push_target()
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

    def _push_target(self) -> tuple[str, str] | None:
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
            self._git("push", remote, f"HEAD:refs/heads/{branch}")
        except GitError as exc:
            return str(exc)
        return None

    def _integrate(self, remote: str, branch: str) -> None:
        """Fetch the remote branch and rebase the local commits onto it."""
        tracking = f"refs/remotes/{remote}/{branch}"
        self._git("fetch", "--no-tags", remote, f"+refs/heads/{branch}:{tracking}")
        upstream = self._git("rev-parse", "--verify", f"{tracking}^{{commit}}")
        head = self._git("rev-parse", "--verify", "HEAD")
        new_head = upstream
        commits = self._git(
            "rev-list", "--reverse", "--topo-order", "--no-merges", f"{upstream}..{head}"
        )
        for commit in commits.split():
            new_head = self._pick(commit, new_head)
        if new_head != head:
            self._move_head(head, new_head)

    def _pick(self, commit: str, onto: str) -> str:
        """Replay ``commit`` onto ``onto`` (three-way, in a temp index); status: ours wins."""
        parents = self._git("rev-list", "--parents", "-n", "1", commit).split()[1:]
        if parents == [onto]:
            return commit  # already on top of ``onto``: keep it as it is
        base = parents[0] if parents else self._git("mktree", input=b"")
        with _temp_index(self.repo.git_dir) as env:
            self._git("read-tree", "-m", "--aggressive", base, onto, commit, env=env)
            self._resolve_conflicts(env)
            tree = self._git("write-tree", env=env)
        fields = self._git("show", "-s", "--date=raw", "--format=%an%n%ae%n%ad%n%cn%n%ce", commit)
        keys = ("AUTHOR_NAME", "AUTHOR_EMAIL", "AUTHOR_DATE", "COMMITTER_NAME", "COMMITTER_EMAIL")
        ident = {f"GIT_{k}": v for k, v in zip(keys, fields.split("\n"), strict=True)}
        message = self._git("show", "-s", "--format=%B", commit, strip=False)
        return self._git(
            "commit-tree", "--no-gpg-sign", tree, "-p", onto, input=message.encode(), env=ident
        )

    def _resolve_conflicts(self, env: dict[str, str]) -> None:
        """Status paths take the replayed commit's side (stage 3); others cannot be merged."""
        stages: dict[str, dict[int, tuple[str, str]]] = {}
        for line in filter(
            None, self._git("ls-files", "-u", "-z", env=env, strip=False).split("\0")
        ):
            info, path = line.split("\t", 1)
            mode, sha, stage = info.split()
            stages.setdefault(path, {})[int(stage)] = (mode, sha)
        for path, entries in stages.items():
            if not path.startswith(f"{STATUS_DIR}/"):
                raise GitError(f"{path}: changed both locally and on the remote")
            if 3 in entries:
                mode, sha = entries[3]
                self._git("update-index", "--cacheinfo", f"{mode},{sha},{path}", env=env)
            else:
                self._git("update-index", "--force-remove", "--", path, env=env)

    def _move_head(self, old: str, new: str) -> None:
        """Move the branch to ``new``, carrying the user's uncommitted changes like a checkout."""
        if not self.repo.bare:
            self._git("update-index", "-q", "--refresh", check=False)
            self._git("read-tree", "-m", "-u", old, new)
        self._git("update-ref", "-m", f"{BOT_NAME}: rebase onto the remote", "HEAD", new, old)

    # git plumbing

    def _head_entry(self, path: str, kind: str) -> Any:
        """The tree or blob at ``path`` in HEAD's tree; None when HEAD or the entry is absent."""
        try:
            entry = self.repo.head.commit.tree / path
        except (ValueError, KeyError):  # ValueError: an unborn branch, no commit yet
            return None
        return entry if entry.type == kind else None

    def _head_text(self, name: str, head: str | None = None) -> str | None:
        data = self._head_blob(_path(name), head or self._head_sha())
        return data.decode(errors="replace") if data is not None else None

    def _head_ref(self) -> str:
        """The ref HEAD points at (``refs/heads/main``); ``HEAD`` when it is detached."""
        text = (Path(self.repo.git_dir) / "HEAD").read_text().strip()
        return text.removeprefix("ref:").strip() if text.startswith("ref:") else "HEAD"

    def _head_sha(self) -> str | None:
        """HEAD's commit id, from the ref files alone (no object lookup); None on a branch
        with no commit yet. A loose branch ref is read directly (this runs several times
        per commit); packed refs and a detached HEAD through GitPython."""
        ref = self._head_ref()
        if ref != "HEAD":
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                sha = (Path(self.repo.common_dir) / ref).read_text().strip()
                if len(sha) == 40:
                    return sha
        try:
            return str(SymbolicReference.dereference_recursive(self.repo, "HEAD"))
        except ValueError:
            return None

    def _git(
        self,
        *args: str,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        strip: bool = True,
    ) -> str:
        """Run git on this repository; GitError (one line) when it fails and ``check``."""
        full_env = {k: v for k, v in os.environ.items() if k != "GIT_INDEX_FILE"}
        full_env.update(GIT_DIR=str(self.repo.git_dir), GIT_TERMINAL_PROMPT="0")
        if self.repo.working_tree_dir:
            full_env["GIT_WORK_TREE"] = str(self.repo.working_tree_dir)
        full_env.update(env or {})
        proc = subprocess.run(
            ["git", *args], input=input, env=full_env, capture_output=True, check=False,
            cwd=self.repo.working_tree_dir or self.repo.git_dir,
        )  # fmt: skip
        if check and proc.returncode != 0:
            lines = proc.stderr.decode(errors="replace").splitlines()
            # git's hints are advice for a person at a terminal, not part of the error.
            detail = " ".join(" ".join(ln.split()) for ln in lines if not ln.startswith("hint:"))
            detail = detail or f"exit {proc.returncode}"
            raise GitError(f"git {args[0]}: {detail}")
        out = proc.stdout.decode(errors="replace")
        return out.strip() if strip else out


@contextlib.contextmanager
def _temp_index(git_dir: "str | os.PathLike[str]") -> Iterator[dict[str, str]]:
    """A throwaway index file (``GIT_INDEX_FILE``) next to the repository's own."""
    with tempfile.TemporaryDirectory(dir=git_dir, prefix="convoy-batch-index-") as tmp:
        yield {"GIT_INDEX_FILE": str(Path(tmp) / "index")}


def _git_order(entry: tuple[bytes, int, str]) -> bytes:
    """Git sorts a tree's entries by name, a subtree's name as if it ended with '/'."""
    return entry[2].encode() + (b"/" if entry[1] == _DIR_MODE else b"")


def _path(name: str) -> str:
    return f"{STATUS_DIR}/{check_file_name(name)}.yaml"


def _load_blob(blob: git.Blob, cache: ParseCache | None) -> ReleaseStatus | None:
    """The status in ``blob``; None (with a warning) when it cannot be read."""
    path = str(blob.path)
    cached = cache.get(path, blob.hexsha) if cache is not None else None
    if cached is not None:
        return ReleaseStatus.model_validate(cached)
    try:
        status = parse_status(blob.data_stream.read(), path)
    except ValueError as exc:
        log.warning("%s; treated as an empty status", exc)
        return None
    if cache is not None:
        cache.put(path, blob.hexsha, status.dump_status())
    return status


def _parse_or_warn(text: bytes | str, source: str) -> ReleaseStatus:
    try:
        return parse_status(text, source)
    except ValueError as exc:
        log.warning("%s; treated as an empty status", exc)
        return ReleaseStatus()
