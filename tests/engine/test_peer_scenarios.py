"""Argo CD and Flux annotations end to end: the CLI against a real git repository and
the directory cluster, manifests written as repositories for those tools write them.

The tests play the controllers by writing ``status`` into the cluster's object files
(a Job completes or fails); time moves only through ``--now``.
"""

import json
from typing import Any

from tests.support.scenario import Scenario, hook_job, release_yaml

WAVED = "  syncPolicy: {waves: {healthStrategy: Healthy, timeout: 5m}}\n"
FAILURE = "  failurePolicy: {rollback: Auto, progressDeadline: 10m}\n"


def configmap(name: str, notes: str = "", data: str = "{a: b}") -> str:
    meta = f"  annotations:\n{notes}" if notes else ""
    return f"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{meta}data: {data}\n"


def job(name: str, notes: str) -> str:
    return hook_job(name, notes)


def hook(phase: str, policy: str = "") -> str:
    notes = f"    argocd.argoproj.io/hook: {phase}\n"
    if policy:
        notes += f"    argocd.argoproj.io/hook-delete-policy: {policy}\n"
    return notes


def job_done(s: Scenario, name: str, condition: str = "Complete") -> None:
    s.set_status("web", "job.batch", name, {"conditions": [{"type": condition, "status": "True"}]})


def exists(s: Scenario, kind_dir: str, name: str) -> bool:
    return s.object_path("web", kind_dir, name).exists()


def inventory(s: Scenario) -> dict[str, dict[str, Any]]:
    text = (s.state / "inventory" / "web.json").read_text()
    return {e["key"]["name"]: e for e in json.loads(text)["entries"]}


# --- prune ----------------------------------------------------------------------------


def test_argo_prune_false_and_flux_prune_disabled_keep_what_left_the_render(
    scenario: Scenario,
) -> None:
    s = scenario
    extra = {
        "argo.yaml": configmap("argo", "    argocd.argoproj.io/sync-options: Prune=false\n"),
        "flux.yaml": configmap("flux", "    kustomize.toolkit.fluxcd.io/prune: disabled\n"),
        "plain.yaml": configmap("plain"),
    }
    s.app(extra=extra)
    assert s.reconcile("web", minutes=0).code == 0
    assert all(exists(s, "configmap", n) for n in ("argo", "flux", "plain"))
    s.commit({f"apps/web/{f}": None for f in extra})
    assert s.reconcile("web", minutes=1).code == 0
    assert not exists(s, "configmap", "plain")
    assert exists(s, "configmap", "argo") and exists(s, "configmap", "flux")
    assert {"argo", "flux", "plain"}.isdisjoint(inventory(s))


# --- Flux ssa -------------------------------------------------------------------------

IF_NOT_PRESENT = "    kustomize.toolkit.fluxcd.io/ssa: IfNotPresent\n"


def test_an_if_not_present_object_is_created_once_and_never_updated(scenario: Scenario) -> None:
    s = scenario
    s.app(extra={"seed.yaml": configmap("seed", IF_NOT_PRESENT, "{level: from-git}")})
    assert s.reconcile("web", minutes=0).code == 0
    assert s.live("web", "configmap", "seed")["data"] == {"level": "from-git"}
    by_hand = s.live("web", "configmap", "seed")
    by_hand["data"] = {"level": "by-hand"}  # someone else's write
    s.object_path("web", "configmap", "seed").write_text(json.dumps(by_hand))

    seed = configmap("seed", IF_NOT_PRESENT, "{level: changed-in-git}")
    s.app(image="2.0", extra={"seed.yaml": seed})
    assert s.reconcile("web", minutes=2).code == 0
    live = s.live("web", "configmap", "seed")
    assert live["data"] == {"level": "by-hand"}
    ref = s.status()["rollout"]["renderRef"]
    assert live["metadata"]["annotations"]["convoy.dev/render"] == ref  # its bookkeeping only
    assert s.deployment_image() == "example/web:2.0"
    s.deployment_ready()
    assert s.reconcile("web", minutes=3).code == 0
    assert s.status()["rollout"]["state"] == "Succeeded"  # the verdict counts it as R's

    written = s.object_path("web", "configmap", "seed").stat().st_mtime_ns
    assert s.reconcile("web", minutes=4).code == 0
    assert s.object_path("web", "configmap", "seed").stat().st_mtime_ns == written
    s.object_path("web", "configmap", "seed").unlink()
    assert s.reconcile("web", minutes=5).code == 0
    assert s.live("web", "configmap", "seed")["data"] == {"level": "changed-in-git"}


