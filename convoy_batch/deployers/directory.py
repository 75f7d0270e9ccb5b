"""The directory cluster (SPEC 12.1): one YAML file per object under a root folder. Does file I/O.

Layout: ``<root>/<namespace or _cluster>/<kind lower>[.<group>]/<name>.yaml``, e.g.
``web/deployment.apps/web.yaml`` or ``_cluster/namespace/web.yaml``. Users and tests play
the cluster's controllers by editing ``status`` in these files, so they are plain YAML
in the manifest's own key order, without anchors.

What it does as an API server would:

- dry run and apply refuse what a server refuses: missing apiVersion/kind/metadata.name,
  invalid names, a namespaced kind without a namespace, a cluster-scoped kind with one.
  Scope comes from :mod:`convoy_batch.kinds` plus CustomResourceDefinitions with
  ``scope: Cluster``, both those in the batch and those already stored.
- apply keeps the stored ``status`` and the server-owned metadata (generation, uid,
  creationTimestamp, resourceVersion, deletionTimestamp), replaces the rest, and
  increments ``metadata.generation`` (1 on create) when anything but apiVersion, kind,
  metadata and status changed. A create-only object (Flux ``ssa: IfNotPresent``) that
  is stored already only gets convoy-batch's label and render annotation. Each file is
  written atomically (temp file, rename; not fsynced: the directory cluster stands in
  for a cluster in examples and tests, where a write per object must stay cheap), 0600
  (objects may be Secrets); an unchanged object is not rewritten.
- drift rules (README, "Drift rules"): an object that is stored already keeps its stored
  values at the paths its rules ignore (nothing else writes them: there is no other field
  manager here); one ignored whole is create-only. ``drift`` tells the paths where a
  stored object differs from what applying its manifest would store.
- every path part is validated, and no write or delete follows a symlink leading out
  of the root, so nothing is ever written outside it. The first write into a folder in a
  deployer's life (one tick) removes the temp files of writes there that never landed.
- where its root may be (:func:`cluster_root`): a folder directly inside
  ``<state>/clusters/`` (default ``clusters/<name>``), or, for an absolute
  ``spec.directory.path``, under a root the operator allows in the state directory's
  ``directories.yaml`` (or the file ``$CONVOY_DIRECTORIES`` names) and neither in the
  state directory nor holding it, so a repository writer cannot make convoy-batch write
  wherever its process may, nor over its own state. That no two Clusters share a folder
  is checked across the snapshot (:mod:`convoy_batch.deployers.targets`).
- Secrets are never kept in the parse cache (``<state>/cache/cluster-<name>.json``): a
  Secret's file is parsed on each read instead, so its data has no copy beyond the
  cluster's own file and the render store.
"""

import os
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from convoy_batch.deployers.base import Manifest
from convoy_batch.errors import (
    ApplyFailed,
    ClusterNotFound,
    ClusterUnavailable,
    DryRunFailed,
    PruneFailed,
    StateFailed,
)
from convoy_batch.kinds import cluster_scoped_crds, group_of, is_cluster_scoped
from convoy_batch.manifests import yamlload
from convoy_batch.manifests.annotations import bookkeeping, create_only
from convoy_batch.manifests.drift import (
    NO_RULES,
    SERVER_OWNED,
    Rules,
    differences,
    managed,
    restore,
)
from convoy_batch.models import Cluster, Identity, Model, ObjectKey, key_of
from convoy_batch.names import (
    KIND,
    VERSION,
    is_dns1035_label,
    is_label,
    is_path_segment,
    is_subdomain,
)
from convoy_batch.state.caches import ParseCache
from convoy_batch.state.files import (
    atomic_write,
    inside,
    os_problem,
    real_root,
    refuse_link_out,
    remove_leftovers,
)
from convoy_batch.state.operator_files import operator_path, read_operator_file, shown

CLUSTER_DIR = "_cluster"
CRD_GROUP = "apiextensions.k8s.io"
NOT_SPEC = frozenset({"apiVersion", "kind", "metadata", "status"})

# RBAC objects only need to be valid path segments (e.g. "system:controller:x").
_PATH_SEGMENT_KINDS = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})


