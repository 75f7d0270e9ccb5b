"""End-to-end scenarios: the CLI against a real git repository and the directory cluster.

The tests play the workloads' controllers by writing ``status`` into the cluster's
object files; time moves only through ``--now``.
"""

from pathlib import Path

import git

from convoy_batch.reconcile import FORCED_IN_SYNC
from tests.support.scenario import FAILURE_POLICY, Scenario, release_yaml

BAD_WAVE = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
    "  annotations: {convoy.dev/sync-wave: nope}\n"
)
"""A manifest whose wave annotation is no number: a RenderFailed naming 'nope'."""


def succeed_first_render(s: Scenario, image: str = "1.0") -> str:
    """Roll web out to Succeeded; returns its renderRef."""
    s.app(image=image)
    assert s.reconcile("web", minutes=0).code == 0
    s.deployment_ready()
    assert s.reconcile("web", minutes=1).code == 0
    status = s.status()
    assert status["rollout"]["state"] == "Succeeded"
    return str(status["rollout"]["renderRef"])


def roll_back_a_second_render(s: Scenario) -> None:
    """web Succeeded at 1.0, then 2.0 fails and is rolled back (minutes 0 to 3)."""
    succeed_first_render(s)
    s.app(image="2.0")
    s.reconcile("web", minutes=2)
    s.deployment_failed()
    s.reconcile("web", minutes=3)
    assert s.status()["rollout"]["state"] == "RolledBack"


def test_first_rollout_progresses_then_succeeds_when_healthy(scenario: Scenario) -> None:
    scenario.app()
    result = scenario.reconcile(minutes=0)
    assert result.code == 0, result.err
    status = scenario.status()
    assert status["rollout"]["state"] == "Progressing"
    assert status["rollout"]["reason"] == "NewRender"
    assert status["lastAttempted"]["applied"] is True
    assert status["lastAttempted"]["reason"] == "Synced"
    assert status["lastHealthy"] is None
    assert scenario.deployment_image() == "example/web:1.0"
    live = scenario.live("web", "deployment.apps", "web")
    assert live["metadata"]["labels"]["convoy.dev/release"] == "web"
    assert live["metadata"]["annotations"]["convoy.dev/render"] == status["rollout"]["renderRef"]

    scenario.deployment_ready()
    # Not named: due because the health changed while Progressing (SPEC 13 item 2).
    assert scenario.reconcile(minutes=1).code == 0
    status = scenario.status()
    ref = status["rollout"]["renderRef"]
    assert status["rollout"]["state"] == "Succeeded"
    assert status["rollout"]["reason"] == "Healthy"
    assert status["lastHealthy"]["renderRef"] == ref
    assert status["conditions"][0]["type"] == "RolloutSucceeded"
    assert status["conditions"][0]["status"] == "True"
    assert status["history"][0]["renderRef"] == ref
    short = ref.removeprefix("sha256:")[:12]
    assert scenario.status_log() == [
        f"web: Progressing -> Succeeded (Healthy) {short}",
        f"web: none -> Progressing (NewRender) {short}",
    ]


def test_failed_render_rolls_back_holds_then_a_new_render_progresses(scenario: Scenario) -> None:
    good = succeed_first_render(scenario)
    scenario.app(image="2.0")
    assert scenario.reconcile("web", minutes=2).code == 0
    bad = scenario.status()["rollout"]["renderRef"]
    assert bad != good
    assert scenario.deployment_image() == "example/web:2.0"

    scenario.deployment_failed()
    assert scenario.reconcile("web", minutes=3).code == 0
    status = scenario.status()
    assert status["rollout"]["state"] == "RolledBack"
    assert status["rollout"]["renderRef"] == bad
    assert status["rollout"]["reason"] == "Unhealthy"
    assert status["lastAttempted"]["renderRef"] == good
    assert status["lastAttempted"]["applied"] is True
    assert status["lastAttempted"]["reason"] == "RolledBack"
    assert status["lastSuccessful"]["renderRef"] == good
    assert status["conditions"][0]["status"] == "False"
    assert scenario.deployment_image() == "example/web:1.0"
    live = scenario.live("web", "deployment.apps", "web")
    assert live["metadata"]["annotations"]["convoy.dev/render"] == good

    # The hold: later ticks re-apply the last healthy render and commit nothing.
    head = scenario.head()
    scenario.set_status("web", "deployment.apps", "web", {})
    assert scenario.reconcile("web", minutes=4).code == 0
    assert scenario.reconcile("web", minutes=30).code == 0
    assert scenario.head() == head
    assert scenario.status()["rollout"]["state"] == "RolledBack"
    assert scenario.deployment_image() == "example/web:1.0"

    scenario.app(image="3.0")
    assert scenario.reconcile("web", minutes=31).code == 0
    status = scenario.status()
    assert status["rollout"]["state"] == "Progressing"
    assert status["rollout"]["reason"] == "NewRender"
    assert scenario.deployment_image() == "example/web:3.0"


