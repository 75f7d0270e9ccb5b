"""Real renderer programs for the tests, on a PATH of the test's own.

The PATH holds git and a shell and what a test adds: so neither a kustomize nor a
kubectl of the machine takes part unless a test puts it there. Kustomize is Debian's
kubectl 1.20 (kustomize v2.0.3), unpacked by ``scripts/k8s-testenv kubectl``.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.scenario import PROJECT

_PATH = os.environ.get("PATH", os.defpath)  # the machine's, before a test narrows it


def debian_kubectl() -> str:
    """The path of Debian's kubectl (fetched once into the cache); skips without it, or
    fails under CI."""
    done = subprocess.run(
        [str(PROJECT / "scripts" / "k8s-testenv"), "kubectl"],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PATH": _PATH},
    )  # fmt: skip
    path = done.stdout.strip()
    if done.returncode != 0 or not os.access(path, os.X_OK):
        reason = f"no Debian kubectl: {done.stderr.strip()[-300:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


class Tools:
    """A bin folder that is the whole PATH of the test."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bin = folder
        self.bin.mkdir()
        for name in ("git", "sh", "cat", "env", "sleep", "yes"):
            found = shutil.which(name)
            assert found is not None, name
            (self.bin / name).symlink_to(found)
        monkeypatch.setenv("PATH", str(self.bin))
        self.calls = folder.parent / "calls.log"

    def recorded(self, name: str, target: str) -> Path:
        """``name`` on the PATH: a script that notes each call in :attr:`calls`, then
        runs ``target``."""
        script = self.bin / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> "{self.calls}"\nexec "{target}" "$@"\n')
        script.chmod(0o755)
        return script

    def script(self, name: str, body: str) -> Path:
        script = self.bin / name
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(0o755)
        return script

    def call_log(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []
