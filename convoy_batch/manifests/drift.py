"""Drift rules (README, "Drift rules"), what they mean for one manifest: which paths of
it convoy-batch leaves to other managers, what it sends for an object that exists (the
manifest without them), and the paths where a live object differs from what an apply
would leave. Pure: over manifests as dicts.

A path is an RFC 6901 JSON pointer (``/spec/replicas``; ``""`` is the whole object:
created once, never updated, still pruned). A rule applies to an object when every field
of its target matches: group, version and kind exactly, name and namespace as regular
expressions matched whole (as Flux's helm-controller), the labels of ``labelSelector``.
The annotation ``convoy.dev/drift: ignore`` (or Flux's
``helm.toolkit.fluxcd.io/driftDetection: disabled``) is the pointer ``""``.

Ignoring is not owning: an ignored path is set when the object is created and never
written afterwards. An update sends :func:`managed` (the manifest without the ignored
values) with, put back by :func:`restore`, the live values at the ignored paths that no
other manager holds: a server-side apply removes a field its applier stops sending when
no other manager owns it, so convoy-batch keeps holding, at its live value, an ignored
field nobody else ever wrote.
"""

import copy
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from convoy_batch.kinds import group_of
from convoy_batch.manifests.annotations import (
    ANNOTATION_DRIFT,
    DRIFT_IGNORE,
    bookkeeping,
    drift_ignored,
)
from convoy_batch.models import Drift, DriftMode, DriftTarget

WHOLE = ""
"""The pointer of the whole object."""

Manifest = dict[str, Any]


@functools.lru_cache(maxsize=4096)
def tokens(pointer: str) -> tuple[str, ...]:
    """The reference tokens of a JSON pointer (``~1`` is ``/``, ``~0`` is ``~``). Cached:
    a pure function of the text, asked for the same few pointers on every object."""
    if pointer == WHOLE:
        return ()
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:])


def pointer(parts: Sequence[str | int]) -> str:
    """The JSON pointer of a path of keys and list indexes."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def mode_of(release: Drift | None, cluster: Drift | None) -> DriftMode:
    """The mode in force: the Release's, else its Cluster's, else Correct."""
    for drift in (release, cluster):
        if drift is not None and drift.mode is not None:
            return drift.mode
    return DriftMode.CORRECT


@dataclass(frozen=True)
class Rules:
    """The drift rules of one Release: its own and its Cluster's."""

    release: Drift | None = None
    cluster: Drift | None = None

    @property
    def mode(self) -> DriftMode:
        return mode_of(self.release, self.cluster)

    def ignored(self, manifest: Mapping[str, Any]) -> tuple[str, ...]:
        """The pointers left to other managers for ``manifest`` (see :func:`ignored`)."""
        if not (self.release and self.release.ignore) and not (
            self.cluster and self.cluster.ignore
        ):
            return (WHOLE,) if drift_ignored(manifest) else ()
        return ignored(manifest, self.release, self.cluster)


NO_RULES = Rules()
"""No rule: every path is convoy-batch's, drift is corrected."""


def ignored(manifest: Mapping[str, Any], *rules: Drift | None) -> tuple[str, ...]:
    """The pointers ``rules`` (a Release's and its Cluster's) leave to other managers for
    ``manifest``, in order, without repeats; ``("",)`` for an object ignored whole."""
    if drift_ignored(manifest):
        return (WHOLE,)
    found: list[str] = []
    for drift in rules:
        for rule in drift.ignore if drift is not None else ():
            if rule.target is None or matches(rule.target, manifest):
                found += [p for p in rule.paths if p not in found]
    return (WHOLE,) if WHOLE in found else tuple(found)


def matches(target: DriftTarget, manifest: Mapping[str, Any]) -> bool:
    """Whether every field of ``target`` matches ``manifest``."""
    api_version = str(manifest.get("apiVersion", ""))
    meta = manifest.get("metadata") or {}
    version = api_version.rsplit("/", 1)[-1]
    checks = [
        target.group is None or target.group == group_of(api_version),
        target.version is None or target.version == version,
        target.kind is None or target.kind == manifest.get("kind"),
        target.name is None or re.fullmatch(target.name, str(meta.get("name", ""))) is not None,
        target.namespace is None
        or re.fullmatch(target.namespace, str(meta.get("namespace") or "")) is not None,
    ]
    if target.label_selector is not None:
        labels = meta.get("labels") or {}
        wanted = target.label_selector.match_labels
        checks.append(all(labels.get(k) == v for k, v in wanted.items()))
    return all(checks)


