"""A tick of a verification killed at its calls, then plain ticks: the Release must end
where a tick without a crash ends (README "Verification by metrics").

The world (``build_verified_world``): ``web`` with one analysis (a local web endpoint
answering a success rate of 0.99, ``count: 1``), its first render rolled out and its
Deployment made available. The next ``reconcile --all`` (at minute 2) takes the
measurement, keeps it in ``<state>/measurements/web.json``, concludes the verification
and commits ``web: Progressing -> Succeeded`` with ``status.verification`` Successful.
That tick is killed at one call (rename, write and unlink: a sample of each, every call
with ``CONVOY_CRASH_ALL=1``); plain ticks at minutes 3 and 4 follow. Then, as in
``test_crash_points.py``: statuses without their times, cluster objects and the render
store equal the run without a crash's; the last tick's exit code; ``git fsck``; nothing
untracked; a person's ``git commit -am x`` changes no status; no traceback.
"""

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from tests.crash import harness as h
from tests.crash.test_crash_points import chosen_points
from tests.scenario import Scenario
from tests.test_verification import Endpoint, verification

pytestmark = pytest.mark.crash

VERIFY_MINUTE = 2
FOLLOW_MINUTES = (3, 4)
KINDS = ("rename", "write", "unlink")


def build_verified_world(base: Path, url: str) -> None:
    s = Scenario(base, h._NoCapture())  # type: ignore[arg-type]
    s.commit({h.NOTES: "notes\n"}, "notes")
    s.app(spec_extra=verification(url).replace("count: 3", "count: 1"))
    h._quiet(s, minutes=0)
    s.deployment_ready()
    assert s.status()["rollout"]["state"] == "Progressing"
    s.repo.close()


@dataclass(repr=False)
class VerifiedWorld:
    template: Path
    reference: h.Snapshot
    last_code: int
    counts: dict[str, int]
    cases: Path

    def __repr__(self) -> str:
        return f"VerifiedWorld(calls {self.counts})"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    e = Endpoint()
    yield e
    e.close()


@pytest.fixture(scope="module")
def verified_world(
    shim: Path, endpoint: Endpoint, tmp_path_factory: pytest.TempPathFactory
) -> VerifiedWorld:
    base = tmp_path_factory.mktemp("verified")
    template = base / "template"
    build_verified_world(template, endpoint.url)
    reference = base / "reference"
    shutil.copytree(template, reference, symlinks=True)
    record = h.run_tick(reference, VERIFY_MINUTE, shim=shim)
    assert record.code == 0, f"the tick without a crash failed:\n{record.err}"
    follow = [h.run_tick(reference, m) for m in FOLLOW_MINUTES]
    snap = h.snapshot(reference)
    status = snap.raw_statuses["web"]
    assert status["rollout"]["state"] == "Succeeded"
    assert status["verification"]["phase"] == "Successful"
    assert (reference / "state" / "measurements" / "web.json").is_file()
    problems = h.fsck(reference / "repo") + h.person_commits(reference / "repo")
    assert not problems, f"the run without a crash: {problems}"
    return VerifiedWorld(
        template, snap, follow[-1].code, h.count_events(record.events), base / "cases"
    )


def verified_case(world: VerifiedWorld, shim: Path, kind: str, n: int) -> str | None:
    with h.case_dir(world.template, world.cases / f"{kind}-{n}") as case:
        crash = h.run_tick(case, VERIFY_MINUTE, shim=shim, kind=kind, n=n)
        follow = [h.run_tick(case, minutes) for minutes in FOLLOW_MINUTES]
        problems = h.compare(world.reference, h.snapshot(case))
        for minutes, run in zip(FOLLOW_MINUTES, follow, strict=True):
            if "Traceback" in run.err:
                problems.append(f"the tick at minute {minutes}: {h.last_words(run.err)}")
        problems += h.settled_problems(case, follow[-1], world.last_code, FOLLOW_MINUTES[-1])
        prefix = f"{case}/"
    if not problems:
        return None
    where = f"crashed at: {crash.hit}" if crash.hit else f"no crash (exit {crash.code})"
    head = f"{kind} #{n} of {world.counts[kind]}, {where}"
    return (head + "".join(f"\n    - {p}" for p in problems)).replace(prefix, "")


@pytest.mark.parametrize("kind", KINDS)
def test_plain_ticks_converge_after_a_crash_in_a_verification(
    kind: str, verified_world: VerifiedWorld, shim: Path
) -> None:
    total = verified_world.counts[kind]
    assert total > 0, f"the tick made no {kind} call: the injector sees nothing"
    points = chosen_points(kind, total)
    h.every_point(kind, points, partial(verified_case, verified_world, shim, kind), parallel=True)
