"""What a Release has on its cluster (SPEC 4, 11): object identity (:class:`ObjectKey`,
:func:`key_of`), each object's health, the inventory, and the tick record of a
Release's last reconcile (SPEC 13). Pure."""

from collections.abc import Mapping
from enum import StrEnum
from functools import cached_property, lru_cache
from typing import Any, Self

from convoy_batch.kinds import group_of
from convoy_batch.models.base import Model, Time
from convoy_batch.models.status import Phase
from convoy_batch.names import KIND, is_label, is_path_segment, is_subdomain


class HealthState(StrEnum):
    """kstatus states, shared by the observer and the verdict."""

    CURRENT = "Current"
    IN_PROGRESS = "InProgress"
    FAILED = "Failed"
    NOT_FOUND = "NotFound"
    TERMINATING = "Terminating"
    UNKNOWN = "Unknown"
    """The health could not be computed (a health rule that does not compile or fails)."""


class Health(Model):
    state: HealthState
    assessed_render_ref: str | None = None
    message: str = ""
    observed_at: Time


Identity = tuple[str, str, str, str]
"""(group, kind, namespace or "", name): what makes two objects the same object (SPEC 3)."""


def _key_text(group: str, kind: str, namespace: str | None, name: str) -> str:
    """An object's identity in words: ``Deployment.apps web/api``, ``Namespace web``."""
    kind_text = f"{kind}.{group}" if group else kind
    return f"{kind_text} {namespace}/{name}" if namespace else f"{kind_text} {name}"


@lru_cache(maxsize=4096)
def _name_problem(group: str, kind: str, namespace: str | None, name: str) -> str | None:
    """:meth:`ObjectKey.name_problem`. Key: the identity; a pure function of it. An
    object's key is checked where its inventory is read, where it is observed and where
    a directory cluster stores it, one after the other: the last 4,096 (a few hundred
    Releases' objects, about 2 MiB) are kept."""
    where = _key_text(group, kind, namespace, name)
    if namespace is not None and not is_label(namespace):
        return f"{where}: namespace {namespace!r} is not a DNS-1123 label"
    if not KIND.match(kind) or (group and not is_subdomain(group)):
        return f"{where}: kind or group is not valid"
    if not is_path_segment(name):
        return f"{where}: name {name!r} cannot be a file name"
    return None


class ObjectKey(Model):
    """Identity of an object: (group, kind, namespace, name); ``version`` for the API."""

    api_version: str
    kind: str
    namespace: str | None = None
    name: str

    @cached_property
    def group(self) -> str:
        """Worked out once per key (an identity is asked for a few dozen times a tick per
        object): a key is immutable, and :meth:`model_copy` forgets it."""
        return group_of(self.api_version)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop("group", None)  # worked out again from its own apiVersion
        return copied

    def identity(self) -> Identity:
        return (self.group, self.kind, self.namespace or "", self.name)

    def name_problem(self) -> str | None:
        """Why this key cannot name a stored object (None: it can): a namespace that is
        not a DNS-1123 label, a kind or group that is not valid, a name that is no path
        segment. A directory cluster keeps each object in a file named from its identity,
        and an inventory's entries name objects to prune: an identity that is not a
        Kubernetes name could name a path outside the cluster."""
        return _name_problem(self.group, self.kind, self.namespace, self.name)

    def __str__(self) -> str:
        return _key_text(self.group, self.kind, self.namespace, self.name)


def key_of(manifest: Mapping[str, Any]) -> ObjectKey:
    """The key of a manifest; missing fields become empty text (a deployer names what it
    refuses with it)."""
    meta = manifest.get("metadata") or {}
    return ObjectKey(
        api_version=str(manifest.get("apiVersion", "")),
        kind=str(manifest.get("kind", "")),
        namespace=meta.get("namespace") or None,
        name=str(meta.get("name", "")),
    )


class InventoryEntry(Model):
    key: ObjectKey
    wave: Phase = 0
    applied_render_ref: str | None = None
    """The renderRef this object was last applied with (None: not applied yet)."""
    prune: bool = True
    """False when the object carries ``convoy.dev/prune: "false"``."""
    retain: bool = False
    """True when the object is left in place as its Release is removed (Argo CD
    ``Delete=false``)."""
    health: Health | None = None
    """Written only by the observer."""
    hook_deleted: bool = False
    """A hook deleted by its delete policy (HookSucceeded, HookFailed) once it finished:
    the entry keeps the health it had then, which the observer leaves alone."""


class ReleaseInventory(Model):
    release: str
    entries: tuple[InventoryEntry, ...] = ()


class TickRecord(Model):
    """What the wake-ups of SPEC 13 remember of a Release's last reconcile."""

    last_reconcile_at: Time | None = None
    release_blob: str | None = None
    """Blob SHA of the Release file at the last reconcile."""
    source_revision: str | None = None
    """Source revision seen at the last reconcile."""
    health: tuple[tuple[str, str, str | None], ...] = ()
    """(object identity, state, assessedRenderRef) of each inventory entry then."""
    render_key: str | None = None
    """Fingerprint of the last render's inputs (source files, Release, Cluster)."""
    render_ref: str | None = None
    """The renderRef those inputs gave: a render-cache hit reloads it from the store."""
    drifted: bool = False
    """The last reconcile found drift (Correct mode: a drift episode goes on)."""