class _Dumper(yaml.CSafeDumper):
    """Never anchors/aliases: a shared dict must read as plain YAML to a human. What it
    writes, ``yamlload.StoredObjectLoader`` reads."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


# --- names --------------------------------------------------------------------------


def _name_problem(kind: str, name: str) -> str | None:
    """Why a server would refuse ``name`` for ``kind`` (None: it would not)."""
    if kind in _PATH_SEGMENT_KINDS:
        ok, rule = is_path_segment(name), "a valid path segment"
    elif kind == "Namespace":
        ok, rule = is_label(name), "a DNS-1123 label"
    elif kind == "Service":
        ok, rule = is_dns1035_label(name), "a DNS-1035 label"
    else:
        ok, rule = is_subdomain(name), "a DNS-1123 subdomain"
    return None if ok else f"metadata.name {name!r} is not {rule}"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _describe(obj: Any) -> str:
    """Names an object even when its identity fields are missing or wrong."""
    if not isinstance(obj, Mapping):
        return "object (not a mapping)"
    meta = _mapping(obj.get("metadata"))
    group = group_of(str(obj.get("apiVersion") or ""))
    kind = str(obj.get("kind") or "?") + (f".{group}" if group else "")
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{kind} {where}{meta.get('name') or '?'}"


# --- what a server refuses -----------------------------------------------------------


def _identity_problem(obj: Mapping[str, Any]) -> str | None:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not api_version:
        return "apiVersion is missing"
    group, _, version = api_version.rpartition("/")
    if not VERSION.match(version) or (group and not is_subdomain(group)):
        return f"apiVersion {api_version!r} is not valid"
    if not isinstance(kind, str) or not kind:
        return "kind is missing"
    if not KIND.match(kind):
        return f"kind {kind!r} is not valid"
    if not isinstance(obj.get("metadata"), Mapping):
        return "metadata is missing"
    return None


def _metadata_problem(
    obj: Mapping[str, Any], cluster_scoped: frozenset[tuple[str, str]]
) -> str | None:
    meta, kind = obj["metadata"], obj["kind"]
    name, namespace = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or not name:
        return "metadata.name is missing"
    if problem := _name_problem(kind, name):
        return problem
    if namespace is not None and (not isinstance(namespace, str) or not is_label(namespace)):
        return f"metadata.namespace {namespace!r} is not a DNS-1123 label"
    scoped = is_cluster_scoped(group_of(obj["apiVersion"]), kind, cluster_scoped)
    if scoped and namespace:
        return f"{kind} is cluster-scoped but metadata.namespace is {namespace!r}"
    if not scoped and not namespace:
        return f"{kind} is namespaced but metadata.namespace is not set"
    for field in ("labels", "annotations"):
        values = meta.get(field) or {}
        if not isinstance(values, Mapping) or not all(isinstance(v, str) for v in values.values()):
            return f"metadata.{field} values must be strings"
    return None


def refusal(obj: Any, cluster_scoped: frozenset[tuple[str, str]] = frozenset()) -> str | None:
    """One line naming the object and why a server would refuse it; None when it would not."""
    if not isinstance(obj, Mapping):
        return f"{_describe(obj)}: an object must be a mapping"
    problem = _identity_problem(obj) or _metadata_problem(obj, cluster_scoped)
    return f"{_describe(obj)}: {problem}" if problem else None


# --- apply --------------------------------------------------------------------------


def _spec_part(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in NOT_SPEC}


def merged(incoming: Mapping[str, Any], stored: Mapping[str, Any] | None) -> Manifest:
    """What the server stores when ``incoming`` is applied over ``stored`` (see module doc)."""
    body: Manifest = {k: v for k, v in incoming.items() if k != "status"}
    meta = {k: v for k, v in incoming["metadata"].items() if k not in SERVER_OWNED}
    old_meta = (stored or {}).get("metadata") or {}
    meta.update({k: old_meta[k] for k in SERVER_OWNED if k in old_meta})
    generation = old_meta.get("generation")
    if stored is None or not isinstance(generation, int):
        meta["generation"] = 1
    elif _spec_part(incoming) != _spec_part(stored):
        meta["generation"] = generation + 1
    body["metadata"] = meta
    if stored is not None and "status" in stored:
        body["status"] = stored["status"]
    return body


def adopted(incoming: Mapping[str, Any], stored: Mapping[str, Any]) -> Manifest:
    """A create-only object that exists (Flux ``ssa: IfNotPresent``): only convoy-batch's
    label and render annotation are written, every other field stays as stored."""
    patch = bookkeeping(incoming)["metadata"]
    meta = dict(stored.get("metadata") or {})
    for field in ("labels", "annotations"):
        meta[field] = {**(meta.get(field) or {}), **patch[field]}
    return {**stored, "metadata": meta}


def stored_form(obj: Manifest, stored: Manifest | None, pointers: Sequence[str]) -> Manifest:
    """What applying ``obj`` over ``stored`` stores, its drift rules' ``pointers`` kept
    as stored (see module doc)."""
    if stored is None:
        return merged(obj, None)
    form = managed(obj, pointers)
    if create_only(form):
        return adopted(form, stored)
    return merged(dict(restore(form, stored, pointers)), stored)


MEMO_FILES = 256
"""Parsed files a deployer keeps in memory, the ones read or written last: the objects of
the Release a tick is on (its drift check and apply parse each file once), not a whole
cluster's; the parse cache keeps the others as text. A Release of more objects than this
parses some of them again from that text. (1,024 held 20,000 parsed objects, 66 MiB, in
a tick of 10,000 Releases on 20 Clusters; a Release is observed just before its sync,
which finds the files its observation read among the last 256.)"""


def _signature(path: Path | str) -> str | None:
    """What changes when the file changes: its mtime, size and inode."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ClusterUnavailable(f"{path}: cannot read: {exc.strerror}") from exc
    return f"{st.st_mtime_ns}:{st.st_size}:{st.st_ino}"


