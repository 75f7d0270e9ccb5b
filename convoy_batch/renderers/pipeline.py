"""Render a Release's source into objects (SPEC 3 steps 2-6). Pure: no I/O.

Declared variables are substituted in the file text (any other ``${...}`` stays as
written), the files are parsed as kubectl parses them (YAML 1.1 scalars as go-yaml v2
resolves them, timestamps and binary kept as their text; both by
:mod:`convoy_batch.manifests.text`), namespaces defaulted,
duplicates refused, and the object list hashed into the ``renderRef``. Only then are
the convoy label and render annotation added, so equal content gives the same ref on
every machine. A render is at most :data:`MAX_OBJECTS` objects and :data:`MAX_BYTES`
of canonical JSON (RenderFailed). A SOPS-encrypted document is read as written (no
substitution) and kept sealed, ciphertext only (:mod:`convoy_batch.manifests.sealed`).
"""

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from convoy_batch.errors import RenderFailed
from convoy_batch.kinds import cluster_scoped_crds, group_of, is_cluster_scoped, kind_rank
from convoy_batch.manifests import yamlload
from convoy_batch.manifests.annotations import ARGO_HOOK, FLUX_RECONCILE, FLUX_SSA, meaning
from convoy_batch.manifests.sealed import check_unsealed, is_encrypted, seal
from convoy_batch.manifests.text import kept_references, parse_file, substitute
from convoy_batch.models import (
    ANNOTATION_RENDER,
    LABEL_RELEASE,
    POST_SYNC,
    PRE_SYNC,
    SYNC,
    SYNC_FAIL,
    Cluster,
    HealthState,
    Identity,
    ObjectKey,
    Phase,
    PhaseName,
    Release,
    key_of,
    order_phases,
)

if TYPE_CHECKING:  # a type only: rendering reads no source itself
    from convoy_batch.repo.source import SourceFile, SourceSnapshot

Manifest = dict[str, Any]
HookName = PhaseName
_HOOK_RANK: dict[HookName | None, int] = {PRE_SYNC: 0, SYNC: 1, None: 2, POST_SYNC: 3, SYNC_FAIL: 4}

MAX_OBJECTS = 10_000
"""Objects in one render, at most."""
MAX_BYTES = 32 * 1024 * 1024
"""Bytes of one render's canonical JSON (what its renderRef hashes and the render store
keeps), at most. Documents are measured as they are read (their scalars, aliases
expanded), so a render far over the limit is refused before its JSON is made."""

# --- Step 2: variables -----------------------------------------------------------------


def variables_for(release: Release, cluster: Cluster) -> dict[str, str]:
    """Built-ins, then Cluster ``spec.vars``, then Release ``spec.vars`` (later wins)."""
    builtins = {
        "release": release.name,
        "cluster": cluster.name,
        "namespace": release.spec.namespace,
    }
    return {**builtins, **cluster.spec.vars, **release.spec.vars}


def _left_as_written(text: str, variables: Mapping[str, str]) -> str:
    """A hint for a file that does not parse: the references it kept (no such variable is
    declared), the likely cause when a file written for substitution meets a Cluster that
    lacks one of its ``vars``."""
    kept = kept_references(text, variables)
    if not kept:
        return ""
    shown = ", ".join(kept[:3]) + (f" and {len(kept) - 3} more" if len(kept) > 3 else "")
    return f" ({shown}: no such variable is declared, left as written)"


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
    files: Sequence["SourceFile"], variables: Mapping[str, str], release: str, decrypts: bool
) -> list[tuple[str, Manifest]]:
    """The objects of the files; a SOPS-encrypted document as its sealed object
    (``manifests.sealed``; ``decrypts``: the Release sets ``source.decryption``)."""
    objects: list[tuple[str, Manifest]] = []
    size = 0
    for file in files:
        docs = _read_file(file, variables)
        size += sum(doc.size for doc in docs)
        _check_limits(release, len(objects) + len(docs), size)
        for index, doc in enumerate(docs, start=1):
            where = file.path if len(docs) == 1 else f"{file.path} (document {index})"
            obj = _check_object(doc.value, where)
            sealed = seal(obj, where, decrypts) if is_encrypted(obj) else None
            objects.append((where, sealed or check_unsealed(obj, where)))
    return objects


