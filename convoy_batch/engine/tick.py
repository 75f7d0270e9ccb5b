"""One tick's context: everything read once per tick and shared by every Release.

Opens the GitOps repository, reads its snapshot and every status file once, and
hands out the stores and one deployer per Cluster. Does I/O (through the stores).

What is whose. The context, read-only once opened: ``now``, ``repo``, ``snapshot``,
``forced``, ``stores``, ``status_store``, ``sources``, ``charts``, and handles that guard
themselves: the inventories (:class:`~convoy_batch.store.Inventories`), the deployers
(:class:`~convoy_batch.deployers.factory.Deployers`). What Releases share across threads
is one object, :class:`~convoy_batch.engine.shared.Shared` (HEAD's statuses as opened,
each Release's render and new status, a ReleaseSet's flights, the ownership index, the
parse caches, the CEL programs), whose docstring is the threading rule; a status is
assembled and committed at :attr:`Tick.desk`; what the retirement pass decides of removed
Releases is :class:`Retired`, given whole. Nothing of one Release is written in a field of
the context: its reconcile is a value of its own
(:class:`~convoy_batch.engine.run.ReleaseRun`).

Every cache, in one table (each module states its own invariant where the cache is
built; this is the index). Cache: key; valid while; lifetime and invalidation.

- ``Shared.rendered``: Release; the tick's snapshot; until the Release is handled,
  unless another Release depends on it (:meth:`Tick.let_go`).
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
- ``Shared.programs``: CEL expression text; one tick.
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
from collections.abc import Callable, Collection, Mapping, Set
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from types import MappingProxyType

import git

from convoy_batch.deployers.base import Deployer
from convoy_batch.deployers.factory import DeployerFactory, Deployers, make_deployer
from convoy_batch.deployers.targets import Targets
from convoy_batch.engine.handler import StatusDesk
from convoy_batch.engine.ownership import Ownership
from convoy_batch.engine.shared import Shared
from convoy_batch.engine.stages.act import BeforeChange, Writes, no_record
from convoy_batch.errors import UsageError
from convoy_batch.health.cel import Programs
from convoy_batch.models import Cluster, ObjectKey, ReleaseInventory, ReleaseStatus
from convoy_batch.renderers.charts import ChartResolver
from convoy_batch.renderers.pipeline import Rendered
from convoy_batch.repo.gitops import GitOpsRepo, GitOpsSnapshot
from convoy_batch.repo.source import SourceResolver
from convoy_batch.state.caches import ParseCache
from convoy_batch.state.files import os_problem
from convoy_batch.status.store import StatusStore
from convoy_batch.store import Inventories, Stores

log = logging.getLogger("convoy_batch")


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


@dataclass(frozen=True)
class Retired:
    """What the retirement pass (``engine/retire.py``) decided of removed Releases, as the
    tick holds it: one value, given whole by that pass's entry points on the tick's thread
    (where they were, before any deployer is made; then whose status file goes)."""

    gone: Mapping[str, str] = field(default_factory=dict)
    """Removed Release -> its Cluster, as its last committed version said."""
    removed: frozenset[str] = frozenset()
    """Removed Releases whose status file this tick removes (a retirement's commit)."""


@dataclass
class Tick:
    """What one tick reads once: the clock, the repository, statuses, stores; what its
    Releases share across threads is :attr:`shared`."""

    now: datetime
    repo: GitOpsRepo
    stores: Stores
    snapshot: GitOpsSnapshot
    status_store: StatusStore
    sources: SourceResolver
    inventories: Inventories
    charts: ChartResolver
    """Helm charts from repositories, resolved once a tick against ``now``."""
    shared: Shared
    deployers: Deployers
    """Builds the deployer of each Cluster the tick talks to (once, see :meth:`deployer`)."""
    forced: Set[str] = frozenset()
    retired: Retired = field(default_factory=Retired)

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
        opened = MappingProxyType(status_store.load_all(caches["repo"]))
        return cls(
            now=now,
            repo=repo,
            stores=stores,
            snapshot=repo.snapshot(caches["repo"], revision),
            status_store=status_store,
            sources=SourceResolver(repo, state_dir, commit if revision else None),
            inventories=Inventories(stores.inventories, stores.health),
            charts=ChartResolver(state_dir, now),
            shared=Shared(opened=opened, caches=caches),
            deployers=Deployers(deployer_factory),
            forced=forced,
        )

    @property
    def opened(self) -> Mapping[str, ReleaseStatus]:
        """Every status file of HEAD as the tick opened it (never written)."""
        return self.shared.opened

    @property
    def rendered(self) -> Mapping[str, Rendered]:
        """Release -> its render of this tick, while the tick holds it (a view)."""
        return MappingProxyType(self.shared.rendered)

    @property
    def programs(self) -> Programs:
        return self.shared.programs

    def status(self, name: str) -> ReleaseStatus:
        """The Release's status: the one this tick committed, else the one it opened."""
        return self.shared.status_of(name)

    @functools.cached_property
    def desk(self) -> StatusDesk:
        """Where the tick's new statuses are assembled and committed (SPEC 10)."""
        return StatusDesk(self.shared, self.status_store, self.stores.state_dir, self.now)

    def statuses(self) -> dict[str, ReleaseStatus]:
        """Every Release's status as :meth:`status` gives it (the render GC reads them)."""
        merged = {**self.shared.opened, **self.shared.decided}
        removed = self.retired.removed
        return {name: status for name, status in merged.items() if name not in removed}

    def cache(self, name: str) -> ParseCache:
        """A parse cache under ``<state>/cache/``, saved by :meth:`close`."""
        return self.shared.cache(name, self.stores.state_dir / "cache")

    def close(self) -> None:
        """Wait for the tick's writes, save what it learnt for the next one (parse caches)."""
        for path, exc in self.stores.writer.close():
            log.warning("not stored (made again when needed): %s", os_problem(path, exc))
        for cache in self.shared.caches.values():
            cache.save()
        # Let go of what the records' flush does not read: it holds a file of every
        # Release's record at once (10,000: the parse caches and claims are 80 MiB).
        self.shared.caches = {}
        self.deployers.clear()
        self.shared.ownership = None  # it refers back to the tick: no cycle outlives it
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
            self.shared.drop_render(name)
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
        shared = self.shared
        with shared.lock:
            if shared.ownership is None:
                releases = [e.release for e in self.snapshot.releases.values() if e.release]
                shared.ownership = Ownership(
                    [r.name for r in releases],
                    {r.name: r.spec.cluster for r in releases},
                    self.inventories.read,
                )
            return shared.ownership

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

        def make() -> Deployer:
            cache = self.cache(f"cluster-{cluster.name}")
            releases = list(self.snapshot.by_cluster.get(cluster.name, ()))
            releases += [n for n, on in self.retired.gone.items() if on == cluster.name]
            return self.deployers.deployer_factory(
                cluster, self.stores.state_dir, self.now, cache, releases
            )

        return self.deployers.get(cluster, self.targets.check, make)
