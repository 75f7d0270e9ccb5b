"""A stage of a Release's reconcile takes its run (``engine/run.py``), which a test builds
in memory: no repository, no cluster, no tick."""

from functools import partial
from pathlib import Path

import yaml

from convoy_batch.deployers.base import Deployer
from convoy_batch.engine.ownership import Ownership
from convoy_batch.engine.run import ReleaseRun
from convoy_batch.engine.shared import Shared
from convoy_batch.engine.stages.act import Writes, no_record
from convoy_batch.engine.stages.gates import stage_gates
from convoy_batch.errors import RenderFailed
from convoy_batch.manifests.drift import NO_RULES
from convoy_batch.models import Cluster, Release, ReleaseInventory, ReleaseStatus, parse_model
from convoy_batch.reasons import Reason
from convoy_batch.renderers.pipeline import Render, Rendered
from convoy_batch.repo.entries import GitOpsSnapshot, ReleaseEntry
from convoy_batch.rollout.windows import window_state
from convoy_batch.store import Stores
from tests.support.scenario import T0, cluster_yaml, release_yaml


def _release(text: str) -> Release:
    return parse_model(Release, yaml.safe_load(text), "releases/x.yaml")


def _rendered(found: dict[str, Rendered], release: Release) -> Rendered:
    if release.name not in found:
        raise RenderFailed(f"releases/{release.name}.yaml: no render")
    return found[release.name]


def _no_owners() -> Ownership:
    raise AssertionError("a gate read the ownership index")


def _no_deployer(cluster: Cluster) -> Deployer:
    raise AssertionError(f"a gate made a deployer of {cluster.name}")


def test_the_dependency_gate_reads_other_releases_through_the_run_alone(tmp_path: Path) -> None:
    web = _release(release_yaml("web", spec_extra="  dependsOn: [db]\n"))
    db = _release(release_yaml("db"))
    cluster = parse_model(Cluster, yaml.safe_load(cluster_yaml()), "clusters/staging.yaml")
    render = Render(ref="sha256:" + "1" * 64, revision="abc", canonical=b"[]")
    db_render = Render(ref="sha256:" + "2" * 64, revision="abc", canonical=b"[]")
    rendered = {"db": Rendered(cluster=cluster, render=db_render, key="k")}
    entries = {
        r.name: ReleaseEntry(r.name, f"releases/{r.name}.yaml", "b", r, None) for r in (web, db)
    }
    shared = Shared(opened={"db": ReleaseStatus()})
    run = ReleaseRun(
        release=web,
        status=ReleaseStatus(),
        inventory=ReleaseInventory(release="web"),
        now=T0,
        force_at=None,
        writes=Writes(ahead=no_record, record=lambda _i: None, claimants=lambda _k: ()),
        rules=NO_RULES,
        stores=Stores.open(tmp_path / "state"),
        snapshot=GitOpsSnapshot("c0", "main", entries, {"staging": cluster}, {}),
        shared=shared,
        owners=_no_owners,
        sources=None,  # type: ignore[arg-type]  # no stage here reads a source
        render_of=partial(_rendered, rendered),
        deployer_of=_no_deployer,
    )

    stop = stage_gates(run, cluster, render, window_state([], T0))

    assert stop is not None and stop.reason == Reason.WAITING_FOR_DEPENDENCY
    assert "db" in stop.message, stop.message
    rendered.clear()  # the dependency's render now fails: the gate says so, through the run
    again = stage_gates(run, cluster, render, window_state([], T0))
    assert again is not None and "db cannot be rendered (RenderFailed)" in again.message
