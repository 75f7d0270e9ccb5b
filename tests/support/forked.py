"""The CLI in a process of its own, forked from a parent that has imported it already:
what ``python -m convoy_batch.cli`` does, without its half second of imports.

One fork server per test process (``multiprocessing``'s ``forkserver``, its only preload
``convoy_batch.cli``), started on first use. Each child starts a session of its own
(its process group is its own, as ``start_new_session`` makes it), takes the working
directory and environment it is given, writes its output to files, runs ``main`` and
exits with its code. Only for plain runs: a run whose environment asks for a library
loaded at start (``LD_PRELOAD``: the crash injector) or a fresh interpreter (which
modules a run loads) is started with ``subprocess`` as before.

Invariant: nothing a run reads is decided at import time (the CLI reads its environment,
working directory and clock when it runs), so a forked run and a fresh process do the
same.
"""

import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from multiprocessing.context import ForkServerContext
from pathlib import Path

_context: ForkServerContext | None = None


def _server() -> ForkServerContext:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["convoy_batch.cli"])
        _context = context
    return _context


def _run(argv: list[str], cwd: str, env: dict[str, str], out: str, err: str) -> None:
    """The child: a session of its own, the caller's directory and environment, its
    output to the caller's files; exits with ``main``'s code."""
    os.setsid()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.dup2(target, fd)
        os.close(target)
    from convoy_batch.cli import main

    code = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class Forked:
    """A forked run of the CLI, as much of :class:`subprocess.Popen` as the tests use:
    ``pid`` (its process group too), ``poll``, ``communicate``, ``returncode``."""

    def __init__(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="convoy-forked-"))
        out, err = self._folder / "out", self._folder / "err"
        out.touch()
        err.touch()
        self._process = _server().Process(
            target=_run, args=(list(argv), str(cwd), dict(env), str(out), str(err))
        )
        self._process.start()
        assert self._process.pid is not None
        self.pid: int = self._process.pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit code once it ended, else None."""
        return self._process.exitcode

    def communicate(self, timeout: float | None = None) -> tuple[bytes, bytes]:
        """Wait for the run (``subprocess.TimeoutExpired`` after ``timeout``), then its
        stdout and stderr."""
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired("convoy-batch (forked)", timeout or 0)
        self.returncode = self._process.exitcode
        out, err = (self._folder / name for name in ("out", "err"))
        output = out.read_bytes(), err.read_bytes()
        shutil.rmtree(self._folder, ignore_errors=True)
        return output


def plain(env: Mapping[str, str]) -> bool:
    """A run that may be forked: nothing in ``env`` asks for a fresh process."""
    return not env.get("LD_PRELOAD")
