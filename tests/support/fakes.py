"""Test helpers at our own seams: a Deployer that fails on demand, and status builders
that play the cluster's controllers in a directory cluster. ``set_status`` does file I/O.
"""

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from convoy_batch.deployers.base import Deployer, Manifest
from convoy_batch.deployers.directory import DirectoryDeployer, dump, load
from convoy_batch.errors import (
    ApplyFailed,
    ClusterUnavailable,
    DryRunFailed,
    Forbidden,
    PruneFailed,
)
from convoy_batch.manifests.drift import NO_RULES, Rules
from convoy_batch.models import Identity, ObjectKey, key_of

Trigger = bool | Callable[[ObjectKey], bool]


def _fires(trigger: Trigger, key: ObjectKey) -> bool:
    return trigger(key) if callable(trigger) else bool(trigger)


class FailingDeployer:
    """Wraps a Deployer and fails on demand.

    Each trigger is a bool (every object) or a predicate on the ObjectKey:
    ``unavailable`` raises ClusterUnavailable from every method, ``forbidden``
    Forbidden (the server refuses the credentials) from every method, ``fail_dry_run``
    DryRunFailed, ``fail_apply`` ApplyFailed (objects before the failing one are applied,
    as a server applies one by one), ``fail_delete`` PruneFailed. ``applied`` and
    ``deleted`` list the keys that reached the wrapped deployer; ``dry_runs`` counts calls.
    """

    def __init__(self, inner: Deployer) -> None:
        self.inner = inner
        self.fail_dry_run: Trigger = False
        self.fail_apply: Trigger = False
        self.fail_delete: Trigger = False
        self.unavailable: Trigger = False
        self.forbidden: Trigger = False
        self.applied: list[ObjectKey] = []
        self.deleted: list[ObjectKey] = []
        self.dry_runs = 0

    def _check_available(self, keys: Iterable[ObjectKey]) -> None:
        for key in keys:
            if _fires(self.unavailable, key):
                raise ClusterUnavailable(f"cluster unavailable (test) reading {key}")
            if _fires(self.forbidden, key):
                raise Forbidden(f"forbidden (test): {key}")

    def dry_run(self, objects: Sequence[Manifest], rules: Rules = NO_RULES) -> None:
        keys = [key_of(o) for o in objects]
        self._check_available(keys)
        self.dry_runs += 1
        for key in keys:
            if _fires(self.fail_dry_run, key):
                raise DryRunFailed(f"dry run refused {key}: failing on purpose (test)")
        self.inner.dry_run(objects, rules)

    def apply(self, objects: Sequence[Manifest], rules: Rules = NO_RULES) -> int:
        written = 0
        for obj in objects:
            key = key_of(obj)
            self._check_available([key])
            if _fires(self.fail_apply, key):
                raise ApplyFailed(f"apply {key}: failing on purpose (test)")
            written += self.inner.apply([obj], rules)
            self.applied.append(key)
        return written

    def drift(
        self, objects: Sequence[Manifest], rules: Rules = NO_RULES
    ) -> dict[Identity, tuple[str, ...]]:
        self._check_available([key_of(o) for o in objects])
        return self.inner.drift(objects, rules)

    def delete(self, key: ObjectKey) -> bool:
        self._check_available([key])
        if _fires(self.fail_delete, key):
            raise PruneFailed(f"delete {key}: failing on purpose (test)")
        gone = self.inner.delete(key)
        self.deleted.append(key)
        return gone

    def get(self, key: ObjectKey) -> Manifest | None:
        self._check_available([key])
        return self.inner.get(key)

    def get_many(self, keys: Iterable[ObjectKey]) -> dict[ObjectKey, Manifest | None]:
        keys = list(keys)
        self._check_available(keys)
        return self.inner.get_many(keys)


# --- playing the controllers of a directory cluster ------------------------------------


def set_status(deployer_root: Path, key: ObjectKey, status: dict[str, Any]) -> Manifest:
    """Replace the stored object's ``status`` as a controller would; returns the new object."""
    path = DirectoryDeployer(deployer_root).path_of(key)
    obj = load(path)
    if obj is None:
        raise FileNotFoundError(f"{path}: no stored object for {key}")
    obj["status"] = status
    path.write_text(dump(obj), encoding="utf-8")
    return obj


def observed(status: dict[str, Any], generation: int | None) -> dict[str, Any]:
    """``status`` with ``observedGeneration`` set first, when a generation is given."""
    return status if generation is None else {"observedGeneration": generation, **status}


def condition(type_: str, status: str, reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def deployment_status_ready(replicas: int, generation: int | None = None) -> dict[str, Any]:
    """A Deployment whose every replica is updated, ready and available."""
    return observed(
        {
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "conditions": [
                condition("Available", "True", "MinimumReplicasAvailable"),
                condition("Progressing", "True", "NewReplicaSetAvailable"),
            ],
        },
        generation,
    )


def deployment_status_progressing(
    available: int, replicas: int, generation: int | None = None
) -> dict[str, Any]:
    """A Deployment rolling out: every replica updated, ``available`` of them ready."""
    return observed(
        {
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": available,
            "availableReplicas": available,
            "conditions": [condition("Progressing", "True", "ReplicaSetUpdated")],
        },
        generation,
    )


def deployment_status_deadline_exceeded(replicas: int) -> dict[str, Any]:
    """A Deployment whose controller gave up: ``ProgressDeadlineExceeded``."""
    return {
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": 0,
        "availableReplicas": 0,
        "conditions": [condition("Progressing", "False", "ProgressDeadlineExceeded")],
    }


def statefulset_status_ready(replicas: int, revision: str = "web-1") -> dict[str, Any]:
    return {
        "replicas": replicas,
        "readyReplicas": replicas,
        "currentReplicas": replicas,
        "updatedReplicas": replicas,
        "currentRevision": revision,
        "updateRevision": revision,
    }


def daemonset_status_ready(pods: int, generation: int = 1) -> dict[str, Any]:
    """A DaemonSet whose every pod is scheduled, updated, available and ready."""
    return observed(
        {
            "desiredNumberScheduled": pods,
            "currentNumberScheduled": pods,
            "updatedNumberScheduled": pods,
            "numberAvailable": pods,
            "numberReady": pods,
        },
        generation,
    )


def job_status_complete() -> dict[str, Any]:
    return {"succeeded": 1, "conditions": [condition("Complete", "True")]}


def job_status_failed() -> dict[str, Any]:
    return {"failed": 1, "conditions": [condition("Failed", "True", "BackoffLimitExceeded")]}


def pod_status_ready() -> dict[str, Any]:
    return {"phase": "Running", "conditions": [condition("Ready", "True")]}


def pvc_status_bound() -> dict[str, Any]:
    return {"phase": "Bound"}


def load_balancer_status(ip: str = "192.0.2.10") -> dict[str, Any]:
    return {"loadBalancer": {"ingress": [{"ip": ip}]}}
