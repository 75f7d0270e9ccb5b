"""Argo CD and Flux annotations against a real kube-apiserver with its controller-manager:
an Argo CD PreSync Job hook deleted once it succeeded, and Flux's create-only objects
that another writer changed (or made) and that convoy-batch never overwrites."""

import json
from datetime import timedelta
from typing import Any

from convoy_batch.deployers import kubeapi
from convoy_batch.timefmt import format_time
from tests.k8s.k8s_scenario import KubeScenario, presync_job_succeeded
from tests.k8s.test_k8s_scenarios import server_writes
from tests.k8s.testenv import eventually, read_or_none
from tests.support.scenario import T0, hook_job

MIGRATE = hook_job(
    "migrate",
    "    argocd.argoproj.io/hook: PreSync\n"
    "    argocd.argoproj.io/hook-delete-policy: HookSucceeded\n",
)
SEED = """\
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: seed
  annotations:
    kustomize.toolkit.fluxcd.io/ssa: IfNotPresent
data:
  level: LEVEL
"""


def sent_since(counts: dict[str, int]) -> set[str]:
    """The request methods sent since ``counts`` was taken (dry runs included)."""
    return {k for k, v in kubeapi.COUNTS.items() if v != counts.get(k, 0)}


def job_or_none(s: KubeScenario, namespace: str, name: str) -> Any | None:
    return read_or_none(s.kube.batch.read_namespaced_job, name, namespace)


def test_an_argo_presync_job_with_hook_succeeded_is_deleted_once_complete(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    first = presync_job_succeeded(s, "argohook", {"migrate.yaml": MIGRATE})
    result = s.reconcile("argohook", minutes=1)
    assert result.code == 0, result.err
    assert s.deployment_image("argohook") == "example/argohook:1.0"
    eventually(lambda: job_or_none(s, "argohook", "migrate") is None, "the hook Job deleted")

    s.ready("argohook")
    assert s.reconcile("argohook", minutes=2).code == 0
    assert s.status("argohook")["rollout"]["state"] == "Succeeded"
    before, counts = server_writes(s, "argohook"), dict(kubeapi.COUNTS)
    assert f"delete jobs/{first.metadata.name}" in before
    assert s.reconcile("argohook", minutes=3).code == 0
    assert server_writes(s, "argohook") == before  # quiet: not re-created, nothing sent
    assert sent_since(counts) <= {"GET"}
    assert job_or_none(s, "argohook", "migrate") is None

    s.app("argohook", image="2.0", extra={"migrate.yaml": MIGRATE})
    assert s.reconcile("argohook", minutes=4).code == 0
    again = s.kube.batch.read_namespaced_job("migrate", "argohook")
    assert again.metadata.uid != first.metadata.uid  # a new render runs it again


def test_a_rollback_sends_no_second_delete_for_a_hook_its_policy_deleted(
    kscenario: KubeScenario,
) -> None:
    """The failed render's HookSucceeded Job is gone (its policy deleted it) and marked
    so in the inventory: the rollback's prune drops its entry without a request, and
    ``diff --live`` does not show it as an object a tick would create again."""
    s = kscenario
    s.app("hookback")
    assert s.reconcile("hookback", minutes=0).code == 0
    s.ready("hookback")
    assert s.reconcile("hookback", minutes=1).code == 0
    s.app("hookback", image="2.0", extra={"migrate.yaml": MIGRATE})
    assert s.reconcile("hookback", minutes=2).code == 0
    s.kube.job_succeeded("hookback", "migrate")
    assert s.reconcile("hookback", minutes=3).code == 0
    eventually(lambda: job_or_none(s, "hookback", "migrate") is None, "the hook Job deleted")
    diff = s.cli("diff", "--live", "--exit-code", "--now", format_time(T0 + timedelta(minutes=4)))
    assert diff.code == 0, diff.out
    assert "hookback: no change against the live cluster" in diff.out.splitlines()

    counts = dict(kubeapi.COUNTS)
    assert s.reconcile("hookback", minutes=13).code == 0
    assert s.status("hookback")["rollout"]["state"] == "RolledBack"
    assert s.deployment_image("hookback") == "example/hookback:1.0"
    assert "DELETE" not in sent_since(counts)
    deletes = [w for w in server_writes(s, "hookback") if w.startswith("delete jobs/")]
    assert deletes == ["delete jobs/migrate"]  # the policy's, once
    entries = json.loads((s.state / "inventory" / "hookback.json").read_text())["entries"]
    assert "migrate" not in {e["key"]["name"] for e in entries}


def test_a_flux_if_not_present_object_changed_by_someone_else_is_not_overwritten(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    s.app("seeded", extra={"seed.yaml": SEED.replace("LEVEL", "from-git")})
    assert s.reconcile("seeded", minutes=0).code == 0
    assert s.configmap("seeded", "seed").data == {"level": "from-git"}
    s.kube.core.patch_namespaced_config_map("seed", "seeded", {"data": {"level": "by-hand"}})

    s.app("seeded", image="2.0", extra={"seed.yaml": SEED.replace("LEVEL", "changed-in-git")})
    assert s.reconcile("seeded", minutes=1).code == 0
    live = s.configmap("seeded", "seed")
    assert live.data == {"level": "by-hand"}
    ref = s.status("seeded")["rollout"]["renderRef"]
    assert live.metadata.annotations["convoy.dev/render"] == ref
    assert s.deployment_image("seeded") == "example/seeded:2.0"
    s.ready("seeded")
    assert s.reconcile("seeded", minutes=2).code == 0
    assert s.status("seeded")["rollout"]["state"] == "Succeeded"

    before, counts = server_writes(s, "seeded"), dict(kubeapi.COUNTS)
    assert s.reconcile("seeded", minutes=3).code == 0
    assert server_writes(s, "seeded") == before
    assert sent_since(counts) <= {"GET"}
    s.kube.core.delete_namespaced_config_map("seed", "seeded")
    assert s.reconcile("seeded", minutes=4).code == 0
    assert s.configmap("seeded", "seed").data == {"level": "changed-in-git"}


def test_a_flux_if_not_present_object_made_by_another_tool_is_adopted_as_it_is(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    s.kube.core.create_namespace({"metadata": {"name": "adopted"}})
    theirs = {"metadata": {"name": "seed", "labels": {"made-by": "flux"}}, "data": {"x": "1"}}
    s.kube.core.create_namespaced_config_map("adopted", theirs)
    s.app("adopted", extra={"seed.yaml": SEED.replace("LEVEL", "from-git")})
    result = s.reconcile("adopted", minutes=0)
    assert result.code == 0, result.err
    live = s.configmap("adopted", "seed")
    assert live.data == {"x": "1"}
    assert live.metadata.labels == {"made-by": "flux", "convoy.dev/release": "adopted"}
    s.ready("adopted")
    assert s.reconcile("adopted", minutes=1).code == 0
    assert s.status("adopted")["rollout"]["state"] == "Succeeded"
