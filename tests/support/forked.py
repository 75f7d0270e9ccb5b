"""The CLI in a process of its own, forked from a server that has imported it already:
what ``python -m convoy_batch.cli`` does, without its half second of imports.

A server is ``python -m tests.support.forked``: it imports the CLI, then takes one run at
a time from its standard input (a JSON line: argv, working directory, environment, the
two files its output goes to). For each it forks; the child starts a session of its own (its process
group is its own, as ``start_new_session`` makes it), takes the directory and
environment, writes its output to the files, runs ``main`` and exits with its code. The
server copies what the child writes to its two pipes into the caller's files, answers the
child's pid at once, and its exit code once it ended: before it reaps the child it kills
what is left of the child's process group (git processes the run started) and waits until
none of it runs, so the group's id cannot be another process's yet when it is killed.

A run whose environment preloads a library (``LD_PRELOAD``: the crash injector) forks
from a server started with that library preloaded, which does nothing there until a
child is configured: the child calls the library's ``crash_shim_configure`` (when it has
one) once its environment is set, so the injector counts the run's calls from there, as
it counts a process that starts with it. Each server kind is kept in a pool per test
process (a run takes an idle server, or starts one); the servers end with it.

Not ``multiprocessing``'s fork server: it has one server per process, started with the
parent's environment (no preloaded library), reaps a child before it reports its end, and
reports any trouble of its own as exit code 255, the cause lost.

Invariant: nothing a run reads is decided at import time (the CLI reads its environment,
working directory and clock when it runs), so a forked run and a fresh process do the
same. A run that must start afresh (which modules a tick loads) uses ``subprocess``.
"""

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

CHECKOUT = Path(__file__).resolve().parents[2]
CONFIGURE = "crash_shim_configure"  # what a preloaded library reads its settings with


# --- the server -----------------------------------------------------------------------


def group_alive(pgid: int) -> bool:
    """Whether a process of the group runs still (zombies, waiting for a parent, do not)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def kill_group(pgid: int) -> None:
    """SIGKILL what is left of a process group, and wait (bounded) until none of it runs."""
    deadline = time.monotonic() + 5
    while True:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        if not group_alive(pgid) or time.monotonic() > deadline:
            return
        time.sleep(0.02)


def _child(request: dict[str, Any], out: int, err: int) -> NoReturn:
    """A run: a session of its own, the caller's directory and environment, its output to
    the pipes, the preloaded library configured; exits with ``main``'s code."""
    code = 1
    try:
        os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in (devnull, out, err):
            os.close(fd)
        if request["env"].get("LD_PRELOAD"):
            import ctypes

            configure = getattr(ctypes.CDLL(None), CONFIGURE, None)
            if configure is not None:
                configure()
        from convoy_batch.cli import main

        code = main(request["argv"])
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _run(request: dict[str, Any], answer: Callable[[dict[str, int]], None]) -> None:
    """Fork a run, answer its pid, copy what it writes to its two pipes into the caller's
    files, and once it ended kill what is left of its group, reap it and answer its code.
    The output goes through pipes, as a ``subprocess`` run's does: the injector counts
    writes to regular files only."""
    pipes = [os.pipe(), os.pipe()]
    pid = os.fork()
    if pid == 0:
        for read, _ in pipes:
            os.close(read)
        _child(request, pipes[0][1], pipes[1][1])
    for _, write in pipes:
        os.close(write)
    answer({"pid": pid})
    ended = os.pidfd_open(pid)
    with open(request["out"], "wb") as out, open(request["err"], "wb") as err:
        exited = _copy({pipes[0][0]: out, pipes[1][0]: err}, ended, pid)
    if not exited:
        select.select([ended], [], [])
        kill_group(pid)
    os.close(ended)
    _, status = os.waitpid(pid, 0)
    answer({"code": os.waitstatus_to_exitcode(status)})


def _copy(sinks: dict[int, IO[bytes]], ended: int, pid: int) -> bool:
    """Copy each pipe to its file until both end; once the run ended (``ended``, its
    pidfd, is readable) kill what is left of its group, and give a writer left outside it
    5 s. Whether the run ended; the pipes are closed."""
    exited = False
    while sinks:
        waiting = [*sinks] if exited else [*sinks, ended]
        ready = select.select(waiting, [], [], 5 if exited else None)[0]
        if not ready:
            break
        if ended in ready:
            exited = True
            kill_group(pid)
        for fd in (fd for fd in ready if fd in sinks):
            chunk = os.read(fd, 65536)
            if chunk:
                sinks[fd].write(chunk)
            else:
                del sinks[fd]
                os.close(fd)
    for fd in sinks:
        os.close(fd)
    return exited


