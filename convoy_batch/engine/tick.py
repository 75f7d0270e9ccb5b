"""One tick's context: everything read once per tick and shared by every Release.

Opens the GitOps repository, reads its snapshot and every status file once, and
hands out the stores and one deployer per Cluster. Does I/O (through the stores).

What is whose. Read-only for the whole tick once opened: ``now``, ``repo``,
``snapshot``, ``forced``, ``stores``, ``sources`` (its own lock). A Release produces its
render (``rendered``), its inventory (``inventories``, ``stored``), its tick record
(``memos``) and its new status (``statuses``): each under its own name only.

The threading rule. Releases on Kubernetes Clusters are reconciled on up to 32 threads
(``runner.PARALLEL_RELEASES``), one Release per thread under its lock. A thread may read
any field, and write the entries of its own Release in ``rendered``, ``inventories``,
``stored``, ``memos`` and ``statuses`` without ``lock`` (one key per thread; a dict's
item assignment is atomic). What Releases create together takes ``lock``: a Cluster's
deployer (:meth:`deployer`), the ownership index (:meth:`owners`), a Release's render
(read under it); a parse cache is made once per name (:meth:`cache`, ``setdefault``).
Other Releases' ``statuses`` are read only by the cluster-wave gate, which reads lower
waves, finished before this wave started. Deployers, the source
resolver and the status store guard their own state.

Every cache, in one table (each module states its own invariant where the cache is
built; this is the index). Cache: key; valid while; lifetime and invalidation.

- ``rendered``: Release; the tick's snapshot; one tick.
- ``memos`` (``<state>/ticks.json``): Release; a hint the callers compare (blob, source
  revision, health); across ticks, rewritten per reconcile.
- render key -> renderRef (in the tick record): Release; the digest of every input of
  the render (files, Release, Cluster, tool, the server's capabilities); across ticks,
  reloaded from the verified render store.
- ``inventories``, ``stored``: Release; read once; one tick.
- health journal (``<state>/health.json``): Release; the SHA-256 of the inventory file
  it was observed over; across ticks, stale once that file is rewritten.
- ``<state>/cache/repo.json``: repository path (status, Release, Cluster, Alert files);
  git blob id; across ticks, entries of gone files stay.
- ``<state>/cache/cluster-<c>.json``: a directory cluster's object file (its stat), a
  Kubernetes object (``k8s:`` keys: a digest of the manifest as sent,
  ``deployers/serverform.py``); across ticks; no Secret is kept; gone entries stay.
- ``<state>/cache/health-<c>.json``: object; a digest of the CEL library, the rule and
  the whole object (``health_rules.py``); across ticks.
- ``programs``: CEL expression text; one tick.
- source resolver: (repository, ref, path); the tick's commits; one tick.
- Kubernetes deployer: kind (its LIST), group version (discovery), object (live); one
  tick, kept current with the server's answers to its own writes.
- directory deployer: object file; its stat; one tick (then the cluster cache above).
- status store: status path; HEAD's blob id; one tick.
- operator files (``operator_files.py``): path; size and modification time; the process.

An inventory has four copies: its file, the health journal's overlay of the file,
``stored`` (what the state directory holds, read or written this tick) and
``inventories`` (what the tick now knows); :meth:`save_inventory` makes the file (or the
journal) agree with ``inventories``.
"""

import functools
import logging
import os
import threading
from collections.abc import Callable, Collection, Set
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from importlib import metadata
from pathlib import Path

from convoy_batch.deployers.base import Deployer
from convoy_batch.deployers.directory import DirectoryDeployer, cluster_root
from convoy_batch.deployers.simulated import SimulatedDeployer
from convoy_batch.engine.ownership import Ownership
from convoy_batch.engine.stages.act import BeforeChange, Writes, no_record
from convoy_batch.health.cel import Programs
from convoy_batch.models import Cluster, ObjectKey, ReleaseInventory, ReleaseStatus, TickRecord
from convoy_batch.renderers.pipeline import Rendered
from convoy_batch.repo.gitops import GitOpsRepo, GitOpsSnapshot
from convoy_batch.repo.source import SourceResolver
from convoy_batch.state.caches import HealthJournal, ParseCache, TickStore
from convoy_batch.state.files import Writer, os_problem
from convoy_batch.state.intents import IntentStore
from convoy_batch.state.locks import Locks
from convoy_batch.status.store import StatusStore
from convoy_batch.store import InventoryStore, RenderStore, open_state

log = logging.getLogger("convoy_batch")
CEL_DISTRIBUTION = "common-expression-language"


@functools.cache
def _cel_library() -> str:
    """The CEL library's name and version (read from its installed metadata, not by
    importing it: see :mod:`convoy_batch.health.cel`)."""
    try:
        return f"{CEL_DISTRIBUTION} {metadata.version(CEL_DISTRIBUTION)}"
    except metadata.PackageNotFoundError:
        return CEL_DISTRIBUTION