def test_an_if_not_present_object_that_exists_already_keeps_its_fields(scenario: Scenario) -> None:
    s = scenario
    path = s.object_path("web", "configmap", "seed")
    path.parent.mkdir(parents=True)
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: seed, namespace: web}\n")
    s.app(extra={"seed.yaml": configmap("seed", IF_NOT_PRESENT, "{level: from-git}")})
    assert s.reconcile("web", minutes=0).code == 0
    live = s.live("web", "configmap", "seed")
    assert "data" not in live
    assert live["metadata"]["labels"] == {"convoy.dev/release": "web"}


IGNORED = {
    "argo-skip": "    argocd.argoproj.io/hook: Skip\n",
    "flux-ignore": "    kustomize.toolkit.fluxcd.io/ssa: Ignore\n",
    "flux-reconcile": "    kustomize.toolkit.fluxcd.io/reconcile: disabled\n",
}


def test_skipped_and_ignored_objects_are_never_applied_nor_pruned(scenario: Scenario) -> None:
    s = scenario
    s.app(extra={f"{n}.yaml": configmap(n, data="{v: '1'}") for n in IGNORED})
    assert s.reconcile("web", minutes=0).code == 0
    assert all(exists(s, "configmap", n) for n in IGNORED)
    s.app(extra={f"{n}.yaml": configmap(n, notes, "{v: '2'}") for n, notes in IGNORED.items()})
    s.commit({"apps/web/new.yaml": configmap("new", IGNORED["flux-ignore"])})
    assert s.reconcile("web", minutes=1).code == 0
    assert s.status()["lastAttempted"]["reason"] == "Synced"
    for name in IGNORED:
        assert s.live("web", "configmap", name)["data"] == {"v": "1"}  # not applied, not pruned
    assert not exists(s, "configmap", "new")
    assert set(IGNORED).isdisjoint(inventory(s))


# --- Argo CD hooks --------------------------------------------------------------------


def test_argo_hooks_run_in_their_phases_as_convoy_hooks_do(scenario: Scenario) -> None:
    s = scenario
    extra = {
        "pre.yaml": job("pre", hook("PreSync")),
        "during.yaml": job("during", hook("Sync")),
        "post.yaml": job("post", hook("PostSync")),
        "late.yaml": configmap("late", '    argocd.argoproj.io/sync-wave: "1"\n'),
    }
    s.app(extra=extra)
    assert s.reconcile("web", minutes=0).code == 0
    status = s.status()
    assert status["lastAttempted"]["reason"] == "WaitingForWaveHealth"
    assert exists(s, "job.batch", "pre")
    assert not exists(s, "job.batch", "during") and not exists(s, "deployment.apps", "web")

    job_done(s, "pre")
    assert s.reconcile("web", minutes=1).code == 0
    assert s.status()["lastAttempted"]["reason"] == "Synced"
    assert [w["wave"] for w in s.status()["waves"]] == ["PreSync", "Sync", 0, 1, "PostSync"]
    assert all(exists(s, "job.batch", n) for n in ("during", "post"))
    assert exists(s, "configmap", "late")

    s.object_path("web", "job.batch", "during").unlink()  # a hook runs once per render
    assert s.reconcile("web", minutes=2).code == 0
    assert not exists(s, "job.batch", "during")
    assert exists(s, "configmap", "web-config")


