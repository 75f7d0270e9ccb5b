"""Simulated controllers for directory clusters (opt-in: ``spec.simulate``).

On a directory cluster nothing plays the cluster's controllers, so a rollout would wait
for its deadline unless someone edits ``status`` by hand. A Cluster with ``spec.simulate``
gets this wrapper around its :class:`DirectoryDeployer`:

- on ``apply``, each Deployment whose ``metadata.generation`` the stored status has not
  seen yet gets a starting status: ``observedGeneration`` set, no replica ready, and a
  ``Progressing`` condition whose ``lastUpdateTime`` is when it was applied;
- on ``get``, a Deployment in that starting status is reported finished once its delay
  has passed: ``readyAfter`` later every replica is available; ``failAfter`` later, when
  its pod template is annotated ``convoy.dev/simulate: fail``, it reports
  ``ProgressDeadlineExceeded`` (health Failed);
- on ``apply``, each CustomResourceDefinition whose status has no ``Established``
  condition yet is accepted and established at once, as the API server's own
  apiextensions controller does: ``NamesAccepted`` and ``Established`` True, and
  ``acceptedNames`` the spec's names. A status written by hand (``Established`` False,
  ``NamesAccepted`` False) is left as it is.

Reads never write: what ``get`` reports is a function of the stored file and ``now``, so
``plan`` stays free of side effects. Writes the object files on apply (file I/O).
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from convoy_batch.deployers.base import Manifest
from convoy_batch.deployers.directory import DirectoryDeployer
from convoy_batch.errors import ApplyFailed, StateFailed
from convoy_batch.manifests.drift import NO_RULES, Rules
from convoy_batch.models import Identity, ObjectKey, SimulatedController, key_of
from convoy_batch.timefmt import format_time, parse_time

ANNOTATION_SIMULATE = "convoy.dev/simulate"
STARTED = "SimulatedRollout"
"""The ``Progressing`` reason that marks a status this controller is still playing."""


def _simulated(key: ObjectKey) -> bool:
    return key.group == "apps" and key.kind == "Deployment"


def _is_crd(key: ObjectKey) -> bool:
    return key.group == "apiextensions.k8s.io" and key.kind == "CustomResourceDefinition"


def _generation(obj: Mapping[str, Any]) -> int:
    value = (obj.get("metadata") or {}).get("generation")
    return value if isinstance(value, int) else 1


def _fails(obj: Mapping[str, Any]) -> bool:
    template = ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
    return (template.get("annotations") or {}).get(ANNOTATION_SIMULATE) == "fail"


def _progressing(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Progressing"), None)


def started_status(obj: Mapping[str, Any], now: datetime) -> dict[str, Any] | None:
    """The status written when ``obj`` is applied; None when its generation was seen."""
    status = obj.get("status") or {}
    generation = _generation(obj)
    if status.get("observedGeneration") == generation:
        return None
    return {
        "observedGeneration": generation,
        "replicas": 0,
        "updatedReplicas": 0,
        "readyReplicas": 0,
        "availableReplicas": 0,
        "conditions": [
            {
                "type": "Progressing",
                "status": "True",
                "reason": STARTED,
                "message": "simulated by convoy-batch (Cluster spec.simulate)",
                "lastUpdateTime": format_time(now),
            }
        ],
    }


def finished_status(
    obj: Mapping[str, Any], sim: SimulatedController, now: datetime
) -> dict[str, Any] | None:
    """The status ``obj`` reports at ``now``; None while it is still rolling out, or when
    this controller is not playing it (no starting status, or one for another generation)."""
    status = obj.get("status") or {}
    condition = _progressing(obj)
    if condition is None or condition.get("reason") != STARTED:
        return None
    if status.get("observedGeneration") != _generation(obj):
        return None
    started = parse_time(str(condition.get("lastUpdateTime")))
    fails = _fails(obj)
    if now - started < (sim.fail_after if fails else sim.ready_after):
        return None
    if fails:
        failed = {
            **condition,
            "status": "False",
            "reason": "ProgressDeadlineExceeded",
            "message": "simulated failure (convoy.dev/simulate: fail)",
        }
        return {**status, "conditions": [failed]}
    replicas = (obj.get("spec") or {}).get("replicas", 1)
    return {
        "observedGeneration": status["observedGeneration"],
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
            {**condition, "reason": "NewReplicaSetAvailable"},
        ],
    }


def established_status(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The status of a CRD the API server has accepted and serves; None when its status
    already has an ``Established`` condition (its own, or one written by hand)."""
    status = obj.get("status") or {}
    conditions = status.get("conditions") or []
    if any(isinstance(c, Mapping) and c.get("type") == "Established" for c in conditions):
        return None
    names = (obj.get("spec") or {}).get("names") or {}
    return {
        **status,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts"},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"},
        ],
        "acceptedNames": names,
    }


class SimulatedDeployer:
    """A Deployer: the directory cluster plus simulated Deployment and CRD controllers."""

    def __init__(self, inner: DirectoryDeployer, sim: SimulatedController, now: datetime):
        self.inner = inner
        self.sim = sim
        self.now = now

    def dry_run(self, objects: Sequence[Manifest], rules: Rules = NO_RULES) -> None:
        self.inner.dry_run(objects, rules)

    def apply(self, objects: Sequence[Manifest], rules: Rules = NO_RULES) -> int:
        written = self.inner.apply(objects, rules)
        for key in (key_of(obj) for obj in objects):
            if _simulated(key):
                self._write_status(key, lambda stored: started_status(stored, self.now))
            elif _is_crd(key):
                self._write_status(key, established_status)
        return written

    def _write_status(
        self, key: ObjectKey, new_status: Callable[[Manifest], dict[str, Any] | None]
    ) -> None:
        stored = self.inner.get(key)
        status = new_status(stored) if stored is not None else None
        if stored is not None and status is not None:
            try:
                self.inner.write(self.inner.path_of(key), {**stored, "status": status})
            except StateFailed as exc:
                raise ApplyFailed(f"apply {key}: cannot write {exc}") from exc

    def drift(
        self, objects: Sequence[Manifest], rules: Rules = NO_RULES
    ) -> dict[Identity, tuple[str, ...]]:
        return self.inner.drift(objects, rules)

    def delete(self, key: ObjectKey) -> bool:
        return self.inner.delete(key)

    def get(self, key: ObjectKey) -> Manifest | None:
        return self._report(key, self.inner.get(key))

    def get_many(self, keys: Iterable[ObjectKey]) -> dict[ObjectKey, Manifest | None]:
        return {key: self._report(key, obj) for key, obj in self.inner.get_many(keys).items()}

    def namespace_objects(self, namespace: str) -> list[ObjectKey]:
        return self.inner.namespace_objects(namespace)

    def _report(self, key: ObjectKey, obj: Manifest | None) -> Manifest | None:
        if obj is None or not _simulated(key):
            return obj
        status = finished_status(obj, self.sim, self.now)
        return obj if status is None else {**obj, "status": status}
