"""Run a renderer's program: in a folder, with a minimal environment, a time-out and a
bound on what it writes; every failure a one-line RenderFailed, never a traceback.

The program runs in a session of its own: at the time-out, or once its output is over
the limit, the whole process group is killed. Its stderr is kept in a bounded buffer,
whose last lines make the message of a failure.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from convoy_batch.errors import RenderFailed

DEFAULT_TIMEOUT_S = 60.0
MAX_OUTPUT = 64 * 1024 * 1024
"""Bytes a renderer may write to stdout (its render), at most."""
_STDERR_LINES = 5
_STDERR_KEEP = 64 * 1024
_LINE_CHARS = 300


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
    timeout: float = DEFAULT_TIMEOUT_S,
    limit: int = MAX_OUTPUT,
    stdin: bytes = b"",
) -> str:
    """The stdout of ``argv`` run in ``cwd`` (UTF-8 text). RenderFailed, naming
    ``label``: the program cannot start, exits non-zero (with the last lines of its
    stderr, joined by " | "), runs past ``timeout`` or writes more than ``limit`` bytes."""
    try:
        process = subprocess.Popen(
            list(argv), cwd=cwd, env=dict(env), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        raise RenderFailed(f"{label}: cannot start {argv[0]}: {exc.strerror}") from None
    assert process.stdin and process.stdout and process.stderr
    errors: deque[bytes] = deque()
    reader = threading.Thread(target=_keep_tail, args=(process.stderr, errors), daemon=True)
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
    if timed_out.is_set():
        raise RenderFailed(f"{label}: timed out after {timeout:g} s")
    if over:
        raise RenderFailed(f"{label}: wrote more than {limit:,} bytes; at most {limit:,} are read")
    if code != 0:
        what = f"killed by signal {-code}" if code < 0 else f"exit {code}"
        tail = _last_lines(b"".join(errors))
        raise RenderFailed(f"{label} failed ({what})" + (f": {tail}" if tail else ""))
    try:
        return out.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RenderFailed(f"{label}: its output is not UTF-8 text") from None


def _read_bounded(stream: IO[bytes], limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    while chunk := os.read(stream.fileno(), 65536):
        size += len(chunk)
        if size > limit:
            return b"", True
        chunks.append(chunk)
    return b"".join(chunks), False


def _keep_tail(stream: IO[bytes], tail: deque[bytes]) -> None:
    """Read ``stream`` to its end, keeping about its last :data:`_STDERR_KEEP` bytes."""
    kept = 0
    while chunk := os.read(stream.fileno(), 65536):
        tail.append(chunk)
        kept += len(chunk)
        while kept - len(tail[0]) > _STDERR_KEEP:
            kept -= len(tail.popleft())
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
