"""A real tick killed at real calls, then plain ticks: they must end where a tick without
a crash ends.

The world (``harness.build_world``): one ``reconcile --all`` over five Releases on the
directory cluster: (a) ``fresh``, a first rollout; (b) ``renew``, a new render over a
healthy one, whose history then drops its oldest render, which the render store's
garbage collection deletes; (c) ``revert``, a rollback whose prune deletes the object
the failed render added; (d) ``trim``, a prune without failurePolicy; (e) ``settle``,
Progressing -> Succeeded (the test made its Deployment ready).

The injector (``crashshim.c``, preloaded into the tick and its git children) numbers the
calls of each kind across all processes and threads: rename (and link), write (to
regular files), fsync, unlink, open with O_CREAT, mkdir. A crash point (kind, n) kills
the whole process group with SIGKILL at the n-th call of that kind, before that call
takes effect. A run without a crash records the calls (the counts of each kind), and
is, with two plain ticks after it, the reference. Calls that the C library makes inside
other functions (a stdio buffer flushed by git) are not seen; the tick's own calls all
are. The injector is compiled with the system's C compiler (``cc``, or ``$CC``); without
one these tests skip, and fail under ``CI=true``.

At each point: a copy of the world, the tick at minute 13 killed at the point, plain
``reconcile --all`` ticks at minutes 14 and 15, then:

- the status files at HEAD equal the reference's with every time left out (a mapping
  entry whose value is an RFC 3339 time: ``startedAt``, ``time``,
  ``lastTransitionTime``, ...; a tick after a crash may legitimately write later times);
- the directory cluster's object files equal the reference's, ``metadata.generation``
  left out (a decided apply that is completed again after a crash may count another
  generation; the rest, ``status`` included, must match); temp files of a killed write
  (dot files) are no objects and are not compared;
- the render store holds the same blob names, each verifying;
- the last tick exits as the reference's did; ``git fsck --strict`` is clean; nothing
  untracked or ignored is left in the working tree;
- a person's ``git commit -am x`` (after a change to a tracked file that is no status)
  succeeds and changes no status file.

A failing point is reported in one message: kind, n, the call it crashed at (with the
process, thread and path) and what differed. All points of a kind are run and reported
together.

How many points run:

- by default a deterministic sample: ``CONVOY_CRASH_SAMPLE`` points of each kind (12),
  evenly spread over the recorded calls, the first and the last always;
- ``CONVOY_CRASH_ALL=1``: every point of every kind (about 300; 1 to 1.5 s each on two
  cores, so 6 to 8 minutes);
- ``CONVOY_CRASH_POINTS=write:17,rename:3``: just those;
- ``CONVOY_CRASH_KEEP=1`` keeps each case's folder (under pytest's basetemp).

``make test`` runs the sample (about 70 points, 2.4 s each alone on two cores). Every
point: ``CONVOY_CRASH_ALL=1 .venv/bin/pytest tests/crash -q``; ``-m "not crash"`` leaves
these tests out.
"""

import os
from pathlib import Path

import pytest

from tests.crash import harness as h
from tests.crash.conftest import CrashWorld

pytestmark = pytest.mark.crash

DEFAULT_SAMPLE = 12


def chosen_points(kind: str, total: int) -> list[int]:
    named = os.environ.get("CONVOY_CRASH_POINTS", "").strip()
    if named:
        points = (p.split(":", 1) for p in named.split(",") if p.strip())
        return sorted({int(n) for k, n in points if k.strip() == kind})
    if os.environ.get("CONVOY_CRASH_ALL") == "1":
        return list(range(1, total + 1))
    return h.sample(total, int(os.environ.get("CONVOY_CRASH_SAMPLE", DEFAULT_SAMPLE)))


def crash_case(world: CrashWorld, shim: Path, kind: str, n: int) -> str | None:
    """One crash point; None when it converged, else the report of what differed."""
    with h.case_dir(world.template, world.cases / f"{kind}-{n}") as case:
        crash = h.run_tick(case, h.CRASH_MINUTE, shim=shim, kind=kind, n=n)
        follow = [h.run_tick(case, minutes) for minutes in h.FOLLOW_MINUTES]
        problems = h.compare(world.reference, h.snapshot(case))
        problems += h.settled_problems(
            case, follow[-1], world.reference_codes[-1], h.FOLLOW_MINUTES[-1]
        )
        prefix = f"{case}/"
    if not problems:
        return None
    if crash.hit is not None:
        where = f"crashed at: {crash.hit}"
    elif crash.killed:
        where = "crashed (the injector's line is missing)"
    else:
        recorded = h.event_line(world.events, kind, n)
        where = f"no crash: the tick ended (exit {crash.code}) before call {n}"
        where += f"; recorded as: {recorded}" if recorded else ""
    pairs = zip(h.FOLLOW_MINUTES, follow, strict=True)
    codes = ", ".join(f"minute {m}: exit {r.code}" for m, r in pairs)
    head = f"{kind} #{n} of {world.counts[kind]}, {where}\n  plain ticks: {codes}"
    return (head + "".join(f"\n    - {p}" for p in problems)).replace(prefix, "")


@pytest.mark.parametrize("kind", h.KINDS)
def test_plain_ticks_converge_after_a_crash_at_each_call(
    kind: str, crash_world: CrashWorld, shim: Path
) -> None:
    total = crash_world.counts[kind]
    assert total > 0, f"the tick made no {kind} call: the injector sees nothing"
    points = chosen_points(kind, total)
    h.every_point(kind, points, lambda n: crash_case(crash_world, shim, kind, n))
