"""Run a renderer's program: in a folder, with a minimal environment, a memory limit, a
time-out and a bound on what it writes; every failure a one-line RenderFailed, never a
traceback. The single place a renderer's process starts.

The memory limit is set in the child before the program runs, by the shell it starts
under (:data:`_LAUNCH`: ``ulimit -d``, then ``exec``), never by a ``preexec_fn``, which
is unsafe in a process with threads (a tick runs many). It is RLIMIT_DATA, soft and
hard (the program cannot raise it): since Linux 4.7 it counts every private writable
mapping (the heap of malloc, of the Go runtime, of Python). RLIMIT_AS would also count
the address space a Go program reserves without using it: helm and kubectl do not start
under 700 MiB of it, and helm holds 1.2 GiB of it to render a one-object chart. A
program over the limit fails to allocate and ends: when its stderr says so
(:data:`_OUT_OF_MEMORY`), the failure is told as being over the limit. The program runs
in a session of its own: at the time-out, or once its output is over the limit, the
whole process group is killed. Its stderr is kept in a bounded buffer, whose last lines
make the message of a failure.
"""

import contextlib
import errno
import os
import re
import resource
import shutil
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from convoy_batch.errors import RenderFailed

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MEMORY = 1024**3
"""Bytes of memory (its data segment: RLIMIT_DATA) a renderer's process may take."""
MAX_OUTPUT = 64 * 1024 * 1024
"""Bytes a renderer may write to stdout (its render), at most."""
_STDERR_LINES = 5
_STDERR_KEEP = 64 * 1024
_LINE_CHARS = 300
_LAUNCH = 'ulimit -d "$1" && shift && exec "$@"'
"""``sh -c _LAUNCH sh KIB PROGRAM ARGS...``: the limit in KiB, then the program in place
of the shell (its pid, its session): about a millisecond more than starting it alone."""
_OUT_OF_MEMORY = re.compile(
    rb"out of memory|cannot allocate memory|memory allocation|MemoryError|bad_alloc", re.I
)
"""How a program says an allocation failed (Go's runtime, glibc, the Jsonnet library,
Python, C++), searched over its whole stderr: Go writes it first, then every stack."""


@dataclass(frozen=True)
class Limits:
    """What one process may take: ``memory`` bytes (RLIMIT_DATA), ``timeout`` seconds of
    wall time. ``memory_from`` and ``timeout_from`` say, in a message, where the operator
    sets each (``renderers.yaml limits.memory``); empty: nowhere."""

    memory: int = DEFAULT_MEMORY
    timeout: float = DEFAULT_TIMEOUT_S
    memory_from: str = ""
    timeout_from: str = ""


