"""One tick's context: everything read once per tick and shared by every Release.

Opens the GitOps repository, reads its snapshot and every status file once, and
hands out the stores and one deployer per Cluster. Does I/O (through the stores).

What is whose. The context, read-only once opened: ``now``, ``repo``, ``snapshot``,
``opened`` (HEAD's statuses), ``forced``, ``stores``, ``status_store``, ``sources``. What
a Release produces is apart from it, each under the Release's name: its render in
``rendered``, its inventory in ``inventories`` (:class:`~convoy_batch.store.Inventories`),
its tick record in the tick store, its new status in ``decided`` (and the status store's
commit); nothing of one Release is written in a field of the context. The tick builds,
once each, what Releases share: deployers, parse caches, the ownership index, the CEL
programs.

The threading rule. Releases on Kubernetes Clusters are reconciled on up to 32 threads
(``runner.PARALLEL_RELEASES``), one Release per thread under its lock. A thread may read
anything, and write its own Release's entries in ``rendered``, ``inventories`` and
``decided`` and its own tick record without ``lock`` (one key per thread; a dict's item
assignment is atomic). What Releases create together takes ``lock``: a Cluster's
deployer (:meth:`deployer`), the ownership index (:meth:`owners`), a Release's render
(read under it); a parse cache is made once per name (:meth:`cache`, ``setdefault``).
Other Releases' statuses are read only by the cluster-wave gate, which reads lower
waves, finished before this wave started. Deployers, the source resolver, the stores
and the status store guard their own state.

Every cache, in one table (each module states its own invariant where the cache is
built; this is the index). Cache: key; valid while; lifetime and invalidation.

- ``rendered``: Release; the tick's snapshot; until the Release is handled, unless another
  Release depends on it (:meth:`let_go`).
- tick records (``<state>/ticks.json``, ``TickStore``): Release; a hint the callers
  compare (blob, source revision, health); across ticks, rewritten per reconcile, parsed
  once per tick.
- render key -> renderRef (in the tick record): Release; the digest of every input of
  the render (files, Release, Cluster, tool, the server's capabilities); across ticks,
  reloaded from the verified render store.
- ``inventories``: Release; read once for its Release (observed just before its
  reconcile); until the Release is handled and its inventory stored (its four copies:
  ``Inventories``). The ownership index reads the others' without keeping them.
- health journal (``<state>/health.json``): Release; the SHA-256 of the inventory file
  it was observed over; across ticks, stale once that file is rewritten.
- ``<state>/cache/repo.json``: repository path (status, Release, Cluster, Alert files);
  git blob id; across ticks, entries of gone files stay.
- ``<state>/cache/cluster-<c>.json``: a directory cluster's object file (its stat), a
  Kubernetes object (``k8s:`` keys: a digest of the manifest as sent, whatever its keys'
  order, ``deployers/serverform.py``); across ticks; no Secret is kept; gone entries stay.
- ``<state>/cache/health-<c>.json``: object; a digest of the CEL library, the rule and
  the whole object (``health/cel.py``); across ticks.
- ``programs``: CEL expression text; one tick.
- source resolver: (repository, ref, path); the tick's commits; one tick.
- a removed Release's last committed version (``GitOpsRepo.last_version``): (name, head
  commit); for ever (history is fixed); one tick.
- Kubernetes deployer: kind (its LIST), group version (discovery), object (live); one
  tick, kept current with the server's answers to its own writes.
- directory deployer: object file; its stat; one tick (then the cluster cache above).
- target checks (``targets``, ``refused``): Cluster; the tick's snapshot and the
  operator's roots files; one tick.
- status store: status path; HEAD's blob id; one tick.
- operator files (``operator_files.py``): path; size and modification time; the process.
"""

import functools
import logging
import os
import threading
from collections.abc import Callable, Collection, Mapping, Set
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from importlib import metadata
from pathlib import Path
from types import MappingProxyType

import git