def test_the_first_wave_waits_for_sync_hooks_only_with_a_healthy_strategy(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app(extra={"during.yaml": job("during", hook("Sync"))}, spec_extra=WAVED)
    assert s.reconcile("web", minutes=0).code == 0
    assert exists(s, "job.batch", "during") and not exists(s, "deployment.apps", "web")
    job_done(s, "during")
    assert s.reconcile("web", minutes=1).code == 0
    assert exists(s, "deployment.apps", "web")


# --- SyncFail -------------------------------------------------------------------------

SYNC_FAIL = {"notify.yaml": job("notify", hook("SyncFail"))}


def test_syncfail_hooks_never_run_when_the_sync_succeeds(scenario: Scenario) -> None:
    s = scenario
    s.app(extra=SYNC_FAIL, spec_extra=FAILURE)
    assert s.reconcile("web", minutes=0).code == 0
    s.deployment_ready()
    assert s.reconcile("web", minutes=1).code == 0
    assert s.status()["rollout"]["state"] == "Succeeded"
    assert s.status()["lastAttempted"]["message"] == "2 objects applied"
    assert not exists(s, "job.batch", "notify")
    assert "notify" not in inventory(s)


def test_syncfail_hooks_run_once_when_an_apply_fails(scenario: Scenario) -> None:
    s = scenario
    s.app(extra=SYNC_FAIL, spec_extra=FAILURE)
    blocked = s.object_path("web", "configmap", "x").parent
    blocked.parent.mkdir(parents=True)
    blocked.write_text("a file where the cluster keeps its ConfigMaps\n")
    result = s.reconcile("web", minutes=0)
    assert result.code == 1
    assert s.status()["lastAttempted"]["reason"] == "ApplyFailed"
    assert exists(s, "job.batch", "notify")
    assert inventory(s)["notify"]["wave"] == "SyncFail"

    s.object_path("web", "job.batch", "notify").unlink()
    assert s.reconcile("web", minutes=1).code == 1
    assert not exists(s, "job.batch", "notify")  # once per render


def test_syncfail_hooks_run_when_the_rollout_fails(scenario: Scenario) -> None:
    s = scenario
    s.app(extra=SYNC_FAIL, spec_extra=FAILURE)
    assert s.reconcile("web", minutes=0).code == 0
    assert not exists(s, "job.batch", "notify")
    s.deployment_failed()
    assert s.reconcile("web", minutes=1).code == 0
    assert s.status()["rollout"]["state"] == "Failed"
    assert exists(s, "job.batch", "notify")
    job_done(s, "notify", "Failed")
    assert s.reconcile("web", minutes=2).code == 0  # a failed SyncFail hook is not judged
    assert s.status()["lastAttempted"]["reason"] == "Synced"


def test_a_wave_timeout_that_fails_the_rollout_runs_the_syncfail_hooks(scenario: Scenario) -> None:
    s = scenario
    late = configmap("late", '    argocd.argoproj.io/sync-wave: "1"\n')
    s.app(extra={**SYNC_FAIL, "late.yaml": late}, spec_extra=WAVED + FAILURE)
    assert s.reconcile("web", minutes=0).code == 0
    assert not exists(s, "job.batch", "notify")
    assert s.reconcile("web", minutes=6).code == 0
    assert s.status()["rollout"]["reason"] == "WaveTimeout"
    assert exists(s, "job.batch", "notify")


def test_a_rollback_runs_the_failed_renders_syncfail_hooks_and_keeps_them(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app(extra=SYNC_FAIL, spec_extra=FAILURE)
    s.reconcile("web", minutes=0)
    s.deployment_ready()
    s.reconcile("web", minutes=1)
    assert s.status()["rollout"]["state"] == "Succeeded"
    s.app(image="2.0", extra=SYNC_FAIL, spec_extra=FAILURE)
    s.reconcile("web", minutes=2)
    bad = s.status()["rollout"]["renderRef"]
    s.deployment_failed()
    assert s.reconcile("web", minutes=3).code == 0
    assert s.status()["rollout"]["state"] == "RolledBack"
    assert s.deployment_image() == "example/web:1.0"
    notify = s.live("web", "job.batch", "notify")
    assert notify["metadata"]["annotations"]["convoy.dev/render"] == bad
    assert s.reconcile("web", minutes=4).code == 0  # the hold keeps it, and runs it once
    assert inventory(s)["notify"]["appliedRenderRef"] == bad
    assert exists(s, "job.batch", "notify")


# --- hook delete policies -------------------------------------------------------------


def test_a_hook_succeeded_job_is_deleted_once_complete_and_the_rollout_goes_on(
    scenario: Scenario,
) -> None:
    s = scenario
    migrate = {"migrate.yaml": job("migrate", hook("PreSync", "HookSucceeded"))}
    s.app(extra=migrate, spec_extra=FAILURE)
    assert s.reconcile("web", minutes=0).code == 0
    assert exists(s, "job.batch", "migrate")
    job_done(s, "migrate")
    assert s.reconcile("web", minutes=1).code == 0
    assert not exists(s, "job.batch", "migrate")
    assert exists(s, "deployment.apps", "web")
    entry = inventory(s)["migrate"]
    assert entry["hookDeleted"] is True
    assert entry["health"]["state"] == "Current"

    s.deployment_ready()
    assert s.reconcile("web", minutes=2).code == 0
    assert s.status()["rollout"]["state"] == "Succeeded"
    head = s.head()
    for minutes in (3, 10, 60):
        assert s.reconcile("web", minutes=minutes).code == 0
    assert not exists(s, "job.batch", "migrate")
    assert s.head() == head

    s.app(image="2.0", extra=migrate, spec_extra=FAILURE)
    assert s.reconcile("web", minutes=61).code == 0
    assert exists(s, "job.batch", "migrate")  # a new render runs it again
    assert inventory(s)["migrate"]["hookDeleted"] is False


def test_a_hook_failed_job_is_deleted_once_failed_and_the_rollout_fails(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app(extra={"migrate.yaml": job("migrate", hook("PreSync", "HookFailed"))}, spec_extra=FAILURE)
    assert s.reconcile("web", minutes=0).code == 0
    job_done(s, "migrate", "Failed")
    assert s.reconcile("web", minutes=1).code == 0
    assert not exists(s, "job.batch", "migrate")
    assert s.status()["rollout"]["state"] == "Failed"
    assert "migrate" in s.status()["rollout"]["message"]
    assert inventory(s)["migrate"]["health"]["state"] == "Failed"
    assert not exists(s, "deployment.apps", "web")


def test_a_hook_succeeded_job_that_failed_stays(scenario: Scenario) -> None:
    s = scenario
    migrate = {"migrate.yaml": job("migrate", hook("PreSync", "HookSucceeded"))}
    s.app(extra=migrate, release=release_yaml("web", spec_extra=FAILURE))
    assert s.reconcile("web", minutes=0).code == 0
    job_done(s, "migrate", "Failed")
    assert s.reconcile("web", minutes=1).code == 0
    assert exists(s, "job.batch", "migrate")
    assert s.status()["rollout"]["state"] == "Failed"


def test_a_hook_marked_deleted_that_is_still_there_is_deleted_by_the_next_tick(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app(extra={"migrate.yaml": job("migrate", hook("PreSync", "HookSucceeded"))})
    assert s.reconcile("web", minutes=0).code == 0
    job_done(s, "migrate")
    path = s.object_path("web", "job.batch", "migrate")
    finished = path.read_text()
    assert s.reconcile("web", minutes=1).code == 0
    assert not path.exists()
    # As if the tick had been killed between writing the mark and sending the delete:
    path.write_text(finished)
    assert s.reconcile("web", minutes=2).code == 0
    assert not path.exists()
    # A copy made for another render is not this render's hook: it stays.
    path.write_text(finished.replace("sha256:", "sha256:0"))
    assert s.reconcile("web", minutes=3).code == 0
    assert path.exists()


# --- hooks of several phases (issue 23) ------------------------------------------------


def account(name: str, notes: str) -> str:
    meta = f"metadata:\n  name: {name}\n  annotations:\n{notes}"
    return f"---\napiVersion: v1\nkind: ServiceAccount\n{meta}"


def helm_hook(hooks: str, policy: str = "hook-succeeded") -> str:
    return f"    helm.sh/hook: {hooks}\n    helm.sh/hook-delete-policy: {policy}\n"


HELM_HOOKS = {
    "account.yaml": account("runner", helm_hook("pre-install,post-install")),
    "create.yaml": job("create", helm_hook("pre-install")),
    "patch.yaml": job("patch", helm_hook("post-install")),
}


def test_a_helm_hook_of_pre_and_post_install_outlives_the_post_install_job_that_needs_it(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app(extra=HELM_HOOKS)
    assert s.reconcile("web", minutes=0).code == 0
    assert exists(s, "serviceaccount", "runner") and exists(s, "job.batch", "create")
    assert not exists(s, "job.batch", "patch")
    assert inventory(s)["runner"]["wave"] == "PreSync"  # one entry, by its first phase
    assert s.reconcile("web", minutes=1).code == 0  # Current, but its PostSync is to come
    assert exists(s, "serviceaccount", "runner")

    job_done(s, "create")
    assert s.reconcile("web", minutes=2).code == 0
    assert [w["wave"] for w in s.status()["waves"]] == ["PreSync", 0, "PostSync"]
    assert not exists(s, "job.batch", "create")  # its phase is over
    assert exists(s, "job.batch", "patch") and exists(s, "serviceaccount", "runner")
    assert s.reconcile("web", minutes=3).code == 0  # the PostSync Job runs
    assert exists(s, "serviceaccount", "runner")
    assert not inventory(s)["runner"]["hookDeleted"]

    job_done(s, "patch")
    assert s.reconcile("web", minutes=4).code == 0  # the PostSync phase is over
    assert not exists(s, "serviceaccount", "runner") and not exists(s, "job.batch", "patch")
    assert inventory(s)["runner"]["hookDeleted"] is True
    s.deployment_ready()
    assert s.reconcile("web", minutes=5).code == 0
    assert s.status()["rollout"]["state"] == "Succeeded"
    assert not exists(s, "serviceaccount", "runner")  # not created again for this render


def test_an_argo_hook_of_presync_and_postsync_is_created_again_for_its_postsync_phase(
    scenario: Scenario,
) -> None:
    s = scenario
    extra = {
        "settings.yaml": configmap("settings", hook("PreSync,PostSync", "HookSucceeded")),
        "pre.yaml": job("pre", hook("PreSync")),
    }
    s.app(extra=extra, spec_extra=WAVED + FAILURE)  # PostSync waits for the wave
    assert s.reconcile("web", minutes=0).code == 0
    assert exists(s, "configmap", "settings")
    job_done(s, "pre")
    assert s.reconcile("web", minutes=1).code == 0
    assert [w["wave"] for w in s.status()["waves"]] == ["PreSync", 0]
    assert exists(s, "configmap", "settings")  # its PostSync phase is still to come
    s.object_path("web", "configmap", "settings").unlink()  # someone deletes it

    s.deployment_ready()
    assert s.reconcile("web", minutes=2).code == 0
    assert s.status()["lastAttempted"]["reason"] == "Synced"
    assert exists(s, "configmap", "settings")  # created again for the PostSync phase
    assert s.reconcile("web", minutes=3).code == 0  # Current: its last phase is over
    assert not exists(s, "configmap", "settings")
    assert s.status()["rollout"]["state"] == "Succeeded"
    assert s.reconcile("web", minutes=4).code == 0
    assert not exists(s, "configmap", "settings")  # once per phase, not on every tick


def test_a_hook_of_one_phase_is_deleted_by_its_policy_once_its_whole_phase_is_over(
    scenario: Scenario,
) -> None:
    # The rule that a policy waits for the last phase naming the hook applies to hooks
    # of one phase as well: the others of its phase are finished first, as Helm does.
    s = scenario
    s.app(
        extra={
            "first.yaml": job("first", hook("PreSync", "HookSucceeded")),
            "second.yaml": job("second", hook("PreSync")),
        }
    )
    assert s.reconcile("web", minutes=0).code == 0
    job_done(s, "first")
    assert s.reconcile("web", minutes=1).code == 0
    assert exists(s, "job.batch", "first")  # the second PreSync Job still runs
    job_done(s, "second")
    assert s.reconcile("web", minutes=2).code == 0
    assert not exists(s, "job.batch", "first")
    assert exists(s, "deployment.apps", "web")


def test_a_syncfail_hook_is_deleted_by_its_policy_on_its_own_health(scenario: Scenario) -> None:
    s = scenario
    s.app(extra={"notify.yaml": job("notify", hook("SyncFail", "HookSucceeded"))})
    assert s.reconcile("web", minutes=0).code == 0
    s.deployment_failed()
    assert s.reconcile("web", minutes=1).code == 0
    assert s.status()["rollout"]["state"] == "Failed"
    assert exists(s, "job.batch", "notify")
    job_done(s, "notify")
    assert s.reconcile("web", minutes=2).code == 0
    assert not exists(s, "job.batch", "notify")
    assert inventory(s)["notify"]["hookDeleted"] is True


def test_a_hook_of_several_phases_in_a_render_rolled_back_before_its_last_phase(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app(extra={"notify.yaml": job("notify", hook("SyncFail"))})
    s.reconcile("web", minutes=0)
    s.deployment_ready()
    s.reconcile("web", minutes=1)
    assert s.status()["rollout"]["state"] == "Succeeded"
    failing = {
        "notify.yaml": job("notify", hook("SyncFail")),
        "settings.yaml": configmap("settings", hook("PreSync,PostSync", "HookSucceeded")),
        "migrate.yaml": job("migrate", hook("PreSync")),
    }
    s.app(image="2.0", extra=failing)
    assert s.reconcile("web", minutes=2).code == 0
    assert exists(s, "configmap", "settings")
    job_done(s, "migrate", "Failed")
    assert s.reconcile("web", minutes=3).code == 0
    assert s.status()["rollout"]["state"] == "RolledBack"
    assert s.deployment_image() == "example/web:1.0"
    assert exists(s, "job.batch", "notify")  # the failed render's SyncFail hook ran
    assert not exists(s, "configmap", "settings")  # a rollback prunes the failed hooks
    assert "settings" not in inventory(s)


def test_skip_or_syncfail_with_another_phase_is_a_one_line_render_failure(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app(extra={"bad.yaml": configmap("bad", hook("Skip,PreSync"))})
    assert s.reconcile("web", minutes=0).code == 1
    attempted = s.status()["lastAttempted"]
    assert attempted["reason"] == "RenderFailed"
    message = attempted["message"]
    assert "\n" not in message
    assert "apps/web/bad.yaml" in message and "ConfigMap web/bad" in message
    assert "annotation argocd.argoproj.io/hook: 'Skip,PreSync' is not a list of sync" in message
    assert not exists(s, "configmap", "web-config")