def test_progress_deadline_fails_a_render_that_never_turns_healthy(scenario: Scenario) -> None:
    spec = "  interval: '0'\n" + FAILURE_POLICY
    scenario.app(spec_extra=spec)
    assert scenario.reconcile("web", minutes=0).code == 0
    scenario.set_status("web", "deployment.apps", "web", {"observedGeneration": 1, "replicas": 2})
    assert scenario.reconcile("web", minutes=5).code == 0
    assert scenario.status()["rollout"]["state"] == "Progressing"
    # Unnamed: interval 0 is never due by interval; the passed deadline wakes it.
    result = scenario.reconcile(minutes=11)
    assert "web: skipped" not in result.out
    status = scenario.status()
    assert status["rollout"]["state"] == "Failed"
    assert status["rollout"]["reason"] == "ProgressDeadlineExceeded"


def test_a_stopped_observer_never_rolls_back(scenario: Scenario) -> None:
    succeed_first_render(scenario)
    scenario.app(image="2.0")
    assert scenario.reconcile("web", minutes=2).code == 0
    scenario.deployment_failed()
    for minutes in (20, 60, 600):
        assert scenario.reconcile("web", minutes=minutes, extra=("--no-observe",)).code == 0
        assert scenario.status()["rollout"]["state"] == "Progressing"
    assert scenario.deployment_image() == "example/web:2.0"


def test_rollback_never_leaves_a_failed_render_failed(scenario: Scenario) -> None:
    spec = "  failurePolicy: {rollback: Never, progressDeadline: 10m}\n"
    scenario.app(spec_extra=spec)
    scenario.reconcile("web", minutes=0)
    scenario.deployment_ready()
    scenario.reconcile("web", minutes=1)
    scenario.app(image="2.0", spec_extra=spec)
    scenario.reconcile("web", minutes=2)
    scenario.deployment_failed()
    assert scenario.reconcile("web", minutes=3).code == 0
    status = scenario.status()
    assert status["rollout"]["state"] == "Failed"
    assert status["rollout"]["reason"] == "Unhealthy"
    assert scenario.deployment_image() == "example/web:2.0"


def test_without_failure_policy_there_is_no_rollout_but_last_healthy_is_kept(
    scenario: Scenario,
) -> None:
    scenario.app(spec_extra="")
    assert scenario.reconcile("web", minutes=0).code == 0
    assert scenario.status()["rollout"] is None
    scenario.deployment_ready()
    scenario.reconcile("web", minutes=1)
    status = scenario.status()
    assert status["rollout"] is None
    assert status["lastHealthy"]["renderRef"] == status["lastAttempted"]["renderRef"]
    assert status["conditions"] == []


def test_a_render_error_keeps_the_rolled_back_state(scenario: Scenario) -> None:
    roll_back_a_second_render(scenario)
    scenario.commit({"apps/web/broken.yaml": BAD_WAVE})
    result = scenario.reconcile("web", minutes=4)
    assert result.code == 1
    assert "nope" in result.err
    status = scenario.status()
    assert status["rollout"]["state"] == "RolledBack"
    assert status["lastAttempted"]["reason"] == "RenderFailed"
    assert "nope" in status["lastAttempted"]["message"]
    assert scenario.deployment_image() == "example/web:1.0"


