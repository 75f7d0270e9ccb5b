"""Render a Release's source into objects (SPEC 3 steps 2-6). Pure: no I/O.

Variables are substituted in the file text, the files are parsed as kubectl parses
them (YAML 1.1 scalars as go-yaml v2 resolves them, timestamps and binary kept as
their text), namespaces defaulted, duplicates refused, and the object list hashed
into the ``renderRef``. Only then are the convoy label and render annotation added,
so equal content gives the same ref on every machine.
"""

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from convoy_batch import yamlload
from convoy_batch.annotations import meaning
from convoy_batch.errors import RenderFailed
from convoy_batch.kinds import group_of, is_cluster_scoped, kind_rank
from convoy_batch.models import (
    ANNOTATION_RENDER,
    LABEL_RELEASE,
    POST_SYNC,
    PRE_SYNC,
    SYNC,
    SYNC_FAIL,
    Cluster,
    HealthState,
    ObjectKey,
    Phase,
    PhaseName,
    Release,
)
from convoy_batch.rollout.waves import order_phases

if TYPE_CHECKING:  # source -> gitops -> render (load_documents): no import cycle at run time
    from convoy_batch.source import SourceSnapshot

Manifest = dict[str, Any]
HookName = PhaseName
_HOOK_RANK: dict[HookName | None, int] = {PRE_SYNC: 0, SYNC: 1, None: 2, POST_SYNC: 3, SYNC_FAIL: 4}

# --- Parsing as kubectl does ---------------------------------------------------------


class ManifestLoader(yaml.CSafeLoader):
    """CSafeLoader with go-yaml v2's implicit scalars (what kubectl uses): YAML 1.1
    booleans including ``y``/``n``, Go integer syntax (``0x``, ``0o``, ``0b``, leading
    ``0`` octal), no base-60 numbers, no timestamps; ``!!binary`` and ``!!timestamp``
    stay text; mapping keys become strings as in JSON."""

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - PyYAML's class registry

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """As SafeConstructor's, with keys turned to text as they are read, so that
        ``1`` and ``true`` stay two keys."""
        if not isinstance(node, yaml.MappingNode):
            return super().construct_mapping(node, deep)  # raises its usual error
        self.flatten_mapping(node)
        mapping = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if type(key) is not str:
                key = _key_text(key, key_node)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _key_text(key: Any, node: yaml.Node) -> str:
    if isinstance(key, list | dict):
        raise yaml.constructor.ConstructorError(
            None, None, "a mapping key must be a scalar", node.start_mark
        )
    if isinstance(key, bool):
        return "true" if key else "false"
    return "null" if key is None else str(key)


def _construct_int(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    text = str(loader.construct_scalar(node)).replace("_", "")  # type: ignore[arg-type]
    sign, digits = (-1, text[1:]) if text.startswith("-") else (1, text.removeprefix("+"))
    if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
        return sign * int(digits, 8)  # Go reads a leading 0 as octal
    return sign * int(digits, 0)


def _construct_bool(loader: yaml.SafeLoader, node: yaml.Node) -> bool:
    text = str(loader.construct_scalar(node)).lower()  # type: ignore[arg-type]
    return text in ("y", "yes", "true", "on")


def _construct_text(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    return str(loader.construct_scalar(node))  # type: ignore[arg-type]


_RESOLVERS: tuple[tuple[str, str, str], ...] = (
    (
        "bool",
        r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$",
        "yYnNtTfFoO",
    ),
    ("null", r"^(?:~|null|Null|NULL|)$", "~nN"),
    (
        "int",
        r"^[-+]?(?:0[bB][01_]+|0[oO][0-7_]+|0[xX][0-9a-fA-F_]+|0[0-7_]*|[1-9][0-9_]*)$",
        "-+0123456789",
    ),
    (
        "float",
        r"^(?:[-+]?(?:\.[0-9_]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+0123456789.",
    ),
    ("merge", r"^<<$", "<"),
)
for _tag, _pattern, _first in _RESOLVERS:
    ManifestLoader.add_implicit_resolver(
        f"tag:yaml.org,2002:{_tag}",
        re.compile(_pattern),
        [*_first, ""] if _tag == "null" else list(_first),  # "": the empty scalar
    )
ManifestLoader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)
ManifestLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
ManifestLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_text)
ManifestLoader.add_constructor("tag:yaml.org,2002:binary", _construct_text)


