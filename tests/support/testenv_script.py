"""Starting a throwaway server by its ``scripts/*-testenv`` script (``start FOLDER``,
``stop FOLDER``), the same for every kind: the script's standard output, or one line of
why it did not start."""

import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path


class NotStarted(Exception):
    """The script is missing, failed or took too long (the message says which, in a line)."""


def start_script(
    script: Path, folder: Path, env: Mapping[str, str], timeout: float, stop: Callable[[], None]
) -> str:
    """Runs ``script start folder`` with ``env``; its standard output. NotStarted when the
    script is missing, exits non-zero (its last line of stderr), or takes longer than
    ``timeout`` seconds (then ``stop`` runs)."""
    if not script.exists():
        raise NotStarted(f"{script} is missing")
    try:
        done = subprocess.run(
            [str(script), "start", str(folder)],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        stop()
        raise NotStarted(f"start took longer than {timeout}s") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise NotStarted(lines[-1] if lines else f"exit code {done.returncode}")
    return done.stdout