from convoy_batch.deployers.base import Deployer
from convoy_batch.deployers.directory import DirectoryDeployer, cluster_root
from convoy_batch.deployers.simulated import SimulatedDeployer
from convoy_batch.deployers.targets import Targets
from convoy_batch.engine.ownership import Ownership
from convoy_batch.engine.stages.act import BeforeChange, Writes, no_record
from convoy_batch.errors import ClusterNotFound, UsageError
from convoy_batch.health.cel import Programs
from convoy_batch.models import Cluster, ObjectKey, ReleaseInventory, ReleaseStatus
from convoy_batch.renderers.charts import ChartResolver
from convoy_batch.renderers.pipeline import Rendered
from convoy_batch.repo.gitops import GitOpsRepo, GitOpsSnapshot
from convoy_batch.repo.source import SourceResolver
from convoy_batch.state.caches import HealthJournal, ParseCache, TickStore
from convoy_batch.state.files import Writer, os_problem
from convoy_batch.state.intents import IntentStore, RetiringStore
from convoy_batch.state.locks import Locks
from convoy_batch.status.store import StatusStore
from convoy_batch.store import Inventories, InventoryStore, RenderStore, open_state

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
    retiring: RetiringStore
    """Write-ahead records of removed Releases' retirements."""

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
            retiring=RetiringStore(state_dir),
        )