def dump(obj: Mapping[str, Any]) -> str:
    """The stored text of an object: block YAML in the object's key order."""
    return yaml.dump(dict(obj), Dumper=_Dumper, sort_keys=False, allow_unicode=True)


def load(path: Path) -> Manifest | None:
    """The object stored at ``path``; None when there is none (ClusterUnavailable: unreadable)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ClusterUnavailable(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        docs = yamlload.load_documents(text, str(path), yamlload.StoredObjectLoader)
    except ValueError as exc:  # one line naming the file
        raise ClusterUnavailable(str(exc)) from exc
    obj = docs[0] if len(docs) == 1 else None
    if not isinstance(obj, dict):
        raise ClusterUnavailable(f"{path}: not a YAML mapping")
    return obj


ROOTS_ENV = "CONVOY_DIRECTORIES"
ROOTS_FILE = "directories.yaml"


class DirectoryRoots(Model):
    """The operator's ``directories.yaml``: the folders absolute directory clusters may use."""

    roots: tuple[str, ...] = ()


CLUSTERS_FOLDER = "clusters"
"""The state directory's folder of directory clusters: a relative ``spec.directory.path``
is a folder directly inside it (default ``clusters/<Cluster name>``)."""


def default_folder(cluster: Cluster) -> str:
    """``clusters/<name>``: where a directory Cluster without ``spec.directory`` lives."""
    return f"{CLUSTERS_FOLDER}/{cluster.name}"


def written_path(cluster: Cluster) -> str:
    """``spec.directory.path`` as the Cluster file says it (default :func:`default_folder`)."""
    spec = cluster.spec.directory
    return spec.path if spec is not None else default_folder(cluster)


def in_own_default(cluster: Cluster) -> bool:
    """Whether the Cluster's folder is its own default ``clusters/<its name>``."""
    path = written_path(cluster)
    return not os.path.isabs(path) and os.path.normpath(path) == default_folder(cluster)


def directory_roots(state_dir: Path) -> tuple[Path, tuple[str, ...]]:
    """The operator's roots file and its absolute roots (ValueError, one line: it cannot
    be read)."""
    allowed = operator_path(state_dir, ROOTS_ENV, ROOTS_FILE)
    file = read_operator_file(allowed, DirectoryRoots, state_dir)
    roots = file.roots if file is not None else ()
    return allowed, tuple(r for r in roots if os.path.isabs(r))


