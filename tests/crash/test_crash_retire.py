"""A removed Release's retirement killed at its calls, then plain ticks: the Release must
end deleted once, as a tick without a crash deletes it.

The world (``build_retiring_world``): two Releases on the directory cluster, ``gone`` and
``stay``, each a Deployment and a ConfigMap, rolled out and healthy; then a commit removes
``releases/gone.yaml`` (its status file stays at HEAD). The next ``reconcile --all`` (at
minute 2) retires ``gone``: it writes the write-ahead record
``<state>/retiring/gone.json``, deletes the two object files (two unlinks), removes
``status/gone.yaml`` in one commit ``gone: Succeeded -> Deleted (2 objects deleted, 0
kept)``, then drops the inventory and the record. That tick runs with the crash injector
of ``test_crash_points.py`` (``harness.run_tick``) and is killed at one call; plain ticks
at minutes 3 and 4 follow. Then:

- ``git log -- status/gone.yaml`` holds exactly one commit whose subject starts with
  ``gone: `` and says ``-> Deleted``, and its subject is the one of the run without a
  crash (a retirement completed from its record keeps the counts it decided);
- ``status/gone.yaml`` is neither at HEAD nor in the working tree; ``gone``'s object
  files, its inventory (``<state>/inventory/gone.json``) and its record are gone;
- the rest equals the run without a crash as in ``test_crash_points.py``: statuses
  without their times, cluster objects, render store (each blob verifying); the last
  tick's exit code; ``git fsck --strict``; nothing untracked in the checkout; a person's
  ``git commit -am x`` changes no status; and no plain tick prints a traceback.

``test_a_crash_between_the_two_deletes_is_completed`` shows the point the feature is
most exposed at: killed just before the second object file's unlink, the tick leaves one
object deleted, the other in place, the record written and the status at HEAD; the next
ticks finish it. ``test_plain_ticks_converge_after_a_crash_in_a_retirement`` runs every
call of the kinds unlink, rename and write of the retiring tick (about 55 points, two
at a time on two cores: about a minute with the world's set-up). ``CONVOY_CRASH_KEEP=1``
keeps each case's folder.
"""

import shutil
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from tests.crash import harness as h
from tests.support.scenario import Scenario

pytestmark = pytest.mark.crash

GONE = "gone"  # removed from the repository: the retiring tick deletes it
STAY = "stay"  # goes on, so the retirement is one Release of two (no mass deletion)

RETIRE_MINUTE = 2
FOLLOW_MINUTES = (3, 4)

KINDS = ("unlink", "rename", "write")
OBJECTS = f"{GONE}/"  # gone's objects, relative to the directory cluster's folder
OBJECT_CALLS = f"clusters/staging/{GONE}/"  # in the injector's lines


def build_retiring_world(base: Path) -> None:
    """``base/repo`` and ``base/state``: both Releases healthy, ``gone``'s file removed
    in the last commit (the next tick retires it)."""
    s = Scenario(base, h._NoCapture())  # type: ignore[arg-type]
    s.commit({h.NOTES: "notes\n"}, "notes")
    s.app(GONE)
    s.app(STAY)
    h._quiet(s, minutes=0)
    s.deployment_ready(GONE)
    s.deployment_ready(STAY)
    h._quiet(s, minutes=1)
    assert s.status(GONE)["rollout"]["state"] == "Succeeded"
    assert s.status(STAY)["rollout"]["state"] == "Succeeded"
    s.commit({f"releases/{GONE}.yaml": None}, f"remove {GONE}")
    s.repo.close()


@dataclass(repr=False)
class RetireWorld:
    template: Path  # one tick before the retirement
    reference: h.Snapshot  # the end of the run without a crash
    subject: str  # the subject of its Deleted commit
    last_code: int  # the exit code of its last tick
    counts: dict[str, int]  # calls of each kind of the retiring tick (recorded)
    events: list[str]
    cases: Path

    def __repr__(self) -> str:
        return f"RetireWorld(calls {self.counts})"


