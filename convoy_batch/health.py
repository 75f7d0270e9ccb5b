"""Health of one live object, computed the way kstatus does (SPEC 11). Pure, no I/O.

``compute(obj)`` never reads the cluster: the object, status included, is all it
sees. Rules run in this order and the first that decides wins:

1. no object                                   -> NotFound
2. ``metadata.deletionTimestamp`` set          -> Terminating
3. ``status.observedGeneration`` below ``metadata.generation`` -> InProgress
   (skipped when either is absent: not every kind reports it)
4. a workload kind (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job) without
   ``status``                                  -> InProgress
5. the per-kind rule of ``KIND_RULES``, keyed ``group/Kind`` (``/Pod`` for the core group)
6. generic conditions: ``Stalled`` True -> Failed; ``Reconciling`` True -> InProgress;
   ``Ready`` or ``Available`` False -> InProgress, True -> Current
7. otherwise                                   -> Current

Where we differ from kstatus, on purpose: a Failed Pod is Failed (a failed hook is an
unhealthy entry, SPEC 7); a Job is InProgress until Complete (a PreSync hook must
finish before the first wave); a LoadBalancer Service waits for
``status.loadBalancer.ingress``; Deployment conditions that are absent do not block
(the directory cluster's users write status by hand), only present ones count.
"""

from collections.abc import Callable, Mapping
from typing import Any

from convoy_batch.kinds import group_of
from convoy_batch.models import HealthState

Result = tuple[HealthState, str]
Rule = Callable[[Mapping[str, Any]], Result]

WORKLOADS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"})


# --- field access -------------------------------------------------------------------


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _field(obj: Mapping[str, Any], path: str) -> Any:
    """``obj["a"]["b"]`` for ``"a.b"``; None when any step is missing or not a mapping."""
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _int(obj: Mapping[str, Any], path: str, default: int) -> int:
    """An integer field; anything that is not an integer counts as absent."""
    value = _field(obj, path)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return default


def _conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """``status.conditions`` by type (the last one wins, as a controller would overwrite)."""
    found = _field(obj, "status.conditions")
    if not isinstance(found, list):
        return {}
    return {str(c.get("type")): c for c in found if isinstance(c, Mapping)}


def _is(condition: Mapping[str, Any] | None, status: str) -> bool:
    return condition is not None and str(condition.get("status")) == status


def _shortfall(kind: str, wanted: int, counts: list[tuple[str, int]]) -> Result | None:
    """InProgress naming the first count below ``wanted``; None when all are reached."""
    for what, have in counts:
        if have < wanted:
            return HealthState.IN_PROGRESS, f"{kind}: {have} of {wanted} replicas {what}"
    return None


# --- per-kind rules -----------------------------------------------------------------


def _deployment(obj: Mapping[str, Any]) -> Result:
    conditions = _conditions(obj)
    progressing = conditions.get("Progressing")
    if progressing is not None and progressing.get("reason") == "ProgressDeadlineExceeded":
        return HealthState.FAILED, "Deployment: progress deadline exceeded"
    wanted = _int(obj, "spec.replicas", 1)
    replicas = _int(obj, "status.replicas", 0)
    counts = [
        ("created", replicas),
        ("updated", _int(obj, "status.updatedReplicas", 0)),
        ("available", _int(obj, "status.availableReplicas", 0)),
        ("ready", _int(obj, "status.readyReplicas", 0)),
    ]
    if found := _shortfall("Deployment", wanted, counts):
        return found
    if replicas > wanted:
        return HealthState.IN_PROGRESS, f"Deployment: {replicas - wanted} old replicas terminating"
    if _is(conditions.get("Available"), "False"):
        return HealthState.IN_PROGRESS, "Deployment: Available condition is False"
    return HealthState.CURRENT, f"Deployment: {wanted} of {wanted} replicas available"