def _read_file(file: "SourceFile", variables: Mapping[str, str]) -> list[yamlload.Document]:
    """The documents of one file, variables substituted; a SOPS-encrypted document as
    written (its MAC covers its values: substituted, it would not decrypt)."""
    text = substitute(file.text, variables, file.path)
    try:
        docs = parse_file(file.path, text)
        if text == file.text or not any(is_encrypted(d.value) for d in docs):
            return docs
        chunks = _DOCUMENT_START.split(file.text)  # a document marker at column 0
        kept = "".join(
            c if _encrypted(file.path, c) else substitute(c, variables, file.path) for c in chunks
        )
        return parse_file(file.path, kept)
    except RenderFailed as exc:
        raise RenderFailed(str(exc) + _left_as_written(file.text, variables)) from None


_DOCUMENT_START = re.compile(r"^(?=---(?:[ \t]|$))", re.MULTILINE)


def _encrypted(path: str, chunk: str) -> bool:
    """The text of one document is SOPS-encrypted (a text that does not parse as written,
    a reference where YAML wants no ``$``, is not)."""
    try:
        return any(is_encrypted(d.value) for d in parse_file(path, chunk))
    except RenderFailed:
        return False


def _check_limits(release: str, objects: int, size: int) -> None:
    """RenderFailed naming the Release and the limit when a render is over one."""
    if objects > MAX_OBJECTS:
        raise RenderFailed(
            f"Release {release}: the render holds more than {MAX_OBJECTS:,} objects, "
            f"the most one render may hold"
        )
    if size > MAX_BYTES:
        raise RenderFailed(
            f"Release {release}: the render is over {MAX_BYTES:,} bytes (32 MiB) of JSON, "
            "the most one render may be"
        )


# --- Steps 3 and 4: scope and identity ----------------------------------------------------


def _default_namespaces(objects: Sequence[tuple[str, Manifest]], namespace: str) -> None:
    """Namespaced objects without one get ``namespace``; cluster-scoped objects lose any
    namespace, as the API server ignores it (decided: dropped, not an error)."""
    crds = cluster_scoped_crds(obj for _, obj in objects)
    for _, obj in objects:
        meta = obj["metadata"]
        if is_cluster_scoped(group_of(obj["apiVersion"]), obj["kind"], crds):
            meta.pop("namespace", None)
        elif not meta.get("namespace"):
            meta["namespace"] = namespace


def _check_duplicates(objects: Sequence[tuple[str, Manifest]]) -> None:
    seen: dict[Identity, str] = {}
    for where, obj in objects:
        key = key_of(obj)
        if key.identity() in seen:
            raise RenderFailed(f"{key} is defined twice: in {seen[key.identity()]} and in {where}")
        seen[key.identity()] = where


# --- Objects outside the sync ------------------------------------------------------------

IGNORE_MARKERS = (ARGO_HOOK, FLUX_SSA, FLUX_RECONCILE)
"""The annotations that can make an object ignored: all an ignored object keeps in the
render (:func:`_outside_the_sync`)."""


def _outside_the_sync(objects: Sequence[tuple[str, Manifest]]) -> list[tuple[str, Manifest]]:
    """What of the objects enters the render and its renderRef: dropped objects (Helm's
    tests, delete and rollback hooks) not at all, ignored ones (Argo CD ``Skip``, Flux
    ``ssa: Ignore``) as their identity and the annotations that ignore them, so their
    content changes no renderRef while a render reloaded from the store still knows them
    (prune spares them). The rest as they are."""
    kept = []
    for where, obj in objects:
        annotations = obj["metadata"].get("annotations") or {}
        note = meaning(annotations, f"{where}: {key_of(obj)}")
        if note.dropped:
            continue
        if note.ignored:
            obj = _identity_stub(obj, annotations)
        kept.append((where, obj))
    return kept