def load_documents(text: str, where: str) -> list[Any]:
    """Every non-empty YAML document of ``text``; a syntax error raises ValueError
    with one line naming ``where`` and the line."""
    try:
        docs = yamlload.load_all(text, ManifestLoader, where)
        return [doc for doc in docs if doc is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise ValueError(f"{where}: {line}invalid YAML: {exc.problem or exc.context}") from None
    except yamlload.LimitExceeded:
        raise
    except (yaml.YAMLError, ValueError) as exc:  # a ReaderError (control characters) too
        raise ValueError(f"{where}: invalid YAML: {' '.join(str(exc).split())}") from None


# --- Step 2: variables -----------------------------------------------------------------

_REFERENCE = re.compile(r"\$(\$?)\{([^}\n]*)\}")
_VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def variables_for(release: Release, cluster: Cluster) -> dict[str, str]:
    """Built-ins, then Cluster ``spec.vars``, then Release ``spec.vars`` (later wins)."""
    builtins = {
        "release": release.name,
        "cluster": cluster.name,
        "namespace": release.spec.namespace,
    }
    return {**builtins, **cluster.spec.vars, **release.spec.vars}


def substitute(text: str, variables: Mapping[str, str], where: str) -> str:
    """Replace every ``${name}``; ``$${x}`` is a literal ``${x}``. Every ``${...}`` is a
    reference: an undefined or malformed one is a RenderFailed naming it and ``where``."""
    if "${" not in text:
        return text

    def replace(match: re.Match[str]) -> str:
        escaped, name = match.group(1), match.group(2)
        if escaped:
            return match.group(0)[1:]
        if not _VARIABLE_NAME.match(name):
            raise RenderFailed(f"{where}: invalid variable reference ${{{name}}}")
        if name not in variables:
            raise RenderFailed(f"{where}: undefined variable ${{{name}}}")
        return variables[name]

    return _REFERENCE.sub(replace, text)


# --- Step 1 (parse) ----------------------------------------------------------------------


def parse_file(path: str, text: str) -> list[Any]:
    """The non-empty documents of one source file: JSON for ``*.json``, else YAML."""
    if not path.endswith(".json"):
        try:
            return load_documents(text, path)
        except ValueError as exc:
            raise RenderFailed(str(exc)) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RenderFailed(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    return [] if doc is None else [doc]


def _check_object(doc: Any, where: str) -> Manifest:
    """A manifest must be a mapping with apiVersion, kind and metadata.name."""
    if not isinstance(doc, dict):
        raise RenderFailed(f"{where}: not a mapping")
    for required in ("apiVersion", "kind"):
        if not isinstance(doc.get(required), str) or not doc[required]:
            raise RenderFailed(f"{where}: {required}: required string missing")
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise RenderFailed(f"{where}: metadata.name: required string missing")
    if meta.get("namespace") is not None and not isinstance(meta["namespace"], str):
        raise RenderFailed(f"{where}: metadata.namespace: not a string")
    for mapping in ("labels", "annotations"):
        if meta.get(mapping) is not None and not isinstance(meta[mapping], dict):
            raise RenderFailed(f"{where}: metadata.{mapping}: not a mapping")
    return doc


def _parse_source(
    snapshot: "SourceSnapshot", variables: Mapping[str, str]
) -> list[tuple[str, Manifest]]:
    objects = []
    for file in snapshot.files:
        docs = parse_file(file.path, substitute(file.text, variables, file.path))
        for index, doc in enumerate(docs, start=1):
            where = file.path if len(docs) == 1 else f"{file.path} (document {index})"
            objects.append((where, _check_object(doc, where)))
    return objects


# --- Steps 3 and 4: scope and identity ----------------------------------------------------


def _cluster_scoped_crds(objects: Sequence[tuple[str, Manifest]]) -> frozenset[tuple[str, str]]:
    """(group, kind) of every CustomResourceDefinition in the render with scope Cluster."""
    found = set()
    for _, obj in objects:
        if obj["kind"] != "CustomResourceDefinition":
            continue
        spec = obj.get("spec")
        if isinstance(spec, dict) and spec.get("scope") == "Cluster":
            names = spec.get("names")
            kind = names.get("kind") if isinstance(names, dict) else None
            found.add((str(spec.get("group", "")), str(kind)))
    return frozenset(found)


def _default_namespaces(objects: Sequence[tuple[str, Manifest]], namespace: str) -> None:
    """Namespaced objects without one get ``namespace``; cluster-scoped objects lose any
    namespace, as the API server ignores it (decided: dropped, not an error)."""
    crds = _cluster_scoped_crds(objects)
    for _, obj in objects:
        meta = obj["metadata"]
        if is_cluster_scoped(group_of(obj["apiVersion"]), obj["kind"], crds):
            meta.pop("namespace", None)
        elif not meta.get("namespace"):
            meta["namespace"] = namespace


def identity(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(group, kind, namespace, name): the sort and duplicate key of SPEC 3."""
    meta = obj["metadata"]
    return (group_of(obj["apiVersion"]), obj["kind"], meta.get("namespace") or "", meta["name"])


def _check_duplicates(objects: Sequence[tuple[str, Manifest]]) -> None:
    seen: dict[tuple[str, str, str, str], str] = {}
    for where, obj in objects:
        ident = identity(obj)
        if ident in seen:
            key = key_of(obj)
            raise RenderFailed(f"{key} is defined twice: in {seen[ident]} and in {where}")
        seen[ident] = where


def key_of(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj["metadata"]
    return ObjectKey(
        api_version=obj["apiVersion"],
        kind=obj["kind"],
        namespace=meta.get("namespace") or None,
        name=meta["name"],
    )


# --- Step 5: the canonical form and its hash ------------------------------------------------


def canonical_json(objects: Sequence[Manifest]) -> bytes:
    """UTF-8 JSON, sorted keys, no whitespace, non-ASCII kept: the hashed bytes."""
    return json.dumps(
        list(objects), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def render_ref(canonical: bytes) -> str:
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def _canonical(objects: Sequence[tuple[str, Manifest]]) -> bytes:
    try:
        return canonical_json([obj for _, obj in objects])
    except ValueError:
        where = next(w for w, obj in objects if not _json_safe(obj))
        raise RenderFailed(f"{where}: holds a number JSON cannot hold (.nan or .inf)") from None


def _json_safe(obj: Manifest) -> bool:
    try:
        canonical_json([obj])
    except ValueError:
        return False
    return True


# --- Step 6 and the result ---------------------------------------------------------------


@dataclass(frozen=True)
class RenderedObject:
    key: ObjectKey
    wave: int
    hook: HookName | None
    prune: bool
    manifest: Manifest
    """With label ``convoy.dev/release`` and annotation ``convoy.dev/render`` (step 6)."""
    delete_when: frozenset[HealthState] = frozenset()
    """A hook is deleted once its health is one of these (Argo CD delete policies)."""
    create_only: bool = False
    """Applied only while it does not exist live (Flux ``ssa: IfNotPresent``)."""

    @property
    def phase(self) -> Phase:
        return self.hook if self.hook is not None else self.wave

    def apply_order(self) -> tuple[int, int, int, str, str, str, str]:
        """PreSync and Sync hooks, then (wave, kind order, name), PostSync and SyncFail
        hooks last."""
        key = self.key
        return (
            _HOOK_RANK[self.hook],
            self.wave,
            kind_rank(key.kind),
            key.kind,
            key.name,
            key.namespace or "",
            key.group,
        )


@dataclass(frozen=True)
class Render:
    ref: str
    """``sha256:<hex>`` of :attr:`canonical`."""
    revision: str | None
    canonical: bytes = field(repr=False)
    """Exactly the canonical JSON that was hashed: the render-store blob."""
    objects: tuple[RenderedObject, ...] = ()
    """In apply order; the ignored objects are not among them."""
    ignored: tuple[ObjectKey, ...] = ()
    """Objects of the source that are never applied nor pruned (Argo CD ``Skip``, Flux
    ``ssa: Ignore``)."""

    def phases(self) -> tuple[Phase, ...]:
        """The phases of a sync, in order (SyncFail hooks are in none of them)."""
        waves = [obj.wave for obj in self.objects if obj.hook is None]
        return order_phases(waves, {obj.hook for obj in self.objects if obj.hook is not None})

    def by_phase(self, phase: Phase) -> tuple[RenderedObject, ...]:
        return tuple(obj for obj in self.objects if obj.phase == phase)


def _stamp(obj: Manifest, release_name: str, ref: str) -> Manifest:
    """Step 6 on a copy: the hashed object stays as it was."""
    meta = dict(obj["metadata"])
    meta["labels"] = {**(meta.get("labels") or {}), LABEL_RELEASE: release_name}
    meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION_RENDER: ref}
    return {**obj, "metadata": meta}


def _assemble(
    objects: Sequence[tuple[str, Manifest]], canonical: bytes, release: str, revision: str | None
) -> Render:
    """The rendered objects with what their annotations mean (convoy's own and the
    peers', :mod:`convoy_batch.annotations`), in apply order."""
    ref = render_ref(canonical)
    rendered, ignored = [], []
    for where, obj in objects:
        key = key_of(obj)
        note = meaning(obj["metadata"].get("annotations") or {}, f"{where}: {key}")
        if note.ignored:
            ignored.append(key)
            continue
        rendered.append(
            RenderedObject(
                key=key,
                wave=note.wave,
                hook=note.hook,
                prune=note.prune,
                manifest=_stamp(obj, release, ref),
                delete_when=note.delete_when if note.hook is not None else frozenset(),
                create_only=note.create_only,
            )
        )
    rendered.sort(key=RenderedObject.apply_order)
    return Render(ref, revision, canonical, tuple(rendered), tuple(ignored))


# --- Entry points ------------------------------------------------------------------------


def render(snapshot: "SourceSnapshot", release: Release, cluster: Cluster) -> Render:
    """SPEC 3 steps 2-6 over the fetched files (step 1 and 7 are the fetch's)."""
    objects = _parse_source(snapshot, variables_for(release, cluster))
    _default_namespaces(objects, release.spec.namespace)
    _check_duplicates(objects)
    if not objects and not release.spec.sync_policy.allow_empty:
        path = release.spec.source.path
        raise RenderFailed(
            f"source.path {path!r}: the render is empty (syncPolicy.allowEmpty is false)"
        )
    objects.sort(key=lambda item: identity(item[1]))
    return _assemble(objects, _canonical(objects), release.name, snapshot.revision)


def load_render(canonical: bytes, release_name: str, revision: str | None) -> Render:
    """Rebuild a Render from a render-store blob (its ref is the blob's hash), adding
    step 6 again: used to re-apply the last healthy render."""
    where = f"render {render_ref(canonical)}"
    try:
        docs = json.loads(canonical)
    except ValueError as exc:
        raise RenderFailed(f"{where}: invalid JSON: {exc}") from None
    if not isinstance(docs, list):
        raise RenderFailed(f"{where}: not a list of objects")
    objects = [
        (f"{where} (object {index})", _check_object(doc, f"{where} (object {index})"))
        for index, doc in enumerate(docs, start=1)
    ]
    return _assemble(objects, canonical, release_name, revision)