def _rollback_with_store(scenario: Scenario, damage: str) -> None:
    good = succeed_first_render(scenario)
    blob = scenario.state / "renders" / (good.removeprefix("sha256:") + ".json")
    assert blob.exists()
    scenario.app(image="2.0")
    scenario.reconcile("web", minutes=2)
    if damage == "missing":
        blob.unlink()
    else:
        blob.write_text('[{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "evil"}}]')
    scenario.deployment_failed()
    assert scenario.reconcile("web", minutes=3).code == 0
    status = scenario.status()
    assert status["rollout"]["state"] == "RolledBack"
    assert status["lastAttempted"]["reason"] == "RolledBack"
    assert status["lastAttempted"]["applied"] is False
    assert status["lastAttempted"]["renderRef"] == status["rollout"]["renderRef"]
    assert scenario.deployment_image() == "example/web:2.0"
    assert not scenario.object_path("web", "configmap", "evil").exists()


def test_a_missing_render_store_blob_stops_the_rollback_without_error(scenario: Scenario) -> None:
    _rollback_with_store(scenario, "missing")


def test_a_corrupted_render_store_blob_is_never_applied(scenario: Scenario) -> None:
    _rollback_with_store(scenario, "corrupt")


MANUAL = "  syncPolicy: {mode: Manual}\n" + FAILURE_POLICY


def test_manual_release_waits_for_a_forced_sync_by_flag(scenario: Scenario) -> None:
    scenario.app(spec_extra=MANUAL)
    assert scenario.reconcile("web", minutes=0).code == 0
    status = scenario.status()
    assert status["lastAttempted"]["reason"] == "WaitingForManualSync"
    assert status["lastAttempted"]["applied"] is False
    assert not scenario.object_path("web", "deployment.apps", "web").exists()

    assert scenario.reconcile("web", minutes=5, extra=("--force",)).code == 0
    status = scenario.status()
    assert status["lastAttempted"]["reason"] == "Synced"
    assert status["lastHandledForceSyncAt"] == "2026-11-29T12:05:00Z"
    assert scenario.deployment_image() == "example/web:1.0"

    # In sync now: no longer "waiting" (and no new commit), until a new render arrives.
    head = scenario.head()
    assert scenario.reconcile("web", minutes=6).code == 0
    attempted = scenario.status()["lastAttempted"]
    assert (attempted["reason"], attempted["applied"]) == ("Synced", True)
    assert attempted["message"] == "2 objects applied"  # what the forced sync did
    assert scenario.head() == head
    scenario.app(image="2.0", spec_extra=MANUAL)
    assert scenario.reconcile("web", minutes=7).code == 0
    attempted = scenario.status()["lastAttempted"]
    assert (attempted["reason"], attempted["applied"]) == ("WaitingForManualSync", False)
    assert scenario.deployment_image() == "example/web:1.0"


def test_a_forced_sync_that_applies_nothing_says_so_with_its_own_time(
    scenario: Scenario,
) -> None:
    scenario.app(spec_extra=MANUAL)
    scenario.reconcile("web", minutes=0)
    assert scenario.reconcile("web", minutes=5, extra=("--force",)).code == 0
    assert scenario.status()["lastAttempted"]["message"] == "2 objects applied"

    for minute in (9, 12):  # in sync: each forced sync writes nothing, at its own time
        result = scenario.reconcile("web", minutes=minute, extra=("--force",))
        attempted = scenario.status()["lastAttempted"]
        assert attempted["time"] == f"2026-11-29T12:{minute:02d}:00Z"
        assert attempted["message"] == FORCED_IN_SYNC
        assert scenario.status()["lastHandledForceSyncAt"] == attempted["time"]
        assert "(in sync)" in result.out, result.out
    rows = scenario.cli("history", "web").out.splitlines()[1:]
    assert [r.split()[0] for r in rows][-2:] == ["2026-11-29T12:09:00Z", "2026-11-29T12:12:00Z"]


def test_manual_release_takes_a_force_sync_annotation_once(scenario: Scenario) -> None:
    scenario.app(spec_extra=MANUAL)
    scenario.reconcile("web", minutes=0)
    annotated = release_yaml(
        "web", spec_extra=MANUAL, annotations='    convoy.dev/force-sync: "2026-11-29T12:30:00Z"\n'
    )
    scenario.commit({"releases/web.yaml": annotated})
    # Unnamed: due because the Release file changed and a forced sync is pending.
    assert scenario.reconcile(minutes=31).code == 0
    status = scenario.status()
    assert status["lastAttempted"]["reason"] == "Synced"
    assert status["lastHandledForceSyncAt"] == "2026-11-29T12:30:00Z"
    assert scenario.reconcile("web", minutes=32).code == 0
    assert scenario.status()["lastAttempted"]["reason"] == "Synced"
    assert scenario.status()["lastHandledForceSyncAt"] == "2026-11-29T12:30:00Z"


