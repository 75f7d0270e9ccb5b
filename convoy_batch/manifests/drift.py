"""Drift rules (issue: living with other controllers), what they mean for one manifest:
which paths of it convoy-batch leaves to other managers, the manifest without them (what
an update sends), and the paths where a live object differs from what the render sets.
Pure: over manifests as dicts.

A path is an RFC 6901 JSON pointer (``/spec/replicas``; ``""`` is the whole object:
created once, never updated, still pruned). A rule applies to an object when every field
of its target matches: group, version and kind exactly, name and namespace as regular
expressions matched whole (as Flux's helm-controller), the labels of ``labelSelector``.
The annotation ``convoy.dev/drift: ignore`` (or Flux's
``helm.toolkit.fluxcd.io/driftDetection: disabled``) is the pointer ``""``.
"""

import copy
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from convoy_batch.kinds import group_of
from convoy_batch.models import Drift, DriftMode, DriftTarget

ANNOTATION_DRIFT = "convoy.dev/drift"
FLUX_DRIFT = "helm.toolkit.fluxcd.io/driftDetection"
WHOLE = ""
"""The pointer of the whole object."""

Manifest = dict[str, Any]


def tokens(pointer: str) -> tuple[str, ...]:
    """The reference tokens of a JSON pointer (``~1`` is ``/``, ``~0`` is ``~``)."""
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


def ignored(manifest: Mapping[str, Any], *rules: Drift | None) -> tuple[str, ...]:
    """The pointers ``rules`` (a Release's and its Cluster's) leave to other managers for
    ``manifest``, in order, without repeats; ``("",)`` for an object ignored whole."""
    meta = manifest.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if (
        annotations.get(ANNOTATION_DRIFT) == "ignore"
        or str(annotations.get(FLUX_DRIFT, "")).lower() == "disabled"
    ):
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


def without(manifest: Mapping[str, Any], pointers: Sequence[str]) -> Manifest | None:
    """A copy of ``manifest`` without the values at ``pointers`` (what an update of the
    object sends); None for an object ignored whole (no update is sent). A pointer to
    something the manifest does not set is passed over."""
    if WHOLE in pointers:
        return None
    result = copy.deepcopy(dict(manifest))
    for text in pointers:
        _remove(result, tokens(text))
    return result


def _remove(node: Any, parts: tuple[str, ...]) -> None:
    *parents, last = parts
    for part in parents:
        node = _child(node, part)
        if node is None:
            return
    if isinstance(node, dict):
        node.pop(last, None)
    elif isinstance(node, list) and last.isdigit() and int(last) < len(node):
        del node[int(last)]


def _child(node: Any, part: str) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    return None


def drifted(
    desired: Mapping[str, Any], live: Mapping[str, Any], pointers: Sequence[str] = ()
) -> list[str]:
    """The pointers of the values ``desired`` sets that ``live`` holds otherwise (a value
    missing or different), leaving out those under ``pointers`` (ignored) and what is
    not the object's own (``status``); a list is compared whole."""
    if WHOLE in pointers:
        return []
    skip = [tokens(p) for p in pointers]
    found = []
    for path, value in _leaves(desired, ()):
        if path[:1] == ("status",) or any(path[: len(s)] == s for s in skip):
            continue
        if _at(live, path) != value:
            found.append(pointer(path))
    return found


def _leaves(node: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _leaves(value, (*path, str(key)))
    else:
        yield path, node


_MISSING = object()


def _at(node: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node
