"""Health of one live object, computed as kstatus's ``Compute`` does (SPEC 11). Pure, no I/O.

``compute(obj, now)`` reads neither the cluster nor the clock: the object, status
included, and the tick's ``now`` (for the Pod scheduling window) are all it sees. The
rules are those of kstatus (kubernetes-sigs/cli-utils, ``pkg/kstatus/status``), run in
its order; the first that decides wins:

1. no object                                   -> NotFound
2. generic properties, for every kind (kstatus ``checkGenericProperties``):
   ``metadata.deletionTimestamp`` set -> Terminating; ``status.observedGeneration``
   other than ``metadata.generation`` -> InProgress (skipped when either is absent);
   then the first of these conditions, in the object's order: ``Reconciling`` True ->
   InProgress, ``Stalled`` True -> Failed
3. a workload kind (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job) without
   ``status``                                  -> InProgress (SPEC 11)
4. the per-kind rule of ``KIND_RULES``, keyed ``group/Kind`` (``/Pod`` for the core group)
5. a kind without a rule: a ``Ready`` or ``Available`` condition False -> InProgress,
   True -> Current
6. otherwise                                   -> Current

The few places where a rule departs from kstatus on purpose are listed, each with its
reason, in the README's Decisions; ``tests/rollout/test_kstatus_conformance.py`` replays
kstatus's own table cases and marks those rows.
"""

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from convoy_batch.kinds import group_of
from convoy_batch.models import HealthState
from convoy_batch.timefmt import parse_time

Result = tuple[HealthState, str]
Rule = Callable[[Mapping[str, Any], datetime], Result]

WORKLOADS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"})
SCHEDULE_WINDOW = timedelta(seconds=15)
"""How long a Pod may stay unschedulable before it is Failed (kstatus ``ScheduleWindow``)."""
NO_DEADLINE = 2**31 - 1
"""``progressDeadlineSeconds`` that the Deployment controller reads as no deadline."""


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


def _maybe_int(obj: Mapping[str, Any], path: str) -> int | None:
    """An integer field; anything that is not an integer counts as absent."""
    value = _field(obj, path)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _int(obj: Mapping[str, Any], path: str, default: int) -> int:
    found = _maybe_int(obj, path)
    return default if found is None else found


