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

from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from tests.crash import harness as h
from tests.crash.test_crash_points import chosen_points
from tests.engine.test_verification import Endpoint, verification
from tests.support.scenario import Scenario

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


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    e = Endpoint()
    yield e
    e.close()


@pytest.fixture(scope="module")
def verified_world(
    shim: Path, endpoint: Endpoint, tmp_path_factory: pytest.TempPathFactory
) -> h.TickWorld:
    base = tmp_path_factory.mktemp("verified")
    build_verified_world(base / "template", endpoint.url)
    world = h.tick_world(base, shim, VERIFY_MINUTE, FOLLOW_MINUTES)
    status = world.snapshot.raw_statuses["web"]
    assert status["rollout"]["state"] == "Succeeded"
    assert status["verification"]["phase"] == "Successful"
    assert (world.reference / "state" / "measurements" / "web.json").is_file()
    return world


@pytest.mark.parametrize("kind", KINDS)
def test_plain_ticks_converge_after_a_crash_in_a_verification(
    kind: str, verified_world: h.TickWorld, shim: Path
) -> None:
    total = verified_world.counts[kind]
    assert total > 0, f"the tick made no {kind} call: the injector sees nothing"
    points = chosen_points(kind, total)
    case = partial(h.converged_case, verified_world, shim, kind)
    h.every_point(kind, points, case, parallel=True)