def _identity_stub(obj: Manifest, annotations: Mapping[str, Any]) -> Manifest:
    meta = {k: obj["metadata"][k] for k in ("name", "namespace") if k in obj["metadata"]}
    meta["annotations"] = {k: annotations[k] for k in IGNORE_MARKERS if k in annotations}
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta}


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
    retain: bool = False
    """Left in place when its Release is removed (Argo CD ``Delete=false``)."""
    delete_when: frozenset[HealthState] = frozenset()
    """A hook is deleted once its health is one of these (Argo CD delete policies)."""
    create_only: bool = False
    """Applied only while it does not exist live (Flux ``ssa: IfNotPresent``)."""
    hooks: tuple[HookName, ...] = ()
    """Every hook phase it is applied in, in sync order (``hook`` is the first); empty
    for an object that is no hook."""

    @property
    def phase(self) -> Phase:
        """Its first phase: the inventory entry's ``wave``."""
        return self.hook if self.hook is not None else self.wave

    @property
    def phases(self) -> tuple[Phase, ...]:
        """Each phase that applies it: its hook phases, else its wave."""
        if self.hook is None:
            return (self.wave,)
        return self.hooks or (self.hook,)

    def apply_order(self) -> tuple[int, int, int, str, str, str, str]:
        """PreSync and Sync hooks, then (wave, kind order, name), PostSync and SyncFail
        hooks last; a hook of several phases by its first."""
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
        hooks = {p for obj in self.objects if obj.hook is not None for p in obj.phases}
        return order_phases(waves, hooks)

    def by_phase(self, phase: Phase) -> tuple[RenderedObject, ...]:
        """The objects applied in ``phase``: a hook of several phases is in each."""
        return self._phases.get(phase, ())

    @cached_property
    def _phases(self) -> dict[Phase, tuple[RenderedObject, ...]]:
        """Phase -> its objects in apply order (made once per Render, which is frozen).
        Within a hook phase, a hook that sorts by an earlier phase takes its place by
        (wave, kind order, name) among the phase's own."""
        grouped: dict[Phase, list[RenderedObject]] = {}
        for obj in self.objects:
            for phase in obj.phases:
                grouped.setdefault(phase, []).append(obj)
        several = {p for obj in self.objects if len(obj.hooks) > 1 for p in obj.hooks[1:]}
        for phase in several:
            grouped[phase].sort(key=lambda obj: obj.apply_order()[1:])
        return {phase: tuple(objects) for phase, objects in grouped.items()}


@dataclass(frozen=True)
class Rendered:
    """A Release's render of one tick (``stages.render.stage_render``, once a tick): the
    Cluster it was rendered for, the render, and the fingerprint of its inputs (what the
    tick record remembers, so the next tick reloads it while they are unchanged)."""

    cluster: Cluster
    render: Render
    key: str


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
    peers', :mod:`convoy_batch.manifests.annotations`), in apply order."""
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
                retain=note.retain,
                delete_when=note.delete_when if note.hook is not None else frozenset(),
                create_only=note.create_only,
                hooks=note.hooks,
            )
        )
    rendered.sort(key=RenderedObject.apply_order)
    return Render(ref, revision, canonical, tuple(rendered), tuple(ignored))


# --- Entry points ------------------------------------------------------------------------


def render(snapshot: "SourceSnapshot", release: Release, cluster: Cluster) -> Render:
    """SPEC 3 steps 2-6 over the fetched files (step 1 and 7 are the fetch's)."""
    return render_files(snapshot.files, snapshot.revision, release, cluster)


def render_files(
    files: Sequence["SourceFile"], revision: str | None, release: Release, cluster: Cluster
) -> Render:
    """SPEC 3 steps 2-6 over texts: the source files of a Plain render, or what a
    renderer wrote (``*.json`` names are read as JSON, the rest as YAML streams)."""
    decrypts = release.spec.source.decryption is not None
    objects = _parse_source(files, variables_for(release, cluster), release.name, decrypts)
    _default_namespaces(objects, release.spec.namespace)
    objects = _outside_the_sync(objects)
    _check_duplicates(objects)
    if not objects and not release.spec.sync_policy.allow_empty:
        path = release.spec.source.path
        raise RenderFailed(
            f"source.path {path!r}: the render is empty (syncPolicy.allowEmpty is false)"
        )
    objects.sort(key=lambda item: key_of(item[1]).identity())
    canonical = _canonical(objects)
    _check_limits(release.name, len(objects), len(canonical))
    return _assemble(objects, canonical, release.name, revision)


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
