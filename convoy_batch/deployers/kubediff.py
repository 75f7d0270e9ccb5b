"""The Kubernetes deployer's pure rules: the defaults a manifest is sent with, when an
object needs no request, what a batch creates for itself, and the order of apply stages.
No I/O.

``covers`` and ``unchanged`` decide from the manifest's text that a live object already
is what applying the manifest would leave (same ``convoy.dev/render``, every manifest
field equal live): true of a manifest written in the server's form. One that the server
normalises (``cpu: 2000m`` stored as ``2``, ``false`` and ``0`` not stored) is found in
sync from the server's own answers instead (:mod:`convoy_batch.deployers.serverform`).
``settled`` adds hooks, which are never re-run for the same render (SPEC 7), and
create-only objects (Flux ``ssa: IfNotPresent``), which are never updated.
"""

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from convoy_batch.deployers.base import Manifest
from convoy_batch.deployers.directory import refusal
from convoy_batch.kinds import cluster_scoped_crds, crd_kinds, group_of, kind_rank
from convoy_batch.manifests.annotations import create_only, is_hook
from convoy_batch.manifests.drift import tokens
from convoy_batch.models import ANNOTATION_RENDER, LABEL_RELEASE

POD_SPECS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Pod"): ("spec",),
    ("", "PodTemplate"): ("template", "spec"),
    ("", "ReplicationController"): ("spec", "template", "spec"),
    ("apps", "Deployment"): ("spec", "template", "spec"),
    ("apps", "StatefulSet"): ("spec", "template", "spec"),
    ("apps", "DaemonSet"): ("spec", "template", "spec"),
    ("apps", "ReplicaSet"): ("spec", "template", "spec"),
    ("batch", "Job"): ("spec", "template", "spec"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template", "spec"),
}
"""Where each built-in kind (group, kind) holds its pod spec."""
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def with_defaults(obj: Manifest) -> Manifest:
    """``obj`` as it is sent to the server: ``protocol: TCP`` filled in every port that
    omits it, of a Service (``spec.ports``) and of every container of a pod spec (the
    kinds of ``POD_SPECS``; ``containers``, ``initContainers``, ``ephemeralContainers``).
    ``protocol`` is a key of both port lists, and server-side apply before Kubernetes 1.21
    refuses an item that omits it ("associative list with keys has an element that omits
    key field", structured-merge-diff #130; 1.20 still for Service ports). TCP is what
    the server stores anyway, so the filled manifest is what lives there and never reads
    as drift. Nothing is changed in place: a copy along the changed path, ``obj`` itself
    when nothing is missing; the render keeps what was written."""
    kind = (group_of(str(obj.get("apiVersion", ""))), str(obj.get("kind", "")))
    path: tuple[str, ...]
    fill: Callable[[Any], Any]
    if kind == ("", "Service"):
        path, fill = ("spec", "ports"), _ports
    elif kind in POD_SPECS:
        path, fill = POD_SPECS[kind], _pod_spec
    else:
        return obj
    filled: Manifest = _at(obj, path, fill)
    return filled


def _at(value: Any, path: Sequence[str], fill: Callable[[Any], Any]) -> Any:
    """``value`` with ``fill`` applied at ``path``, copied along the path when that
    changes something; ``value`` itself otherwise."""
    if not path:
        return fill(value)
    if not isinstance(value, Mapping) or path[0] not in value:
        return value
    new = _at(value[path[0]], path[1:], fill)
    return value if new is value[path[0]] else {**value, path[0]: new}


def _each(items: Any, fill: Callable[[Any], Any]) -> Any:
    if not isinstance(items, list):
        return items
    new = [fill(item) for item in items]
    return items if all(a is b for a, b in zip(new, items, strict=True)) else new


def _port(port: Any) -> Any:
    if isinstance(port, Mapping) and port.get("protocol") is None:
        return {**port, "protocol": "TCP"}
    return port


def _ports(ports: Any) -> Any:
    return _each(ports, _port)


def _container(container: Any) -> Any:
    return _at(container, ("ports",), _ports)


def _pod_spec(spec: Any) -> Any:
    for field in CONTAINER_LISTS:
        spec = _at(spec, (field,), lambda containers: _each(containers, _container))
    return spec


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def annotation(obj: Mapping[str, Any] | None, name: str) -> str | None:
    if obj is None:
        return None
    value = (meta(obj).get("annotations") or {}).get(name)
    return None if value is None else str(value)


def label(obj: Mapping[str, Any] | None, name: str) -> str | None:
    if obj is None:
        return None
    value = (meta(obj).get("labels") or {}).get(name)
    return None if value is None else str(value)


def covers(desired: Any, live: Any) -> bool:
    """True when applying ``desired`` would change nothing in ``live``: every field of
    ``desired`` has the same value live (the server may add fields and defaults; lists
    match element by element). What server-side apply sets nothing for never counts:
    a null (``creationTimestamp: null``, as kubectl writes manifests) and an empty
    object or list where the server shows none."""
    if desired is None:
        return True
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return live is None and sets_nothing(desired)
        return all(covers(v, live[k]) if k in live else sets_nothing(v) for k, v in desired.items())
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(desired) == len(live)
            and all(covers(d, x) for d, x in zip(desired, live, strict=True))
        )
    return bool(desired == live) and isinstance(desired, bool) == isinstance(live, bool)


