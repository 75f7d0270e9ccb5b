"""A tick that finds drift, killed at its calls, then plain ticks: drift a Report-mode
Release leaves is never written back, and each drift is committed once, as a tick without
a crash does.

The world (``build_drift_world``): two Releases on the directory cluster, rolled out and
healthy: ``kept`` in Report mode, whose ConfigMap a person then edits, and ``fixed`` in
Correct mode, whose Deployment a person scales. The tick at minute 2 records ``kept``'s
drift (``kept: Drifted``, its ConfigMap left as edited: the write-ahead record's step
leaves it out) and corrects ``fixed``'s (its Deployment file written, ``fixed:
DriftCorrected``). That tick is killed at each of its renames and writes in turn, in a
copy of the world; plain ticks at minutes 3 and 4 follow. Then the edited ConfigMap is
still as the person left it, ``fixed``'s replicas are the render's, each Release has
exactly one drift commit, and the rest equals the run without a crash (statuses without
their times, cluster objects, render store, ``git fsck``, a person's commit)."""

import shutil
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from tests.crash import harness as h
from tests.support.scenario import FAILURE_POLICY, Scenario

pytestmark = pytest.mark.crash

KEPT, FIXED = "kept", "fixed"
DRIFT_MINUTE = 2
FOLLOW_MINUTES = (3, 4)
KINDS = ("rename", "write")
EDITED = "env: by-hand"


def build_drift_world(base: Path) -> None:
    s = Scenario(base, h._NoCapture())  # type: ignore[arg-type]
    s.commit({h.NOTES: "notes\n"}, "notes")
    s.app(KEPT, spec_extra=FAILURE_POLICY + "  drift: {mode: Report}\n")
    s.app(FIXED)
    h._quiet(s, minutes=0)
    s.deployment_ready(KEPT)
    s.deployment_ready(FIXED)
    h._quiet(s, minutes=1)
    config = s.object_path(KEPT, "configmap", f"{KEPT}-config")
    config.write_text(config.read_text().replace("env: staging", EDITED))
    deployment = s.object_path(FIXED, "deployment.apps", FIXED)
    text = deployment.read_text()
    deployment.write_text(text.replace("replicas: 2", "replicas: 9", 1))
    s.repo.close()


def drift_subjects(repo: Path) -> list[str]:
    log = h.git(repo, "log", "--format=%s", "--", "status/").stdout
    return [s for s in log.splitlines() if s.endswith(("Drifted", "DriftCorrected"))]


def problems_of(case: Path) -> list[str]:
    """What a converged run never shows."""
    problems = []
    cluster = case / "state" / "clusters" / "staging"
    config = cluster / KEPT / "configmap" / f"{KEPT}-config.yaml"
    if EDITED not in config.read_text():
        problems.append(f"{KEPT}'s reported drift was written back")
    if "replicas: 9" in (cluster / FIXED / "deployment.apps" / f"{FIXED}.yaml").read_text():
        problems.append(f"{FIXED}'s drift was not corrected")
    subjects = sorted(drift_subjects(case / "repo"))
    if subjects != [f"{FIXED}: DriftCorrected", f"{KEPT}: Drifted"]:
        problems.append(f"drift commits: {subjects}")
    return problems


@dataclass(repr=False)
class DriftWorld:
    template: Path
    reference: h.Snapshot
    last_code: int
    counts: dict[str, int]
    cases: Path


@pytest.fixture(scope="module")
def drift_world(shim: Path, tmp_path_factory: pytest.TempPathFactory) -> DriftWorld:
    base = tmp_path_factory.mktemp("drift")
    template = base / "template"
    build_drift_world(template)
    reference = base / "reference"
    shutil.copytree(template, reference, symlinks=True)
    record = h.run_tick(reference, DRIFT_MINUTE, shim=shim)
    assert record.code == 0, f"the drift tick without a crash failed:\n{record.err}"
    follow = [h.run_tick(reference, m) for m in FOLLOW_MINUTES]
    problems = problems_of(reference) + h.fsck(reference / "repo")
    assert not problems, f"the run without a crash: {problems}"
    return DriftWorld(
        template,
        h.snapshot(reference),
        follow[-1].code,
        h.count_events(record.events),
        base / "cases",
    )


def drift_case(world: DriftWorld, shim: Path, kind: str, n: int) -> str | None:
    with h.case_dir(world.template, world.cases / f"{kind}-{n}") as case:
        crash = h.run_tick(case, DRIFT_MINUTE, shim=shim, kind=kind, n=n)
        follow = [h.run_tick(case, minutes) for minutes in FOLLOW_MINUTES]
        problems = problems_of(case) + h.compare(world.reference, h.snapshot(case))
        for minutes, run in zip(FOLLOW_MINUTES, follow, strict=True):
            if "Traceback" in run.err:
                problems.append(f"the tick at minute {minutes}: {h.last_words(run.err)}")
        problems += h.settled_problems(case, follow[-1], world.last_code, FOLLOW_MINUTES[-1])
        prefix = f"{case}/"
    if not problems:
        return None
    where = crash.hit or f"no crash (exit {crash.code})"
    text = f"{kind} #{n}, crashed at: {where}" + "".join(f"\n    - {p}" for p in problems)
    return text.replace(prefix, "")


@pytest.mark.parametrize("kind", KINDS)
def test_plain_ticks_converge_after_a_crash_in_a_drift_tick(
    kind: str, drift_world: DriftWorld, shim: Path
) -> None:
    total = drift_world.counts[kind]
    assert total > 0, f"the drift tick made no {kind} call: the injector sees nothing"
    case = partial(drift_case, drift_world, shim, kind)
    h.every_point(kind, range(1, total + 1), case, parallel=True)
