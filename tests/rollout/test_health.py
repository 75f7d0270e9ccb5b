"""Health rules (SPEC 11): one case per rule and per kind, and the order the rules run in.
kstatus's own table cases are replayed in ``test_kstatus_conformance.py``."""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from convoy_batch.health.builtin import KIND_RULES, WORKLOADS, compute
from convoy_batch.models import HealthState
from convoy_batch.timefmt import format_time
from tests.support.fakes import (
    condition,
    daemonset_status_ready,
    deployment_status_deadline_exceeded,
    deployment_status_progressing,
    deployment_status_ready,
    job_status_complete,
    job_status_failed,
    load_balancer_status,
    pod_status_ready,
    pvc_status_bound,
    statefulset_status_ready,
)
from tests.support.scenario import T0

CURRENT = HealthState.CURRENT
IN_PROGRESS = HealthState.IN_PROGRESS
FAILED = HealthState.FAILED
TERMINATING = HealthState.TERMINATING
NOT_FOUND = HealthState.NOT_FOUND

API = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "ReplicaSet": "apps/v1",
    "Job": "batch/v1",
    "Pod": "v1",
    "PersistentVolumeClaim": "v1",
    "Service": "v1",
    "ConfigMap": "v1",
    "Secret": "v1",
    "CronJob": "batch/v1",
    "PodDisruptionBudget": "policy/v1",
    "CustomResourceDefinition": "apiextensions.k8s.io/v1",
    "Widget": "example.com/v1",
}
NOW = T0


