"""Drift rules on the directory cluster, through the CLI: ignored paths kept as another
manager left them (and, the trap, as convoy-batch created them), Report mode recording
drift in the status without writing it back, Correct mode recording a correction once per
episode, objects ignored whole, a Cluster's defaults, a Secret's drift told by paths
only, and one notification per drift change. Each runs twice: with the deployer's memory
of parsed files as shipped, and holding a single file (every drift check and apply then
reads most objects again from the parse cache)."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from convoy_batch.deployers import directory
from tests.engine.test_notify import alert_yaml, generic, providers
from tests.support.receiver import Receiver
from tests.support.scenario import FAILURE_POLICY, Scenario

IGNORE_REPLICAS = """\
  drift:
    ignore:
    - paths: [/spec/replicas]
      target: {kind: Deployment, name: 'w.*'}
"""
REPORT = "  drift: {mode: Report}\n"
SEEDED = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: seed\n"
    "  annotations: {convoy.dev/drift: ignore}\ndata: {value: first}\n"
)
"""A ConfigMap ignored whole: created once, never updated."""


@pytest.fixture(autouse=True, params=[directory.MEMO_FILES, 1], ids=["memo", "memo-of-one"])
def _memo_files(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(directory, "MEMO_FILES", request.param)


def settled(s: Scenario, spec_extra: str, **app: Any) -> None:
    """The Release applied, its Deployment ready and the rollout Succeeded."""
    s.app(spec_extra=FAILURE_POLICY + spec_extra, **app)
    s.reconcile(minutes=0)
    s.deployment_ready()
    s.reconcile(minutes=1)
    assert s.status()["rollout"]["state"] == "Succeeded"


def edit(path: Path, old: str, new: str) -> None:
    """Another manager (a person, an autoscaler) changes the object's file."""
    text = path.read_text()
    assert old in text, text
    path.write_text(text.replace(old, new))


def deployment(s: Scenario) -> Path:
    return s.object_path("web", "deployment.apps", "web")


def config(s: Scenario) -> Path:
    return s.object_path("web", "configmap", "web-config")


def test_an_ignored_path_stays_as_another_manager_set_it(scenario: Scenario) -> None:
    s = scenario
    settled(s, IGNORE_REPLICAS)
    edit(deployment(s), "replicas: 2", "replicas: 10")  # an autoscaler at peak load
    before, commits = deployment(s).read_bytes(), s.status_log()

    quiet = s.reconcile("--all", minutes=2)

    assert quiet.out.rstrip().endswith("(in sync)"), quiet.out
    assert deployment(s).read_bytes() == before  # not written
    assert s.status_log() == commits  # no commit: nothing drifted
    s.app(image="2.0", spec_extra=FAILURE_POLICY + IGNORE_REPLICAS)
    s.reconcile(minutes=3)
    live = s.live("web", "deployment.apps", "web")
    assert live["spec"]["replicas"] == 10  # the other manager's
    assert s.deployment_image() == "example/web:2.0"  # the new render's


def test_an_ignored_path_nobody_else_wrote_keeps_the_value_it_was_created_with(
    scenario: Scenario,
) -> None:
    s = scenario
    settled(s, IGNORE_REPLICAS)
    for minute in (2, 3, 4):
        s.reconcile("--all", minutes=minute)
        assert s.live("web", "deployment.apps", "web")["spec"]["replicas"] == 2
    s.app(image="2.0", spec_extra=FAILURE_POLICY + IGNORE_REPLICAS)
    s.reconcile(minutes=5)
    assert s.live("web", "deployment.apps", "web")["spec"]["replicas"] == 2
    assert s.deployment_image() == "example/web:2.0"


def test_report_mode_records_drift_once_and_clears_it_in_one_commit(
    scenario: Scenario,
) -> None:
    s = scenario
    settled(s, REPORT)
    commits = len(s.status_log())
    edit(config(s), "env: staging", "env: edited-by-hand")

    found = s.reconcile("--all", minutes=2)

    assert found.code == 0
    assert "drifted: ConfigMap web/web-config /data/env" in found.out, found.out
    assert s.live("web", "configmap", "web-config")["data"]["env"] == "edited-by-hand"
    assert s.status()["drift"] == {
        "objects": [
            {"kind": "ConfigMap", "namespace": "web", "name": "web-config", "paths": ["/data/env"]}
        ],
        "since": "2026-11-29T12:02:00Z",
    }
    assert s.status_log()[0] == "web: Drifted"
    assert s.status()["rollout"]["state"] == "Succeeded"  # drift never feeds the verdict

    s.reconcile("--all", minutes=3)  # the same drift: no commit
    assert len(s.status_log()) == commits + 1

    edit(deployment(s), "replicas: 2", "replicas: 3")  # it grows
    s.reconcile("--all", minutes=4)
    assert [o["kind"] for o in s.status()["drift"]["objects"]] == ["ConfigMap", "Deployment"]
    assert s.status()["drift"]["since"] == "2026-11-29T12:02:00Z"
    assert s.live("web", "deployment.apps", "web")["spec"]["replicas"] == 3

    edit(config(s), "env: edited-by-hand", "env: staging")  # reverted by hand
    edit(deployment(s), "replicas: 3", "replicas: 2")
    s.reconcile("--all", minutes=5)
    assert "drift" not in s.status()
    assert s.status_log()[:3] == ["web: DriftResolved", "web: Drifted", "web: Drifted"]
    s.reconcile("--all", minutes=6)
    assert len(s.status_log()) == commits + 3


def test_report_mode_still_applies_a_new_render(scenario: Scenario) -> None:
    s = scenario
    settled(s, REPORT)
    edit(config(s), "env: staging", "env: edited-by-hand")
    s.reconcile("--all", minutes=2)

    s.app(image="2.0", spec_extra=FAILURE_POLICY + REPORT)
    s.reconcile(minutes=3)

    assert s.deployment_image() == "example/web:2.0"
    assert s.status()["rollout"]["state"] == "Progressing"