def managed(manifest: Mapping[str, Any], pointers: Sequence[str]) -> Mapping[str, Any]:
    """What convoy-batch manages of ``manifest`` once the object exists: the manifest
    without the values at ``pointers`` (its label and render annotation always kept; a
    pointer to something the manifest does not set is passed over). An object ignored
    whole is stamped ``convoy.dev/drift: ignore``, which makes it create-only (only
    convoy-batch's label and render annotation are written to it once it exists).
    ``manifest`` is never changed: what differs is copied along its path."""
    if not pointers:
        return manifest
    if WHOLE in pointers:
        return dict(_put(manifest, ("metadata", "annotations", ANNOTATION_DRIFT), DRIFT_IGNORE))
    result: Any = manifest
    for text in pointers:
        result = _without(result, tokens(text))
    kept = bookkeeping(manifest)["metadata"]
    for field in ("labels", "annotations"):
        for name, value in kept[field].items():
            if value is not None and _at(result, ("metadata", field, name)) != value:
                result = _put(result, ("metadata", field, name), value)
    return dict(result)


def restore(
    form: Mapping[str, Any], live: Mapping[str, Any], pointers: Sequence[str]
) -> Mapping[str, Any]:
    """``form`` (from :func:`managed`) with ``live``'s values at ``pointers`` put back:
    what an update of an existing object sends, so that what convoy-batch stops writing
    keeps its live value. A pointer ``live`` holds nothing at is passed over; neither
    ``form`` nor ``live`` is changed."""
    result: Any = form
    for text in pointers:
        parts = tokens(text)
        value = _at(live, parts) if parts else MISSING
        if value is not MISSING:
            result = _put(result, parts, copy.deepcopy(value))
    return dict(result)


def _without(node: Any, parts: tuple[str, ...]) -> Any:
    """``node`` without the value at ``parts``, copied along the path (``node`` itself
    when there is nothing there)."""
    head, rest = parts[0], parts[1:]
    if isinstance(node, Mapping):
        if head not in node:
            return node
        if not rest:
            return {k: v for k, v in node.items() if k != head}
        child = _without(node[head], rest)
        return node if child is node[head] else {**node, head: child}
    if isinstance(node, list) and head.isdigit() and int(head) < len(node):
        index = int(head)
        if not rest:
            return node[:index] + node[index + 1 :]
        child = _without(node[index], rest)
        return node if child is node[index] else [*node[:index], child, *node[index + 1 :]]
    return node


def _put(node: Any, parts: tuple[str, ...], value: Any) -> Any:
    """``node`` with ``value`` at ``parts`` (missing mappings on the way made; a list item
    put back where :func:`_without` took it from), copied along the path."""
    head, rest = parts[0], parts[1:]
    if isinstance(node, Mapping):
        child = _put(node.get(head) or {}, rest, value) if rest else value
        return {**node, head: child}
    if isinstance(node, list) and head.isdigit():
        index = int(head)
        if not rest and index <= len(node):
            return [*node[:index], value, *node[index:]]
        if rest and index < len(node):
            return [*node[:index], _put(node[index], rest, value), *node[index + 1 :]]
    return node


def _child(node: Any, part: str) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    return None


SERVER_OWNED = ("generation", "uid", "creationTimestamp", "resourceVersion", "deletionTimestamp")
"""The metadata a server sets by itself and keeps through every apply."""
SERVER_METADATA = frozenset(SERVER_OWNED) | {"managedFields", "selfLink"}
"""What the server keeps of an object's metadata by itself: never drift."""
_SERVER_PATHS = {(field,) for field in SERVER_METADATA}


def differences(after: Mapping[str, Any], live: Mapping[str, Any]) -> list[str]:
    """The pointers where ``live`` differs from ``after`` (what an apply would leave):
    through mappings key by key (both ways), through lists of the same length item by
    item; ``status`` and the server's own metadata left out. Paths only: no value."""
    found: list[str] = []
    _differ(after, live, (), found)
    return found


def _differ(a: Any, b: Any, path: tuple[str, ...], found: list[str]) -> None:
    if path == ("status",) or (path[:1] == ("metadata",) and path[1:] in _SERVER_PATHS):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            _differ(a.get(key, MISSING), b.get(key, MISSING), (*path, str(key)), found)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            _differ(x, y, (*path, str(index)), found)
    elif a != b:
        found.append(pointer(path))


MISSING = object()
"""What a path an object holds nothing at reads as."""


def value_at(node: Any, pointer: str) -> Any:
    """The value at a JSON pointer of ``node``, or :data:`MISSING`."""
    return _at(node, tokens(pointer))


def _at(node: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        node = _child(node, part) if isinstance(node, (dict, list)) else None
        if node is None:
            return MISSING
    return node