def test_a_pinned_release_applies_the_pinned_revision_without_a_rollout(scenario: Scenario) -> None:
    first = scenario.app(image="1.0", spec_extra="")
    scenario.repo.create_tag("v1", ref=first)
    scenario.app(image="2.0", release=release_yaml("web", spec_extra="  pin: v1\n"))
    assert scenario.reconcile("web", minutes=0).code == 0
    status = scenario.status()
    assert status["rollout"] is None
    assert status["lastAttempted"]["revision"] == first
    assert scenario.deployment_image() == "example/web:1.0"


def test_prune_deletes_what_left_the_render_unless_told_not_to(scenario: Scenario) -> None:
    extra = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {a: b}\n"
    keep = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n"
        '  annotations: {convoy.dev/prune: "false"}\n'
    )
    scenario.app(extra={"extra.yaml": extra, "keep.yaml": keep})
    scenario.reconcile("web", minutes=0)
    assert scenario.object_path("web", "configmap", "extra").exists()
    scenario.commit({"apps/web/extra.yaml": None, "apps/web/keep.yaml": None})
    assert scenario.reconcile("web", minutes=1).code == 0
    assert not scenario.object_path("web", "configmap", "extra").exists()
    assert scenario.object_path("web", "configmap", "keep").exists()


def test_prune_false_keeps_objects_and_forgets_them(scenario: Scenario) -> None:
    extra = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n"
    spec = "  syncPolicy: {prune: false}\n" + FAILURE_POLICY
    scenario.app(extra={"extra.yaml": extra}, spec_extra=spec)
    scenario.reconcile("web", minutes=0)
    scenario.commit({"apps/web/extra.yaml": None})
    assert scenario.reconcile("web", minutes=1).code == 0
    assert scenario.object_path("web", "configmap", "extra").exists()
    inventory = (scenario.state / "inventory" / "web.json").read_text()
    assert '"extra"' not in inventory


def test_an_empty_render_is_an_error_unless_allowed(scenario: Scenario) -> None:
    empty = {"apps/web/empty.yaml": "# nothing here\n", "releases/web.yaml": release_yaml("web")}
    scenario.commit(empty)
    result = scenario.reconcile("web", minutes=0)
    assert result.code == 1
    assert scenario.status()["lastAttempted"]["reason"] == "RenderFailed"
    allowed = release_yaml("web", spec_extra="  syncPolicy: {allowEmpty: true}\n")
    scenario.commit({"releases/web.yaml": allowed})
    assert scenario.reconcile("web", minutes=1).code == 0
    assert scenario.status()["lastAttempted"]["reason"] == "Synced"


WAVED = "  syncPolicy: {waves: {healthStrategy: Healthy, timeout: 5m}}\n"
WAVE1_CONFIG = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: late\n"
    '  annotations: {convoy.dev/sync-wave: "1"}\n'
)


def test_waves_wait_for_the_previous_wave_to_be_healthy(scenario: Scenario) -> None:
    scenario.app(extra={"late.yaml": WAVE1_CONFIG}, spec_extra=WAVED + FAILURE_POLICY)
    assert scenario.reconcile("web", minutes=0).code == 0
    status = scenario.status()
    assert status["lastAttempted"]["reason"] == "WaitingForWaveHealth"
    assert status["lastAttempted"]["applied"] is True
    assert [w["wave"] for w in status["waves"]] == [0]
    assert not scenario.object_path("web", "configmap", "late").exists()
    scenario.deployment_ready()
    assert scenario.reconcile("web", minutes=1).code == 0
    assert scenario.object_path("web", "configmap", "late").exists()
    status = scenario.status()
    assert status["lastAttempted"]["reason"] == "Synced"
    assert [w["wave"] for w in status["waves"]] == [0, 1]
    assert status["rollout"]["state"] == "Progressing"