def cluster_root(cluster: Cluster, state_dir: Path) -> tuple[Path, Path]:
    """A directory Cluster's root and the folder nothing may be written outside of: the
    state directory for a relative ``spec.directory.path``, which must be a folder
    directly inside ``<state>/clusters/`` (default ``clusters/<name>``); the allowing
    root for an absolute one, which may neither lie in the state directory nor hold it.
    ClusterNotFound (one line naming the Cluster file) for any other path. (Clusters
    that share a folder: :mod:`convoy_batch.deployers.targets`.)"""
    written = written_path(cluster)
    path = Path(written)
    where = f"clusters/{cluster.name}.yaml: spec.directory.path: {written!r}"
    if "\x00" in written:
        raise ClusterNotFound(f"{where} is not a path of this machine")
    if not path.is_absolute():
        parts = os.path.normpath(path).split(os.sep)
        if parts[0] == "..":
            raise ClusterNotFound(f"{where} leaves the state directory")
        if len(parts) != 2 or parts[0] != CLUSTERS_FOLDER or parts[1] in (".", ".."):
            raise ClusterNotFound(
                f"{where} is not a folder directly inside <state>/{CLUSTERS_FOLDER}/ (the "
                f"rest of the state directory is convoy-batch's own): name one as "
                f"{CLUSTERS_FOLDER}/<folder>, or leave it unset for {default_folder(cluster)}"
            )
        return state_dir / path, state_dir
    if problem := _state_problem(path, state_dir):
        raise ClusterNotFound(f"{where} {problem}")
    try:
        allowed, roots = directory_roots(state_dir)
    except ValueError as exc:
        raise ClusterNotFound(f"{where}: directory roots: {exc}") from None
    real = Path(os.path.realpath(path))
    for root in roots:
        if real.is_relative_to(os.path.realpath(root)):
            return path, Path(root)
    raise ClusterNotFound(
        f"{where} is outside the state directory and no root of {shown(allowed, state_dir)} "
        f"allows it (an operator lists allowed roots there under 'roots:')"
    )


def _state_problem(path: Path, state_dir: Path) -> str | None:
    """Why an absolute directory cluster ``path`` would write over the state directory
    (links resolved, or as written): it lies in it, or holds it."""
    state_forms = {os.path.abspath(state_dir), os.path.realpath(state_dir)}
    for form in {os.path.abspath(path), os.path.realpath(path)}:
        for state in state_forms:
            if Path(form).is_relative_to(state):
                return (
                    "lies in the state directory, which is convoy-batch's own (a directory "
                    f"cluster there is named relatively: {CLUSTERS_FOLDER}/<folder>)"
                )
            if Path(state).is_relative_to(form):
                return "holds the state directory, which is convoy-batch's own"
    return None


def _is_secret(obj: Manifest) -> bool:
    return obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1"