def obj(
    kind: str,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    generation: int | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    """A live object of ``kind``; ``status=None`` leaves the status out."""
    meta: dict[str, Any] = {"name": "web", "namespace": "web", **metadata}
    if generation is not None:
        meta["generation"] = generation
    found: dict[str, Any] = {"apiVersion": API[kind], "kind": kind, "metadata": meta}
    if spec is not None:
        found["spec"] = spec
    if status is not None:
        found["status"] = status
    return found


@dataclass(frozen=True)
class Case:
    obj: dict[str, Any] | None
    state: HealthState
    says: str = ""
    """A fragment the one-line message must contain."""


THREE = {"replicas": 3}
RS_READY = {"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 3, "availableReplicas": 3}
DEADLINE = {"replicas": 3, "progressDeadlineSeconds": 600}


def unschedulable(created: str | None) -> dict[str, Any]:
    """A pending Pod the scheduler could not place, created at ``created``."""
    meta = {} if created is None else {"creationTimestamp": created}
    status = {
        "phase": "Pending",
        "conditions": [
            condition("PodScheduled", "False", "Unschedulable", "0/3 nodes are available")
        ],
    }
    return obj("Pod", {}, status, **meta)


def crd(*conditions: dict[str, str]) -> dict[str, Any]:
    status = {"conditions": list(conditions)} if conditions else None
    return obj("CustomResourceDefinition", {"group": "example.com"}, status, 1)


CASES: dict[str, Case] = {
    # --- generic rules, in their order ---
    "no-object-is-not-found": Case(None, NOT_FOUND, "not found"),
    "deletion-timestamp-is-terminating": Case(
        obj("ConfigMap", deletionTimestamp="2026-11-29T12:00:00Z"), TERMINATING, "deleted"
    ),
    "deletion-comes-before-the-generation-check": Case(
        obj("Deployment", THREE, {"observedGeneration": 1}, 2, deletionTimestamp="x"), TERMINATING
    ),
    "unobserved-generation-is-in-progress-even-when-ready": Case(
        obj("Deployment", THREE, deployment_status_ready(3, generation=1), 2),
        IN_PROGRESS,
        "generation 2",
    ),
    "unobserved-generation-comes-before-the-kind-rule": Case(
        obj("Job", {}, {"observedGeneration": 1, **job_status_failed()}, 2), IN_PROGRESS
    ),
    "observed-generation-equal-lets-the-kind-rule-decide": Case(
        obj("Deployment", THREE, deployment_status_ready(3, generation=2), 2), CURRENT
    ),
    "generation-without-observed-generation-is-not-checked": Case(
        obj("Deployment", THREE, deployment_status_ready(3), 5), CURRENT
    ),
    "observed-generation-above-generation-is-in-progress": Case(
        obj("Deployment", THREE, deployment_status_ready(3, generation=3), 2),
        IN_PROGRESS,
        "generation 2",
    ),
    "stalled-comes-before-the-kind-rule": Case(
        obj("Pod", {}, {**pod_status_ready(), "conditions": [condition("Stalled", "True", "X")]}),
        FAILED,
        "stalled (X)",
    ),
    "reconciling-comes-before-the-kind-rule": Case(
        obj(
            "Deployment",
            THREE,
            {
                **deployment_status_ready(3),
                "conditions": [condition("Reconciling", "True", message="scaling")],
            },
        ),
        IN_PROGRESS,
        "reconciling (scaling)",
    ),
    "the-first-of-reconciling-and-stalled-wins": Case(
        obj(
            "Widget",
            {},
            {"conditions": [condition("Reconciling", "True"), condition("Stalled", "True")]},
        ),
        IN_PROGRESS,
        "reconciling",
    ),
    "generic-conditions-come-after-the-generation-check": Case(
        obj(
            "Widget", {}, {"observedGeneration": 1, "conditions": [condition("Stalled", "True")]}, 2
        ),
        IN_PROGRESS,
        "generation 2",
    ),
    # --- workloads without status ---
    "deployment-without-status-is-in-progress": Case(
        obj("Deployment", THREE), IN_PROGRESS, "no status"
    ),
    "statefulset-without-status-is-in-progress": Case(obj("StatefulSet", THREE), IN_PROGRESS),
    "daemonset-without-status-is-in-progress": Case(obj("DaemonSet", {}), IN_PROGRESS),
    "replicaset-without-status-is-in-progress": Case(obj("ReplicaSet", THREE), IN_PROGRESS),
    "job-without-status-is-in-progress": Case(obj("Job", {}), IN_PROGRESS),
    "empty-status-counts-as-no-status": Case(obj("Deployment", THREE, {}), IN_PROGRESS),
    # --- Deployment ---
    "deployment-ready-is-current": Case(
        obj("Deployment", THREE, deployment_status_ready(3)), CURRENT, "3 of 3"
    ),
    "deployment-default-one-replica": Case(
        obj("Deployment", {}, deployment_status_ready(1)), CURRENT
    ),
    "deployment-short-of-available-is-in-progress": Case(
        obj("Deployment", THREE, deployment_status_progressing(1, 3)),
        IN_PROGRESS,
        "Deployment: 1 of 3 replicas available",
    ),
    "deployment-short-of-updated-is-in-progress": Case(
        obj("Deployment", THREE, {**deployment_status_ready(3), "updatedReplicas": 2}),
        IN_PROGRESS,
        "2 of 3 replicas updated",
    ),
    "deployment-short-of-ready-is-in-progress": Case(
        obj("Deployment", THREE, {**deployment_status_ready(3), "readyReplicas": 2}),
        IN_PROGRESS,
        "2 of 3 replicas ready",
    ),
    "deployment-with-old-replicas-terminating-is-in-progress": Case(
        obj("Deployment", THREE, {**deployment_status_ready(3), "replicas": 4}),
        IN_PROGRESS,
        "terminating",
    ),
    "deployment-progress-deadline-exceeded-is-failed": Case(
        obj("Deployment", THREE, deployment_status_deadline_exceeded(3)),
        FAILED,
        "deadline",
    ),
    "deployment-available-false-is-in-progress": Case(
        obj(
            "Deployment",
            THREE,
            {**deployment_status_ready(3), "conditions": [condition("Available", "False")]},
        ),
        IN_PROGRESS,
        "Available",
    ),
    "deployment-counts-without-conditions-are-enough": Case(
        obj("Deployment", DEADLINE, {**deployment_status_ready(3), "conditions": []}), CURRENT
    ),
    "deployment-short-of-available-among-updated-is-in-progress": Case(
        obj("Deployment", THREE, {**deployment_status_ready(3), "availableReplicas": 2}),
        IN_PROGRESS,
        "2 of 3 replicas available",
    ),
    "deployment-progressing-not-done-with-a-deadline-is-in-progress": Case(
        obj(
            "Deployment",
            DEADLINE,
            {
                **deployment_status_ready(3),
                "conditions": [
                    condition("Progressing", "True", "ReplicaSetUpdated"),
                    condition("Available", "True"),
                ],
            },
        ),
        IN_PROGRESS,
        "new ReplicaSet not available yet (ReplicaSetUpdated)",
    ),
    "deployment-progressing-false-without-a-deadline-is-current": Case(
        obj(
            "Deployment",
            THREE,
            {
                **deployment_status_ready(3),
                "conditions": [condition("Progressing", "False", "Whatever")],
            },
        ),
        CURRENT,
    ),
    "deployment-deadline-of-max-int32-is-no-deadline": Case(
        obj(
            "Deployment",
            {"replicas": 3, "progressDeadlineSeconds": 2**31 - 1},
            {
                **deployment_status_ready(3),
                "conditions": [condition("Progressing", "True", "ReplicaSetUpdated")],
            },
        ),
        CURRENT,
    ),
    "deployment-available-unknown-is-in-progress": Case(
        obj(
            "Deployment",
            THREE,
            {**deployment_status_ready(3), "conditions": [condition("Available", "Unknown")]},
        ),
        IN_PROGRESS,
        "Available",
    ),
    # --- StatefulSet ---
    "statefulset-ready-is-current": Case(
        obj("StatefulSet", THREE, statefulset_status_ready(3)), CURRENT
    ),
    "statefulset-short-of-ready-is-in-progress": Case(
        obj("StatefulSet", THREE, {**statefulset_status_ready(3), "readyReplicas": 1}),
        IN_PROGRESS,
        "1 of 3 replicas ready",
    ),
    "statefulset-short-of-current-is-in-progress": Case(
        obj("StatefulSet", THREE, {**statefulset_status_ready(3), "currentReplicas": 2}),
        IN_PROGRESS,
        "2 of 3 replicas current",
    ),
    "statefulset-revision-mismatch-is-in-progress": Case(
        obj("StatefulSet", THREE, {**statefulset_status_ready(3), "updateRevision": "web-2"}),
        IN_PROGRESS,
        "Revision",
    ),
    "statefulset-on-delete-is-current": Case(
        obj(
            "StatefulSet",
            {"replicas": 3, "updateStrategy": {"type": "OnDelete"}},
            {"replicas": 0},
        ),
        CURRENT,
    ),
    "statefulset-partition-zero-counts-updated-replicas": Case(
        obj(
            "StatefulSet",
            {"replicas": 3, "updateStrategy": {"rollingUpdate": {"partition": 0}}},
            {**statefulset_status_ready(3), "updatedReplicas": 2},
        ),
        IN_PROGRESS,
        "2 of 3 replicas updated",
    ),
    "statefulset-with-extra-replicas-is-in-progress": Case(
        obj("StatefulSet", THREE, {**statefulset_status_ready(3), "replicas": 5}),
        IN_PROGRESS,
        "2 extra",
    ),
    "statefulset-partition-done-is-current": Case(
        obj(
            "StatefulSet",
            {"replicas": 3, "updateStrategy": {"rollingUpdate": {"partition": 2}}},
            {**statefulset_status_ready(3), "updatedReplicas": 1, "updateRevision": "web-2"},
        ),
        CURRENT,
    ),
    # --- DaemonSet ---
    "daemonset-ready-is-current": Case(
        obj("DaemonSet", {}, daemonset_status_ready(2), 1), CURRENT, "2 of 2 pods"
    ),
    "daemonset-without-observed-generation-is-in-progress": Case(
        obj("DaemonSet", {}, {"desiredNumberScheduled": 0}, 1),
        IN_PROGRESS,
        "status.observedGeneration not set",
    ),
    "daemonset-without-generation-is-in-progress": Case(
        obj("DaemonSet", {}, daemonset_status_ready(2)), IN_PROGRESS, "metadata.generation"
    ),
    "daemonset-without-desired-number-is-in-progress": Case(
        obj("DaemonSet", {}, {"observedGeneration": 1, "numberReady": 2}, 1),
        IN_PROGRESS,
        "desiredNumberScheduled",
    ),
    "daemonset-short-of-scheduled-is-in-progress": Case(
        obj("DaemonSet", {}, {**daemonset_status_ready(2), "currentNumberScheduled": 1}, 1),
        IN_PROGRESS,
        "1 of 2 pods scheduled",
    ),
    "daemonset-short-of-updated-is-in-progress": Case(
        obj("DaemonSet", {}, {**daemonset_status_ready(2), "updatedNumberScheduled": 1}, 1),
        IN_PROGRESS,
        "1 of 2 pods updated",
    ),
    "daemonset-short-of-ready-is-in-progress": Case(
        obj("DaemonSet", {}, {**daemonset_status_ready(2), "numberReady": 0}, 1), IN_PROGRESS
    ),
    # --- ReplicaSet ---
    "replicaset-available-is-current": Case(obj("ReplicaSet", THREE, RS_READY), CURRENT),
    "replicaset-short-of-labelled-is-in-progress": Case(
        obj("ReplicaSet", THREE, {**RS_READY, "fullyLabeledReplicas": 1}),
        IN_PROGRESS,
        "1 of 3 replicas labelled",
    ),
    "replicaset-short-of-available-is-in-progress": Case(
        obj("ReplicaSet", THREE, {**RS_READY, "availableReplicas": 2}),
        IN_PROGRESS,
        "2 of 3 replicas available",
    ),
    "replicaset-with-extra-replicas-is-in-progress": Case(
        obj("ReplicaSet", THREE, {**RS_READY, "replicas": 4}), IN_PROGRESS, "1 extra"
    ),
    "replicaset-replica-failure-is-in-progress": Case(
        obj("ReplicaSet", THREE, {"conditions": [condition("ReplicaFailure", "True")]}),
        IN_PROGRESS,
        "ReplicaFailure",
    ),
    # --- Job ---
    "job-complete-is-current": Case(obj("Job", {}, job_status_complete()), CURRENT, "complete"),
    "job-failed-is-failed": Case(obj("Job", {}, job_status_failed()), FAILED, "Backoff"),
    "job-running-is-in-progress": Case(obj("Job", {}, {"active": 1}), IN_PROGRESS, "1 active"),
    "job-with-suspended-condition-is-current": Case(
        obj("Job", {"suspend": True}, {"conditions": [condition("Suspended", "True")]}),
        CURRENT,
        "suspended",
    ),
    "job-suspended-false-is-in-progress": Case(
        obj("Job", {}, {"conditions": [condition("Suspended", "False")]}), IN_PROGRESS
    ),
    "job-suspend-in-spec-alone-waits-for-the-controller": Case(
        obj("Job", {"suspend": True}, {"active": 0}), IN_PROGRESS
    ),
    "job-failed-wins-over-suspended": Case(
        obj(
            "Job",
            {},
            {"conditions": [condition("Suspended", "True"), *job_status_failed()["conditions"]]},
        ),
        FAILED,
    ),
    # --- Pod ---
    "pod-succeeded-is-current": Case(obj("Pod", {}, {"phase": "Succeeded"}), CURRENT),
    "pod-running-and-ready-is-current": Case(obj("Pod", {}, pod_status_ready()), CURRENT),
    "pod-running-not-ready-is-in-progress": Case(
        obj("Pod", {}, {"phase": "Running", "conditions": [condition("Ready", "False")]}),
        IN_PROGRESS,
    ),
    "pod-pending-is-in-progress": Case(obj("Pod", {}, {"phase": "Pending"}), IN_PROGRESS),
    "pod-unschedulable-within-15s-of-its-creation-is-in-progress": Case(
        unschedulable(format_time(NOW - timedelta(seconds=14))), IN_PROGRESS, "not scheduled yet"
    ),
    "pod-unschedulable-15s-after-its-creation-is-failed": Case(
        unschedulable(format_time(NOW - timedelta(seconds=15))), FAILED, "0/3 nodes"
    ),
    "pod-unschedulable-without-creation-time-is-failed": Case(unschedulable(None), FAILED),
    "pod-unschedulable-with-a-malformed-creation-time-is-failed": Case(
        unschedulable("yesterday"), FAILED
    ),
    "pod-pending-for-another-reason-is-in-progress": Case(
        obj(
            "Pod",
            {},
            {"phase": "Pending", "conditions": [condition("PodScheduled", "False", "Other")]},
        ),
        IN_PROGRESS,
    ),
    "pod-in-an-unknown-phase-is-in-progress": Case(
        obj("Pod", {}, {"phase": "Unknown"}), IN_PROGRESS, "phase Unknown"
    ),
    "pod-crash-looping-only-counts-when-running": Case(
        obj(
            "Pod",
            {},
            {
                "phase": "Pending",
                "containerStatuses": [
                    {"name": "app", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                ],
            },
        ),
        IN_PROGRESS,
    ),
    "pod-without-status-is-in-progress": Case(obj("Pod", {}), IN_PROGRESS, "not set"),
    "pod-failed-is-failed": Case(obj("Pod", {}, {"phase": "Failed"}), FAILED),
    "pod-running-and-crash-looping-is-failed": Case(
        obj(
            "Pod",
            {},
            {
                "phase": "Running",
                "containerStatuses": [
                    {"name": "app", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                ],
            },
        ),
        FAILED,
        "app",
    ),
    # --- PersistentVolumeClaim ---
    "pvc-bound-is-current": Case(obj("PersistentVolumeClaim", {}, pvc_status_bound()), CURRENT),
    "pvc-pending-is-in-progress": Case(
        obj("PersistentVolumeClaim", {}, {"phase": "Pending"}), IN_PROGRESS, "Pending"
    ),
    # --- Service ---
    "cluster-ip-service-is-current": Case(obj("Service", {"type": "ClusterIP"}), CURRENT),
    "load-balancer-without-ingress-is-in-progress": Case(
        obj("Service", {"type": "LoadBalancer"}, {"loadBalancer": {}}), IN_PROGRESS, "ingress"
    ),
    "load-balancer-with-ingress-is-current": Case(
        obj("Service", {"type": "LoadBalancer"}, load_balancer_status()), CURRENT
    ),
    # --- CustomResourceDefinition ---
    "crd-established-is-current": Case(
        crd(condition("NamesAccepted", "True"), condition("Established", "True")),
        CURRENT,
        "established",
    ),
    "crd-without-status-is-in-progress": Case(crd(), IN_PROGRESS, "not established yet"),
    "crd-installing-is-in-progress": Case(
        crd(condition("Established", "False", "Installing")), IN_PROGRESS
    ),
    "crd-names-not-accepted-is-failed": Case(
        crd(condition("NamesAccepted", "False", "KindConflict", "kind Widget is taken")),
        FAILED,
        "names not accepted (kind Widget is taken)",
    ),
    "crd-not-established-for-another-reason-is-failed": Case(
        crd(condition("Established", "False", "NotAccepted")), FAILED, "NotAccepted"
    ),
    # --- kinds that are always ready once observed ---
    "pod-disruption-budget-observed-is-current": Case(
        obj("PodDisruptionBudget", {}, {"observedGeneration": 1}, 1), CURRENT
    ),
    "pod-disruption-budget-not-observed-is-in-progress": Case(
        obj("PodDisruptionBudget", {}, {"observedGeneration": 1}, 2), IN_PROGRESS
    ),
    "secret-is-current": Case(obj("Secret"), CURRENT),
    "cron-job-is-current": Case(obj("CronJob", {}), CURRENT),
    # --- generic conditions, for kinds without a rule ---
    "ready-true-is-current": Case(
        obj("Widget", {}, {"conditions": [condition("Ready", "True")]}), CURRENT, "Ready"
    ),
    "ready-false-is-in-progress": Case(
        obj("Widget", {}, {"conditions": [condition("Ready", "False")]}), IN_PROGRESS, "Ready"
    ),
    "available-false-is-in-progress": Case(
        obj("Widget", {}, {"conditions": [condition("Available", "False")]}), IN_PROGRESS
    ),
    "available-true-is-current": Case(
        obj("Widget", {}, {"conditions": [condition("Available", "True")]}), CURRENT
    ),
    "any-readiness-false-wins-over-another-true": Case(
        obj(
            "Widget",
            {},
            {"conditions": [condition("Ready", "True"), condition("Available", "False")]},
        ),
        IN_PROGRESS,
    ),
    "stalled-true-is-failed": Case(
        obj(
            "Widget",
            {},
            {
                "conditions": [
                    condition("Stalled", "True", message="bad"),
                    condition("Ready", "True"),
                ]
            },
        ),
        FAILED,
        "bad",
    ),
    "reconciling-true-is-in-progress": Case(
        obj("Widget", {}, {"conditions": [condition("Reconciling", "True")]}), IN_PROGRESS
    ),
    "unknown-kind-without-conditions-is-current": Case(obj("Widget", {}), CURRENT),
    "config-map-is-current": Case(obj("ConfigMap"), CURRENT),
    "kind-rule-wins-over-generic-conditions": Case(
        obj("Pod", {}, {"phase": "Pending", "conditions": [condition("Available", "True")]}),
        IN_PROGRESS,
    ),
    "yaml-booleans-as-condition-status-are-read": Case(
        obj("Widget", {}, {"conditions": [{"type": "Ready", "status": True}]}), CURRENT
    ),
    "malformed-status-fields-count-as-absent": Case(
        obj("Deployment", THREE, {"replicas": "three", "conditions": "none"}), IN_PROGRESS
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_health_rule_gives_the_expected_state_and_says_why(case: Case) -> None:
    state, message = compute(case.obj, NOW)
    assert state == case.state
    assert case.says in message
    assert message and "\n" not in message


def test_every_kind_with_a_rule_has_a_case() -> None:
    tested = {
        f"{API[c.obj['kind']].rpartition('/')[0]}/{c.obj['kind']}" for c in CASES.values() if c.obj
    }
    assert {k for k in KIND_RULES if not k.startswith("extensions/")} <= tested


def test_every_workload_kind_without_status_is_in_progress() -> None:
    for kind in WORKLOADS:
        assert compute(obj(kind, {}), NOW)[0] == IN_PROGRESS, kind


def test_compute_does_not_change_the_object() -> None:
    live = obj("Deployment", THREE, deployment_status_ready(3), 1)
    before = repr(live)
    compute(live, NOW)
    assert repr(live) == before