def serve() -> None:
    """The server's loop: a request line in, the run's pid and then its code out."""
    import ctypes  # noqa: F401  (imported once, for the children that configure a library)

    import convoy_batch.cli  # noqa: F401

    def answer(value: dict[str, int]) -> None:
        os.write(1, json.dumps(value).encode() + b"\n")

    for line in sys.stdin.buffer:
        _run(json.loads(line), answer)


# --- the client -----------------------------------------------------------------------


class _Server:
    """One server process, and the lines it answered that were not read yet."""

    def __init__(self, preload: str) -> None:
        self.preload = preload
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRASH_SHIM_")}
        env.pop("LD_PRELOAD", None)
        if preload:
            env["LD_PRELOAD"] = preload
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CHECKOUT), env.get("PYTHONPATH")]))
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # a run's imports write nothing
        self._said = Path(tempfile.mkdtemp(prefix="convoy-fork-server-")) / "stderr"
        with self._said.open("wb") as said:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.forked"],
                cwd=CHECKOUT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=said,
                start_new_session=True,
            )
        self._pending = b""

    def send(self, request: Mapping[str, Any]) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(request).encode() + b"\n")
        self._process.stdin.flush()

    def receive(self, timeout: float | None) -> dict[str, int] | None:
        """The next answer, or None when none came within ``timeout`` seconds."""
        assert self._process.stdout is not None
        fd = self._process.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                said = self._said.read_text(errors="replace").strip()
                raise RuntimeError(f"the CLI's fork server ended: {said or '(nothing said)'}")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        answer: dict[str, int] = json.loads(line)
        return answer

    def close(self) -> None:
        assert self._process.stdin is not None
        with contextlib.suppress(OSError):
            self._process.stdin.close()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        shutil.rmtree(self._said.parent, ignore_errors=True)


_idle: dict[str, list[_Server]] = {}
_lock = threading.Lock()


def _take(preload: str) -> _Server:
    with _lock:
        idle = _idle.setdefault(preload, [])
        if idle:
            return idle.pop()
    return _Server(preload)


def _give(server: _Server) -> None:
    with _lock:
        _idle.setdefault(server.preload, []).append(server)


@atexit.register
def _close_all() -> None:
    with _lock:
        servers = [server for idle in _idle.values() for server in idle]
        _idle.clear()
    for server in servers:
        server.close()


class Forked:
    """A forked run of the CLI, as much of :class:`subprocess.Popen` as the tests use:
    ``pid`` (its process group too), ``poll``, ``communicate``, ``returncode``, ``kill``."""

    def __init__(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="convoy-forked-"))
        out, err = self._folder / "out", self._folder / "err"
        self._server = _take(env.get("LD_PRELOAD", ""))
        request = {"argv": list(argv), "cwd": str(cwd), "env": dict(env)}
        self._server.send({**request, "out": str(out), "err": str(err)})
        started = self._server.receive(None)
        assert started is not None
        self.pid: int = started["pid"]
        self.returncode: int | None = None

    def _wait(self, timeout: float | None) -> int | None:
        if self.returncode is None:
            ended = self._server.receive(timeout)
            if ended is not None:
                self.returncode = ended["code"]
                _give(self._server)
        return self.returncode

    def poll(self) -> int | None:
        """Its exit code once it ended, else None."""
        return self._wait(0)

    def kill(self) -> None:
        """SIGKILL its process group while it runs (the server reaps it, and reports)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[bytes, bytes]:
        """Wait for the run (``subprocess.TimeoutExpired`` after ``timeout``), then its
        stdout and stderr."""
        if self._wait(timeout) is None:
            raise subprocess.TimeoutExpired("convoy-batch (forked)", timeout or 0)
        out, err = (self._folder / name for name in ("out", "err"))
        output = out.read_bytes(), err.read_bytes()
        shutil.rmtree(self._folder, ignore_errors=True)
        return output


if __name__ == "__main__":
    serve()