def deleted_subjects(repo: Path) -> list[str]:
    """The subjects of ``gone``'s Deleted commits, newest first."""
    log = h.git(repo, "log", "--format=%s", "--", f"status/{GONE}.yaml").stdout
    return [s for s in log.splitlines() if s.startswith(f"{GONE}: ") and "-> Deleted" in s]


def retired(case: Path) -> list[str]:
    """What is left of ``gone`` that a finished retirement removes."""
    problems = []
    repo, state = case / "repo", case / "state"
    if h.git(repo, "ls-tree", "HEAD", f"status/{GONE}.yaml").stdout.strip():
        problems.append(f"status/{GONE}.yaml: still at HEAD")
    if (repo / "status" / f"{GONE}.yaml").exists():
        problems.append(f"status/{GONE}.yaml: still in the working tree")
    cluster = state / "clusters" / "staging" / GONE
    left = sorted(
        p.relative_to(cluster).as_posix()
        for p in (cluster.rglob("*.yaml") if cluster.is_dir() else ())
        if not any(part.startswith(".") for part in p.relative_to(cluster).parts)
    )
    if left:
        problems.append(f"{GONE}'s objects still on the cluster: {left}")
    for rel in (f"inventory/{GONE}.json", f"retiring/{GONE}.json"):
        if (state / rel).exists():
            problems.append(f"<state>/{rel}: still there")
    return problems


def object_unlinks(events: list[str]) -> list[int]:
    """The numbers of the unlink calls that delete ``gone``'s object files."""
    return [
        int(line.split(" ", 2)[1])
        for line in events
        if line.startswith("unlink ") and OBJECT_CALLS in line
    ]


@pytest.fixture(scope="module")
def retire_world(shim: Path, tmp_path_factory: pytest.TempPathFactory) -> RetireWorld:
    base = tmp_path_factory.mktemp("retire")
    template = base / "template"
    build_retiring_world(template)
    before = h.snapshot(template)
    assert any(rel.startswith(OBJECTS) for rel in before.cluster), "gone has no objects"

    # The run without a crash: the retiring tick (its calls recorded), then plain ticks.
    reference = base / "reference"
    shutil.copytree(template, reference, symlinks=True)
    record = h.run_tick(reference, RETIRE_MINUTE, shim=shim)
    assert record.code == 0, f"the retiring tick without a crash failed:\n{record.err}"
    follow = [h.run_tick(reference, m) for m in FOLLOW_MINUTES]
    snap = h.snapshot(reference)
    subjects = deleted_subjects(reference / "repo")
    assert subjects == [f"{GONE}: Succeeded -> Deleted (2 objects deleted, 0 kept)"]
    assert GONE not in snap.statuses and STAY in snap.statuses
    assert not any(rel.startswith(OBJECTS) for rel in snap.cluster)
    problems = retired(reference)
    problems += h.fsck(reference / "repo") + h.person_commits(reference / "repo")
    assert not problems, f"the run without a crash: {problems}"
    assert len(object_unlinks(record.events)) == 2, "the tick did not delete two objects"

    # Without the injector the run ends the same: the comparison sees only the crash.
    again = base / "again"
    shutil.copytree(template, again, symlinks=True)
    for minutes in (RETIRE_MINUTE, *FOLLOW_MINUTES):
        h.run_tick(again, minutes)
    assert h.compare(snap, h.snapshot(again)) == []
    shutil.rmtree(again)

    return RetireWorld(
        template,
        snap,
        subjects[0],
        follow[-1].code,
        h.count_events(record.events),
        record.events,
        base / "cases",
    )


def converged(world: RetireWorld, case: Path, follow: list[h.TickRun]) -> list[str]:
    """What differs, after the plain ticks, from the run without a crash."""
    problems = []
    subjects = deleted_subjects(case / "repo")
    if subjects != [world.subject]:
        problems.append(f"Deleted commits of {GONE}: {subjects} (expected [{world.subject!r}])")
    problems += retired(case)
    problems += h.compare(world.reference, h.snapshot(case))
    for minutes, run in zip(FOLLOW_MINUTES, follow, strict=True):
        if "Traceback" in run.err:
            problems.append(f"the tick at minute {minutes}: {h.last_words(run.err)}")
    return problems + h.settled_problems(case, follow[-1], world.last_code, FOLLOW_MINUTES[-1])