def default_state_dir(repo: Path) -> Path:
    """``$CONVOY_STATE``, else ``<repo>/.convoy`` (added to ``.git/info/exclude``)."""
    env = os.environ.get("CONVOY_STATE")
    if env:
        return Path(env)
    exclude = repo / ".git" / "info" / "exclude"
    if exclude.parent.is_dir():
        text = exclude.read_text() if exclude.exists() else ""
        if ".convoy/" not in text.splitlines():
            with exclude.open("a") as f:
                f.write(("" if text.endswith("\n") or not text else "\n") + ".convoy/\n")
    return repo / ".convoy"


@dataclass
class Stores:
    """The machine-local stores under one state directory."""

    state_dir: Path
    renders: RenderStore
    inventories: InventoryStore
    ticks: TickStore
    locks: Locks
    writer: Writer
    """Renders are written through it, in the background."""
    intents: IntentStore
    health: HealthJournal

    @classmethod
    def open(cls, state_dir: Path) -> "Stores":
        """The stores, once the state directory is ready (UsageError when it cannot be)."""
        open_state(state_dir)
        writer = Writer()
        return cls(
            state_dir=state_dir,
            renders=RenderStore(state_dir, writer),
            inventories=InventoryStore(state_dir),
            ticks=TickStore(state_dir),
            locks=Locks(state_dir),
            writer=writer,
            intents=IntentStore(state_dir),
            health=HealthJournal(state_dir),
        )


def make_deployer(
    cluster: Cluster,
    state_dir: Path,
    now: datetime | None = None,
    cache: ParseCache | None = None,
    releases: Collection[str] = (),
) -> Deployer:
    """The deployer a Cluster asks for; no target means a directory cluster (SPEC 1),
    with the simulated controller when the Cluster asks for it and ``now`` is given.
    ``releases``: the Releases on the Cluster (a Kubernetes deployer lists their objects);
    ``cache``: the Cluster's parse cache (what either deployer remembers across ticks)."""
    spec = cluster.spec
    if spec.kubernetes is not None:
        from convoy_batch.deployers import kubernetes  # only Kubernetes Clusters pay its import

        return kubernetes.from_cluster(cluster, state_dir, releases, cache)
    root, within = cluster_root(cluster, state_dir)  # never written outside ``within``
    directory = DirectoryDeployer(root, cache, within=within)
    if spec.simulate is not None and now is not None:
        return SimulatedDeployer(directory, spec.simulate, now)
    return directory


DeployerFactory = Callable[[Cluster, Path, datetime, ParseCache, Collection[str]], Deployer]
"""Builds a Cluster's deployer for one tick, as :func:`make_deployer` does: (Cluster,
state directory, now, the Cluster's parse cache, the names of its Releases). The seam
where tests hand a tick deployers that fail on demand."""