def test_correct_mode_records_a_correction_once_per_episode(scenario: Scenario) -> None:
    s = scenario
    settled(s, "")
    commits = len(s.status_log())
    edit(deployment(s), "replicas: 2", "replicas: 5")

    s.reconcile("--all", minutes=2)

    assert s.live("web", "deployment.apps", "web")["spec"]["replicas"] == 2  # corrected
    assert s.status()["lastDriftCorrection"] == {
        "time": "2026-11-29T12:02:00Z",
        "objects": [
            {"kind": "Deployment", "namespace": "web", "name": "web", "paths": ["/spec/replicas"]}
        ],
    }
    assert s.status_log()[0] == "web: DriftCorrected"
    for minute in (3, 4):  # a controller that fights back every tick: the same episode
        edit(deployment(s), "replicas: 2", "replicas: 5")
        s.reconcile("--all", minutes=minute)
        assert s.live("web", "deployment.apps", "web")["spec"]["replicas"] == 2
    assert len(s.status_log()) == commits + 1
    s.reconcile("--all", minutes=5)  # nothing drifted: the episode ends, no commit
    assert len(s.status_log()) == commits + 1

    edit(deployment(s), "replicas: 2", "replicas: 7")  # a new episode
    s.reconcile("--all", minutes=6)
    assert s.status()["lastDriftCorrection"]["time"] == "2026-11-29T12:06:00Z"
    assert len(s.status_log()) == commits + 2


def test_an_object_ignored_whole_is_created_once_and_still_pruned(scenario: Scenario) -> None:
    s = scenario
    seeded = SEEDED
    settled(s, "", extra={"seed.yaml": seeded})
    path = s.object_path("web", "configmap", "seed")
    edit(path, "value: first", "value: theirs")

    s.app(
        image="2.0",
        spec_extra=FAILURE_POLICY,
        extra={"seed.yaml": seeded.replace("first", "second")},
    )
    s.reconcile(minutes=2)

    live = s.live("web", "configmap", "seed")
    assert live["data"] == {"value": "theirs"}
    assert (
        live["metadata"]["annotations"]["convoy.dev/render"] == s.status()["rollout"]["renderRef"]
    )
    s.commit({"apps/web/seed.yaml": None})
    s.deployment_ready()
    s.reconcile(minutes=3)
    s.reconcile(minutes=4)
    assert not path.exists()  # pruned


def test_a_cluster_s_rules_apply_to_its_releases_and_a_release_s_mode_wins(
    scenario: Scenario,
) -> None:
    s = scenario
    cluster = yaml.safe_load((s.root / "clusters/staging.yaml").read_text())
    cluster["spec"]["drift"] = {"mode": "Report", "ignore": [{"paths": ["/data/env"]}]}
    s.commit({"clusters/staging.yaml": yaml.safe_dump(cluster)})
    settled(s, "  drift: {mode: Correct}\n")
    edit(config(s), "env: staging", "env: theirs")  # ignored by the Cluster's rule
    edit(deployment(s), "replicas: 2", "replicas: 4")  # corrected: the Release's mode

    s.reconcile("--all", minutes=2)

    assert s.live("web", "configmap", "web-config")["data"]["env"] == "theirs"
    assert s.live("web", "deployment.apps", "web")["spec"]["replicas"] == 2
    assert "drift" not in s.status()
    assert [o["kind"] for o in s.status()["lastDriftCorrection"]["objects"]] == ["Deployment"]


def test_a_secret_s_drift_names_its_paths_never_a_value(scenario: Scenario) -> None:
    s = scenario
    secret = (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\n"
        "data: {password: czNjcjN0}\n"  # s3cr3t
    )
    settled(s, REPORT, extra={"secret.yaml": secret})
    path = s.object_path("web", "secret", "creds")
    edit(path, "czNjcjN0", "bGVha2Vk")  # leaked

    result = s.reconcile("--all", minutes=2)
    status = s.cli("status", "web")
    diff = s.cli("diff", "web", "--live")

    assert s.status()["drift"]["objects"] == [
        {"kind": "Secret", "namespace": "web", "name": "creds", "paths": ["/data/password"]}
    ]
    seen = [result.out, result.err, status.out, diff.out, s.repo.git.log("-p", "--", "status/")]
    for text in seen:
        for value in ("czNjcjN0", "bGVha2Vk", "s3cr3t", "leaked"):
            assert value not in text, text
    assert "/data/password" in status.out
    assert "***" in diff.out


def test_each_drift_change_is_one_notification(scenario: Scenario) -> None:
    s, receiver = scenario, Receiver()
    try:
        receiver.up()
        providers(s, "providers:\n" + generic(receiver))
        spec = "  reasons: [Drifted, DriftResolved, DriftCorrected]\n"
        s.commit({"alerts/drift.yaml": alert_yaml("drift", "hooks", spec)})
        settled(s, REPORT)
        edit(config(s), "env: staging", "env: edited-by-hand")
        s.reconcile("--all", minutes=2)
        s.reconcile("--all", minutes=3)  # the same drift: nothing new to tell
        edit(config(s), "env: edited-by-hand", "env: staging")
        s.reconcile("--all", minutes=4)

        told = [(r.body["reason"], r.body["message"]) for r in receiver.requests]
        assert told == [
            ("Drifted", "ConfigMap web/web-config /data/env"),
            ("DriftResolved", "no drift left"),
        ]
        assert receiver.requests[0].body["summary"] == (
            "web (staging): Drifted: ConfigMap web/web-config /data/env"
        )
    finally:
        receiver.close()