def make_deployer(
    cluster: Cluster,
    state_dir: Path,
    now: datetime | None = None,
    cache: ParseCache | None = None,
    releases: Collection[str] = (),
) -> Deployer:
    """The deployer a Cluster asks for, once the tick has checked that the Cluster may use
    its target (:meth:`Tick.deployer`); no target means a directory cluster (SPEC 1),
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


def refuse_tracked_state(repo: GitOpsRepo, state_dir: Path) -> None:
    """UsageError (no tick) when HEAD holds a file of the state directory (one inside the
    working tree, as the default ``<repo>/.convoy``): a checkout would have written the
    operator's files (``renderers.yaml``, ``credentials.yaml``, ...) or convoy-batch's
    state from a commit, and git overwrites ignored files. No Release can be trusted to
    run then, so none is: a person removes the files from git and checks the folder."""
    tree = Path(os.path.realpath(repo.repo.working_tree_dir or repo.path))
    state = Path(os.path.realpath(state_dir))
    if not state.is_relative_to(tree) or state == tree:
        return
    try:
        held = repo.repo.head.commit.tree / state.relative_to(tree).as_posix()
    except (KeyError, ValueError):  # nothing there (or no commit yet)
        return
    if isinstance(held, git.Tree):
        files = sorted(str(item.path) for item in held.traverse() if isinstance(item, git.Blob))
    else:
        files = [str(held.path)]
    if files:
        shown_files = ", ".join(files[:3]) + (
            f" and {len(files) - 3} more" if len(files) > 3 else ""
        )
        raise UsageError(
            f"the GitOps repository's HEAD holds files of the state directory ({shown_files}): "
            "a commit never holds the operator's files or convoy-batch's state; remove them "
            "from git (git rm -r --cached) and check the state directory, then tick again"
        )


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
    opened: Mapping[str, ReleaseStatus]
    """Every status file of HEAD as the tick opened it (never written)."""
    status_store: StatusStore
    sources: SourceResolver
    inventories: Inventories
    charts: ChartResolver
    """Helm charts from repositories, resolved once a tick against ``now``."""
    forced: Set[str] = frozenset()
    decided: dict[str, ReleaseStatus] = field(default_factory=dict)
    """Release -> the status this tick committed for it (:func:`engine.handler.commit_status`)."""
    gone: dict[str, str] = field(default_factory=dict)
    """Removed Release -> its Cluster, as its last committed version said (set by the
    retirement pass, ``engine/retire.py``, before any deployer is made)."""
    removed: set[str] = field(default_factory=set)
    """Removed Releases whose status file this tick removes (a retirement's commit)."""
    deployers: dict[str, Deployer] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    """Cluster -> why its target may not be used (:meth:`deployer`), for the tick."""
    caches: dict[str, ParseCache] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Guards what Releases reconciled on several threads create together."""
    rendered: dict[str, Rendered] = field(default_factory=dict)
    """Release -> its render of this tick (``stages.render.stage_render``, once a tick),
    until the Release is handled (:meth:`let_go`)."""
    flights: dict[str, set[str]] = field(default_factory=dict)
    """ReleaseSet -> its members that started a rollout in this tick (``maxInFlight``,
    ``stages.gates.max_in_flight_gate``; under :attr:`lock`)."""
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
        refuse_tracked_state(repo, state_dir)
        stores = Stores.open(state_dir)
        caches = {name: ParseCache(state_dir / "cache" / f"{name}.json") for name in ("repo",)}
        status_store = StatusStore(repo.repo, stores.locks, cache=caches["repo"])
        status_store.recover()  # what a killed tick left half-written in git
        return cls(
            now=now,
            repo=repo,
            stores=stores,
            snapshot=repo.snapshot(caches["repo"], revision),
            opened=MappingProxyType(status_store.load_all(caches["repo"])),
            status_store=status_store,
            sources=SourceResolver(repo, state_dir, commit if revision else None),
            inventories=Inventories(stores.inventories, stores.health),
            charts=ChartResolver(state_dir, now),
            forced=forced,
            caches=caches,
            deployer_factory=deployer_factory,
        )

    def status(self, name: str) -> ReleaseStatus:
        """The Release's status: the one this tick committed, else the one it opened."""
        return self.decided.get(name) or self.opened.get(name) or ReleaseStatus()

    def statuses(self) -> dict[str, ReleaseStatus]:
        """Every Release's status as :meth:`status` gives it (the render GC reads them)."""
        merged = {**self.opened, **self.decided}
        return {name: status for name, status in merged.items() if name not in self.removed}

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
        # Let go of what the records' flush does not read: it holds a file of every
        # Release's record at once (10,000: the parse caches and claims are 80 MiB).
        self.caches, self.deployers = {}, {}
        self.ownership = None  # it refers back to the tick: no cycle outlives it
        self.sources.remember()
        self.stores.ticks.flush()
        self.stores.health.flush()
        self.sources.close()

    def inventory(self, name: str) -> ReleaseInventory:
        """The Release's inventory as this tick knows it (read once per tick)."""
        return self.inventories.get(name)

    def note_inventory(self, inventory: ReleaseInventory) -> None:
        """What the tick now knows of an inventory, written by :meth:`save_inventory`."""
        self.inventories.note(inventory)
        self.owners().note_inventory(inventory)

    def let_go(self, name: str) -> None:
        """Forget what the tick holds of a handled Release that no later step reads: its
        render, unless another Release depends on it (a dependent's gate reads it later
        in the tick, once per dependent), and its inventory (read again from its file if
        asked)."""
        if name not in self.depended_on:
            with self.lock:
                self.rendered.pop(name, None)
        self.inventories.let_go(name)

    @functools.cached_property
    def depended_on(self) -> frozenset[str]:
        """The Releases another Release depends on (``spec.dependsOn``)."""
        releases = (e.release for e in self.snapshot.releases.values() if e.release)
        return frozenset(d.name for r in releases for d in r.spec.depends_on)

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
                    self.inventories.read,
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
        """Write the Release's inventory when it changed (:meth:`Inventories.save`)."""
        self.inventories.save(name)

    def health_memo(self, cluster: Cluster) -> ParseCache:
        """Where the results of the Cluster's health rules are remembered across ticks
        (:mod:`convoy_batch.health.cel` states the key and invariant)."""
        return self.cache(f"health-{cluster.name}")

    def observed_memo(self, cluster: Cluster) -> ParseCache:
        """Where what the Cluster's objects were seen as is remembered across ticks
        (:mod:`convoy_batch.health.observer` states the key and invariant)."""
        return self.cache(f"observed-{cluster.name}")

    @functools.cached_property
    def targets(self) -> Targets:
        """What each Cluster's target is checked against before its deployer is made
        (:mod:`convoy_batch.deployers.targets`): the state directory, the snapshot's
        Clusters, the repository's working tree and git folder."""
        git_repo = self.repo.repo
        tree = Path(git_repo.working_tree_dir or self.repo.path)
        state_dir = self.stores.state_dir
        return Targets(state_dir, self.snapshot.clusters, (tree, Path(git_repo.git_dir)))

    def deployer(self, cluster: Cluster) -> Deployer:
        """One deployer per Cluster per tick (so per-tick caches such as discovery hold),
        made once the Cluster's target is one it may use (ClusterNotFound, each time it is
        asked for, when it is not: :meth:`targets`)."""
        with self.lock:
            if cluster.name in self.refused:
                raise ClusterNotFound(self.refused[cluster.name])
            if cluster.name not in self.deployers:
                try:
                    self.targets.check(cluster)
                except ClusterNotFound as exc:
                    self.refused[cluster.name] = str(exc)
                    raise
                cache = self.cache(f"cluster-{cluster.name}")
                releases = list(self.snapshot.by_cluster.get(cluster.name, ()))
                releases += [n for n, on in self.gone.items() if on == cluster.name]
                self.deployers[cluster.name] = self.deployer_factory(
                    cluster, self.stores.state_dir, self.now, cache, releases
                )
            return self.deployers[cluster.name]
