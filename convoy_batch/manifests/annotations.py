"""What an object's annotations mean to convoy-batch: its own ``convoy.dev/*`` ones and
those of Argo CD and Flux, so that repositories written for them sync unchanged
(README, "Peer annotations"). Pure: no I/O.

Rules:

- convoy's own annotation wins: when it is present, the peer annotation with the same
  meaning is not read at all.
- An unknown value is a RenderFailed naming the file, the object and the annotation.
  Argo CD values are compared exactly and Flux values without regard to case, as each
  of them does.
- Argo CD's ``Sync`` hooks are a phase of their own between PreSync and the first wave,
  and ``SyncFail`` hooks run only when a sync fails (``stages/hooks.py``).
- A hook may name several sync phases (Argo CD's ``PreSync,PostSync``, Helm's
  ``pre-install,post-install``): it is a hook of each, in sync order, duplicates
  collapsed. ``Skip`` and ``SyncFail`` stand alone: combined with another phase they
  are refused.
- Argo CD's ``Skip`` hook and Flux's ``ssa: Ignore`` (or ``reconcile: disabled``) make
  an object ignored: never applied, never pruned.
- Helm's hooks (``helm.sh/hook``, as ``helm template`` leaves them) are read as Argo CD
  reads them: pre-install/pre-upgrade are PreSync, post-install/post-upgrade PostSync,
  each item of the list read so; the others (tests, delete, rollback) are dropped;
  ``hook-weight`` orders like a wave, ``hook-delete-policy`` maps to the delete
  policies. Argo CD's own annotations win.
- Flux's ``ssa: IfNotPresent`` is read by the deployers from the manifest itself
  (:func:`create_only`): the object is created when missing; an existing one gets
  convoy-batch's label and render annotation only (:func:`bookkeeping`), never a field
  of its own.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from convoy_batch.errors import RenderFailed
from convoy_batch.models import (
    ANNOTATION_HOOK,
    ANNOTATION_PRUNE,
    ANNOTATION_RENDER,
    ANNOTATION_SYNC_WAVE,
    HOOK_FINALIZER,
    LABEL_RELEASE,
    POST_SYNC,
    PRE_SYNC,
    SYNC,
    SYNC_FAIL,
    HealthState,
    PhaseName,
)

ARGO_HOOK = "argocd.argoproj.io/hook"
ARGO_HOOK_DELETE_POLICY = "argocd.argoproj.io/hook-delete-policy"
ARGO_SYNC_WAVE = "argocd.argoproj.io/sync-wave"
ARGO_SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
HELM_HOOK = "helm.sh/hook"
HELM_HOOK_DELETE_POLICY = "helm.sh/hook-delete-policy"
HELM_HOOK_WEIGHT = "helm.sh/hook-weight"
FLUX_PRUNE = "kustomize.toolkit.fluxcd.io/prune"
FLUX_SSA = "kustomize.toolkit.fluxcd.io/ssa"
ANNOTATION_DRIFT = "convoy.dev/drift"
DRIFT_IGNORE = "ignore"
FLUX_DRIFT = "helm.toolkit.fluxcd.io/driftDetection"
FLUX_RECONCILE = "kustomize.toolkit.fluxcd.io/reconcile"

SKIP = "Skip"
CONVOY_HOOKS: tuple[PhaseName, ...] = (PRE_SYNC, POST_SYNC)
ARGO_HOOKS: tuple[PhaseName, ...] = (PRE_SYNC, SYNC, POST_SYNC, SYNC_FAIL)
DELETE_POLICIES: Mapping[str, HealthState | None] = {
    "BeforeHookCreation": None,  # what convoy-batch always does: re-created per render
    "HookSucceeded": HealthState.CURRENT,
    "HookFailed": HealthState.FAILED,
}
ARGO_BOOLEAN_OPTIONS = frozenset({"Prune", "Delete"})
"""Sync options read as ``Name=true|false``: ``Prune=false`` keeps an object that left the
render, ``Delete=false`` one whose Release was removed."""
ARGO_IGNORED_OPTIONS = frozenset(
    {
        # what convoy-batch does anyway (server-side apply, prune after the last wave,
        # only what differs is sent, shared objects refused)
        "ServerSideApply",
        "PruneLast",
        "ApplyOutOfSyncOnly",
        "FailOnSharedResource",
        # what only kubectl's client-side apply needs
        "ClientSideApplyMigration",
        "Replace",
        "Validate",
        # what convoy-batch does not do; the server's answer stands (a dry run or apply
        # that fails is DryRunFailed or ApplyFailed)
        "SkipDryRunOnMissingResource",
        "Force",
        # about deleting or creating a whole Application
        "CreateNamespace",
        "PrunePropagationPolicy",
        "RespectIgnoreDifferences",
    }
)
HELM_HOOKS: Mapping[str, PhaseName | None] = {
    # as Argo CD maps them; None: dropped (never applied): tests, and what a sync
    # never is (a delete, a rollback)
    "pre-install": PRE_SYNC,
    "pre-upgrade": PRE_SYNC,
    "post-install": POST_SYNC,
    "post-upgrade": POST_SYNC,
    "test": None,
    "test-success": None,
    "test-failure": None,
    "pre-delete": None,
    "post-delete": None,
    "pre-rollback": None,
    "post-rollback": None,
}
HELM_DELETE_POLICIES: Mapping[str, HealthState | None] = {
    "before-hook-creation": None,
    "hook-succeeded": HealthState.CURRENT,
    "hook-failed": HealthState.FAILED,
}
FLUX_SSA_VALUES = ("Override", "Merge", "IfNotPresent", "Ignore")
_WAVE = re.compile(r"^[-+]?[0-9]+$")


@dataclass(frozen=True)
class Meaning:
    """What convoy-batch does with one object."""

    wave: int = 0
    hooks: tuple[PhaseName, ...] = ()
    """Its hook phases in sync order (PreSync, Sync, PostSync), or SyncFail alone; empty
    for an object that is no hook."""
    prune: bool = True
    retain: bool = False
    """Left in place when its Release is removed from the repository (Argo CD
    ``Delete=false``); pruned as any object when it leaves the render."""
    ignored: bool = False
    """Never applied, never pruned (Argo CD ``Skip``, Flux ``ssa: Ignore``)."""
    dropped: bool = False
    """Not part of a sync at all (Helm's tests, delete and rollback hooks): ignored, and
    left out of the render and its renderRef, so a test hook named with ``randAlphaNum``
    does not make every run of the chart a new render."""
    create_only: bool = False
    """Applied only when it does not exist live (Flux ``ssa: IfNotPresent``)."""
    delete_when: frozenset[HealthState] = frozenset()
    """A hook deleted once its health is one of these (HookSucceeded, HookFailed)."""

    @property
    def hook(self) -> PhaseName | None:
        """Its first hook phase: where it sorts (None: no hook)."""
        return self.hooks[0] if self.hooks else None


PLAIN = Meaning()
"""An object without annotations: wave 0, no hook, pruned, applied."""


def meaning(annotations: Mapping[str, Any], where: str) -> Meaning:
    """The meaning of an object's annotations; ``where`` names the file and object."""
    if not annotations:  # most objects: nothing to read
        return PLAIN
    note = _Reader(annotations, where)
    hooks, skip = note.hooks()
    return Meaning(
        wave=note.wave(),
        hooks=hooks,
        prune=note.prune(),
        retain=note.argo_option("Delete") is False,
        ignored=skip or note.flux_ignored(),
        dropped=skip and note.helm_dropped(),
        create_only=note.flux_ssa() == "IfNotPresent",
        delete_when=note.delete_when(),
    )


class _Reader:
    def __init__(self, annotations: Mapping[str, Any], where: str) -> None:
        self.annotations = annotations
        self.where = where

    def refuse(self, name: str, value: Any, expected: str) -> RenderFailed:
        return RenderFailed(f"{self.where}: annotation {name}: {value!r} is not {expected}")

    def text(self, name: str, expected: str) -> str | None:
        value = self.annotations.get(name)
        if value is None or isinstance(value, str):
            return value
        raise self.refuse(name, value, expected)

    def csv(self, name: str, expected: str) -> list[str] | None:
        """A comma separated list as Argo CD reads one: items trimmed, empty ones dropped."""
        value = self.text(name, expected)
        if value is None:
            return None
        items = [item.strip() for item in value.split(",") if item.strip()]
        if not items:
            raise self.refuse(name, value, expected)
        return items

    def wave(self) -> int:
        name = next(
            (n for n in (ANNOTATION_SYNC_WAVE, ARGO_SYNC_WAVE) if n in self.annotations),
            HELM_HOOK_WEIGHT,  # a Helm hook's weight orders it as a wave would
        )
        value = self.annotations.get(name)
        if value is None:
            return 0
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and _WAVE.match(value.strip()):
            return int(value)
        raise self.refuse(name, value, "an integer")

    def hooks(self) -> tuple[tuple[PhaseName, ...], bool]:
        """The hook phases, and whether the object is skipped (Argo CD ``Skip``)."""
        if ANNOTATION_HOOK in self.annotations:
            value = self.annotations[ANNOTATION_HOOK]
            found = next((h for h in CONVOY_HOOKS if h == value), None)
            if value is not None and found is None:
                raise self.refuse(ANNOTATION_HOOK, value, "PreSync or PostSync")
            return ((found,) if found else ()), False
        if ARGO_HOOK not in self.annotations and HELM_HOOK in self.annotations:
            return self.helm_hooks()
        return self.argo_hooks()

    def argo_hooks(self) -> tuple[tuple[PhaseName, ...], bool]:
        """Argo CD's list: sync phases, or ``Skip`` or ``SyncFail`` alone."""
        known = "one of PreSync, Sync, PostSync, SyncFail, Skip"
        items = self.csv(ARGO_HOOK, known)
        if items is None:
            return (), False
        for item in items:
            if item != SKIP and item not in ARGO_HOOKS:
                raise self.refuse(ARGO_HOOK, item, known)
        if len(set(items)) > 1 and not set(items).isdisjoint((SKIP, SYNC_FAIL)):
            expected = "a list of sync phases (Skip and SyncFail stand alone)"
            raise self.refuse(ARGO_HOOK, ",".join(items), expected)
        if items[0] == SKIP:
            return (), True
        return _in_order(items), False

    def helm_hooks(self) -> tuple[tuple[PhaseName, ...], bool]:
        """Helm's hooks: the phases a sync runs them in, or skipped when it runs none of
        them (tests)."""
        expected = "a list of Helm hooks (pre-install, post-upgrade, test, ...)"
        items = self.csv(HELM_HOOK, expected) or []
        for item in items:
            if item not in HELM_HOOKS:
                raise self.refuse(HELM_HOOK, item, expected)
        found = _in_order([p for p in (HELM_HOOKS[item] for item in items) if p is not None])
        return found, not found

    def helm_dropped(self) -> bool:
        """Skipped by Helm's annotation alone (no convoy or Argo CD hook annotation): every
        hook it names is one a sync never runs."""
        return ANNOTATION_HOOK not in self.annotations and ARGO_HOOK not in self.annotations

    def delete_when(self) -> frozenset[HealthState]:
        if ARGO_HOOK_DELETE_POLICY not in self.annotations and (
            HELM_HOOK_DELETE_POLICY in self.annotations
        ):
            return self.policies(HELM_HOOK_DELETE_POLICY, HELM_DELETE_POLICIES)
        return self.policies(ARGO_HOOK_DELETE_POLICY, DELETE_POLICIES)

    def policies(
        self, name: str, known: Mapping[str, HealthState | None]
    ) -> frozenset[HealthState]:
        expected = "a list of " + ", ".join(known)
        items = self.csv(name, expected) or []
        for item in items:
            if item not in known:
                raise self.refuse(name, item, expected)
        return frozenset(s for s in (known[i] for i in items) if s is not None)

    def prune(self) -> bool:
        if ANNOTATION_PRUNE in self.annotations:
            value = self.annotations[ANNOTATION_PRUNE]
            return not (value == "false" or value is False)
        argo = self.argo_prune()
        flux = self.flux_value(FLUX_PRUNE, ("enabled", "disabled"))
        return argo is not False and flux != "disabled"

    def argo_prune(self) -> bool | None:
        return self.argo_option("Prune")

    def argo_option(self, name: str) -> bool | None:
        """``<name>=false|true`` of the sync options (``Prune``, ``Delete``); the other
        options Argo CD documents are ignored (README), an unknown one is refused."""
        found = None
        expected = "a list of Argo CD sync options (Name=value)"
        for item in self.csv(ARGO_SYNC_OPTIONS, expected) or []:
            option, equals, value = item.partition("=")
            if not equals:
                raise self.refuse(ARGO_SYNC_OPTIONS, item, expected)
            if option in ARGO_BOOLEAN_OPTIONS:
                if value not in ("true", "false"):
                    expected_value = f"{option}=false or {option}=true"
                    raise self.refuse(ARGO_SYNC_OPTIONS, item, expected_value)
                if option == name:
                    found = value == "true"
            elif option not in ARGO_IGNORED_OPTIONS:
                raise self.refuse(ARGO_SYNC_OPTIONS, item, "a known Argo CD sync option")
        return found

    def flux_value(self, name: str, known: tuple[str, ...]) -> str | None:
        """The value among ``known`` (Flux compares without regard to case)."""
        expected = " or ".join(known)
        value = self.text(name, expected)
        if value is None:
            return None
        found = next((k for k in known if k.lower() == value.lower()), None)
        if found is None:
            raise self.refuse(name, value, expected)
        return found

    def flux_ssa(self) -> str | None:
        return self.flux_value(FLUX_SSA, FLUX_SSA_VALUES)

    def flux_ignored(self) -> bool:
        reconcile = self.flux_value(FLUX_RECONCILE, ("enabled", "disabled"))
        return self.flux_ssa() == "Ignore" or reconcile == "disabled"


def _in_order(phases: Sequence[str]) -> tuple[PhaseName, ...]:
    """The distinct hook phases among ``phases``, in sync order."""
    return tuple(p for p in ARGO_HOOKS if p in phases)


def _annotation(manifest: Mapping[str, Any], name: str) -> Any:
    meta = manifest.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return annotations.get(name) if isinstance(annotations, Mapping) else None


def is_hook(manifest: Mapping[str, Any]) -> bool:
    """A rendered hook (convoy's or Argo CD's annotation): created once per render."""
    return bool(
        _annotation(manifest, ANNOTATION_HOOK)
        or _annotation(manifest, ARGO_HOOK)
        or _annotation(manifest, HELM_HOOK)
    )


def held(manifest: Mapping[str, Any]) -> bool:
    """The live object holds convoy-batch's hook finalizer (:data:`HOOK_FINALIZER`)."""
    finalizers = (manifest.get("metadata") or {}).get("finalizers") or ()
    return HOOK_FINALIZER in finalizers


def holding(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A hook's manifest as it is created: with convoy-batch's finalizer added."""
    meta = dict(manifest.get("metadata") or {})
    finalizers = list(meta.get("finalizers") or ())
    if HOOK_FINALIZER not in finalizers:
        meta["finalizers"] = [*finalizers, HOOK_FINALIZER]
    return {**manifest, "metadata": meta}


def create_only(manifest: Mapping[str, Any]) -> bool:
    """Applied only while the object does not exist live: Flux ``ssa: IfNotPresent``, and
    an object whose drift is ignored whole (:func:`drift_ignored`)."""
    value = _annotation(manifest, FLUX_SSA)
    return (isinstance(value, str) and value.lower() == "ifnotpresent") or drift_ignored(manifest)


def drift_ignored(manifest: Mapping[str, Any]) -> bool:
    """``convoy.dev/drift: ignore`` (or Flux's ``helm.toolkit.fluxcd.io/driftDetection:
    disabled``): the object is created once and never updated (README, "Drift rules")."""
    value = _annotation(manifest, ANNOTATION_DRIFT)
    flux = _annotation(manifest, FLUX_DRIFT)
    return value == DRIFT_IGNORE or (isinstance(flux, str) and flux.lower() == "disabled")


def bookkeeping(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """convoy-batch's own label and render annotation of a rendered manifest, as a
    metadata patch: all that is written to a create-only object that already exists
    (so the observer and prune know it as the Release's, for this render)."""
    meta = manifest.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    return {
        "metadata": {
            "labels": {LABEL_RELEASE: labels.get(LABEL_RELEASE)},
            "annotations": {ANNOTATION_RENDER: annotations.get(ANNOTATION_RENDER)},
        }
    }
