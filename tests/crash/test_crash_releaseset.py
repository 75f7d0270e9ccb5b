"""A tick of a ReleaseSet killed at its calls, then plain ticks: the set's members and its
own status must end where a tick without a crash ends.

The world (``build_set_world``): the ReleaseSet ``web`` over the Clusters labelled
``fleet: web`` (``a1``, ``a2``, ``a3``; ``a4`` is not), each a directory cluster, its
members ``web-a1``, ``web-a2``, ``web-a3`` applied and their statuses and the set's
``status/web.yaml`` committed. Then one commit: ``a3`` loses the label, ``a4`` gains it,
and the app's image moves to 2.0. The next ``reconcile --all`` (at minute 2) applies 2.0
to ``web-a1`` and ``web-a2``, applies ``web-a4`` first, retires ``web-a3`` (its objects
deleted, its status file removed) and commits the set's new status (members a1, a2,
a4). That tick runs with the crash injector of ``test_crash_points.py`` and is killed at
one call; plain ticks at minutes 3 and 4 follow. Then, as in ``test_crash_retire.py``:

- ``web-a3`` is deleted once (one ``-> Deleted`` commit, the reference's subject), its
  objects gone;
- the statuses at HEAD (the set's included) equal the reference's without their times;
  the objects of every directory cluster equal the reference's (``metadata.generation``
  left out); the render store holds the same blobs, each verifying;
- the last tick exits as the reference's did; ``git fsck --strict``; nothing untracked;
  a person's ``git commit -am x`` changes no status; no plain tick prints a traceback.

By default a sample of each kind's calls (``CONVOY_CRASH_SAMPLE``, 12), every call with
``CONVOY_CRASH_ALL=1``; kinds rename, write and unlink, four cases at a time.
"""

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.crash import harness as h
from tests.crash.test_crash_points import chosen_points
from tests.support.scenario import CONFIGMAP, DEPLOYMENT, Scenario, cluster_yaml

pytestmark = pytest.mark.crash

SET_MINUTE = 2
FOLLOW_MINUTES = (3, 4)
KINDS = ("rename", "write", "unlink")
LEAVING = "web-a3"

WEB = """\
apiVersion: convoy.dev/v1alpha1
kind: ReleaseSet
metadata: {name: web}
spec:
  generators:
  - clusters: {selector: {matchLabels: {fleet: web}}}
  template:
    namespace: web
    source: {path: apps/web}
    vars: {env: "${cluster.labels.fleet}"}
"""


def cluster(name: str, labelled: bool) -> str:
    return cluster_yaml(name, labels="{fleet: web}" if labelled else "{}", vars="{}")


def build_set_world(base: Path) -> None:
    """``base/repo`` and ``base/state`` one tick before the set's members change."""
    s = Scenario(base, h._NoCapture())  # type: ignore[arg-type]
    s.commit(
        {
            h.NOTES: "notes\n",
            **{f"clusters/a{i}.yaml": cluster(f"a{i}", i != 4) for i in range(1, 5)},
            "apps/web/deployment.yaml": DEPLOYMENT.replace("IMAGE", "1.0"),
            "apps/web/configmap.yaml": CONFIGMAP,
            "releases/web.yaml": WEB,
        },
        "web on the fleet",
    )
    h._quiet(s, minutes=0)
    assert all(s.has_status(f"web-a{i}") for i in (1, 2, 3))
    s.commit(
        {
            "clusters/a3.yaml": cluster("a3", False),
            "clusters/a4.yaml": cluster("a4", True),
            "apps/web/deployment.yaml": DEPLOYMENT.replace("IMAGE", "2.0"),
        },
        "a4 instead of a3; web 2.0",
    )
    s.repo.close()


def live_objects(case: Path) -> dict[str, Any]:
    """Every directory cluster's objects by ``<cluster>/<path>``, without
    ``metadata.generation`` (temp files of a killed write are no objects)."""
    root = case / "state" / "clusters"
    found: dict[str, Any] = {}
    for path in sorted(root.rglob("*.yaml")):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        obj = yaml.safe_load(path.read_text())
        if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
            obj["metadata"].pop("generation", None)
        found[rel.as_posix()] = obj
    return found


def deleted_subjects(repo: Path) -> list[str]:
    log = h.git(repo, "log", "--format=%s", "--", f"status/{LEAVING}.yaml").stdout
    return [s for s in log.splitlines() if s.startswith(f"{LEAVING}: ") and "-> Deleted" in s]


@dataclass(frozen=True)
class SetWorld:
    tick: h.TickWorld
    objects: dict[str, Any]  # every directory cluster's, at the end of the run
    subject: str  # the leaving member's Deleted commit


@pytest.fixture(scope="module")
def set_world(shim: Path, tmp_path_factory: pytest.TempPathFactory) -> SetWorld:
    base = tmp_path_factory.mktemp("releaseset")
    build_set_world(base / "template")
    world = h.tick_world(base, shim, SET_MINUTE, FOLLOW_MINUTES)
    snap, objects = world.snapshot, live_objects(world.reference)
    # The tick does what the world is for.
    members = snap.raw_statuses["web"]["releaseSet"]["members"]
    assert [m["name"] for m in members] == ["web-a1", "web-a2", "web-a4"]
    assert LEAVING not in snap.raw_statuses
    assert not any(rel.startswith("a3/") for rel in objects)
    assert "example/web-a4:2.0" in str(objects["a4/web/deployment.apps/web-a4.yaml"])
    assert "example/web-a1:2.0" in str(objects["a1/web/deployment.apps/web-a1.yaml"])
    subjects = deleted_subjects(world.reference / "repo")
    assert len(subjects) == 1, subjects
    return SetWorld(world, objects, subjects[0])


def set_checks(world: SetWorld, case: Path) -> list[str]:
    """Every cluster's objects as without a crash, and one Deleted commit of the member."""
    problems = h._differences("cluster objects", world.objects, live_objects(case))
    subjects = deleted_subjects(case / "repo")
    if subjects != [world.subject]:
        problems.append(f"Deleted commits of {LEAVING}: {subjects}")
    return problems


@pytest.mark.parametrize("kind", KINDS)
def test_plain_ticks_converge_after_a_crash_in_a_set_s_tick(
    kind: str, set_world: SetWorld, shim: Path
) -> None:
    total = set_world.tick.counts[kind]
    assert total > 0, f"the tick made no {kind} call: the injector sees nothing"
    points = chosen_points(kind, total)
    checks = partial(set_checks, set_world)
    case = partial(h.converged_case, set_world.tick, shim, kind, checks=checks)
    h.every_point(kind, points, case, parallel=True)