class DirectoryDeployer:
    """A Deployer over a folder of YAML files (see module doc)."""

    def __init__(
        self, root: Path, cache: ParseCache | None = None, *, within: Path | None = None
    ) -> None:
        """``within``: the folder nothing may be written outside of (the state directory,
        for a root configured relative to it); default the root itself."""
        self.root = Path(root)
        self._root_text = str(self.root)
        self._real_root = real_root(within if within is not None else self.root)
        self._checked: set[Path] = set()  # folders checked (and cleaned) by this instance
        # Parsed files, checked against the file's stat: the observer's read and the
        # apply's compare parse each file once, an unchanged file is not parsed again on
        # the next tick (``cache``), and an edit by hand is still seen.
        self._cache = cache
        self._objects: OrderedDict[Path, tuple[str | None, Manifest | None]] = OrderedDict()
        """The :data:`MEMO_FILES` files parsed or written last, by path, with their stat."""
        self._crd_scopes: frozenset[tuple[str, str]] | None = None
        self._paths: dict[Identity, Path] = {}
        # What applying a manifest would store, worked out by ``drift`` for the ``apply``
        # that follows it in the same reconcile. Key: the manifest (by identity, the
        # entry holding it); valid while its file still holds the same parsed object.
        self._planned: dict[int, tuple[Manifest, Path, Manifest | None, Manifest]] = {}

    def _load(self, path: Path) -> Manifest | None:
        signature = _signature(path)
        cached = self._objects.get(path)
        if cached is not None and cached[0] == signature:
            self._objects.move_to_end(path)
            return cached[1]
        obj = None
        if signature is not None:
            obj = self._cache.get(str(path), signature) if self._cache is not None else None
            if obj is None:
                obj = load(path)
                self._persist(path, signature, obj)
        self._keep(path, signature, obj)
        return obj

    def _keep(self, path: Path, signature: str | None, obj: Manifest | None) -> None:
        self._objects[path] = (signature, obj)
        self._objects.move_to_end(path)
        if len(self._objects) > MEMO_FILES:
            self._objects.popitem(last=False)

    def _persist(self, path: Path, signature: str | None, obj: Manifest | None) -> None:
        if self._cache is None or signature is None or obj is None or _is_secret(obj):
            return
        self._cache.put(str(path), signature, obj)

    def _remember(self, path: Path, obj: Manifest | None) -> None:
        signature = _signature(path)
        self._keep(path, signature, obj)
        self._persist(path, signature, obj)

    def path_of(self, key: ObjectKey) -> Path:
        """Where ``key`` is stored; ValueError when a part could leave the root."""
        identity = key.identity()
        if identity not in self._paths:
            self._paths[identity] = self._path_of(key)
        return self._paths[identity]

    def _path_of(self, key: ObjectKey) -> Path:
        return Path(self._file_of(key))

    def _file_of(self, key: ObjectKey) -> str:
        """:meth:`path_of` as text (a path object costs more than the stat it is for)."""
        namespace = key.namespace or CLUSTER_DIR
        if problem := key.name_problem():
            raise ValueError(problem)
        kind_dir = key.kind.lower() + (f".{key.group}" if key.group else "")
        return os.path.join(self._root_text, namespace, kind_dir, f"{key.name}.yaml")

    def _stored_crd_scopes(self) -> frozenset[tuple[str, str]]:
        if self._crd_scopes is None:
            folder = self.root / CLUSTER_DIR / f"customresourcedefinition.{CRD_GROUP}"
            stored = (self._load(p) for p in sorted(folder.glob("*.yaml")))
            self._crd_scopes = cluster_scoped_crds(stored)
        return self._crd_scopes

    def _scopes(self, objects: Sequence[Manifest]) -> frozenset[tuple[str, str]]:
        return cluster_scoped_crds(objects) | self._stored_crd_scopes()

    def dry_run(self, objects: Sequence[Manifest], rules: Rules = NO_RULES) -> None:
        """DryRunFailed naming the first object a server would refuse."""
        scopes = self._scopes(objects)
        for obj in objects:
            if problem := refusal(obj, scopes):
                raise DryRunFailed(f"dry run refused {problem}")

    def apply(self, objects: Sequence[Manifest], rules: Rules = NO_RULES) -> int:
        """Apply in order, one file each; ApplyFailed at the first refusal or I/O error.
        How many files it wrote."""
        scopes = self._scopes(objects)
        written = 0
        for obj in objects:
            if problem := refusal(obj, scopes):
                raise ApplyFailed(f"apply refused {problem}")
            written += self._apply_one(obj, rules)
        return written

    def _apply_one(self, obj: Manifest, rules: Rules) -> bool:
        try:
            path, stored, new = self._plan(obj, rules, self._planned.pop(id(obj), None))
        except (ValueError, ClusterUnavailable) as exc:
            raise ApplyFailed(f"apply {_describe(obj)}: {exc}") from exc
        if new == stored:
            return False
        try:
            self.write(path, new)
        except StateFailed as exc:
            raise ApplyFailed(f"apply {_describe(obj)}: cannot write {exc}") from exc
        if new.get("kind") == "CustomResourceDefinition":
            self._crd_scopes = None
        return True

    def _plan(
        self,
        obj: Manifest,
        rules: Rules,
        planned: tuple[Manifest, Path, Manifest | None, Manifest] | None = None,
    ) -> tuple[Path, Manifest | None, Manifest]:
        """The object's file, what it holds and what applying ``obj`` would store there
        (``planned``: worked out before, used while the file holds the same object)."""
        if planned is not None and planned[0] is obj:
            _, path, stored, new = planned
            if self._load(path) is stored:
                return path, stored, new
        path = self.path_of(key_of(obj))
        stored = self._load(path)
        return path, stored, stored_form(obj, stored, rules.ignored(obj))

    def write(self, path: Path, obj: Manifest) -> None:
        """Store ``obj`` at ``path`` (from :meth:`path_of`); StateFailed (one line naming
        the path) when it cannot be written or a symlink would lead out of the root."""
        try:
            atomic_write(self._writable(path), dump(obj).encode(), durable=False)
        except OSError as exc:
            raise StateFailed(os_problem(path, exc)) from None
        self._remember(path, obj)

    def _writable(self, path: Path) -> Path:
        """``path``, once neither a folder on its way nor the file itself is a symlink
        leading out of the root (StateFailed). The first time for a folder, its leftover
        temp files are removed."""
        folder = path.parent
        if folder not in self._checked:
            if not inside(folder, self._real_root):
                problem = f"{folder}: a symlink on the way leads out of {self._real_root}"
                raise StateFailed(problem)
            remove_leftovers(folder, time.time())  # wall-clock: file ages
            self._checked.add(folder)
        refuse_link_out(path, self._real_root)
        return path

    def delete(self, key: ObjectKey) -> bool:
        """Remove the object's file; True when it is gone (also when it was never there)."""
        try:
            path = self._writable(self.path_of(key))
            path.unlink(missing_ok=True)  # a symlink is removed, never what it points to
            self._remember(path, None)
        except ValueError as exc:
            raise PruneFailed(f"delete {exc}") from exc
        except StateFailed as exc:
            raise PruneFailed(f"delete {key}: {exc}") from exc
        except OSError as exc:
            raise PruneFailed(f"delete {key}: {os_problem(path, exc)}") from exc
        return True

    def drift(
        self, objects: Sequence[Manifest], rules: Rules = NO_RULES
    ) -> dict[Identity, tuple[str, ...]]:
        """The paths where each stored object differs from what applying it would store
        (none for an object not stored); what applying it would store is kept for the
        ``apply`` that follows."""
        found: dict[Identity, tuple[str, ...]] = {}
        for obj in objects:  # each passed its dry run, or the one of its render
            try:
                path, stored, new = self._plan(obj, rules)
            except ValueError:
                continue
            self._planned[id(obj)] = (obj, path, stored, new)
            if stored is not None and new != stored and (paths := differences(new, stored)):
                found[key_of(obj).identity()] = tuple(paths)
        return found

    def get(self, key: ObjectKey) -> Manifest | None:
        """The stored object; None when absent or when ``key`` cannot name a stored file."""
        try:
            path = self.path_of(key)
        except ValueError:
            return None
        return self._load(path)

    def get_many(self, keys: Iterable[ObjectKey]) -> dict[ObjectKey, Manifest | None]:
        return {key: self.get(key) for key in keys}

    def versions(self, keys: Iterable[ObjectKey]) -> dict[ObjectKey, str | None]:
        """Each object's version: its file's mtime, size and inode, as the parse cache
        keys it (None: no file, or a key that can name none)."""
        found: dict[ObjectKey, str | None] = {}
        for key in keys:
            try:
                found[key] = _signature(self._file_of(key))
            except ValueError:
                found[key] = None
        return found

    def namespace_objects(self, namespace: str) -> list[ObjectKey]:
        """The objects stored in ``namespace`` (its folder's object files)."""
        folder = self.root / namespace
        if not is_label(namespace) or not folder.is_dir():
            return []
        found = (self._load(path) for path in sorted(folder.glob("*/*.yaml")))
        return [key_of(obj) for obj in found if obj is not None]
