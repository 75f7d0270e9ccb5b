"""Hook Jobs that delete themselves once finished (issue 48 item 1), on a real
kube-apiserver whose TTL-after-finished controller runs (``TTLAfterFinished``: a feature
gate in 1.20, on by default from 1.21, GA in 1.23): a Job with
``ttlSecondsAfterFinished: 0`` is deleted by the server a moment after it completes, as
today's charts' hook Jobs are (ingress-nginx 4.15's admission Jobs).

convoy-batch creates every hook holding its finalizer ``convoy.dev/hook-finalizer``: the
server's delete leaves the finished Job readable until its end is on record, then
convoy-batch removes the finalizer and the Job goes. The tests play the kubelet; the
audit log tells what convoy-batch sent."""

from typing import Any

from convoy_batch.models import HOOK_FINALIZER
from tests.k8s.k8s_scenario import KubeScenario
from tests.k8s.test_k8s_delete_release import deleted
from tests.k8s.test_k8s_hook_phases import (
    ADMISSION,
    WAVED,
    admission_rbac,
    audit,
    helm_job,
)
from tests.k8s.test_k8s_hook_phases import job as argo_job
from tests.k8s.testenv import eventually, read_or_none
from tests.support.scenario import FAILURE_POLICY


def ttl_job(name: str, image: str = "1.0") -> str:
    """A PreSync Job that deletes itself once finished."""
    return argo_job(name, "PreSync", image=image, ttl=True)


def running(s: KubeScenario, namespace: str) -> None:
    """The Release ``namespace`` with the PreSync Job ``migrate``, applied, its pod
    running (the Job holds convoy-batch's finalizer)."""
    s.app(namespace, extra={"migrate.yaml": ttl_job("migrate")}, spec_extra=WAVED + FAILURE_POLICY)
    assert s.reconcile(namespace, minutes=0).code == 0
    eventually(lambda: s.kube.run_pods(namespace, "job-name=migrate"), "the Job's pod running")


def job(s: KubeScenario, namespace: str, name: str) -> Any | None:
    return read_or_none(s.kube.batch.read_namespaced_job, name, namespace)


def deleted_by_its_ttl(s: KubeScenario, namespace: str, name: str) -> Any | None:
    """The Job once the TTL controller deleted it: held by convoy-batch's finalizer (and
    the foreground delete's) it is still there; without, gone (None)."""

    def deleted() -> Any:
        found = job(s, namespace, name)
        return "gone" if found is None else found.metadata.deletion_timestamp and found

    found = eventually(deleted, f"Job {namespace}/{name} deleted by its TTL")
    return None if found == "gone" else found


def complete(s: KubeScenario, namespace: str, name: str) -> Any | None:
    """Play the kubelet: the Job's pod succeeds; the Job once its TTL deleted it."""
    eventually(lambda: s.kube.run_pods(namespace, f"job-name={name}", "Succeeded"), "the pod")
    return deleted_by_its_ttl(s, namespace, name)


EVERY = {"ServiceAccount", "Role", "RoleBinding"}
"""The admission RBAC hooks (:data:`ADMISSION`)."""


def admitted(s: KubeScenario, namespace: str, **jobs: str) -> None:
    """The Release ``namespace`` of the admission RBAC hooks of pre- and post-install and
    ``jobs`` (a file's stem -> a hook Job), its PreSync phase applied."""
    extra = {"admission.yaml": ADMISSION, **{f"{stem}.yaml": job for stem, job in jobs.items()}}
    s.app(namespace, extra=extra)
    assert s.reconcile(namespace, minutes=0).code == 0


def sent(s: KubeScenario, namespace: str, name: str) -> list[str]:
    """What was sent to the Job (:func:`audit`'s verbs)."""
    return [verb for _, verb, resource in audit(s, name, namespace) if resource == "jobs"]


