"""Hooks of several phases against a real kube-apiserver with its controller-manager
(issues 23 and 47): a hook that names PreSync and PostSync is applied in each and deleted
by its policy only once its PostSync phase is over (its Jobs complete as the server says,
however long they run and however loaded the machine), so the PostSync Job that needs it
finds it.
ingress-nginx's chart, unmodified, is the real case, in the public content's suite
(``tests/k8s/test_k8s_realworld.py``).

The audit log tells what the server received and when; the tests play the kubelet."""

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes import client

from convoy_batch.engine.stages.hooks import delete_finished_hooks
from convoy_batch.models import (
    ANNOTATION_RENDER,
    POST_SYNC,
    Health,
    HealthState,
    InventoryEntry,
    ReleaseInventory,
    WaveStatus,
)
from tests.k8s.k8s_scenario import KubeScenario, cpu_load
from tests.k8s.testenv import eventually, read_or_none
from tests.rollout.test_render import run
from tests.support.scenario import FAILURE_POLICY, hook_job

WAVED = "  syncPolicy: {waves: {healthStrategy: Healthy, timeout: 5m}}\n"


def audit(s: KubeScenario, name: str, namespace: str = "") -> Iterator[tuple[str, str, str]]:
    """(time, verb, resource) of every write to objects called ``name`` (in ``namespace``;
    any namespace, cluster-scoped ones too, when not given) but the controllers', dry runs
    and subresources aside, in the order received. The verb of a server-side apply is
    ``apply``; another patch stays ``patch`` (the removal of convoy-batch's hook
    finalizer)."""
    for event in s.kube.writes():
        ref = event.get("objectRef", {})
        if (
            ref.get("name") == name
            and ref.get("namespace", "") == (namespace or ref.get("namespace", ""))
            and not ref.get("subresource")
            and "dryRun" not in event["requestURI"]
        ):
            verb = "apply" if "force=true" in event["requestURI"] else event["verb"]
            yield event["requestReceivedTimestamp"], verb, ref["resource"]


def writes(s: KubeScenario, namespace: str, name: str, resource: str) -> list[tuple[str, str]]:
    """(time, verb) of the writes to the object (:func:`audit`)."""
    return [(when, verb) for when, verb, res in audit(s, name, namespace) if res == resource]


# --- Argo CD PreSync,PostSync ----------------------------------------------------------

SETTINGS = """\
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  annotations:
    argocd.argoproj.io/hook: PreSync,PostSync
    argocd.argoproj.io/hook-delete-policy: HookSucceeded
data: {a: b}
"""


def job(name: str, phase: str, *, image: str = "1.0", ttl: bool = False) -> str:
    """An Argo CD hook Job of ``phase``; ``ttl``: it deletes itself once finished
    (``ttlSecondsAfterFinished: 0``)."""
    return hook_job(name, f"    argocd.argoproj.io/hook: {phase}\n", image=image, ttl=ttl)


