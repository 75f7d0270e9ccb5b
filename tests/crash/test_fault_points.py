"""A real tick whose system calls fail (a full or failing disk), then plain ticks: the
failing tick says so in one line per error and claims nothing that did not happen, and
the ticks after it end where a tick that never failed ends.

The world and the injector are the crash tests' (``test_crash_points.py``, the module
docstring there). Instead of a kill, the injector makes the n-th call of a kind fail
(``CRASH_SHIM_ERRNO``): the call is not made and returns -1 (NULL for ``fopen``) with
ENOSPC or EIO, in the tick or in any git process it starts. The kinds are those a full
or failing disk refuses: write (to a regular file), fsync, rename (and link), open with
O_CREAT. Points alternate between ENOSPC and EIO. A second test keeps the disk full for
the rest of the tick (``CRASH_SHIM_STICKY``: every write from the n-th on fails with
ENOSPC).

At each point: a copy of the world, the tick at minute 13 with the fault, then

- right after it (``fault_checks``): its exit code and stderr are the README's (no
  traceback, one line per message, exit 1 exactly when an error is reported); every
  render that a status at HEAD (its rollout and attempt too, applied or not), a
  write-ahead record or a cluster object names is stored and verifies; "status commits
  not written" only when HEAD did not move;
- with a single failing call, also right after it: ``status/`` of the index and working
  tree equal HEAD, no git lock file is left, nothing untracked, and a person's
  ``git commit -am x`` succeeds and changes no status;
- plain ticks at minutes 14 and 15, then what ``test_crash_points`` checks: statuses
  without their times, cluster objects and render store equal the reference's (so no
  fault caused a rollback), the last tick's exit code, ``git fsck --strict``, nothing left
  in the checkout, a person's commit.

How many points run:

- always the calls issue 24 found failing (``KEY_POINTS``, found by their recorded call:
  a background render write and its fsyncs, the fsync of ``renders/`` and ``intents/``,
  the locks of the branch and of ``packed-refs``, the rename of ``index.lock`` once the
  branch moved, the index that ``git checkout`` writes);
- always every write, fsync and rename of a render blob of the tick (issue 47: a render
  that cannot be stored is named by no status), each once;
- by default a deterministic sample: ``CONVOY_FAULT_SAMPLE`` points of each kind (6),
  and ``CONVOY_FAULT_FULL_SAMPLE`` (3) of the disk that stays full (about 35 points, about
  a minute and a half on two cores);
- ``CONVOY_FAULT_ALL=1``: every point of every kind, each with ENOSPC and with EIO, and
  every write with the disk full from there on (about 700 points, some minutes);
- ``CONVOY_FAULT_POINTS=write:17:EIO,rename:3:ENOSPC,write:40:ENOSPC+``: just those
  (``+``: from there on);
- ``CONVOY_CRASH_KEEP=1`` keeps each case's folder.
"""

import os
import re
from pathlib import Path

import pytest

from tests.crash import fault_checks as fc
from tests.crash import harness as h
from tests.crash.conftest import CrashWorld

pytestmark = pytest.mark.crash

KINDS = ("write", "fsync", "rename", "create")
ERRNOS = ("ENOSPC", "EIO")
DEFAULT_SAMPLE = 6
DEFAULT_FULL_SAMPLE = 3
RELEASES = 5


def named_points(kind: str, sticky: bool) -> list[tuple[int, h.Fault]] | None:
    named = os.environ.get("CONVOY_FAULT_POINTS", "").strip()
    if not named:
        return None
    points = []
    for item in filter(None, (p.strip() for p in named.split(","))):
        k, n, errno = item.split(":")
        if k == kind and errno.endswith("+") == sticky:
            points.append((int(n), h.Fault(errno.rstrip("+"), sticky)))
    return points


def chosen_points(kind: str, total: int) -> list[tuple[int, h.Fault]]:
    named = named_points(kind, sticky=False)
    if named is not None:
        return named
    if os.environ.get("CONVOY_FAULT_ALL") == "1":
        return [(n, h.Fault(e)) for n in range(1, total + 1) for e in ERRNOS]
    size = int(os.environ.get("CONVOY_FAULT_SAMPLE", DEFAULT_SAMPLE))
    # Shifted by one from the crash tests' sample, so the two suites meet other calls.
    points = sorted({min(total, n + 1) for n in h.sample(total, size)} | {1})
    return [(n, h.Fault(ERRNOS[i % 2])) for i, n in enumerate(points)]


def full_disk_points(total: int) -> list[tuple[int, h.Fault]]:
    named = named_points("write", sticky=True)
    if named is not None:
        return named
    if os.environ.get("CONVOY_FAULT_ALL") == "1":
        return [(n, h.Fault("ENOSPC", True)) for n in range(1, total + 1)]
    size = int(os.environ.get("CONVOY_FAULT_FULL_SAMPLE", DEFAULT_FULL_SAMPLE))
    return [(n, h.Fault("ENOSPC", True)) for n in h.sample(total, size)]