def size_text(size: int) -> str:
    """``size`` bytes in the largest binary unit it reaches: ``1 GiB``, ``200 MiB``."""
    for unit, name in ((1024**4, "TiB"), (1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB")):
        if size >= unit:
            return f"{size / unit:.4g} {name}"
    return f"{size} bytes"


@dataclass(frozen=True)
class Tool:
    """A program found on the search path, named by what identifies its build without
    running it (its resolved path, size and modification time)."""

    name: str
    path: str

    def identity(self) -> str:
        real = os.path.realpath(self.path)
        try:
            st = os.stat(real)
        except OSError:
            return f"{real}:missing"
        return f"{real}:{st.st_size}:{st.st_mtime_ns}"


def find_tool(name: str, search_path: str | None = None) -> Tool | None:
    found = shutil.which(name, path=search_path if search_path is not None else _path())
    return None if found is None else Tool(name, found)


def _path() -> str:
    return os.environ.get("PATH", os.defpath)


def minimal_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """PATH, a throwaway HOME and TMPDIR, a UTF-8 locale, and ``extra``: nothing else of
    the reconciler's environment (no credentials, no kubeconfig)."""
    return {
        "PATH": _path(),
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        **(extra or {}),
    }


def run(
    label: str,
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    *,
    limits: Limits = Limits(),
    timeout: float | None = None,
    limit: int = MAX_OUTPUT,
    stdin: bytes = b"",
) -> str:
    """The stdout of ``argv`` run in ``cwd`` (UTF-8 text), under ``limits`` (``timeout``,
    when given, in place of ``limits.timeout``). RenderFailed, naming ``label``: the
    program cannot start, exits non-zero (with the last lines of its stderr, joined by
    " | "), runs out of its memory, runs past its time-out or writes more than ``limit``
    bytes."""
    if timeout is not None:
        limits = replace(limits, timeout=timeout, timeout_from="")
    shell = shutil.which("sh", path=_path())  # the reconciler's, whatever the program's PATH
    if shell is None:
        raise RenderFailed(f"{label}: cannot start {argv[0]}: no sh on PATH to set its limits")
    if why := _cannot_start(argv[0], cwd, env):
        raise RenderFailed(f"{label}: cannot start {argv[0]}: {why}")
    try:
        process = subprocess.Popen(
            [shell, "-c", _LAUNCH, "sh", str(_kib(limits.memory)), *argv], cwd=cwd,
            env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        raise RenderFailed(f"{label}: cannot start {argv[0]}: {exc.strerror}") from None
    return _outcome(label, limits, limit, _wait(process, limits.timeout, limit, stdin))


@dataclass(frozen=True)
class _Ended:
    code: int
    out: bytes
    over: bool
    """It wrote more than the limit (``out`` is then empty)."""
    stderr: "_Stderr"
    timed_out: bool


def _outcome(label: str, limits: Limits, limit: int, ended: _Ended) -> str:
    """The output of a program that ended well; RenderFailed, one line, otherwise."""
    if ended.timed_out:
        where = _set_in(limits.timeout_from)
        raise RenderFailed(f"{label}: timed out after {limits.timeout:g} s{where}")
    if ended.over:
        raise RenderFailed(f"{label}: wrote more than {limit:,} bytes; at most {limit:,} are read")
    if ended.code != 0 and ended.stderr.out_of_memory:
        where = _set_in(limits.memory_from)
        raise RenderFailed(f"{label}: over its memory limit of {size_text(limits.memory)}{where}")
    if ended.code != 0:
        what = f"killed by signal {-ended.code}" if ended.code < 0 else f"exit {ended.code}"
        tail = _last_lines(b"".join(ended.stderr.tail))
        raise RenderFailed(f"{label} failed ({what})" + (f": {tail}" if tail else ""))
    try:
        return ended.out.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RenderFailed(f"{label}: its output is not UTF-8 text") from None


def _cannot_start(program: str, cwd: Path, env: Mapping[str, str]) -> str:
    """Why ``program`` cannot start, found as the shell will find it (on the PATH of
    ``env``, or relative to ``cwd``); empty when it can."""
    named = str(cwd / program) if "/" in program else None
    found = shutil.which(named or program, path=env.get("PATH", os.defpath))
    if found is not None:
        return ""
    exists = named is not None and os.path.exists(named)
    return os.strerror(errno.EACCES if exists else errno.ENOENT)


def _kib(memory: int) -> int:
    """``memory`` in KiB, at most what this process may have (a limit above its own
    hard limit could not be set)."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        memory = min(memory, hard)
    return max(memory // 1024, 1)


def _set_in(where: str) -> str:
    return f" ({where})" if where else ""


def _wait(process: "subprocess.Popen[bytes]", timeout: float, limit: int, stdin: bytes) -> _Ended:
    """Feed ``stdin``, read stdout (at most ``limit`` bytes) and stderr, and wait. The
    process group is killed at the time-out, once the output is over the limit, and in
    any case at the end."""
    assert process.stdin and process.stdout and process.stderr
    errors = _Stderr()
    reader = threading.Thread(target=errors.read, args=(process.stderr,), daemon=True)
    reader.start()
    feeder = threading.Thread(target=_feed, args=(process.stdin, stdin), daemon=True)
    feeder.start()
    timed_out = threading.Event()
    timer = threading.Timer(timeout, _kill_group, args=(process, timed_out))
    timer.start()
    try:
        out, over = _read_bounded(process.stdout, limit)
        if over:
            _kill_group(process, None)
        code = process.wait()
    finally:
        timer.cancel()
        _kill_group(process, None)
        process.wait()
        reader.join()
        feeder.join()
        process.stdout.close()
    return _Ended(code, out, over, errors, timed_out.is_set())


def _read_bounded(stream: IO[bytes], limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    while chunk := os.read(stream.fileno(), 65536):
        size += len(chunk)
        if size > limit:
            return b"", True
        chunks.append(chunk)
    return b"".join(chunks), False


class _Stderr:
    """A program's stderr, read to its end: about its last :data:`_STDERR_KEEP` bytes,
    and whether it said anywhere that an allocation failed."""

    def __init__(self) -> None:
        self.tail: deque[bytes] = deque()
        self.out_of_memory = False

    def read(self, stream: IO[bytes]) -> None:
        kept, last = 0, b""
        while chunk := os.read(stream.fileno(), 65536):
            if not self.out_of_memory and _OUT_OF_MEMORY.search(last[-64:] + chunk):
                self.out_of_memory = True
            last = chunk
            self.tail.append(chunk)
            kept += len(chunk)
            while kept - len(self.tail[0]) > _STDERR_KEEP:
                kept -= len(self.tail.popleft())
        stream.close()


def _feed(stream: IO[bytes], data: bytes) -> None:
    try:
        if data:
            stream.write(data)
    except OSError:
        pass  # the program ended without reading it all
    finally:
        with contextlib.suppress(OSError):
            stream.close()


def _kill_group(process: "subprocess.Popen[bytes]", timed_out: threading.Event | None) -> None:
    """Kill the program and whatever it started; ``timed_out`` is set when the timer
    finds it still running."""
    if timed_out is not None:
        if process.poll() is not None:
            return
        timed_out.set()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _last_lines(data: bytes) -> str:
    """The last few non-empty lines of a stderr, each cut short, joined by " | "."""
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines()]
    kept = [line[:_LINE_CHARS] for line in lines if line][-_STDERR_LINES:]
    return " | ".join(kept)
