"""Over 600 lines: one class, :class:`KubernetesDeployer`, the Kubernetes implementation of
the Deployer protocol, whose methods share its memory of live objects; its transport,
pure rules and server forms are already modules of their own (:mod:`.kubeapi`,
:mod:`.kubediff`, :mod:`.serverform`).

The Kubernetes deployer (SPEC 12.2): server-side apply against a real API server.
Does network I/O (through :class:`~convoy_batch.deployers.kubeapi.KubeApi`); the pure
rules (what needs no request, apply stages) are :mod:`convoy_batch.deployers.kubediff`.

One instance lives for one tick, so its caches are per tick (the server's answers
aside, see below):

- discovery, per group version, for each kind's plural and scope;
- live objects: one LIST per kind with the ``convoy.dev/release`` label selector, across
  all namespaces (per namespace when the credentials may not list cluster-wide), shared
  by every Release of the tick and kept current with the server's answers to our own
  writes. ``get_many`` (the observer), ``dry_run`` and ``apply`` all read it.

Decisions where the spec is silent:

- Every manifest is dry-run, compared and applied ``with_defaults`` (``protocol: TCP`` on
  ports that omit it, which servers before 1.21 refuse in server-side apply); the render
  and its renderRef stay as written.
- An object whose live state already matches the render is neither dry-run nor applied:
  its ``convoy.dev/render`` annotation equals the render's (so the last apply by
  convoy-batch was this very manifest) and nothing drifted: every field of the manifest
  has the same value live, or the live values at the manifest's fields are those of the
  server's last answer to it (:mod:`~convoy_batch.deployers.serverform`, remembered
  across ticks in the Cluster's parse cache). A quiet tick therefore only reads. An
  object whose dry run answers what already lives there is not applied.
- Dry run: objects that cannot be dry-run yet (in a namespace, or of a kind, that the
  same render creates) get the checks the directory cluster makes instead. A hook whose live
  copy belongs to another render is dry-run as a create under a generated name.
- Namespaces before their contents: a Namespace of the render (seen by its dry run) is
  applied first whenever an object needs it and it does not exist yet, even when the
  Namespace sits in a later wave than a PreSync hook.
- Apply, within one call: Namespaces, then CRDs (each waited for until the server
  serves its kind), then the rest in kind order (a stage of more than 8 objects 8
  requests at a time, a smaller one from the calling thread); the first
  failure in that order is the one reported.
- Hooks (``convoy.dev/hook``, Argo CD's ``argocd.argoproj.io/hook``) are re-created when
  the live copy's ``convoy.dev/render`` differs (deleted in the background, then
  applied) and left alone for the same render; one being deleted (a Job that deleted
  itself once finished) counts as gone: it is created again once the delete is over.
  Each is created holding convoy-batch's finalizer (``stages/hooks.py``).
- Create-only objects (Flux ``kustomize.toolkit.fluxcd.io/ssa: IfNotPresent``) are applied
  only while they do not exist (looked up with a GET when the labelled LIST lacks them);
  one that exists gets a merge patch of convoy-batch's label and render annotation when
  they differ, and nothing else: no field of its own is dry-run, compared or written.
- Drift rules (README, "Drift rules"): what is compared with the live object, dry-run and
  applied is the manifest without its ignored paths (``drift.managed``); an object that
  exists is sent it with the live values put back at the ignored paths that no other
  field manager owns (``metadata.managedFields``), so server-side apply never removes an
  ignored field that convoy-batch alone set, and never takes one another manager holds.
  An object ignored whole is create-only. ``drift`` tells the paths where a live object
  differs from the server's answer to its dry run (made by ``dry_run`` this tick).
- Prune deletes with foreground propagation and waits briefly; an object still there
  (its dependents being deleted) is reported as not yet gone and retried next tick.
"""

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from convoy_batch.deployers.base import Capabilities, Manifest
from convoy_batch.deployers.kubeapi import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    ApiError,
    KubeApi,
    Resource,
    Unreachable,
    client_timeout,
)
from convoy_batch.deployers.kubeconfig import load_configuration
from convoy_batch.deployers.kubediff import (
    BatchContext,
    annotation,
    meta,
    owned_by_others,
    settled,
    shape_problem,
    stages,
    with_defaults,
)
from convoy_batch.deployers.serverform import ServerForms, drifted, in_sync
from convoy_batch.errors import (
    ApplyFailed,
    ClusterUnavailable,
    ConvoyError,
    DryRunFailed,
    Forbidden,
    PruneFailed,
)
from convoy_batch.kinds import crd_kinds, group_of
from convoy_batch.manifests.annotations import bookkeeping, create_only, held, holding, is_hook
from convoy_batch.manifests.drift import NO_RULES, WHOLE, Rules, managed, restore
from convoy_batch.models import (
    ANNOTATION_RENDER,
    HOOK_FINALIZER,
    LABEL_RELEASE,
    Cluster,
    Identity,
    ObjectKey,
    key_of,
)
from convoy_batch.state.caches import ParseCache