def fault_case(world: CrashWorld, shim: Path, kind: str, n: int, fault: h.Fault) -> str | None:
    """One fault point; None when all is well, else the report of what was wrong."""
    name = f"fault-{kind}-{n}-{fault.errno}{'-full' if fault.sticky else ''}"
    with h.case_dir(world.template, world.cases / name) as case:
        repo = case / "repo"
        before = fc.head(repo)
        run = h.run_tick(case, h.CRASH_MINUTE, shim=shim, kind=kind, n=n, fault=fault)
        problems = [f"the failing tick: {p}" for p in fc.output_problems(run, RELEASES)]
        problems += fc.claim_problems(case, h.snapshot(case))
        problems += fc.commit_report_problems(repo, run, before)
        if not fault.sticky:
            problems += [f"after the failing tick: {p}" for p in fc.tidy_problems(repo)]
            problems += [f"after the failing tick: {p}" for p in h.person_commits(repo)]
        follow = [h.run_tick(case, minutes) for minutes in h.FOLLOW_MINUTES]
        problems += h.compare(world.reference, h.snapshot(case))
        last, expected = follow[-1].code, world.reference_codes[-1]
        if last != expected:
            problems.append(
                f"the tick at minute {h.FOLLOW_MINUTES[-1]} exited {last} (reference"
                f" {expected}): {h.last_words(follow[-1].err)}"
            )
        problems += h.fsck(repo) + h.litter(repo) + h.person_commits(repo)
        prefix = f"{case}/"
    if not problems:
        return None
    where = (
        f"failed at: {run.hit}"
        if run.hit
        else f"no such call (the tick made fewer; exit {run.code})"
    )
    said = "; ".join(ln for ln in run.err.splitlines() if ln.strip())
    head = f"{kind} #{n} of {world.counts[kind]} ({fault}), {where}"
    head += f"\n  the failing tick: exit {run.code}: {h.short(said, 600)}"
    return (head + "".join(f"\n    - {p}" for p in problems)).replace(prefix, "")


KEY_POINTS = (
    # (kind, the recorded call, errno): the defects issue 24 found, each at its first call.
    ("write", r" write\(\S*/state/renders/\.\S*\.tmp,", "ENOSPC"),  # a background render write
    ("fsync", r" fsync\(\S*/state/renders/\.\S*\.tmp\)$", "EIO"),  # the render's own fsync
    ("fsync", r" fsync\(\S*/state/renders\)$", "EIO"),  # what makes its rename durable
    ("fsync", r" fsync\(\S*/state/intents\)$", "EIO"),
    ("create", r" git \S+\(\S*/\.git/refs/heads/main\.lock,", "ENOSPC"),  # the branch's lock
    ("create", r" git \S+\(\S*/\.git/packed-refs\.lock,", "ENOSPC"),
    ("rename", r" python rename\(\S*/\.git/index\.lock, \S*/\.git/index\)$", "EIO"),  # landed
    ("write", r" git write\(\S*/\.git/index\.lock\.lock,", "EIO"),  # checkout's index
)


def key_point(world: CrashWorld, kind: str, pattern: str) -> int:
    """The number of the first recorded call of ``kind`` that matches ``pattern``."""
    for line in world.events:
        if line.startswith(f"{kind} ") and re.search(pattern, line):
            return int(line.split(" ", 2)[1])
    raise AssertionError(f"the tick made no {kind} call like {pattern!r}")


def run_points(world: CrashWorld, shim: Path, kind: str, points: list[tuple[int, h.Fault]]) -> None:
    failures = [r for n, fault in points if (r := fault_case(world, shim, kind, n, fault))]
    if failures:
        summary = f"{len(failures)} of {len(points)} {kind} fault points failed"
        pytest.fail(summary + ":\n\n" + "\n\n".join(failures), pytrace=False)


@pytest.mark.parametrize("kind", KINDS)
def test_a_failing_call_is_reported_in_one_line_and_later_ticks_converge(
    kind: str, crash_world: CrashWorld, shim: Path
) -> None:
    total = crash_world.counts[kind]
    assert total > 0, f"the tick made no {kind} call: the injector sees nothing"
    run_points(crash_world, shim, kind, chosen_points(kind, total))


def test_a_disk_that_stays_full_claims_nothing_and_later_ticks_converge(
    crash_world: CrashWorld, shim: Path
) -> None:
    run_points(crash_world, shim, "write", full_disk_points(crash_world.counts["write"]))


RENDER_BLOB_CALLS = {
    # kind: the recorded call of a render blob's atomic write (its temp file, then its name)
    "write": r" write\(\S*/state/renders/\.\S*\.tmp,",
    "fsync": r" fsync\(\S*/state/renders/\.\S*\.tmp\)$",
    "rename": r" rename\(\S*/state/renders/\.\S*\.tmp, ",
}


def matching_points(world: CrashWorld, kind: str, pattern: str) -> list[int]:
    """The numbers of every recorded call of ``kind`` that matches ``pattern``."""
    return [
        int(line.split(" ", 2)[1])
        for line in world.events
        if line.startswith(f"{kind} ") and re.search(pattern, line)
    ]


@pytest.mark.parametrize("kind", list(RENDER_BLOB_CALLS))
def test_a_render_blob_that_cannot_be_stored_is_named_by_no_status(
    kind: str, crash_world: CrashWorld, shim: Path
) -> None:
    points = matching_points(crash_world, kind, RENDER_BLOB_CALLS[kind])
    assert points, f"the tick stored no render blob with a {kind} call the injector saw"
    run_points(crash_world, shim, kind, [(n, h.Fault(ERRNOS[i % 2])) for i, n in enumerate(points)])


@pytest.mark.parametrize(
    ("kind", "pattern", "errno"),
    KEY_POINTS,
    ids=[f"{k}-{e}-{i}" for i, (k, _, e) in enumerate(KEY_POINTS)],
)
def test_the_calls_the_issue_found_failing_are_reported_and_converge(
    kind: str, pattern: str, errno: str, crash_world: CrashWorld, shim: Path
) -> None:
    n = key_point(crash_world, kind, pattern)
    run_points(crash_world, shim, kind, [(n, h.Fault(errno))])