def _statefulset(obj: Mapping[str, Any]) -> Result:
    strategy = _field(obj, "spec.updateStrategy.type") or "RollingUpdate"
    if strategy == "OnDelete":
        return HealthState.CURRENT, "StatefulSet: OnDelete update strategy, managed by the user"
    wanted = _int(obj, "spec.replicas", 1)
    replicas = _int(obj, "status.replicas", 0)
    counts = [("created", replicas), ("ready", _int(obj, "status.readyReplicas", 0))]
    if found := _shortfall("StatefulSet", wanted, counts):
        return found
    if replicas > wanted:
        return HealthState.IN_PROGRESS, f"StatefulSet: {replicas - wanted} replicas terminating"
    partition = _int(obj, "spec.updateStrategy.rollingUpdate.partition", 0)
    if partition > 0:
        counts = [("updated", _int(obj, "status.updatedReplicas", 0))]
        return _shortfall("StatefulSet", wanted - partition, counts) or (
            HealthState.CURRENT,
            f"StatefulSet: partitioned rollout of {wanted - partition} replicas done",
        )
    if found := _shortfall(
        "StatefulSet", wanted, [("current", _int(obj, "status.currentReplicas", 0))]
    ):
        return found
    if _field(obj, "status.currentRevision") != _field(obj, "status.updateRevision"):
        return HealthState.IN_PROGRESS, "StatefulSet: currentRevision differs from updateRevision"
    return HealthState.CURRENT, f"StatefulSet: {wanted} of {wanted} replicas ready"


def _daemonset(obj: Mapping[str, Any]) -> Result:
    wanted = _int(obj, "status.desiredNumberScheduled", -1)
    if wanted < 0:
        return HealthState.IN_PROGRESS, "DaemonSet: status.desiredNumberScheduled not set"
    counts = [
        ("updated", _int(obj, "status.updatedNumberScheduled", 0)),
        ("available", _int(obj, "status.numberAvailable", 0)),
        ("ready", _int(obj, "status.numberReady", 0)),
    ]
    return _shortfall("DaemonSet", wanted, counts) or (
        HealthState.CURRENT,
        f"DaemonSet: {wanted} of {wanted} pods available",
    )


def _replicaset(obj: Mapping[str, Any]) -> Result:
    if _is(_conditions(obj).get("ReplicaFailure"), "True"):
        return HealthState.IN_PROGRESS, "ReplicaSet: ReplicaFailure condition is True"
    wanted = _int(obj, "spec.replicas", 1)
    counts = [
        ("available", _int(obj, "status.availableReplicas", 0)),
        ("ready", _int(obj, "status.readyReplicas", 0)),
    ]
    if found := _shortfall("ReplicaSet", wanted, counts):
        return found
    replicas = _int(obj, "status.replicas", 0)
    if replicas > wanted:
        return HealthState.IN_PROGRESS, f"ReplicaSet: {replicas - wanted} replicas terminating"
    return HealthState.CURRENT, f"ReplicaSet: {wanted} of {wanted} replicas available"


def _job(obj: Mapping[str, Any]) -> Result:
    conditions = _conditions(obj)
    if _is(conditions.get("Failed"), "True"):
        reason = str(conditions["Failed"].get("reason") or "Failed condition is True")
        return HealthState.FAILED, f"Job: failed ({reason})"
    if _is(conditions.get("Complete"), "True"):
        return HealthState.CURRENT, "Job: complete"
    active = _int(obj, "status.active", 0)
    return HealthState.IN_PROGRESS, f"Job: not complete ({active} active)"


def _crash_looping(obj: Mapping[str, Any]) -> list[str]:
    statuses = _field(obj, "status.containerStatuses")
    if not isinstance(statuses, list):
        return []
    return [
        str(s.get("name"))
        for s in statuses
        if isinstance(s, Mapping) and _field(s, "state.waiting.reason") == "CrashLoopBackOff"
    ]