def test_an_argo_hook_of_presync_and_postsync_lives_until_its_postsync_phase_is_over(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    extra = {"settings.yaml": SETTINGS, "pre.yaml": job("pre", "PreSync")}
    extra["post.yaml"] = job("post", "PostSync")
    s.app("phased", extra=extra, spec_extra=WAVED + FAILURE_POLICY)  # PostSync waits
    assert s.reconcile("phased", minutes=0).code == 0
    assert s.configmap("phased", "settings") is not None
    s.kube.job_succeeded("phased", "pre")
    result = s.reconcile("phased", minutes=1)
    assert result.code == 0, result.err
    assert s.configmap("phased", "settings") is not None  # its PostSync is still to come
    s.kube.core.delete_namespaced_config_map("settings", "phased")  # someone deletes it

    s.ready("phased")
    result = s.reconcile("phased", minutes=2)
    assert result.code == 0, result.err
    assert s.status("phased")["lastAttempted"]["reason"] == "Synced"
    assert s.configmap("phased", "settings") is not None  # created again for PostSync
    assert s.kube.batch.read_namespaced_job("post", "phased") is not None
    assert s.reconcile("phased", minutes=3).code == 0  # the PostSync Job runs
    assert s.configmap("phased", "settings") is not None
    verbs = [verb for _, verb in writes(s, "phased", "settings", "configmaps")]
    assert verbs == ["apply", "patch", "delete", "apply", "patch"], (
        verbs
    )  # each let go once Current

    s.kube.job_succeeded("phased", "post")
    assert s.reconcile("phased", minutes=4).code == 0
    eventually(lambda: s.configmap("phased", "settings") is None, "the hook deleted")
    assert s.reconcile("phased", minutes=5).code == 0
    assert s.status("phased")["rollout"]["state"] == "Succeeded"
    assert s.configmap("phased", "settings") is None  # not created again for this render


# --- Helm pre-install,post-install (issue 47) -------------------------------------------

RBAC_HOOK = """\
  annotations:
    helm.sh/hook: pre-install,pre-upgrade,post-install,post-upgrade
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
"""

ADMISSION = f"""\
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: admission
{RBAC_HOOK}---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: admission
{RBAC_HOOK}rules:
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: admission
{RBAC_HOOK}roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: admission}}
subjects:
- {{kind: ServiceAccount, name: admission, namespace: hooked}}
"""


def helm_job(name: str, hook: str, ttl: bool = False) -> str:
    """A Helm hook Job; ``ttl``: it deletes itself once finished (ingress-nginx 4.15's
    admission Jobs)."""
    annotations = (
        f"    helm.sh/hook: {hook}\n"
        "    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded\n"
    )
    return hook_job(name, annotations, ttl=ttl, account="admission")


def admission_rbac(s: KubeScenario, namespace: str = "admitted") -> set[str]:
    """The admission hooks the server has now."""
    rbac = client.RbacAuthorizationV1Api(s.kube.api)
    reads = {
        "ServiceAccount": s.kube.core.read_namespaced_service_account,
        "Role": rbac.read_namespaced_role,
        "RoleBinding": rbac.read_namespaced_role_binding,
    }
    return {kind for kind, read in reads.items() if read_or_none(read, "admission", namespace)}


def job_complete(s: KubeScenario, name: str) -> bool:
    job = read_or_none(s.kube.batch.read_namespaced_job, name, "admitted")
    return job is not None and any(
        c.type == "Complete" and c.status == "True" for c in job.status.conditions or []
    )


def test_helm_rbac_hooks_of_pre_and_post_install_outlive_the_running_post_install_job(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    extra = {"admission.yaml": ADMISSION, "create.yaml": helm_job("create", "pre-install")}
    extra["patch.yaml"] = helm_job("patch", "post-install,post-upgrade")
    s.app("admitted", extra=extra)
    every = {"ServiceAccount", "Role", "RoleBinding"}
    assert s.reconcile("admitted", minutes=0).code == 0
    assert admission_rbac(s) == every
    s.kube.job_succeeded("admitted", "create")

    with cpu_load():
        for minute in range(1, 6):  # the post-install Job runs: nothing completes it
            result = s.reconcile("admitted", minutes=minute)
            assert result.code == 0, result.err
            assert read_or_none(s.kube.batch.read_namespaced_job, "patch", "admitted") is not None
            assert not job_complete(s, "patch")
            assert admission_rbac(s) == every, f"tick {minute}"
            s.kube.run_pods("admitted", "job-name=patch")  # running, not done
    verbs = [verb for _, verb in writes(s, "admitted", "admission", "serviceaccounts")]
    assert verbs == ["apply", "patch"], verbs  # applied once, let go once Current

    completing = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    s.kube.job_succeeded("admitted", "patch")  # returns once the server says Complete
    assert s.reconcile("admitted", minutes=6).code == 0
    eventually(lambda: admission_rbac(s) == set(), "the admission hooks deleted")
    assert s.reconcile("admitted", minutes=7).code == 0
    assert admission_rbac(s) == set()  # not created again for this render
    deletes = [
        when
        for when, verb in writes(s, "admitted", "admission", "serviceaccounts")
        if verb == "delete"
    ]
    assert len(deletes) == 1 and deletes[0] > completing, (completing, deletes)


# --- a hook phase applied in the tick that judges it (issue 47 item 5) -------------------


class Deletes:
    """A deployer seam that records deletes; every object is live for ``ref``."""

    def __init__(self, ref: str) -> None:
        self.ref, self.deleted = ref, []  # type: list[str]

    def get_many(self, keys: Any) -> dict[Any, Any]:
        note = {"annotations": {ANNOTATION_RENDER: self.ref}}
        return {key: {"metadata": note} for key in keys}

    def delete(self, key: Any) -> bool:
        self.deleted.append(key.name)
        return True


def test_a_hook_phase_applied_by_this_tick_is_not_over_in_it_whatever_the_health_read_before() -> (
    None
):
    # PostSync applied again (its status.waves entry lost with a sync that failed
    # half-way): the patch Job is re-created by this tick, and the Current the observer
    # read before the sync is the previous Job's.
    files = {"app/admission.yaml": ADMISSION, "app/create.yaml": helm_job("create", "pre-install")}
    files["app/patch.yaml"] = helm_job("patch", "post-install,post-upgrade")
    render = run(files)
    now = datetime.now(UTC)
    seen = Health(state=HealthState.CURRENT, assessed_render_ref=render.ref, observed_at=now)
    entries = tuple(
        InventoryEntry(key=o.key, wave=o.phase, applied_render_ref=render.ref, health=seen)
        for o in render.objects
    )
    inventory = ReleaseInventory(release="hooked", entries=entries)
    waves = [WaveStatus(wave=p, render_ref=render.ref, started_at=now) for p in render.phases()]
    deployer = Deletes(render.ref)
    kept, _ = delete_finished_hooks(
        cast(Any, deployer), inventory, render, lambda _i: None, waves, (POST_SYNC,)
    )
    assert deployer.deleted == ["create"]  # its PreSync was over before this tick
    delete_finished_hooks(cast(Any, deployer), kept, render, lambda _i: None, waves)
    # The next tick: over, its Job Current as read then (the stub keeps every hook live,
    # so the create Job's delete is sent again, as for an unconfirmed one).
    assert deployer.deleted.count("admission") == 3 and "patch" in deployer.deleted
