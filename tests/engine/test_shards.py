"""``reconcile --jobs N``: a tick run as one process per Cluster, wave by wave, reaches
what one process reaches, and a higher cluster wave sees the lower waves' new statuses."""

import subprocess
from pathlib import Path

import pytest
import yaml

from convoy_batch.ticks import shards
from tests.engine.test_scenarios import PROD, _convoy_release
from tests.support.scenario import FAILURE_POLICY, Scenario, cluster_yaml, release_yaml


def cluster(name: str, wave: int) -> str:
    return cluster_yaml(name, wave=str(wave), vars=f"{{env: {name}}}")


def fleet(scenario: Scenario) -> None:
    """Releases on three Clusters in two waves, one on a Cluster that does not exist."""
    scenario.commit(
        {"clusters/east.yaml": cluster("east", 1), "clusters/west.yaml": cluster("west", 1)}
    )
    scenario.app("web")
    scenario.app("api")
    for name, where in (("shop", "east"), ("blog", "west"), ("ghost", "nowhere")):
        text = release_yaml(name, spec_extra=FAILURE_POLICY).replace(
            "cluster: staging", f"cluster: {where}"
        )
        scenario.app(name, release=text)


def outcome(scenario: Scenario) -> dict[str, object]:
    """What a tick leaves: every status, every object of every directory cluster."""
    return outcome_at(scenario.root, scenario.state)


def outcome_at(repo: Path, state: Path) -> dict[str, object]:
    """:func:`outcome` of a checkout ``repo`` and a state directory ``state``."""
    statuses = {
        p.stem: yaml.safe_load(p.read_text()) for p in sorted((repo / "status").glob("*.yaml"))
    }
    clusters = state / "clusters"
    objects = {
        str(p.relative_to(clusters)): p.read_text() for p in sorted(clusters.rglob("*.yaml"))
    }
    return {"statuses": statuses, "objects": objects}


@pytest.fixture
def two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[Scenario, Scenario]:
    """Two repositories with the same commits (the same dates: the same SHAs)."""
    for variable in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):
        monkeypatch.setenv(variable, "1764414000 +0000")
    return Scenario(tmp_path / "one", capsys), Scenario(tmp_path / "sharded", capsys)


@pytest.mark.slow
def test_a_sharded_tick_reaches_what_one_process_reaches(two: tuple[Scenario, Scenario]) -> None:
    one, sharded = two
    for s in two:
        fleet(s)
    for minutes, extra in ((0, ()), (1, ("--all",))):
        a = one.reconcile(minutes=minutes, extra=extra)
        b = sharded.reconcile(minutes=minutes, extra=(*extra, "--jobs", "3"))
        assert (a.code, a.out) == (b.code, b.out)
        assert sorted(a.err.splitlines()) == sorted(b.err.splitlines())
        assert outcome(one) == outcome(sharded)
    assert "ghost: ClusterNotFound" in b.err
    assert len(outcome(sharded)["statuses"]) == 5
    git = ["git", "-C", str(sharded.root)]
    subprocess.run([*git, "fsck", "--strict", "--no-progress"], check=True, capture_output=True)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--", "status/"], capture_output=True, text=True
    )
    assert dirty.stdout == ""  # HEAD, index and working tree agree


@pytest.mark.slow
def test_a_higher_cluster_wave_reads_the_statuses_the_lower_wave_just_committed(
    scenario: Scenario,
) -> None:
    scenario.app(release=_convoy_release("web", "staging"))
    scenario.commit(
        {"clusters/prod.yaml": PROD, "releases/web-prod.yaml": _convoy_release("web-prod", "prod")}
    )
    assert scenario.reconcile(minutes=0, extra=("--jobs", "2")).code == 0
    assert scenario.status("web-prod")["lastAttempted"]["reason"] == "WaitingForClusterWave"
    scenario.deployment_ready()
    # One tick: web turns healthy (wave 0), then web-prod (wave 1) passes its gate.
    result = scenario.reconcile(minutes=1, extra=("--all", "--jobs", "2"))
    assert result.code == 0, result.err
    assert scenario.status("web")["lastHealthy"] is not None
    assert scenario.status("web-prod")["lastAttempted"]["reason"] == "Synced"


def test_jobs_must_be_at_least_one(scenario: Scenario) -> None:
    scenario.app("web")
    result = scenario.reconcile(extra=("--jobs", "0"))
    assert result.code == 2 and "--jobs" in result.err


@pytest.mark.slow
def test_a_quiet_sharded_tick_starts_no_worker(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet(scenario)
    assert scenario.reconcile(minutes=0, extra=("--jobs", "2")).code == 1  # ghost errs
    scenario.deployment_ready("web")
    assert scenario.reconcile(minutes=1, extra=("--all", "--jobs", "2")).code == 1
    head = scenario.head()

    def no_workers(*args: object, **kwargs: object) -> None:
        raise AssertionError("a worker was started for a tick with nothing due")

    monkeypatch.setattr(shards, "ProcessPoolExecutor", no_workers)
    result = scenario.reconcile(minutes=2, extra=("--jobs", "2"))
    quiet = {line.split(":")[0] for line in result.out.splitlines() if "skipped (not due)" in line}
    assert quiet == {"web", "api", "shop", "blog", "ghost"}, result.out
    assert scenario.head() == head