def _condition_list(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``status.conditions`` in the object's order (entries that are not mappings dropped)."""
    found = _field(obj, "status.conditions")
    return [c for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []


def _conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """``status.conditions`` by type (the last one wins, as a controller would overwrite)."""
    return {str(c.get("type")): c for c in _condition_list(obj)}


def _is(condition: Mapping[str, Any] | None, status: str) -> bool:
    return condition is not None and str(condition.get("status")) == status


def _why(condition: Mapping[str, Any]) -> str:
    """The condition's message (else its reason) on one line."""
    text = " ".join(str(condition.get("message") or condition.get("reason") or "").split())
    return text or "no reason given"


def _shortfall(
    kind: str, wanted: int, counts: list[tuple[str, int]], noun: str = "replicas"
) -> Result | None:
    """InProgress naming the first count below ``wanted``; None when all are reached."""
    for what, have in counts:
        if have < wanted:
            return HealthState.IN_PROGRESS, f"{kind}: {have} of {wanted} {noun} {what}"
    return None


def _extra(kind: str, wanted: int, replicas: int) -> Result | None:
    if replicas > wanted:
        return HealthState.IN_PROGRESS, f"{kind}: {replicas - wanted} extra replicas terminating"
    return None


# --- per-kind rules (kstatus core.go) -----------------------------------------------


def _deployment(obj: Mapping[str, Any], now: datetime) -> Result:
    conditions = _conditions(obj)
    progressing = conditions.get("Progressing")
    if progressing is not None and progressing.get("reason") == "ProgressDeadlineExceeded":
        return HealthState.FAILED, "Deployment: progress deadline exceeded"
    wanted = _int(obj, "spec.replicas", 1)
    replicas = _int(obj, "status.replicas", 0)
    updated = _int(obj, "status.updatedReplicas", 0)
    available = _int(obj, "status.availableReplicas", 0)
    ready = _int(obj, "status.readyReplicas", 0)
    found = (
        _shortfall("Deployment", wanted, [("created", replicas), ("updated", updated)])
        or _extra("Deployment", wanted, replicas)
        or _shortfall("Deployment", updated, [("available", available)])
        or _shortfall("Deployment", wanted, [("ready", ready)])
    )
    if found:
        return found
    # Conditions count when present (see the README's Decisions); a deadline of
    # NO_DEADLINE, or none, means the controller never reports NewReplicaSetAvailable.
    deadline = _int(obj, "spec.progressDeadlineSeconds", NO_DEADLINE) != NO_DEADLINE
    if deadline and progressing is not None and not _new_replica_set_available(progressing):
        why = _why(progressing)
        return HealthState.IN_PROGRESS, f"Deployment: new ReplicaSet not available yet ({why})"
    if "Available" in conditions and not _is(conditions["Available"], "True"):
        return HealthState.IN_PROGRESS, "Deployment: Available condition is not True"
    return HealthState.CURRENT, f"Deployment: {wanted} of {wanted} replicas available"


def _new_replica_set_available(progressing: Mapping[str, Any]) -> bool:
    return _is(progressing, "True") and progressing.get("reason") == "NewReplicaSetAvailable"


def _statefulset(obj: Mapping[str, Any], now: datetime) -> Result:
    if _field(obj, "spec.updateStrategy.type") == "OnDelete":
        return HealthState.CURRENT, "StatefulSet: OnDelete update strategy, managed by the user"
    wanted = _int(obj, "spec.replicas", 1)
    replicas = _int(obj, "status.replicas", 0)
    ready = _int(obj, "status.readyReplicas", 0)
    found = _shortfall("StatefulSet", wanted, [("created", replicas), ("ready", ready)])
    if found := found or _extra("StatefulSet", wanted, replicas):
        return found
    updated = _int(obj, "status.updatedReplicas", 0)
    partition = _maybe_int(obj, "spec.updateStrategy.rollingUpdate.partition")
    if partition is not None:
        target = wanted - partition
        return _shortfall("StatefulSet", target, [("updated", updated)]) or (
            HealthState.CURRENT,
            f"StatefulSet: partitioned rollout of {target} replicas done",
        )
    current = _int(obj, "status.currentReplicas", 0)
    if found := _shortfall("StatefulSet", wanted, [("current", current)]):
        return found
    if _field(obj, "status.currentRevision") != _field(obj, "status.updateRevision"):
        return HealthState.IN_PROGRESS, "StatefulSet: currentRevision differs from updateRevision"
    return HealthState.CURRENT, f"StatefulSet: {wanted} of {wanted} replicas ready"


def _daemonset(obj: Mapping[str, Any], now: datetime) -> Result:
    # The DaemonSet controller always writes these; kstatus requires them for this kind.
    for path in ("metadata.generation", "status.observedGeneration"):
        if _maybe_int(obj, path) is None:
            return HealthState.IN_PROGRESS, f"DaemonSet: {path} not set"
    wanted = _int(obj, "status.desiredNumberScheduled", -1)
    if wanted < 0:
        return HealthState.IN_PROGRESS, "DaemonSet: status.desiredNumberScheduled not set"
    counts = [
        ("scheduled", _int(obj, "status.currentNumberScheduled", 0)),
        ("updated", _int(obj, "status.updatedNumberScheduled", 0)),
        ("available", _int(obj, "status.numberAvailable", 0)),
        ("ready", _int(obj, "status.numberReady", 0)),
    ]
    return _shortfall("DaemonSet", wanted, counts, "pods") or (
        HealthState.CURRENT,
        f"DaemonSet: {wanted} of {wanted} pods available",
    )


def _replicaset(obj: Mapping[str, Any], now: datetime) -> Result:
    if _is(_conditions(obj).get("ReplicaFailure"), "True"):
        return HealthState.IN_PROGRESS, "ReplicaSet: ReplicaFailure condition is True"
    wanted = _int(obj, "spec.replicas", 1)
    counts = [
        ("labelled", _int(obj, "status.fullyLabeledReplicas", 0)),
        ("available", _int(obj, "status.availableReplicas", 0)),
        ("ready", _int(obj, "status.readyReplicas", 0)),
    ]
    replicas = _int(obj, "status.replicas", 0)
    return (
        _shortfall("ReplicaSet", wanted, counts)
        or _extra("ReplicaSet", wanted, replicas)
        or (HealthState.CURRENT, f"ReplicaSet: {wanted} of {wanted} replicas available")
    )


def _job(obj: Mapping[str, Any], now: datetime) -> Result:
    conditions = _conditions(obj)
    if _is(conditions.get("Failed"), "True"):
        reason = str(conditions["Failed"].get("reason") or "Failed condition is True")
        return HealthState.FAILED, f"Job: failed ({reason})"
    if _is(conditions.get("Complete"), "True"):
        return HealthState.CURRENT, "Job: complete"
    if _is(conditions.get("Suspended"), "True"):
        return HealthState.CURRENT, "Job: suspended"
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


def _pod(obj: Mapping[str, Any], now: datetime) -> Result:
    phase = _field(obj, "status.phase")
    if phase == "Succeeded":
        return HealthState.CURRENT, "Pod: succeeded"
    if phase == "Failed":
        return HealthState.FAILED, "Pod: failed"
    if phase == "Running":
        if _is(_conditions(obj).get("Ready"), "True"):
            return HealthState.CURRENT, "Pod: running and ready"
        if crashing := _crash_looping(obj):
            names = ", ".join(crashing)
            return HealthState.FAILED, f"Pod: containers in CrashLoopBackOff: {names}"
        return HealthState.IN_PROGRESS, "Pod: running, not ready"
    if phase == "Pending":
        return _pending_pod(obj, now)
    if not phase:
        return HealthState.IN_PROGRESS, "Pod: phase not set"
    return HealthState.IN_PROGRESS, f"Pod: phase {phase}"


def _pending_pod(obj: Mapping[str, Any], now: datetime) -> Result:
    scheduled = _conditions(obj).get("PodScheduled") or {}
    if not _is(scheduled, "False") or scheduled.get("reason") != "Unschedulable":
        return HealthState.IN_PROGRESS, "Pod: pending"
    created = _created(obj)
    if created is not None and now - created < SCHEDULE_WINDOW:
        return HealthState.IN_PROGRESS, "Pod: not scheduled yet"
    return HealthState.FAILED, f"Pod: unschedulable ({_why(scheduled)})"


def _created(obj: Mapping[str, Any]) -> datetime | None:
    """``metadata.creationTimestamp``; None when absent or not a time (kstatus then counts
    from the zero time, so the window has passed)."""
    value = _field(obj, "metadata.creationTimestamp")
    try:
        return parse_time(value) if isinstance(value, str | datetime) else None
    except ValueError:
        return None


def _pvc(obj: Mapping[str, Any], now: datetime) -> Result:
    phase = _field(obj, "status.phase")
    if phase == "Bound":
        return HealthState.CURRENT, "PersistentVolumeClaim: bound"
    return HealthState.IN_PROGRESS, f"PersistentVolumeClaim: phase {phase or 'not set'}, not bound"


def _service(obj: Mapping[str, Any], now: datetime) -> Result:
    if _field(obj, "spec.type") != "LoadBalancer":
        return HealthState.CURRENT, "Service: ready"
    if _field(obj, "status.loadBalancer.ingress"):
        return HealthState.CURRENT, "Service: load balancer ready"
    return HealthState.IN_PROGRESS, "Service: waiting for a load balancer ingress"


def _pdb(obj: Mapping[str, Any], now: datetime) -> Result:
    # The generation check (step 2) already waited for the disruption controller.
    return HealthState.CURRENT, "PodDisruptionBudget: allowed disruptions computed"


def _crd(obj: Mapping[str, Any], now: datetime) -> Result:
    for condition in _condition_list(obj):
        type_ = condition.get("type")
        if type_ == "NamesAccepted" and _is(condition, "False"):
            why = _why(condition)
            return HealthState.FAILED, f"CustomResourceDefinition: names not accepted ({why})"
        if type_ != "Established":
            continue
        if _is(condition, "True"):
            return HealthState.CURRENT, "CustomResourceDefinition: established"
        if _is(condition, "False") and condition.get("reason") != "Installing":
            why = _why(condition)
            return HealthState.FAILED, f"CustomResourceDefinition: not established ({why})"
    return HealthState.IN_PROGRESS, "CustomResourceDefinition: not established yet"


def _always_current(obj: Mapping[str, Any], now: datetime) -> Result:
    return HealthState.CURRENT, f"{obj.get('kind')}: always ready"


KIND_RULES: dict[str, Rule] = {
    "apps/Deployment": _deployment,
    "extensions/Deployment": _deployment,
    "apps/StatefulSet": _statefulset,
    "apps/DaemonSet": _daemonset,
    "extensions/DaemonSet": _daemonset,
    "apps/ReplicaSet": _replicaset,
    "extensions/ReplicaSet": _replicaset,
    "batch/Job": _job,
    "batch/CronJob": _always_current,
    "/Pod": _pod,
    "/PersistentVolumeClaim": _pvc,
    "/Service": _service,
    "/ConfigMap": _always_current,
    "/Secret": _always_current,
    "policy/PodDisruptionBudget": _pdb,
    "apiextensions.k8s.io/CustomResourceDefinition": _crd,
}


# --- generic rules ------------------------------------------------------------------


def kind_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``("apps/Deployment", "Deployment")`` from apiVersion and kind."""
    group = group_of(str(obj.get("apiVersion") or ""))
    kind = str(obj.get("kind") or "")
    return f"{group}/{kind}", kind


def _generic(obj: Mapping[str, Any], kind: str) -> Result | None:
    """kstatus's ``checkGenericProperties``: deletion, generation, Reconciling, Stalled."""
    if _field(obj, "metadata.deletionTimestamp"):
        return HealthState.TERMINATING, f"{kind}: being deleted"
    generation = _maybe_int(obj, "metadata.generation")
    observed = _maybe_int(obj, "status.observedGeneration")
    if generation is not None and observed is not None and observed != generation:
        return (
            HealthState.IN_PROGRESS,
            f"{kind}: generation {generation} not yet observed ({observed})",
        )
    for condition in _condition_list(obj):
        if condition.get("type") == "Reconciling" and _is(condition, "True"):
            return HealthState.IN_PROGRESS, f"{kind}: reconciling ({_why(condition)})"
        if condition.get("type") == "Stalled" and _is(condition, "True"):
            return HealthState.FAILED, f"{kind}: stalled ({_why(condition)})"
    return None


def _by_readiness(obj: Mapping[str, Any], kind: str) -> Result | None:
    """``Ready`` (kstatus) and ``Available`` (SPEC 11) conditions: any False wins."""
    conditions = _conditions(obj)
    readiness = [(t, conditions.get(t)) for t in ("Ready", "Available")]
    for type_, condition in readiness:
        if _is(condition, "False"):
            return HealthState.IN_PROGRESS, f"{kind}: {type_} condition is False"
    for type_, condition in readiness:
        if _is(condition, "True"):
            return HealthState.CURRENT, f"{kind}: {type_} condition is True"
    return None


CLOCK_KINDS = frozenset({"/Pod"})
"""The kinds (``KIND_RULES`` keys) whose health :func:`compute` may tell from ``now`` as
well as from the object: a Pod's scheduling window. Of every other kind, the same object
has the same health at any time."""


def compute(obj: Mapping[str, Any] | None, now: datetime) -> Result:
    """The health state of one live object at ``now`` (the tick's time) and why, in one
    short line (see module doc)."""
    if obj is None:
        return HealthState.NOT_FOUND, "not found in the cluster"
    key, kind = kind_key(obj)
    if found := _generic(obj, kind):
        return found
    rule = KIND_RULES.get(key)
    if rule is None:
        return _by_readiness(obj, kind) or (HealthState.CURRENT, f"{kind}: current")
    if kind in WORKLOADS and not _mapping(obj.get("status")):
        return HealthState.IN_PROGRESS, f"{kind}: no status reported yet"
    return rule(obj, now)
