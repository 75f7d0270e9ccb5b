"""The Kubernetes deployer's pure rules: when an object needs no request, what a batch
creates for itself, and the order of apply stages. No I/O.

``covers`` and ``unchanged`` decide that a live object already is what applying the
manifest would leave (same ``convoy.dev/render``, every manifest field equal live);
``settled`` adds hooks, which are never re-run for the same render (SPEC 7), and
create-only objects (Flux ``ssa: IfNotPresent``), which are never updated.
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from convoy_batch.annotations import create_only, is_hook
from convoy_batch.deployers.base import Manifest, key_of
from convoy_batch.deployers.directory import refusal
from convoy_batch.kinds import kind_rank
from convoy_batch.models import ANNOTATION_RENDER, LABEL_RELEASE

Identity = tuple[str, str, str, str]


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


def unchanged(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    """The live object is what applying ``desired`` would leave (see module doc)."""
    if live is None or annotation(desired, ANNOTATION_RENDER) is None:
        return False
    if annotation(desired, ANNOTATION_RENDER) != annotation(live, ANNOTATION_RENDER):
        return False
    return covers({k: v for k, v in desired.items() if k != "status"}, live)


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


def identity(obj: Mapping[str, Any]) -> Identity:
    return key_of(obj).identity()


def crd_kinds(objects: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """(group, kind) of the custom resources these CRDs define."""
    found = set()
    for obj in objects:
        if obj.get("kind") == "CustomResourceDefinition":
            spec = obj.get("spec") or {}
            found.add((str(spec.get("group", "")), str((spec.get("names") or {}).get("kind", ""))))
    return found


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
        self._scopes = frozenset(
            (str((o.get("spec") or {}).get("group", "")), kind)
            for o in objects
            if o.get("kind") == "CustomResourceDefinition"
            and (o.get("spec") or {}).get("scope") == "Cluster"
            for kind in [str(((o.get("spec") or {}).get("names") or {}).get("kind", ""))]
        )

    def local_problem(self, obj: Manifest) -> str | None:
        problem = refusal(obj, self._scopes)
        return f"dry run refused {problem}" if problem else None