@dataclass
class Tick:
    """What one tick reads once: the clock, the repository, statuses, stores."""

    now: datetime
    repo: GitOpsRepo
    stores: Stores
    snapshot: GitOpsSnapshot
    statuses: dict[str, ReleaseStatus]
    status_store: StatusStore
    sources: SourceResolver
    forced: Set[str] = frozenset()
    deployers: dict[str, Deployer] = field(default_factory=dict)
    memos: dict[str, TickRecord] = field(default_factory=dict)
    caches: dict[str, ParseCache] = field(default_factory=dict)
    inventories: dict[str, ReleaseInventory] = field(default_factory=dict)
    stored: dict[str, ReleaseInventory] = field(default_factory=dict)
    """The inventories as the state directory holds them (read or written this tick)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Guards what Releases reconciled on several threads create together."""
    rendered: dict[str, Rendered] = field(default_factory=dict)
    """Release -> its render of this tick (``stages.render.stage_render``, once a tick)."""
    ownership: Ownership | None = None
    """See :meth:`owners`."""
    deployer_factory: DeployerFactory = make_deployer
    """Builds the deployer of each Cluster the tick talks to (once, see :meth:`deployer`)."""
    programs: Programs = field(default_factory=lambda: Programs(library=_cel_library()))
    """The health rules' CEL programs, compiled once per tick by expression text."""

    @classmethod
    def open(
        cls,
        repo_path: Path,
        state_dir: Path,
        now: datetime,
        forced: Set[str] = frozenset(),
        deployer_factory: DeployerFactory = make_deployer,
        revision: str | None = None,
    ) -> "Tick":
        """The tick of HEAD; with ``revision``, Releases, Clusters and the sources of this
        repository are read at that commit instead (statuses always at HEAD)."""
        repo = GitOpsRepo(repo_path)
        commit = repo.commit(revision)
        stores = Stores.open(state_dir)
        caches = {name: ParseCache(state_dir / "cache" / f"{name}.json") for name in ("repo",)}
        status_store = StatusStore(repo.repo, stores.locks, cache=caches["repo"])
        status_store.recover()  # what a killed tick left half-written in git
        return cls(
            now=now,
            repo=repo,
            stores=stores,
            snapshot=repo.snapshot(caches["repo"], revision),
            statuses=status_store.load_all(caches["repo"]),
            status_store=status_store,
            sources=SourceResolver(repo, state_dir, commit if revision else None),
            forced=forced,
            caches=caches,
            deployer_factory=deployer_factory,
        )

    def status(self, name: str) -> ReleaseStatus:
        return self.statuses.get(name) or ReleaseStatus()

    def cache(self, name: str) -> ParseCache:
        """A parse cache under ``<state>/cache/``, saved by :meth:`close` (one per name,
        whichever thread asks first)."""
        found = self.caches.get(name)
        if found is None:
            made = ParseCache(self.stores.state_dir / "cache" / f"{name}.json")
            found = self.caches.setdefault(name, made)
        return found

    def close(self) -> None:
        """Wait for the tick's writes, save what it learnt for the next one (parse caches)."""
        for path, exc in self.stores.writer.close():
            log.warning("not stored (made again when needed): %s", os_problem(path, exc))
        for cache in self.caches.values():
            cache.save()
        self.stores.ticks.flush()
        self.stores.health.flush()
        self.sources.close()
        self.ownership = None  # it refers back to the tick: no cycle outlives it

    def inventory(self, name: str) -> ReleaseInventory:
        """The Release's inventory as this tick knows it (read once per tick)."""
        if name not in self.inventories:
            stores = self.stores
            inventory = stores.health.overlay(
                stores.inventories.load(name), stores.inventories.digest(name)
            )
            self.inventories[name] = self.stored[name] = inventory
        return self.inventories[name]

    def note_inventory(self, inventory: ReleaseInventory) -> None:
        """What the tick now knows of an inventory, written by :meth:`save_inventory`."""
        self.inventories[inventory.release] = inventory
        self.owners().note_inventory(inventory)

    def claimants(self, name: str) -> Callable[[ObjectKey], Collection[str]]:
        """The other Releases that claim an object of Release ``name`` (for prune)."""
        return partial(self.owners().claimants, name)

    def owners(self) -> Ownership:
        """Which Release each object belongs to (made on first use)."""
        with self.lock:
            if self.ownership is None:
                releases = [e.release for e in self.snapshot.releases.values() if e.release]
                self.ownership = Ownership(
                    [r.name for r in releases],
                    {r.name: r.spec.cluster for r in releases},
                    self.inventory,
                )
            return self.ownership

    def writes(self, name: str, ahead: BeforeChange = no_record) -> Writes:
        """What a step of Release ``name`` writes on the way (see :class:`Writes`): its
        write-ahead record (``ahead``), its inventory, and the claims prune reads."""
        return Writes(ahead=ahead, record=self.recorder(name), claimants=self.claimants(name))

    def recorder(self, name: str) -> Callable[[ReleaseInventory], None]:
        """Writes the Release's inventory now (a step's objects before its first apply)."""

        def record(inventory: ReleaseInventory) -> None:
            self.note_inventory(inventory)
            self.save_inventory(name)

        return record

    def save_inventory(self, name: str) -> None:
        """Write the Release's inventory when it differs from the stored one: durably
        when its entries changed; when only their health did, into the health journal
        (written once, when the tick closes; the observer sees health again)."""
        inventory, stored = self.inventory(name), self.stored.get(name)
        if inventory == stored:
            return
        stores = self.stores
        same_entries = stored is not None and _bookkeeping(inventory) == _bookkeeping(stored)
        if not (same_entries and stores.health.keep(inventory, stores.inventories.digest(name))):
            stores.inventories.save(inventory, durable=not same_entries)
            stores.health.forget(name)
        self.stored[name] = inventory

    def memo(self, name: str) -> TickRecord:
        """What the state directory remembers of the Release's last reconcile (read once)."""
        if name not in self.memos:
            self.memos[name] = self.stores.ticks.load(name)
        return self.memos[name]

    def health_memo(self, cluster: Cluster) -> ParseCache:
        """Where the results of the Cluster's health rules are remembered across ticks
        (:mod:`convoy_batch.health.cel` states the key and invariant)."""
        return self.cache(f"health-{cluster.name}")

    def deployer(self, cluster: Cluster) -> Deployer:
        """One deployer per Cluster per tick (so per-tick caches such as discovery hold)."""
        with self.lock:
            if cluster.name not in self.deployers:
                cache = self.cache(f"cluster-{cluster.name}")
                releases = [
                    e.release.name
                    for e in self.snapshot.releases.values()
                    if e.release is not None and e.release.spec.cluster == cluster.name
                ]
                self.deployers[cluster.name] = self.deployer_factory(
                    cluster, self.stores.state_dir, self.now, cache, releases
                )
            return self.deployers[cluster.name]


def _bookkeeping(inventory: ReleaseInventory) -> list[tuple[object, ...]]:
    """An inventory's entries without their health (a hook's deletion mark is kept: it is
    written before the delete)."""
    return [
        (e.key, e.wave, e.applied_render_ref, e.prune, e.hook_deleted) for e in inventory.entries
    ]