def sets_nothing(value: Any) -> bool:
    """A null, or an object or list holding only such values (``strategy: {}``)."""
    if isinstance(value, Mapping):
        return all(sets_nothing(v) for v in value.values())
    if isinstance(value, list):
        return not value
    return value is None


def same_render(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    """``live`` exists and carries the ``convoy.dev/render`` annotation of ``desired``."""
    render = annotation(desired, ANNOTATION_RENDER)
    return live is not None and render is not None and render == annotation(live, ANNOTATION_RENDER)


def unchanged(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    """The live object is what applying ``desired`` would leave (see module doc)."""
    if not same_render(desired, live):
        return False
    return covers(managed(desired), live)


def managed(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The fields of ``obj`` that convoy-batch manages, write-only ones in the form the
    server stores them (``as_stored``): what is compared with a live object. ``status``
    is another writer's."""
    return {k: v for k, v in as_stored(obj).items() if k != "status"}


def as_stored(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``obj`` in the form the server stores it, where the API documents a write-only
    field: a Secret's ``stringData`` is merged into ``data`` (base64, its keys winning)
    and never stored, so a manifest that uses it reads as unchanged once applied."""
    if obj.get("apiVersion") != "v1" or obj.get("kind") != "Secret":
        return obj
    strings = obj.get("stringData")
    if not isinstance(strings, Mapping):
        return obj
    data = dict(obj.get("data") or {})
    data.update({k: base64.b64encode(str(v).encode()).decode() for k, v in strings.items()})
    return {**{k: v for k, v in obj.items() if k != "stringData"}, "data": data}


def settled(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    """Nothing to send: a hook already created for this render (never re-run, SPEC 7), a
    create-only object (Flux ``ssa: IfNotPresent``) that exists with this render's label
    and annotation (its own fields are never compared), or an object that is
    ``unchanged``."""
    if is_hook(desired) or create_only(desired):
        render = annotation(desired, ANNOTATION_RENDER)
        same = render is not None and render == annotation(live, ANNOTATION_RENDER)
        if create_only(desired):
            return same and label(desired, LABEL_RELEASE) == label(live, LABEL_RELEASE)
        return same
    return unchanged(desired, live)


def shape_problem(obj: Manifest) -> str | None:
    """What no server would take (no apiVersion, kind, name...): the directory cluster's
    checks, scope aside, since the server knows the scope of every kind it serves."""
    problem = refusal(obj, frozenset())
    if problem and ("namespaced but" in problem or "cluster-scoped but" in problem):
        return None
    return problem


def stages(objects: Sequence[Manifest]) -> list[list[Manifest]]:
    """The objects by kind order (SPEC 3: Namespaces, CRDs, ..., Services, workloads,
    the rest), one stage per rank: a stage's objects may be sent concurrently, and a
    stage runs only once every earlier one succeeded."""
    ranked: dict[int, list[Manifest]] = {}
    for obj in objects:
        ranked.setdefault(kind_rank(str(obj.get("kind"))), []).append(obj)
    return [ranked[rank] for rank in sorted(ranked)]


class BatchContext:
    """What one dry run knows of its whole batch: namespaces and CRDs it creates."""

    def __init__(self, objects: Sequence[Manifest]) -> None:
        self.namespaces = {
            str(meta(o).get("name")) for o in objects if o.get("kind") == "Namespace"
        }
        self.pending: set[str] = set()
        """Namespaces of the batch that do not exist yet: their contents cannot be dry-run."""
        self.crd_kinds = crd_kinds(objects)
        self._scopes = cluster_scoped_crds(objects)

    def local_problem(self, obj: Manifest) -> str | None:
        problem = refusal(obj, self._scopes)
        return f"dry run refused {problem}" if problem else None


def owned_by_others(
    live: Mapping[str, Any], managed_fields: Sequence[Any], pointer: str, manager: str
) -> bool:
    """Whether a field manager other than ``manager`` owns the field at ``pointer`` of
    ``live``, or a field beneath it, by ``managed_fields`` (the object's
    ``metadata.managedFields``; ``fieldsV1``: ``f:`` a key, ``k:`` a list item by its
    keys, ``v:`` a set's value, ``i:`` an index)."""
    parts = tokens(pointer)
    for entry in managed_fields:
        if not isinstance(entry, Mapping) or entry.get("manager") == manager:
            continue
        if _owns(entry.get("fieldsV1") or {}, live, parts):
            return True
    return False


def _owns(fields: Mapping[str, Any], node: Any, parts: Sequence[str]) -> bool:
    for part in parts:
        if isinstance(node, list):
            index = int(part) if part.isdigit() else len(node)
            key = _item_key(fields, node[index], index) if index < len(node) else None
            node = node[index] if key is not None else None
        else:
            key = f"f:{part}"
            node = node.get(part) if isinstance(node, Mapping) else None
        if key is None or not isinstance(fields.get(key), Mapping):
            return False
        fields = fields[key]
    return True


def _item_key(fields: Mapping[str, Any], item: Any, index: int) -> str | None:
    """The ``fieldsV1`` key of a list item: by index, by its key fields, or by value."""
    if f"i:{index}" in fields:
        return f"i:{index}"
    for key in fields:
        if key.startswith(("k:", "v:")):
            wanted = json.loads(key[2:])
            if key[0] == "v" and wanted == item:
                return key
            by_keys = isinstance(item, Mapping) and isinstance(wanted, Mapping)
            if key[0] == "k" and by_keys and all(item.get(k) == v for k, v in wanted.items()):
                return key
    return None
