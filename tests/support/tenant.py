"""What every hostile-tenant test checks after its tick (``tests/test_tenant_*.py``),
written once:

- :func:`nowhere`: the planted secret, in any of the forms it may be written in, is in no
  output, no commit or git object of the GitOps repository, no file of its working tree
  nor of the state directory (but the files a test allows), and in no other text the
  test recorded (a server's requests, a tool's command lines);
- :func:`refused`: the hostile Release got exactly one line on stderr, and the same
  message in its status with the given reason, naming no path of the state directory;
- :func:`synced`: the healthy Releases beside it are Synced.
"""

import os
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from tests.support.scenario import Result, Scenario


def nowhere(
    s: Scenario,
    secret: str | Iterable[str],
    results: Iterable[Result],
    *,
    texts: Mapping[str, str] | None = None,
    allowed: Iterable[Path] = (),
) -> None:
    """``secret`` (one string, or all the forms it may be written in: as is, base64, in a
    header, ...) is nowhere: not on the stdout or stderr of any of ``results``, not in
    ``git log -p --all`` or ``git status``, not in any git object of the repository (its
    blobs, trees and commits, uncompressed), not in any file of the working tree (``.git``
    included) or of the state directory (its directory cluster, render store and source
    cache included) but the ``allowed`` ones, and not in any of ``texts`` (what else the
    test recorded, by name). A symlink is checked by where it points and by the file it
    leads to, unless ``allowed``."""
    forms = [secret] if isinstance(secret, str) else list(secret)
    assert forms and all(forms), "no secret to look for"
    kept = set(allowed)
    for path in kept:
        assert path.is_file(), f"allowed, but no file: {path}"
    found = [where for where, data in _places(s, results, texts or {}, kept) if _holds(data, forms)]
    assert found == [], f"the secret is in {found}"


def _places(
    s: Scenario, results: Iterable[Result], texts: Mapping[str, str], allowed: set[Path]
) -> Iterator[tuple[str, str | bytes]]:
    """Every place a secret could be, by name, and what it holds."""
    for i, result in enumerate(results):
        yield f"stdout of tick {i}", result.out
        yield f"stderr of tick {i}", result.err
    yield "git log -p --all", s.repo.git.log("-p", "--all")
    yield "git status", s.repo.git.status()
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=s.root, capture_output=True, check=True,
    )  # fmt: skip
    yield "git objects", objects.stdout
    yield from texts.items()
    for path in sorted(set(_files(s.root)) | set(_files(s.state))):
        if path in allowed:
            continue
        if path.is_symlink():
            yield f"{path} (where it points)", os.readlink(path)
        if path.is_file():
            yield str(path), path.read_bytes()


def _files(folder: Path) -> Iterator[Path]:
    """The files and symlinks under ``folder`` (none when it does not exist)."""
    return (p for p in folder.rglob("*") if p.is_symlink() or p.is_file())


def _holds(data: str | bytes, forms: list[str]) -> bool:
    if isinstance(data, str):
        return any(form in data for form in forms)
    return any(form.encode() in data for form in forms)


def refused(
    s: Scenario,
    result: Result,
    name: str,
    reason: str,
    *,
    healthy: Iterable[str] = (),
    logged: bool = False,
) -> str:
    """The hostile Release ``name`` failed the tick with ``reason``: stderr is exactly the
    one line ``name: reason: message``, ``message`` being its status's (one line, nothing
    applied), without a traceback; no output and no message names the state directory's
    path; and the ``healthy`` Releases are Synced. ``logged``: the tick ran in a process
    of its own (:meth:`Scenario.cli_process`), whose log is on its stderr too: there, the
    line is also the log's one line, ``ERROR name: reason: message``, before it. Returns
    the message."""
    assert result.code == 1, result.err
    assert "Traceback" not in result.err, result.err
    attempted = s.status(name)["lastAttempted"]
    assert (attempted["reason"], attempted.get("applied")) == (reason, False), attempted
    message = str(attempted["message"])
    assert "\n" not in message, message
    line = f"{name}: {reason}: {message}"
    assert result.err.splitlines() == ([f"ERROR {line}"] if logged else []) + [line], result.err
    for path in {str(s.state), str(s.state.resolve())}:
        for text in (message, result.err, result.out):
            assert path not in text, text
    synced(s, *healthy)
    return message


def synced(s: Scenario, *names: str) -> None:
    """The last attempt of each Release ``names`` is Synced."""
    for name in names:
        attempted = s.status(name)["lastAttempted"]
        assert attempted["reason"] == "Synced", (name, attempted)