def report(
    world: RetireWorld,
    kind: str,
    n: int,
    crash: h.TickRun,
    follow: list[h.TickRun],
    problems: list[str],
) -> str:
    """One failing point: kind, n, the call it crashed at, the exit codes, what differed."""
    if crash.hit is not None:
        where = f"crashed at: {crash.hit}"
    elif crash.killed:
        where = "crashed (the injector's line is missing)"
    else:
        where = f"no crash: the tick ended (exit {crash.code}) before call {n}"
    pairs = zip(FOLLOW_MINUTES, follow, strict=True)
    codes = ", ".join(f"minute {m}: exit {r.code}" for m, r in pairs)
    head = f"{kind} #{n} of {world.counts[kind]}, {where}\n  plain ticks: {codes}"
    return head + "".join(f"\n    - {p}" for p in problems)


def retire_case(world: RetireWorld, shim: Path, kind: str, n: int) -> str | None:
    """One crash point; None when it converged, else the report of what differed."""
    with h.case_dir(world.template, world.cases / f"{kind}-{n}") as case:
        crash = h.run_tick(case, RETIRE_MINUTE, shim=shim, kind=kind, n=n)
        follow = [h.run_tick(case, minutes) for minutes in FOLLOW_MINUTES]
        problems = converged(world, case, follow)
        prefix = f"{case}/"
    if not problems:
        return None
    return report(world, kind, n, crash, follow, problems).replace(prefix, "")


def test_a_crash_between_the_two_deletes_is_completed(
    retire_world: RetireWorld, shim: Path
) -> None:
    """Killed just before the unlink of ``gone``'s second object file: one object is
    deleted, the other is not, the record is written and ``status/gone.yaml`` is at HEAD
    with no Deleted commit yet; the plain ticks after it delete the second object and
    commit the retirement once, with the counts the record holds."""
    first, second = object_unlinks(retire_world.events)
    assert first < second
    with h.case_dir(retire_world.template, retire_world.cases / "between") as case:
        crash = h.run_tick(case, RETIRE_MINUTE, shim=shim, kind="unlink", n=second)
        assert crash.killed, f"the tick was not killed (exit {crash.code}): {crash.err}"
        assert crash.hit is not None and OBJECT_CALLS in crash.hit, crash.hit
        cluster = case / "state" / "clusters" / "staging"
        objects = sorted(p.relative_to(cluster).as_posix() for p in cluster.rglob("*.yaml"))
        assert len([o for o in objects if o.startswith(OBJECTS)]) == 1, objects
        assert (case / "state" / "retiring" / f"{GONE}.json").is_file()
        assert h.git(case / "repo", "ls-tree", "HEAD", f"status/{GONE}.yaml").stdout.strip()
        assert deleted_subjects(case / "repo") == []

        follow = [h.run_tick(case, minutes) for minutes in FOLLOW_MINUTES]
        problems = converged(retire_world, case, follow)
        if problems:
            text = report(retire_world, "unlink", second, crash, follow, problems)
            pytest.fail(text.replace(f"{case}/", ""), pytrace=False)


@pytest.mark.parametrize("kind", KINDS)
def test_plain_ticks_converge_after_a_crash_in_a_retirement(
    kind: str, retire_world: RetireWorld, shim: Path
) -> None:
    """Every call of ``kind`` of the retiring tick, each in a copy of the world: the plain
    ticks after the crash end with ``gone`` deleted once and the rest as without a crash."""
    total = retire_world.counts[kind]
    assert total > 0, f"the retiring tick made no {kind} call: the injector sees nothing"
    points = range(1, total + 1)
    case = partial(retire_case, retire_world, shim, kind)
    h.every_point(kind, points, case, parallel=True)