log = logging.getLogger("convoy_batch")

FIELD_MANAGER = "convoy-batch"
CRD_WAIT = 60.0  # seconds for a new CRD's kind to be served
DELETE_WAIT = 2.0  # seconds a prune waits for the object to disappear
HOOK_DELETE_WAIT = 60.0
POLL = 0.1
SMALL_BATCH = 8  # objects sent one after the other by the calling thread
BATCH_WORKERS = 8  # requests at once for a larger batch
SELECTOR_LIMIT = 4000  # characters of Release names in a LIST's label selector, at most

T = TypeVar("T")


def from_cluster(
    cluster: Cluster,
    state_dir: Path,
    releases: Collection[str] = (),
    cache: ParseCache | None = None,
) -> "KubernetesDeployer":
    """The deployer for a Cluster with ``spec.kubernetes`` (ClusterUnavailable: no kubeconfig).
    A relative kubeconfig path is relative to the state directory, as directory paths are;
    the tick has checked that the Cluster may name it (:mod:`~convoy_batch.deployers.targets`).
    ``releases``: the names of the Releases on this Cluster (what its LISTs select);
    ``cache``: the Cluster's parse cache, where the server's answers are remembered."""
    target = cluster.spec.kubernetes
    assert target is not None  # make_deployer only calls this for Kubernetes Clusters
    where = f"clusters/{cluster.name}.yaml"
    api = KubeApi(load_configuration(target, state_dir, where), where, client_timeout(where))
    return KubernetesDeployer(api, releases, cache)


def _pair(desired: Manifest) -> tuple[Identity, str | None]:
    """The key of ``KubernetesDeployer._settled_pairs``: the object and its render."""
    return key_of(desired).identity(), annotation(desired, ANNOTATION_RENDER)


CLUSTER_MADE = {("ServiceAccount", "default"), ("ConfigMap", "kube-root-ca.crt")}
"""(kind, name) of the core objects a cluster makes in every namespace by itself."""


def _cluster_made(obj: Manifest) -> bool:
    """An object the cluster made in the namespace by itself: its default ServiceAccount,
    that account's token Secret, the CA ConfigMap, and a dependent of another object (a
    ReplicaSet's Pods: the garbage collector deletes it with its owner)."""
    meta = obj.get("metadata") or {}
    if (obj.get("kind"), meta.get("name")) in CLUSTER_MADE or meta.get("ownerReferences"):
        return True
    account = (meta.get("annotations") or {}).get("kubernetes.io/service-account.name")
    token = obj.get("type") == "kubernetes.io/service-account-token"
    return obj.get("kind") == "Secret" and token and account == "default"


def release_selector(releases: Collection[str]) -> str:
    """The label selector of the tick's LISTs: the objects of these Releases (not those of
    another repository's Releases on the same cluster), or, for a list too long for a URL,
    every object with the label."""
    names = ",".join(sorted(releases))
    if not names or len(names) > SELECTOR_LIMIT:
        return LABEL_RELEASE
    return f"{LABEL_RELEASE} in ({names})"


