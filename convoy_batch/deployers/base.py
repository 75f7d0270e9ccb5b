"""The ``Deployer`` protocol (SPEC 12): ``dry_run``, ``apply``, ``delete``, ``get``.

Objects are plain manifest dicts (as rendered, with the convoy label and render
annotation). Implementations raise the typed errors of :mod:`convoy_batch.errors`:
DryRunFailed, ApplyFailed, PruneFailed, ClusterUnavailable.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from convoy_batch.manifests.drift import NO_RULES, Rules
from convoy_batch.models import Identity, ObjectKey

Manifest = dict[str, Any]


class Deployer(Protocol):
    def dry_run(self, objects: Sequence[Manifest], rules: Rules = NO_RULES) -> None:
        """Validate every object as the target would, applying nothing (DryRunFailed)."""

    def apply(self, objects: Sequence[Manifest], rules: Rules = NO_RULES) -> int:
        """Apply the objects in the given order (ApplyFailed, ClusterUnavailable); how
        many it wrote (created or changed: 0 when every one was already as given). An
        object that exists keeps its values at the paths ``rules`` ignore."""

    def drift(
        self, objects: Sequence[Manifest], rules: Rules = NO_RULES
    ) -> dict[Identity, tuple[str, ...]]:
        """The objects that exist and differ from what applying them would leave, with the
        paths where they differ (RFC 6901 pointers; never a value)."""

    def delete(self, key: ObjectKey) -> bool:
        """Delete one object; True when it is confirmed gone (PruneFailed)."""

    def get(self, key: ObjectKey) -> Manifest | None:
        """The live object, or None when it is not there."""

    def get_many(self, keys: Iterable[ObjectKey]) -> dict[ObjectKey, Manifest | None]:
        """Live objects for many keys at once (the observer's read path)."""


@dataclass(frozen=True)
class Capabilities:
    """What a Kubernetes API server says of itself, as Helm's ``.Capabilities`` hold it."""

    kube_version: str
    """``/version``'s ``gitVersion`` (``v1.20.2``)."""
    api_versions: tuple[str, ...]
    """Every group/version served and every group/version/Kind (``apps/v1``,
    ``apps/v1/Deployment``, ``v1/ConfigMap``), sorted."""


@runtime_checkable
class Describes(Protocol):
    """A deployer whose target is an API server that can be asked what it is."""

    def capabilities(self) -> Capabilities:
        """Read once per deployer (one tick); ClusterUnavailable when it cannot be."""
        ...


@runtime_checkable
class Versioned(Protocol):
    """A deployer that can tell what changes when an object changes without reading it
    (a directory cluster: its file's stat), for the observer's memo."""

    def versions(self, keys: Iterable[ObjectKey]) -> dict[ObjectKey, str | None]:
        """Each object's version; None for an object not there (ClusterUnavailable)."""
        ...


@runtime_checkable
class ListsNamespaces(Protocol):
    """A deployer that can tell what a namespace holds (a removed Release's namespace is
    deleted only when nothing is in it)."""

    def namespace_objects(self, namespace: str) -> list[ObjectKey]:
        """The objects in ``namespace``, but for those the cluster makes in every
        namespace by itself (its default ServiceAccount and CA ConfigMap, events) and the
        dependents of other objects (``ownerReferences``: deleted with their owner)."""
        ...


@runtime_checkable
class HoldsHooks(Protocol):
    """A deployer whose hooks are created holding convoy-batch's finalizer
    (:data:`~convoy_batch.models.HOOK_FINALIZER`), so that one deleted by someone else
    (a Job's ``ttlSecondsAfterFinished``) is still there to be read until its end is on
    record (``stages/hooks.py``)."""

    def let_go(self, keys: Iterable[ObjectKey]) -> None:
        """Remove the finalizer from those of these objects that hold it."""
        ...
