"""Health rules (SPEC 11): one case per rule and per kind, and the order the rules run in."""

from dataclasses import dataclass
from typing import Any

import pytest

from convoy_batch.health import KIND_RULES, WORKLOADS, compute
from convoy_batch.models import HealthState
from tests.fakes import (
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
    "Widget": "example.com/v1",
}


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
        obj("Deployment", THREE, {**deployment_status_ready(3), "conditions": []}), CURRENT
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
    "statefulset-partition-done-is-current": Case(
        obj(
            "StatefulSet",
            {"replicas": 3, "updateStrategy": {"rollingUpdate": {"partition": 2}}},
            {**statefulset_status_ready(3), "updatedReplicas": 1, "updateRevision": "web-2"},
        ),
        CURRENT,
    ),
    # --- DaemonSet ---
    "daemonset-ready-is-current": Case(obj("DaemonSet", {}, daemonset_status_ready(2)), CURRENT),
    "daemonset-without-desired-number-is-in-progress": Case(
        obj("DaemonSet", {}, {"numberReady": 2}), IN_PROGRESS, "desiredNumberScheduled"
    ),
    "daemonset-short-of-updated-is-in-progress": Case(
        obj("DaemonSet", {}, {**daemonset_status_ready(2), "updatedNumberScheduled": 1}),
        IN_PROGRESS,
        "1 of 2",
    ),
    "daemonset-short-of-ready-is-in-progress": Case(
        obj("DaemonSet", {}, {**daemonset_status_ready(2), "numberReady": 0}), IN_PROGRESS
    ),
    # --- ReplicaSet ---
    "replicaset-available-is-current": Case(
        obj("ReplicaSet", THREE, {"replicas": 3, "readyReplicas": 3, "availableReplicas": 3}),
        CURRENT,
    ),
    "replicaset-short-of-available-is-in-progress": Case(
        obj("ReplicaSet", THREE, {"replicas": 3, "readyReplicas": 3, "availableReplicas": 2}),
        IN_PROGRESS,
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
    # --- Pod ---
    "pod-succeeded-is-current": Case(obj("Pod", {}, {"phase": "Succeeded"}), CURRENT),
    "pod-running-and-ready-is-current": Case(obj("Pod", {}, pod_status_ready()), CURRENT),
    "pod-running-not-ready-is-in-progress": Case(
        obj("Pod", {}, {"phase": "Running", "conditions": [condition("Ready", "False")]}),
        IN_PROGRESS,
    ),
    "pod-pending-is-in-progress": Case(obj("Pod", {}, {"phase": "Pending"}), IN_PROGRESS),
    "pod-without-status-is-in-progress": Case(obj("Pod", {}), IN_PROGRESS, "not set"),
    "pod-failed-is-failed": Case(obj("Pod", {}, {"phase": "Failed"}), FAILED),
    "pod-crash-looping-is-failed": Case(
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
    state, message = compute(case.obj)
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
        assert compute(obj(kind, {}))[0] == IN_PROGRESS, kind


def test_compute_does_not_change_the_object() -> None:
    live = obj("Deployment", THREE, deployment_status_ready(3), 1)
    before = repr(live)
    compute(live)
    assert repr(live) == before