def test_a_wave_timeout_without_last_healthy_fails_the_rollout(scenario: Scenario) -> None:
    scenario.app(extra={"late.yaml": WAVE1_CONFIG}, spec_extra=WAVED + FAILURE_POLICY)
    scenario.reconcile("web", minutes=0)
    assert scenario.reconcile("web", minutes=6).code == 0
    status = scenario.status()
    assert status["rollout"]["state"] == "Failed"
    assert status["rollout"]["reason"] == "WaveTimeout"
    assert status["lastAttempted"]["reason"] == "WaveTimeout"
    assert not scenario.object_path("web", "configmap", "late").exists()


def test_a_wave_timeout_without_failure_policy_stops_without_rollout(scenario: Scenario) -> None:
    scenario.app(extra={"late.yaml": WAVE1_CONFIG}, spec_extra=WAVED)
    scenario.reconcile("web", minutes=0)
    assert scenario.reconcile("web", minutes=6).code == 0
    status = scenario.status()
    assert status["rollout"] is None
    assert status["lastAttempted"]["reason"] == "WaveTimeout"


def test_a_wave_timeout_with_last_healthy_rolls_back(scenario: Scenario) -> None:
    spec = WAVED + FAILURE_POLICY
    scenario.app(extra={"late.yaml": WAVE1_CONFIG}, spec_extra=spec)
    scenario.reconcile("web", minutes=0)
    scenario.deployment_ready()
    scenario.reconcile("web", minutes=1)
    scenario.reconcile("web", minutes=2)
    assert scenario.status()["rollout"]["state"] == "Succeeded"
    scenario.app(image="2.0", extra={"late.yaml": WAVE1_CONFIG}, spec_extra=spec)
    scenario.reconcile("web", minutes=3)
    assert scenario.deployment_image() == "example/web:2.0"
    assert scenario.reconcile("web", minutes=10).code == 0
    status = scenario.status()
    assert status["rollout"]["state"] == "RolledBack"
    assert status["rollout"]["reason"] == "WaveTimeout"
    assert scenario.deployment_image() == "example/web:1.0"


PROD = """\
apiVersion: convoy.dev/v1alpha1
kind: Cluster
metadata: {name: prod}
spec: {wave: 1, vars: {env: prod}}
"""


def _convoy_release(name: str, cluster: str) -> str:
    return (
        "apiVersion: convoy.dev/v1alpha1\nkind: Release\n"
        f"metadata: {{name: {name}}}\n"
        f"spec:\n  cluster: {cluster}\n  namespace: web\n  convoy: web\n"
        "  source: {path: apps/web}\n" + FAILURE_POLICY
    )


def test_the_cluster_wave_gate_waits_for_lower_waves_to_be_healthy(scenario: Scenario) -> None:
    scenario.app(release=_convoy_release("web", "staging"))
    scenario.commit(
        {"clusters/prod.yaml": PROD, "releases/web-prod.yaml": _convoy_release("web-prod", "prod")}
    )
    assert scenario.reconcile(minutes=0).code == 0
    assert scenario.status("web-prod")["lastAttempted"]["reason"] == "WaitingForClusterWave"
    prod_deployment = (
        scenario.state / "clusters" / "prod" / "web" / "deployment.apps" / "web-prod.yaml"
    )
    assert not prod_deployment.exists()
    scenario.deployment_ready()
    scenario.reconcile("web", minutes=1)
    assert scenario.status()["lastHealthy"] is not None
    assert scenario.reconcile("web-prod", minutes=2).code == 0
    assert scenario.status("web-prod")["lastAttempted"]["reason"] == "Synced"
    assert prod_deployment.exists()


def test_variables_come_from_builtins_cluster_and_release(scenario: Scenario) -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: vars}\n"
        "data: {release: ${release}, ns: ${namespace}, cluster: ${cluster}, env: ${env},"
        " tier: ${tier}, literal: '$${keep}'}\n"
    )
    spec = "  vars: {env: override, tier: 3}\n"
    scenario.app(extra={"vars.yaml": text}, spec_extra=spec)
    assert scenario.reconcile("web", minutes=0).code == 0
    data = scenario.live("web", "configmap", "vars")["data"]
    assert data == {
        "release": "web",
        "ns": "web",
        "cluster": "staging",
        "env": "override",
        "tier": 3,
        "literal": "${keep}",
    }