class KubernetesDeployer:
    """A Deployer over one API server, for one tick (see module doc)."""

    def __init__(
        self, api: KubeApi, releases: Collection[str] = (), cache: ParseCache | None = None
    ) -> None:
        self.api = api
        self._server_forms = ServerForms(cache)  # the server's answers, across ticks
        self._selector = release_selector(releases)
        self._live: dict[Identity, Manifest | None] = {}
        self._listed: set[tuple[str, str, str | None]] = set()  # (apiVersion, kind, ns | None=all)
        self._no_cluster_list: set[tuple[str, str]] = set()
        self._crds: set[tuple[str, str]] = set()
        self._namespaces: dict[str, Manifest] = {}  # the Namespaces of renders dry-run this tick
        self._namespace_names: set[str] = set()  # every namespace known to exist this tick
        # (identity, render) -> the live copy it was found settled against, this tick
        self._settled_pairs: dict[tuple[Identity, str | None], Manifest] = {}
        self._all_namespaces: bool | None = None  # listed every namespace (None: not yet)
        # Objects with ignored paths: (the whole manifest, what a create sends; the
        # pointers), by identity; what ``_body`` puts back into an update.
        self._ignoring: dict[Identity, tuple[Manifest, tuple[str, ...]]] = {}
        self._owners: dict[Identity, list[object]] = {}  # live objects' managedFields
        self._dry_answers: dict[tuple[Identity, str | None], Manifest] = {}  # this tick's
        self._reads = threading.Lock()  # one LIST at a time, shared by the tick's Releases
        self._workers = ThreadPoolExecutor(
            max_workers=BATCH_WORKERS, thread_name_prefix="convoy-k8s"
        )

    # --- reads ----------------------------------------------------------------------

    def _resource(self, api_version: str, kind: str) -> Resource | None:
        found = self.api.resources(api_version).get(kind)
        if found is None and (group_of(api_version), kind) in self._crds:
            found = self.api.resources(api_version, refresh=True).get(kind)
        return found

    def _list(self, resource: Resource, namespace: str | None) -> None:
        query = {"labelSelector": self._selector, "limit": "500"}
        path = resource.path(namespace)
        while True:
            page = self.api.request("GET", path, query)
            for item in page.get("items") or []:
                item["apiVersion"], item["kind"] = resource.api_version, resource.kind
                self._keep(item)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return
            query = {**query, "continue": str(token)}

    def _ensure_listed(self, api_version: str, kind: str, namespaces: set[str | None]) -> None:
        if (api_version, kind, None) in self._listed:
            return
        # Releases run side by side: one of them lists, the others wait and share the answer.
        with self._reads:
            self._list_kind(api_version, kind, namespaces)

    def _list_kind(self, api_version: str, kind: str, namespaces: set[str | None]) -> None:
        if (api_version, kind, None) in self._listed:
            return
        resource = self._resource(api_version, kind)
        if resource is None:
            return
        if (api_version, kind) not in self._no_cluster_list:
            try:
                self._list(resource, None)
                self._listed.add((api_version, kind, None))
                return
            except Forbidden:  # may list in its namespaces only (RBAC)
                if not resource.namespaced:
                    raise
                self._no_cluster_list.add((api_version, kind))
        for namespace in namespaces:
            if (api_version, kind, namespace) not in self._listed:
                self._list(resource, namespace)
                self._listed.add((api_version, kind, namespace))

    def _keep(self, obj: Manifest) -> None:
        """``obj`` as the live copy of its object; its managedFields kept apart (read only
        for an object with ignored paths)."""
        identity = key_of(obj).identity()
        self._owners[identity] = obj.get("metadata", {}).pop("managedFields", None) or []
        self._live[identity] = obj

    def _lookup(self, keys: Iterable[ObjectKey]) -> dict[ObjectKey, Manifest | None]:
        keys = list(keys)
        wanted: dict[tuple[str, str], set[str | None]] = {}
        for key in keys:
            wanted.setdefault((key.api_version, key.kind), set()).add(key.namespace)
        for (api_version, kind), namespaces in wanted.items():
            self._ensure_listed(api_version, kind, namespaces)
        return {key: self._live.get(key.identity()) for key in keys}

    @contextmanager
    def _answers(self, refused: Callable[[ApiError], ConvoyError] | None = None) -> Iterator[None]:
        """The one translation of the client's errors into outcome errors: no usable answer
        (:class:`Unreachable`: unreachable, cut, timed out, 5xx, 429) is ClusterUnavailable
        naming the Cluster file; a refusal (:class:`ApiError`, a 4xx) is what ``refused``
        makes of it (None: it propagates, for the caller to tell the objects apart)."""
        try:
            yield
        except Unreachable as exc:
            raise self._unavailable(str(exc)) from None
        except ApiError as exc:
            if refused is None:
                raise
            raise refused(exc) from None

    def _unavailable(self, what: str) -> ClusterUnavailable:
        return ClusterUnavailable(f"{self.api.where}: {what}")

    def get_many(self, keys: Iterable[ObjectKey]) -> dict[ObjectKey, Manifest | None]:
        """Live objects carrying the ``convoy.dev/release`` label, one LIST per kind."""
        with self._answers(lambda exc: self._unavailable(f"list: {exc}")):
            return self._lookup(keys)

    def get(self, key: ObjectKey) -> Manifest | None:
        """The live object, read now."""
        with self._answers(lambda exc: self._unavailable(f"get {key}: {exc}")):
            return self._get(key)

    def _get(self, key: ObjectKey) -> Manifest | None:
        resource = self._resource(key.api_version, key.kind)
        if resource is None:
            return None
        try:
            obj: Manifest = self.api.request("GET", resource.path(key.namespace, key.name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return obj

    def capabilities(self) -> Capabilities:
        """The server's version and API versions (what a Helm render is told), read once."""
        with self._answers(lambda exc: self._unavailable(f"the server's version: {exc}")):
            return self.api.capabilities()

    def _settled(self, desired: Manifest, live: Manifest | None) -> bool:
        """``settled``, or the server's last answer to ``desired`` is what lives there
        (:mod:`~convoy_batch.deployers.serverform`); remembered per (object, render) and
        live copy: the apply that follows a dry run in the same reconcile does not compare
        the same pair again, and an object its dry run found in sync is not applied."""
        if live is None or (is_hook(desired) and meta(live).get("deletionTimestamp")):
            return False  # a hook being deleted is gone: created again (``_apply_one``)
        if self._settled_pairs.get(_pair(desired)) is live:
            return True
        if settled(desired, live) or self._server_forms.matches(desired, live):
            self._settled_pairs[_pair(desired)] = live
            return True
        return False

    def _live_of(self, objects: Sequence[Manifest]) -> dict[Identity, Manifest | None]:
        found = self.get_many(key_of(o) for o in objects)
        return {key.identity(): obj for key, obj in found.items()}

    # --- dry run --------------------------------------------------------------------

    def _forms(self, objects: Sequence[Manifest], rules: Rules) -> list[Manifest]:
        """What convoy-batch manages of each object (``drift.managed``, ``with_defaults``):
        what is compared, dry-run and applied; the objects with ignored paths noted for
        ``_body``."""
        forms = []
        for obj in objects:
            pointers = rules.ignored(obj)
            if not pointers:
                forms.append(with_defaults(obj))
                continue
            form = with_defaults(dict(managed(obj, pointers)))
            if WHOLE not in pointers:
                self._ignoring[key_of(obj).identity()] = (with_defaults(obj), pointers)
            forms.append(form)
        return forms

    def _body(self, form: Manifest, current: Manifest | None) -> Manifest:
        """What is sent for ``form``: the whole manifest to create the object; to update
        it, ``form`` with the live values at its ignored paths that no other manager
        owns (see module doc)."""
        identity = key_of(form).identity()
        ignoring = self._ignoring.get(identity)
        if ignoring is None:
            return form
        whole, pointers = ignoring
        if current is None:
            return whole
        fields = self._owners.get(identity) or meta(current).get("managedFields") or []
        ours = [p for p in pointers if not owned_by_others(current, fields, p, FIELD_MANAGER)]
        return dict(restore(form, current, ours))

    def dry_run(self, objects: Sequence[Manifest], rules: Rules = NO_RULES) -> None:
        """DryRunFailed (server's message, object) for the first object the server refuses."""
        if problem := next(filter(None, map(shape_problem, objects)), None):
            raise DryRunFailed(f"dry run refused {problem}")
        objects = self._forms(objects, rules)
        self._namespaces.update(
            (str(meta(o).get("name")), o) for o in objects if o.get("kind") == "Namespace"
        )
        live = self._with_unlabelled(objects, self._live_of(objects))
        todo = [o for o in objects if not self._settled(o, live.get(key_of(o).identity()))]
        context = BatchContext(objects)
        with self._answers(lambda exc: DryRunFailed(f"dry run: reading the namespaces: {exc}")):
            context.pending = {n for n in context.namespaces if not self._namespace_exists(n, live)}
        problems = self._run(lambda o: self._dry_run_one(o, live, context), todo)
        if found := next(filter(None, problems), None):
            raise DryRunFailed(found)

    def _dry_run_one(
        self, obj: Manifest, live: Mapping[Identity, Manifest | None], context: BatchContext
    ) -> str | None:
        key = key_of(obj)
        resource = self._resource(key.api_version, key.kind)
        if resource is None:
            if (key.group, key.kind) in context.crd_kinds:
                return context.local_problem(obj)
            return f"dry run refused {key}: the server has no kind {key.kind} in {key.api_version}"
        if key.namespace in context.pending:
            return context.local_problem(obj)  # its namespace comes with this render
        current = live.get(key.identity())
        if create_only(obj) and current is not None:
            return None  # only convoy-batch's own label and annotation are written
        try:
            with self._answers(refused=None):
                if is_hook(obj) and current is not None:
                    self._dry_run_create(resource, obj)
                else:
                    answer = self._patch(resource, self._body(obj, current), dry_run=True)
                    self._answered(obj, answer, current)
        except ApiError as exc:
            if exc.status == 404 and key.namespace in context.namespaces:
                return context.local_problem(obj)  # its namespace comes with this render
            return f"dry run refused {key}: {exc}"
        return None

    def _answered(self, obj: Manifest, answer: Manifest, current: Manifest | None) -> None:
        """Remember the server's form of ``obj``; when the live copy already is that form,
        it is settled for this tick: the apply sends nothing for it."""
        self._server_forms.remember(obj, answer)
        self._dry_answers[_pair(obj)] = answer
        if current is not None and in_sync(obj, answer, current):
            self._settled_pairs[_pair(obj)] = current

    def _namespace_exists(self, name: str, live: Mapping[Identity, Manifest | None]) -> bool:
        """From the labelled listing, else from one LIST of every namespace per tick (they
        are few; someone else may have created it), else, when that is forbidden, a GET."""
        namespace = ObjectKey(api_version="v1", kind="Namespace", name=name)
        if live.get(namespace.identity()) is not None or name in self._namespace_names:
            return True
        with self._reads:
            if self._all_namespaces is None:
                try:
                    listing = self.api.request("GET", "/api/v1/namespaces")
                    items = listing.get("items") or []
                    self._all_namespaces = True
                    self._namespace_names.update(str(i["metadata"]["name"]) for i in items)
                except Forbidden:  # may not list namespaces: each is read alone
                    self._all_namespaces = False
        if self._all_namespaces:
            return name in self._namespace_names
        return self._get(namespace) is not None

    def _dry_run_create(self, resource: Resource, obj: Manifest) -> None:
        """A create under a generated name: the live copy of a hook is replaced, not patched."""
        created = {k: v for k, v in meta(obj).items() if k != "name"}
        created["generateName"] = str(meta(obj).get("name", ""))[:50] + "-"
        query = {"dryRun": "All", "fieldManager": FIELD_MANAGER}
        body = {**obj, "metadata": created}
        self.api.request("POST", resource.path(created.get("namespace")), query, body)

    # --- apply ----------------------------------------------------------------------

    def apply(self, objects: Sequence[Manifest], rules: Rules = NO_RULES) -> int:
        """Server-side apply (manager convoy-batch, force) of what differs from live; how
        many objects it sent."""
        written = 0
        with self._answers():
            objects = [*self._missing_namespaces(objects), *self._forms(objects, rules)]
            live = self._with_unlabelled(objects, self._live_of(objects))
            self._crds |= crd_kinds(objects)
            for stage in stages(objects):
                todo = [o for o in stage if not self._settled(o, live.get(key_of(o).identity()))]
                problems = self._run(
                    lambda o: self._apply_one(o, live.get(key_of(o).identity())), todo
                )
                if found := next(filter(None, problems), None):
                    raise ApplyFailed(found)
                written += len(todo)
        return written

    def _missing_namespaces(self, objects: Sequence[Manifest]) -> list[Manifest]:
        """Namespaces of the render (seen by its dry run) that these objects need and that
        do not exist yet: a PreSync hook or an early wave may live in a namespace that the
        render creates in a later wave."""
        present = {str(meta(o).get("name")) for o in objects if o.get("kind") == "Namespace"}
        needed = {str(meta(o).get("namespace") or "") for o in objects} - present
        wanted = [self._namespaces[n] for n in sorted(needed) if n in self._namespaces]
        found = self.get_many(key_of(ns) for ns in wanted)
        return [ns for ns in wanted if found.get(key_of(ns)) is None]

    def _apply_one(self, obj: Manifest, current: Manifest | None) -> str | None:
        key = key_of(obj)
        try:
            resource = self._served(key)
            if resource is None:
                return f"apply {key}: the server has no kind {key.kind} in {key.api_version}"
            if create_only(obj) and current is not None:
                applied = self._mark(resource, obj)
            else:
                if is_hook(obj) and current is not None:
                    log.info(
                        "%s: creating the hook again (a new render, or it is being deleted)", key
                    )
                    if not self._delete_and_wait(resource, key, "Background", HOOK_DELETE_WAIT):
                        return f"apply {key}: the previous render's hook is still being deleted"
                body = self._body(obj, current)
                applied = self._patch(resource, holding(body) if is_hook(obj) else body, False)
                self._server_forms.remember(obj, applied)
        except ApiError as exc:
            return f"apply {key}: {exc}"
        self._keep(applied)
        if key.kind == "Namespace" and not key.group:
            self._namespace_names.add(key.name)
        return None

    def _served(self, key: ObjectKey) -> Resource | None:
        """The kind's resource, waiting for a CRD applied in this tick to be established."""
        resource = self._resource(key.api_version, key.kind)
        if resource is not None or (key.group, key.kind) not in self._crds:
            return resource
        deadline = time.monotonic() + CRD_WAIT
        while resource is None and time.monotonic() < deadline:
            time.sleep(POLL)
            resource = self.api.resources(key.api_version, refresh=True).get(key.kind)
        return resource

    def _patch(self, resource: Resource, obj: Manifest, dry_run: bool) -> Manifest:
        query = {"fieldManager": FIELD_MANAGER, "force": "true"}
        if dry_run:
            query["dryRun"] = "All"
        path = resource.path(meta(obj).get("namespace"), str(meta(obj).get("name")))
        result: Manifest = self.api.request("PATCH", path, query, obj, APPLY_PATCH)
        return result

    def _mark(self, resource: Resource, obj: Manifest) -> Manifest:
        """A merge patch of convoy-batch's label and render annotation alone: what a
        create-only object that exists is sent (Flux ``ssa: IfNotPresent``)."""
        path = resource.path(meta(obj).get("namespace"), str(meta(obj).get("name")))
        query = {"fieldManager": FIELD_MANAGER}
        result: Manifest = self.api.request("PATCH", path, query, bookkeeping(obj), MERGE_PATCH)
        return result

    def _with_unlabelled(
        self, objects: Sequence[Manifest], live: dict[Identity, Manifest | None]
    ) -> dict[Identity, Manifest | None]:
        """``live`` with the create-only objects that exist without convoy-batch's label
        (one GET each: the LISTs read labelled objects only), which are never applied over."""
        for obj in objects:
            if create_only(obj) and live.get(key_of(obj).identity()) is None:
                live[key_of(obj).identity()] = self.get(key_of(obj))
        return live

    def _run(self, fn: Callable[[Manifest], T], items: Sequence[Manifest]) -> list[T]:
        """``fn`` over ``items``, results in the items' order: a large batch several at a
        time; a small one in the calling thread (Releases run side by side already, and
        handing each request to another thread costs more than it saves)."""
        if len(items) <= SMALL_BATCH:
            return [fn(item) for item in items]
        return list(self._workers.map(fn, items))

    # --- drift ----------------------------------------------------------------------

    def drift(
        self, objects: Sequence[Manifest], rules: Rules = NO_RULES
    ) -> dict[Identity, tuple[str, ...]]:
        """The paths where each live object differs from the server's answer to its dry
        run (this tick's, else one made now), for the objects that exist and are not
        settled; hooks and create-only objects never drift."""
        found: dict[Identity, tuple[str, ...]] = {}
        forms = self._forms(objects, rules)
        live = self._live_of(forms)
        for form in forms:
            identity = key_of(form).identity()
            current = live.get(identity)
            if current is None or is_hook(form) or create_only(form):
                continue
            if self._settled(form, current):
                continue
            answer = self._dry_answers.get(_pair(form)) or self._dry_answer(form, current)
            if paths := drifted(form, answer, current):
                found[identity] = tuple(paths)
        return found

    def _dry_answer(self, form: Manifest, current: Manifest) -> Manifest:
        key = key_of(form)
        with self._answers(lambda exc: DryRunFailed(f"dry run refused {key}: {exc}")):
            resource = self._resource(key.api_version, key.kind)
            if resource is None:
                raise DryRunFailed(f"dry run refused {key}: the server has no kind {key.kind}")
            return self._patch(resource, self._body(form, current), dry_run=True)

    # --- delete ---------------------------------------------------------------------

    def delete(self, key: ObjectKey) -> bool:
        """Foreground delete; True once the object is gone (PruneFailed, ClusterUnavailable)."""
        with self._answers(lambda exc: PruneFailed(f"delete {key}: {exc}")):
            resource = self._resource(key.api_version, key.kind)
            if resource is None:
                return True  # the kind is no longer served: nothing of it is left
            gone = self._delete_and_wait(resource, key, "Foreground", DELETE_WAIT)
        if gone:
            self._live[key.identity()] = None
        return gone

    def let_go(self, keys: Iterable[ObjectKey]) -> None:
        """Remove convoy-batch's hook finalizer from those of these objects that hold it
        (read from this tick's LISTs: nothing is sent for the others); ClusterUnavailable."""
        with self._answers(lambda exc: self._unavailable(f"hook finalizer: {exc}")):
            for key, live in self._lookup(keys).items():
                resource = self._resource(key.api_version, key.kind)
                if live is not None and resource is not None and held(live):
                    self._let_go(resource, key, live)

    def _let_go(self, resource: Resource, key: ObjectKey, live: Manifest) -> None:
        """A JSON patch removing the finalizer where ``live`` has it (``test`` first: a
        list changed since is left for the next tick); 404, 409 and 422: nothing to do."""
        finalizers = list(meta(live).get("finalizers") or ())
        at = f"/metadata/finalizers/{finalizers.index(HOOK_FINALIZER)}"
        patch = [{"op": "test", "path": at, "value": HOOK_FINALIZER}, {"op": "remove", "path": at}]
        path = resource.path(key.namespace, key.name)
        try:
            query = {"fieldManager": FIELD_MANAGER}
            answer = self.api.request("PATCH", path, query, patch, JSON_PATCH)
        except ApiError as exc:
            if exc.status in (404, 409, 422):
                return
            raise
        log.info("%s: hook finalizer removed", key)
        gone = meta(answer).get("deletionTimestamp") and not meta(answer).get("finalizers")
        if gone:
            self._live[key.identity()] = None
        else:
            self._keep(answer)

    def namespace_objects(self, namespace: str) -> list[ObjectKey]:
        """What ``namespace`` holds: one LIST (of one object) per namespaced kind the server
        serves, the cluster's own objects (:data:`CLUSTER_MADE`, events) left out."""
        found: list[ObjectKey] = []
        seen: set[tuple[str, str]] = set()
        with self._answers(lambda exc: self._unavailable(f"list namespace {namespace}: {exc}")):
            served = self.api.capabilities().api_versions
            for api_version in (v for v in served if not v.rsplit("/", 1)[-1][:1].isupper()):
                for resource in self.api.resources(api_version).values():
                    kind = (group_of(api_version), resource.kind)
                    if not resource.namespaced or kind in seen or resource.kind == "Event":
                        continue
                    seen.add(kind)
                    found += self._held(resource, namespace)
        return found

    def _held(self, resource: Resource, namespace: str) -> list[ObjectKey]:
        try:
            page = self.api.request("GET", resource.path(namespace), {"limit": "20"})
        except ApiError:  # not listable (405), or gone meanwhile (404)
            return []
        keys = []
        for item in page.get("items") or []:
            item["apiVersion"], item["kind"] = resource.api_version, resource.kind
            if not _cluster_made(item):
                keys.append(key_of(item))
        return keys

    def _delete_and_wait(
        self, resource: Resource, key: ObjectKey, policy: str, wait: float
    ) -> bool:
        path = resource.path(key.namespace, key.name)
        try:
            answer = self.api.request("DELETE", path, {"propagationPolicy": policy})
        except ApiError as exc:
            if exc.status == 404:
                return True
            raise
        if isinstance(answer, dict) and answer.get("kind") != "Status" and held(answer):
            self._let_go(resource, key, answer)  # a hook: nothing is left to read of it
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self._get(key) is None:
                return True
            time.sleep(POLL)
        return False