def _pod(obj: Mapping[str, Any]) -> Result:
    phase = _field(obj, "status.phase")
    if phase == "Succeeded":
        return HealthState.CURRENT, "Pod: succeeded"
    if phase == "Failed":
        return HealthState.FAILED, "Pod: failed"
    if phase == "Running" and _is(_conditions(obj).get("Ready"), "True"):
        return HealthState.CURRENT, "Pod: running and ready"
    if crashing := _crash_looping(obj):
        return HealthState.FAILED, f"Pod: containers in CrashLoopBackOff: {', '.join(crashing)}"
    return HealthState.IN_PROGRESS, f"Pod: phase {phase or 'not set'}, not ready"


def _pvc(obj: Mapping[str, Any]) -> Result:
    phase = _field(obj, "status.phase")
    if phase == "Bound":
        return HealthState.CURRENT, "PersistentVolumeClaim: bound"
    return HealthState.IN_PROGRESS, f"PersistentVolumeClaim: phase {phase or 'not set'}, not bound"


def _service(obj: Mapping[str, Any]) -> Result:
    if _field(obj, "spec.type") != "LoadBalancer":
        return HealthState.CURRENT, "Service: ready"
    if _field(obj, "status.loadBalancer.ingress"):
        return HealthState.CURRENT, "Service: load balancer ready"
    return HealthState.IN_PROGRESS, "Service: waiting for a load balancer ingress"


KIND_RULES: dict[str, Rule] = {
    "apps/Deployment": _deployment,
    "extensions/Deployment": _deployment,
    "apps/StatefulSet": _statefulset,
    "apps/DaemonSet": _daemonset,
    "extensions/DaemonSet": _daemonset,
    "apps/ReplicaSet": _replicaset,
    "extensions/ReplicaSet": _replicaset,
    "batch/Job": _job,
    "/Pod": _pod,
    "/PersistentVolumeClaim": _pvc,
    "/Service": _service,
}


# --- generic rules ------------------------------------------------------------------


def _kind_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``("apps/Deployment", "Deployment")`` from apiVersion and kind."""
    group = group_of(str(obj.get("apiVersion") or ""))
    kind = str(obj.get("kind") or "")
    return f"{group}/{kind}", kind


def _generation_lag(obj: Mapping[str, Any], kind: str) -> Result | None:
    generation = _int(obj, "metadata.generation", -1)
    observed = _int(obj, "status.observedGeneration", -1)
    if generation < 0 or observed < 0 or observed >= generation:
        return None
    return HealthState.IN_PROGRESS, f"{kind}: generation {generation} not yet observed ({observed})"


def _by_conditions(obj: Mapping[str, Any], kind: str) -> Result | None:
    conditions = _conditions(obj)
    if _is(conditions.get("Stalled"), "True"):
        stalled = conditions["Stalled"]
        why = " ".join(str(stalled.get("message") or stalled.get("reason") or "").split())
        return HealthState.FAILED, f"{kind}: stalled ({why or 'no reason given'})"
    if _is(conditions.get("Reconciling"), "True"):
        return HealthState.IN_PROGRESS, f"{kind}: reconciling"
    readiness = [(t, conditions.get(t)) for t in ("Ready", "Available")]
    for type_, condition in readiness:
        if _is(condition, "False"):
            return HealthState.IN_PROGRESS, f"{kind}: {type_} condition is False"
    for type_, condition in readiness:
        if _is(condition, "True"):
            return HealthState.CURRENT, f"{kind}: {type_} condition is True"
    return None


def compute(obj: Mapping[str, Any] | None) -> Result:
    """The health state of one live object and why, in one short line (see module doc)."""
    if obj is None:
        return HealthState.NOT_FOUND, "not found in the cluster"
    key, kind = _kind_key(obj)
    if _field(obj, "metadata.deletionTimestamp"):
        return HealthState.TERMINATING, f"{kind}: being deleted"
    if lag := _generation_lag(obj, kind):
        return lag
    if kind in WORKLOADS and key in KIND_RULES and not _mapping(obj.get("status")):
        return HealthState.IN_PROGRESS, f"{kind}: no status reported yet"
    rule = KIND_RULES.get(key)
    if rule is not None:
        return rule(obj)
    return _by_conditions(obj, kind) or (HealthState.CURRENT, f"{kind}: current")
