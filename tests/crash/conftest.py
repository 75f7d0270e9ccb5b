"""Fixtures of the crash tests: the injector, compiled once, and the world's template
with the reference end state, built once per session."""

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from tests.crash import harness as h


def unavailable(reason: str) -> NoReturn:
    """Fail under CI, skip elsewhere (as the Kubernetes tests do)."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not sys.platform.startswith("linux"):
        unavailable("the crash injector is an LD_PRELOAD library for Linux")
    try:
        return h.build_shim(tmp_path_factory.mktemp("shim"))
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or str(exc)
        text = detail.decode(errors="replace") if isinstance(detail, bytes) else detail
        unavailable(f"cannot compile the crash injector with a C compiler (cc, or $CC): {text}")


@dataclass(repr=False)
class CrashWorld:
    template: Path  # repo/ and state/ one tick before the crash tick
    reference: h.Snapshot  # the end state of the run without a crash
    reference_codes: list[int]  # the exit codes of its ticks (crash tick, then plain)
    counts: dict[str, int]  # calls of each kind in the crash tick (recorded)
    events: list[str]  # the recorded calls, one line each
    cases: Path  # where the cases are copied to

    def __repr__(self) -> str:
        return f"CrashWorld({self.template.parent.name}, calls {self.counts})"


@pytest.fixture(scope="session")
def crash_world(shim: Path, tmp_path_factory: pytest.TempPathFactory) -> CrashWorld:
    base = tmp_path_factory.mktemp("crash")
    template = base / "template"
    h.build_world(template)
    before = h.snapshot(template)

    # The reference: the crash tick without a crash (recording its calls), then plain ticks.
    reference = base / "reference"
    shutil.copytree(template, reference, symlinks=True)
    record = h.run_tick(reference, h.CRASH_MINUTE, shim=shim)
    assert record.code == 0, f"the tick without a crash failed:\n{record.err}"
    codes = [record.code]
    for minutes in h.FOLLOW_MINUTES:
        codes.append(h.run_tick(reference, minutes).code)
    snap = h.snapshot(reference)
    h.check_reference(snap, before)
    problems = h.fsck(reference / "repo") + h.person_commits(reference / "repo")
    assert not problems, f"the run without a crash: {problems}"

    # A second run without a crash (and without the injector) ends the same: the
    # comparison only sees what a crash changes.
    again = base / "again"
    shutil.copytree(template, again, symlinks=True)
    for minutes in (h.CRASH_MINUTE, *h.FOLLOW_MINUTES):
        h.run_tick(again, minutes)
    assert h.compare(snap, h.snapshot(again)) == []
    shutil.rmtree(again)

    return CrashWorld(
        template, snap, codes, h.count_events(record.events), record.events, base / "cases"
    )
