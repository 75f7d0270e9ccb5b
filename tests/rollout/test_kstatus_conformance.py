"""kstatus conformance: kstatus's own table cases, re-expressed row by row.

Each row of ``TABLE`` is one case of kstatus's tests (kubernetes-sigs/cli-utils,
``pkg/kstatus/status/status_compute_test.go`` and ``core_test.go``), named
``TestFunction/caseName`` as there: the object of that case and the state kstatus
expects. ``RULES`` adds rows for kstatus rules that have no table case of their own,
named after the function of ``core.go`` or ``generic.go`` they come from.

A row where convoy-batch answers otherwise on purpose has ``ours`` and ``why``: the
words of the Decisions entry that gives the reason (a test checks that a page of
docs/developer/decisions/ says them). Every other row must give kstatus's state.
"""

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from convoy_batch.health.builtin import KIND_RULES, compute
from convoy_batch.models import HealthState
from convoy_batch.timefmt import format_time
from tests.support.scenario import T0

NOW = T0
DECISIONS = Path(__file__).resolve().parents[2] / "docs" / "developer" / "decisions"

FAILED_POD = "A Pod whose phase is Failed is Failed"
JOB_UNTIL_COMPLETE = "A Job is InProgress until it is Complete"
LOAD_BALANCER = "A LoadBalancer Service is InProgress until"
DEPLOYMENT_CONDITIONS = "A Deployment's Progressing and Available conditions count when present"
UNKNOWN_PHASE = "A Pod in a phase kstatus does not know"
NO_HPA_RULE = "A HorizontalPodAutoscaler has no rule of its own"
AVAILABLE = "An `Available` condition counts as `Ready` does"


@dataclass(frozen=True)
class Row:
    case: str
    """The kstatus test case (``TestFunction/caseName``) or rule it comes from."""
    obj: dict[str, Any]
    kstatus: str
    """The state kstatus gives, as kstatus spells it."""
    ours: HealthState | None = None
    """Set only where convoy-batch differs on purpose."""
    why: str = ""
    """The Decisions entry that says why (the start of its words)."""

    @property
    def expected(self) -> HealthState:
        return self.ours if self.ours is not None else HealthState(self.kstatus)


# --- building kstatus's objects ---------------------------------------------------------


def live(
    api: str, kind: str, *, spec: Any = None, status: Any = None, **meta: Any
) -> dict[str, Any]:
    """One object of a kstatus case: ``metadata.generation`` 1 unless given, name ``test``
    in namespace ``qual``; ``spec`` and ``status`` only when given (``status=None`` leaves
    it out; pass ``{}`` or ``"null"`` as kstatus writes it)."""
    metadata = {"name": "test", "namespace": "qual", "generation": 1, **meta}
    found: dict[str, Any] = {"apiVersion": api, "kind": kind, "metadata": metadata}
    if spec is not None:
        found["spec"] = spec
    if status is not None:
        found["status"] = None if status == "null" else status
    return found


def cond(type_: str, status: str, reason: str = "") -> dict[str, str]:
    found = {"type": type_, "status": status}
    return {**found, "reason": reason} if reason else found


def pod(**kwargs: Any) -> dict[str, Any]:
    return live("v1", "Pod", **kwargs)


def sts(**kwargs: Any) -> dict[str, Any]:
    return live("apps/v1", "StatefulSet", **kwargs)


def ds(**kwargs: Any) -> dict[str, Any]:
    return live("apps/v1", "DaemonSet", **kwargs)


def dep(**kwargs: Any) -> dict[str, Any]:
    return live("apps/v1", "Deployment", **kwargs)


def rs(**kwargs: Any) -> dict[str, Any]:
    return live("apps/v1", "ReplicaSet", **kwargs)


def job(**kwargs: Any) -> dict[str, Any]:
    return live("batch/v1", "Job", **kwargs)


def svc(**kwargs: Any) -> dict[str, Any]:
    return live("v1", "Service", **kwargs)


def crd(*conditions: dict[str, str]) -> dict[str, Any]:
    status = {"conditions": list(conditions)} if conditions else None
    return live("apiextensions.k8s.io/v1", "CustomResourceDefinition", status=status)


def my_cr(**kwargs: Any) -> dict[str, Any]:
    return live("something/v1", "MyCR", **kwargs)