def test_a_broken_release_file_is_reported_and_others_carry_on(scenario: Scenario) -> None:
    scenario.app()
    bogus = release_yaml("bad", spec_extra="  bogus: 1\n")
    scenario.commit({"releases/bad.yaml": bogus, "releases/ugly.yaml": "spec: [unclosed\n"})
    result = scenario.reconcile(minutes=0)
    assert result.code == 1
    assert "releases/bad.yaml" in result.err and "spec.bogus" in result.err
    assert "releases/ugly.yaml" in result.err
    assert scenario.status("bad")["lastAttempted"]["reason"] == "InvalidRelease"
    assert scenario.status("ugly")["lastAttempted"]["reason"] == "InvalidRelease"
    assert scenario.status("web")["lastAttempted"]["reason"] == "Synced"


def test_an_unknown_cluster_is_reported(scenario: Scenario) -> None:
    text = release_yaml("web").replace("cluster: staging", "cluster: nowhere")
    scenario.app(release=text)
    result = scenario.reconcile("web", minutes=0)
    assert result.code == 1
    assert "nowhere" in result.err
    assert scenario.status()["lastAttempted"]["reason"] == "ClusterNotFound"


def test_a_source_path_escaping_the_repository_is_refused(scenario: Scenario) -> None:
    text = release_yaml("web").replace("path: apps/web", "path: ../outside")
    scenario.app(release=text)
    result = scenario.reconcile("web", minutes=0)
    assert result.code == 1
    assert scenario.status()["lastAttempted"]["reason"] == "SourceFailed"


def test_quiet_ticks_make_no_commit(scenario: Scenario) -> None:
    succeed_first_render(scenario)
    head = scenario.head()
    for minutes in (2, 3, 10, 60):
        assert scenario.reconcile(minutes=minutes, extra=("--all",)).code == 0
    assert scenario.head() == head


def test_an_unknown_name_is_a_usage_error(scenario: Scenario) -> None:
    scenario.app()
    assert scenario.reconcile("nope", minutes=0).code == 2


def test_a_rejected_push_is_fetched_rebased_and_retried(scenario: Scenario, tmp_path: Path) -> None:
    scenario.app()
    remote = git.Repo.init(tmp_path / "remote.git", bare=True, initial_branch="main")
    scenario.repo.create_remote("origin", str(tmp_path / "remote.git"))
    scenario.repo.git.push("-u", "origin", "main")
    other = git.Repo.clone_from(str(tmp_path / "remote.git"), tmp_path / "other")
    with other.config_writer() as cfg:
        cfg.set_value("user", "name", "other")
        cfg.set_value("user", "email", "other@localhost")
    (tmp_path / "other" / "NOTES.md").write_text("someone else\n")
    other.index.add(["NOTES.md"])
    other.index.commit("notes")
    other.git.push("origin", "main")

    assert scenario.reconcile("web", minutes=0).code == 0
    log = remote.git.log("--format=%s", "main").splitlines()
    assert log[0].startswith("web: none -> Progressing (NewRender)")
    assert "notes" in log


def test_a_rolled_back_release_is_not_due_again_for_its_own_source(scenario: Scenario) -> None:
    roll_back_a_second_render(scenario)
    result = scenario.reconcile(minutes=4)
    assert "web: skipped (not due)" in result.out


def test_after_a_tick_the_working_tree_and_index_match_the_status_commits(
    scenario: Scenario,
) -> None:
    scenario.app()
    scenario.app("db")
    assert scenario.reconcile(minutes=0).code == 0
    assert scenario.repo.git.status("--porcelain") == ""
    assert (scenario.root / "status" / "db.yaml").read_text() == scenario.repo.git.show(
        "HEAD:status/db.yaml"
    ) + "\n"


def test_an_unreadable_status_file_keeps_the_renders_it_may_refer_to(scenario: Scenario) -> None:
    good = succeed_first_render(scenario)
    blob = scenario.state / "renders" / (good.removeprefix("sha256:") + ".json")
    scenario.app("db")
    scenario.commit({"status/web.yaml": "rollout: [not, a, status\n"})
    scenario.app("db", image="2.0")  # db persists a new render: the tick would collect
    assert scenario.reconcile("db", minutes=5).code == 0
    assert blob.exists()