def test_a_presync_job_that_deletes_itself_once_complete_ends_its_phase(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    s.app("ttl", extra={"migrate.yaml": ttl_job("migrate")}, spec_extra=WAVED + FAILURE_POLICY)
    assert s.reconcile("ttl", minutes=0).code == 0
    assert s.configmap("ttl", "ttl-config") is None  # PreSync first

    held = complete(s, "ttl", "migrate")
    result = s.reconcile("ttl", minutes=1)
    assert result.code == 0, result.err
    assert s.configmap("ttl", "ttl-config") is not None, s.status("ttl")  # PreSync is over
    assert held is not None and HOOK_FINALIZER in held.metadata.finalizers
    eventually(lambda: job(s, "ttl", "migrate") is None, "the Job let go")  # its end on record

    s.ready("ttl")
    for minute in (2, 3):
        result = s.reconcile("ttl", minutes=minute)
        assert result.code == 0, result.err
    status = s.status("ttl")
    assert status["rollout"]["state"] == "Succeeded", status
    assert job(s, "ttl", "migrate") is None  # not created again for the render
    assert sent(s, "ttl", "migrate") == ["apply", "patch"]  # created, then let go


def test_ingress_nginx_admission_hooks_whose_jobs_delete_themselves_reach_succeeded(
    kscenario: KubeScenario,
) -> None:
    # ingress-nginx 4.15's shape: RBAC hooks of pre- and post-install, a pre-install and
    # a post-install Job, each with ttlSecondsAfterFinished: 0.
    s = kscenario
    create = helm_job("create", "pre-install,pre-upgrade", ttl=True)
    patch = helm_job("patch", "post-install,post-upgrade", ttl=True)
    admitted(s, "ttlhelm", create=create, patch=patch)
    held = complete(s, "ttlhelm", "create")
    result = s.reconcile("ttlhelm", minutes=1)  # PreSync over: the app and PostSync
    assert result.code == 0, result.err
    assert s.configmap("ttlhelm", "ttlhelm-config") is not None, s.status("ttlhelm")
    assert held is not None and HOOK_FINALIZER in held.metadata.finalizers
    assert job(s, "ttlhelm", "patch") is not None
    assert admission_rbac(s, "ttlhelm") == EVERY  # the patch Job runs with them

    s.ready("ttlhelm")
    held = complete(s, "ttlhelm", "patch")
    assert held is not None and HOOK_FINALIZER in held.metadata.finalizers
    assert s.reconcile("ttlhelm", minutes=2).code == 0  # PostSync over
    eventually(lambda: admission_rbac(s, "ttlhelm") == set(), "the RBAC hooks deleted")
    assert s.reconcile("ttlhelm", minutes=3).code == 0
    status = s.status("ttlhelm")
    assert status["rollout"]["state"] == "Succeeded", status
    for name in ("create", "patch"):
        eventually(lambda n=name: job(s, "ttlhelm", n) is None, f"Job {name} let go")
        assert sent(s, "ttlhelm", name) == ["apply", "patch"]  # never created again


def test_a_hook_job_deleted_while_it_runs_fails_its_phase(kscenario: KubeScenario) -> None:
    s = kscenario
    running(s, "ttlkill")
    s.kube.batch.delete_namespaced_job("migrate", "ttlkill", propagation_policy="Foreground")
    result = s.reconcile("ttlkill", minutes=1)
    status = s.status("ttlkill")
    assert status["rollout"]["state"] == "Failed", status
    assert "deleted before it finished" in status["rollout"]["message"], status
    assert s.configmap("ttlkill", "ttlkill-config") is None  # never past PreSync
    eventually(lambda: job(s, "ttlkill", "migrate") is None, "the Job let go")
    assert result.code == 0, result.err


def test_a_presync_job_that_fails_and_deletes_itself_fails_its_phase(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    extra = {"migrate.yaml": ttl_job("migrate")}
    s.app("ttlfail", extra=extra, spec_extra=WAVED + FAILURE_POLICY)
    assert s.reconcile("ttlfail", minutes=0).code == 0
    eventually(
        lambda: s.kube.run_pods("ttlfail", "job-name=migrate", phase="Failed"), "the Job's pod"
    )
    held = deleted_by_its_ttl(s, "ttlfail", "migrate")
    result = s.reconcile("ttlfail", minutes=1)
    status = s.status("ttlfail")
    assert status["rollout"]["state"] == "Failed", status
    assert "migrate" in status["rollout"]["message"], status
    assert "Job: failed" in result.out + result.err + str(status), status
    assert s.configmap("ttlfail", "ttlfail-config") is None  # never past PreSync
    assert held is not None and HOOK_FINALIZER in held.metadata.finalizers
    eventually(lambda: job(s, "ttlfail", "migrate") is None, "the Job let go")


def test_a_running_hook_of_a_replaced_render_is_created_again_at_once(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    running(s, "ttlnew")
    s.commit({"apps/ttlnew/migrate.yaml": ttl_job("migrate", image="2.0")}, "migrate 2.0")
    result = s.reconcile("ttlnew", minutes=1)
    assert result.code == 0, result.err
    again = job(s, "ttlnew", "migrate")
    assert again is not None and not again.metadata.deletion_timestamp
    assert again.spec.template.spec.containers[0].image == "example/migrate:2.0"
    assert again.metadata.finalizers == [HOOK_FINALIZER]
    assert sent(s, "ttlnew", "migrate").count("delete") == 1


def test_a_release_retired_while_its_hook_job_runs_is_deleted_whole(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    running(s, "ttlgone")
    s.commit({"releases/ttlgone.yaml": None}, "retire ttlgone")
    deleted(s, "ttlgone", 1)
    eventually(lambda: job(s, "ttlgone", "migrate") is None, "the hook Job deleted")
    assert sent(s, "ttlgone", "migrate") == ["apply", "delete", "patch"]  # deleted, then let go


def test_a_self_deleting_job_of_pre_and_post_install_runs_again_with_its_rbac_hooks(
    kscenario: KubeScenario,
) -> None:
    # Issue 47 item 5 on a real server: the tick that applies PostSync creates the Job
    # again (it deleted itself after its PreSync run), and the health read before that
    # tick says Current for the render (its PreSync run's end): the RBAC hooks of pre- and
    # post-install must outlive the second run, however long it takes.
    s = kscenario
    admitted(s, "twice", certs=helm_job("certs", "pre-install,post-install", ttl=True))
    first = complete(s, "twice", "certs")
    assert first is not None

    result = s.reconcile("twice", minutes=1)  # PreSync over: the app, and PostSync
    assert result.code == 0, result.err
    assert s.configmap("twice", "twice-config") is not None, s.status("twice")
    assert admission_rbac(s, "twice") == EVERY, "deleted in the tick that runs the Job again"
    again = job(s, "twice", "certs")
    assert again is not None and again.metadata.uid != first.metadata.uid, "not run again"
    s.ready("twice")
    for minute in (1, 2, 3):  # the second run goes on: nothing completes it
        if minute > 1:
            assert s.reconcile("twice", minutes=minute).code == 0
        assert admission_rbac(s, "twice") == EVERY, f"minute {minute}"
        eventually(lambda: s.kube.run_pods("twice", "job-name=certs"), "the second run")

    complete(s, "twice", "certs")
    assert s.reconcile("twice", minutes=4).code == 0
    eventually(lambda: admission_rbac(s, "twice") == set(), "the RBAC hooks deleted")
    assert s.reconcile("twice", minutes=5).code == 0
    assert s.status("twice")["rollout"]["state"] == "Succeeded"
    assert sent(s, "twice", "certs").count("apply") == 2  # once per phase