def hpa(*conditions: dict[str, str]) -> dict[str, Any]:
    status = {"conditions": list(conditions)} if conditions else None
    return live("autoscaling/v2", "HorizontalPodAutoscaler", status=status)


UNSCHEDULABLE = {"phase": "Pending", "conditions": [cond("PodScheduled", "False", "Unschedulable")]}
CRASH_LOOP = [{"name": "nginx", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]
STS_4 = {"observedGeneration": 1, "currentReplicas": 4, "readyReplicas": 4, "replicas": 4}
DS_4 = {
    "observedGeneration": 1,
    "desiredNumberScheduled": 4,
    "currentNumberScheduled": 4,
    "updatedNumberScheduled": 4,
    "numberAvailable": 4,
    "numberReady": 4,
}
DEP_1 = {
    "observedGeneration": 1,
    "updatedReplicas": 1,
    "readyReplicas": 1,
    "availableReplicas": 1,
    "replicas": 1,
}
NEW_RS = cond("Progressing", "True", "NewReplicaSetAvailable")
RS_2 = {
    "observedGeneration": 1,
    "replicas": 2,
    "readyReplicas": 2,
    "availableReplicas": 2,
    "fullyLabeledReplicas": 2,
}
RS_4 = {
    **RS_2,
    "replicas": 4,
    "readyReplicas": 4,
    "availableReplicas": 4,
    "fullyLabeledReplicas": 4,
}
ACCEPTED = cond("NamesAccepted", "True", "NoConflicts")


def ago(seconds: int) -> str:
    return format_time(NOW - timedelta(seconds=seconds))


# --- kstatus's table cases --------------------------------------------------------------

IN_PROGRESS, CURRENT, FAILED = "InProgress", "Current", "Failed"
UNKNOWN, TERMINATING = "Unknown", "Terminating"
TABLE = [
    # TestPodStatus
    Row("TestPodStatus/podNoStatus", pod(), IN_PROGRESS),
    Row(
        "TestPodStatus/podReady",
        pod(status={"conditions": [cond("Ready", "True")], "phase": "Running"}),
        CURRENT,
    ),
    Row(
        "TestPodStatus/podCompletedSuccessfully",
        pod(status={"phase": "Succeeded", "conditions": [cond("Ready", "False", "PodCompleted")]}),
        CURRENT,
    ),
    Row(
        "TestPodStatus/podCompletedFailed",
        pod(status={"phase": "Failed", "conditions": [cond("Ready", "False", "PodCompleted")]}),
        CURRENT,
        ours=HealthState.FAILED,
        why=FAILED_POD,
    ),
    Row(
        "TestPodStatus/podBeingScheduled",
        pod(creationTimestamp=ago(0), status=UNSCHEDULABLE),
        IN_PROGRESS,
    ),
    Row("TestPodStatus/podUnschedulable", pod(status=UNSCHEDULABLE), FAILED),
    Row(
        "TestPodStatus/podCrashLooping",
        pod(
            status={
                "phase": "Running",
                "conditions": [cond("PodScheduled", "False", "Unschedulable")],
                "containerStatuses": CRASH_LOOP,
            }
        ),
        FAILED,
    ),
    # TestPVCStatus
    Row("TestPVCStatus/pvcNoStatus", live("v1", "PersistentVolumeClaim"), IN_PROGRESS),
    Row(
        "TestPVCStatus/pvcBound",
        live("v1", "PersistentVolumeClaim", status={"phase": "Bound"}),
        CURRENT,
    ),
    # TestStsStatus
    Row("TestStsStatus/stsNoStatus", sts(), IN_PROGRESS),
    Row(
        "TestStsStatus/stsBadStatus",
        sts(status={"observedGeneration": 1, "currentReplicas": 1}),
        IN_PROGRESS,
    ),
    Row("TestStsStatus/stsOK", sts(spec={"replicas": 4}, status=STS_4), CURRENT),
    Row(
        "TestStsStatus/stsLessReady",
        sts(spec={"replicas": 4}, status={**STS_4, "readyReplicas": 2}),
        IN_PROGRESS,
    ),
    Row(
        "TestStsStatus/stsLessCurrent",
        sts(spec={"replicas": 4}, status={**STS_4, "currentReplicas": 2}),
        IN_PROGRESS,
    ),
    Row(
        "TestStsStatus/stsExtraPods",
        sts(spec={"replicas": 4}, status={**STS_4, "replicas": 8}),
        IN_PROGRESS,
    ),
    # TestDaemonsetStatus
    Row("TestDaemonsetStatus/dsNoStatus", ds(), IN_PROGRESS),
    Row(
        "TestDaemonsetStatus/dsBadStatus",
        ds(status={"observedGeneration": 1, "currentReplicas": 1}),
        IN_PROGRESS,
    ),
    Row("TestDaemonsetStatus/dsOK", ds(status=DS_4), CURRENT),
    Row("TestDaemonsetStatus/dsLessReady", ds(status={**DS_4, "numberReady": 2}), IN_PROGRESS),
    Row("TestDaemonsetStatus/dsDifferentGeneration", ds(generation=2, status=DS_4), IN_PROGRESS),
    Row(
        "TestDaemonsetStatus/dsLessAvailable",
        ds(status={**DS_4, "numberAvailable": 2}),
        IN_PROGRESS,
    ),
    # TestDeploymentStatus
    Row("TestDeploymentStatus/depNoStatus", dep(), IN_PROGRESS),
    Row(
        "TestDeploymentStatus/depOK",
        dep(status={**DEP_1, "conditions": [NEW_RS, cond("Available", "True")]}),
        CURRENT,
    ),
    Row(
        "TestDeploymentStatus/depNotProgressing",
        dep(
            spec={"progressDeadlineSeconds": 45},
            status={
                **DEP_1,
                "conditions": [
                    cond("Progressing", "False", "Some reason"),
                    cond("Available", "True"),
                ],
            },
        ),
        IN_PROGRESS,
    ),
    Row(
        "TestDeploymentStatus/depNoProgressDeadlineSeconds",
        dep(status={**DEP_1, "conditions": [cond("Available", "True")]}),
        CURRENT,
    ),
    Row(
        "TestDeploymentStatus/depNotAvailable",
        dep(status={**DEP_1, "conditions": [NEW_RS, cond("Available", "False")]}),
        IN_PROGRESS,
    ),
    # TestReplicasetStatus
    Row("TestReplicasetStatus/rsNoStatus", rs(), IN_PROGRESS),
    Row(
        "TestReplicasetStatus/rsOK1",
        rs(spec={"replicas": 2}, status={**RS_2, "conditions": [cond("ReplicaFailure", "False")]}),
        CURRENT,
    ),
    Row("TestReplicasetStatus/rsOK2", rs(spec={"replicas": 2}, status=RS_2), CURRENT),
    Row(
        "TestReplicasetStatus/rsLessAvailable",
        rs(spec={"replicas": 4}, status={**RS_4, "availableReplicas": 2}),
        IN_PROGRESS,
    ),
    Row(
        "TestReplicasetStatus/rsLessReady",
        rs(spec={"replicas": 4}, status={**RS_4, "readyReplicas": 2}),
        IN_PROGRESS,
    ),
    Row(
        "TestReplicasetStatus/rsReplicaFailure",
        rs(spec={"replicas": 4}, status={**RS_4, "conditions": [cond("ReplicaFailure", "True")]}),
        IN_PROGRESS,
    ),
    # TestPDBStatus
    Row(
        "TestPDBStatus/pdbNotObserved",
        live(
            "policy/v1beta1", "PodDisruptionBudget", generation=2, status={"observedGeneration": 1}
        ),
        IN_PROGRESS,
    ),
    Row(
        "TestPDBStatus/pdbObserved",
        live("policy/v1beta1", "PodDisruptionBudget", status={"observedGeneration": 1}),
        CURRENT,
    ),
    # TestCRDGenericStatus: a custom resource without a rule of its own
    Row("TestCRDGenericStatus/crdNoStatus", my_cr(), CURRENT),
    Row(
        "TestCRDGenericStatus/crdReady",
        my_cr(status={"conditions": [cond("Ready", "True", "AllOk")]}),
        CURRENT,
    ),
    Row(
        "TestCRDGenericStatus/crdNotReady",
        my_cr(
            status={"observedGeneration": 1, "conditions": [cond("Ready", "False", "NotReadyYet")]}
        ),
        IN_PROGRESS,
    ),
    Row(
        "TestCRDGenericStatus/crdNoCondition",
        my_cr(status={"conditions": [cond("SomeCondition", "False")]}),
        CURRENT,
    ),
    Row(
        "TestCRDGenericStatus/crdMismatchStatusGeneration",
        my_cr(generation=2, status={"observedGeneration": 1}),
        IN_PROGRESS,
    ),
    # TestJobStatus
    Row("TestJobStatus/jobNoStatus", job(), IN_PROGRESS),
    Row(
        "TestJobStatus/jobComplete",
        job(status={"succeeded": 1, "active": 0, "conditions": [cond("Complete", "True")]}),
        CURRENT,
    ),
    Row(
        "TestJobStatus/jobFailed",
        job(
            spec={"completions": 4},
            status={
                "succeeded": 3,
                "failed": 1,
                "conditions": [cond("Failed", "True", "JobFailed")],
            },
        ),
        FAILED,
    ),
    Row(
        "TestJobStatus/jobInProgress",
        job(
            spec={"completions": 10, "parallelism": 2},
            status={
                "startTime": "2019-06-04T01:17:13Z",
                "succeeded": 3,
                "failed": 1,
                "active": 2,
                "conditions": [cond("Failed", "False"), cond("Complete", "False")],
            },
        ),
        CURRENT,
        ours=HealthState.IN_PROGRESS,
        why=JOB_UNTIL_COMPLETE,
    ),
    # TestHPAStatus
    Row("TestHPAStatus/hpaNoStatus", hpa(), UNKNOWN, ours=HealthState.CURRENT, why=NO_HPA_RULE),
    Row(
        "TestHPAStatus/hpaCurrentStatus",
        hpa(cond("AbleToScale", "True"), cond("ScalingActive", "True")),
        CURRENT,
    ),
    Row(
        "TestHPAStatus/hpaScalingLimitedStatus",
        hpa(
            cond("AbleToScale", "True"),
            cond("ScalingActive", "True"),
            cond("ScalingLimited", "True"),
        ),
        FAILED,
        ours=HealthState.CURRENT,
        why=NO_HPA_RULE,
    ),
    # TestCronJobStatus
    Row("TestCronJobStatus/cronjobNoStatus", live("batch/v1", "CronJob"), CURRENT),
    Row("TestCronJobStatus/cronjobWithStatus", live("batch/v1", "CronJob", status="null"), CURRENT),
    # TestServiceStatus
    Row("TestServiceStatus/serviceDefault", svc(), CURRENT),
    Row("TestServiceStatus/serviceNodePort", svc(spec={"type": "NodePort"}), CURRENT),
    Row("TestServiceStatus/serviceLBnok", svc(spec={"type": "LoadBalancer"}), IN_PROGRESS),
    Row(
        "TestServiceStatus/serviceLBok",
        svc(spec={"type": "LoadBalancer", "clusterIP": "1.2.3.4"}),
        CURRENT,
        ours=HealthState.IN_PROGRESS,
        why=LOAD_BALANCER,
    ),
    # TestCRDStatus
    Row("TestCRDStatus/crdNoConditions", crd(), IN_PROGRESS),
    Row(
        "TestCRDStatus/crdInstalling",
        crd(ACCEPTED, cond("Established", "False", "Installing")),
        IN_PROGRESS,
    ),
    Row(
        "TestCRDStatus/crdNamesNotAccepted",
        crd(cond("NamesAccepted", "False", "SomeReason")),
        FAILED,
    ),
    Row(
        "TestCRDStatus/crdEstablished",
        crd(ACCEPTED, cond("Established", "True", "InitialNamesAccepted")),
        CURRENT,
    ),
    # core_test.go: TestSuspendedJobConditions
    Row(
        "TestSuspendedJobConditions/suspended",
        job(status={"conditions": [cond("Suspended", "True", "JobSuspended")]}),
        CURRENT,
    ),
    Row(
        "TestSuspendedJobConditions/inprogress",
        job(status={"conditions": [cond("Suspended", "False", "JobSuspended")]}),
        IN_PROGRESS,
    ),
]

# --- kstatus rules without a table case -------------------------------------------------

READY_POD = {"phase": "Running", "conditions": [cond("Ready", "True")]}
RULES = [
    Row("generic.go/deletionTimestamp", dep(deletionTimestamp=ago(5), status=DEP_1), TERMINATING),
    Row(
        "generic.go/observedGenerationAhead",
        dep(generation=2, status={**DEP_1, "observedGeneration": 3}),
        IN_PROGRESS,
    ),
    Row(
        "generic.go/StalledBeforeTheKindRule",
        pod(status={**READY_POD, "conditions": [cond("Ready", "True"), cond("Stalled", "True")]}),
        FAILED,
    ),
    Row(
        "generic.go/ReconcilingBeforeTheKindRule",
        dep(status={**DEP_1, "conditions": [NEW_RS, cond("Reconciling", "True")]}),
        IN_PROGRESS,
    ),
    Row(
        "generic.go/FirstOfReconcilingAndStalled",
        my_cr(status={"conditions": [cond("Stalled", "True"), cond("Reconciling", "True")]}),
        FAILED,
    ),
    Row(
        "core.go/podConditions/within15s",
        pod(creationTimestamp=ago(14), status=UNSCHEDULABLE),
        IN_PROGRESS,
    ),
    Row(
        "core.go/podConditions/after15s",
        pod(creationTimestamp=ago(15), status=UNSCHEDULABLE),
        FAILED,
    ),
    Row(
        "core.go/podConditions/unknownPhase",
        pod(status={"phase": "Unknown"}),
        UNKNOWN,
        ours=HealthState.IN_PROGRESS,
        why=UNKNOWN_PHASE,
    ),
    Row(
        "core.go/deploymentConditions/progressDeadlineExceeded",
        dep(
            status={
                **DEP_1,
                "conditions": [cond("Progressing", "False", "ProgressDeadlineExceeded")],
            }
        ),
        FAILED,
    ),
    Row(
        "core.go/deploymentConditions/noConditionsWithADeadline",
        dep(spec={"progressDeadlineSeconds": 600}, status=DEP_1),
        IN_PROGRESS,
        ours=HealthState.CURRENT,
        why=DEPLOYMENT_CONDITIONS,
    ),
    Row(
        "core.go/stsConditions/partitionRolledOut",
        sts(
            spec={"replicas": 4, "updateStrategy": {"rollingUpdate": {"partition": 2}}},
            status={**STS_4, "updatedReplicas": 2, "currentReplicas": 2},
        ),
        CURRENT,
    ),
    Row(
        "core.go/stsConditions/onDelete",
        sts(spec={"replicas": 4, "updateStrategy": {"type": "OnDelete"}}, status={"replicas": 0}),
        CURRENT,
    ),
    Row(
        "core.go/crdConditions/notEstablished",
        crd(
            cond("NamesAccepted", "False", "KindConflict"),
            cond("Established", "False", "NotAccepted"),
        ),
        FAILED,
    ),
    Row("core.go/alwaysReady/Secret", live("v1", "Secret"), CURRENT),
    Row("core.go/alwaysReady/ConfigMap", live("v1", "ConfigMap"), CURRENT),
    Row(
        "status.go/noRuleAvailableFalse",
        my_cr(status={"conditions": [cond("Available", "False")]}),
        CURRENT,
        ours=HealthState.IN_PROGRESS,
        why=AVAILABLE,
    ),
]

ROWS = {row.case: row for row in TABLE + RULES}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_health_gives_kstatus_state_or_the_documented_difference(row: Row) -> None:
    assert compute(row.obj, NOW)[0] == row.expected


def test_every_difference_is_a_decision_in_the_docs() -> None:
    pages = sorted(DECISIONS.glob("*.md"))
    assert pages
    decisions = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    differences = [row for row in ROWS.values() if row.ours is not None]
    assert differences
    for row in differences:
        assert row.ours != row.kstatus, row.case
        assert row.why and row.why in decisions, row.case


def test_rows_name_distinct_cases() -> None:
    assert len(ROWS) == len(TABLE) + len(RULES)


def test_every_kind_rule_meets_a_kstatus_row() -> None:
    kinds = {
        (o["apiVersion"].rpartition("/")[0], o["kind"]) for o in (r.obj for r in ROWS.values())
    }
    for key in KIND_RULES:
        group, _, kind = key.partition("/")
        if group != "extensions":
            assert (group, kind) in kinds, key
