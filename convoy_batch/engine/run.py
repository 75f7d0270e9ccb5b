"""One Release's reconcile in a tick, as one value: :class:`ReleaseRun`.

Built once per reconcile (``reconcile.begin``), after the Release's status and inventory
are read and before anything is decided; every stage after it takes the run and what the
step before it made (the render, the plan, the decision), never the tick. What the run
holds of other Releases it reads through :class:`~convoy_batch.engine.shared.Shared`; the
stores and the deployers guard themselves. A test builds one in memory.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from convoy_batch.deployers.base import Deployer
from convoy_batch.engine.ownership import Ownership
from convoy_batch.engine.shared import Shared
from convoy_batch.engine.stages.act import Writes
from convoy_batch.manifests.drift import Rules
from convoy_batch.models import Cluster, Release, ReleaseInventory, ReleaseStatus
from convoy_batch.renderers.pipeline import Rendered
from convoy_batch.repo.gitops import GitOpsSnapshot
from convoy_batch.repo.source import SourceResolver
from convoy_batch.store import Stores


@dataclass(frozen=True)
class ReleaseRun:
    """What one reconcile of :attr:`release` reads and writes through (SPEC 4)."""

    release: Release
    status: ReleaseStatus
    """Its status as the tick knows it (HEAD's, or the one a killed tick decided)."""
    inventory: ReleaseInventory
    """Its inventory as observed just before this reconcile."""
    now: datetime
    force_at: datetime | None
    """The time of its pending forced sync (None: none is pending)."""
    writes: Writes
    """Its write-ahead record, its inventory and the claims prune reads."""
    rules: Rules
    """Its drift rules with its Cluster's defaults."""
    stores: Stores
    snapshot: GitOpsSnapshot
    """Releases, Clusters and ReleaseSets as the tick read them (the gates read others)."""
    shared: Shared
    """Other Releases' statuses and renders of this tick, and what Releases start together."""
    owners: Callable[[], Ownership]
    """Which Release each object belongs to (the tick's index, made on first use)."""
    sources: SourceResolver
    """The Releases' source files (a metric provider reads the Release's)."""
    render_of: Callable[[Release], Rendered]
    """A Release's render of this tick, made once a tick (its own, a dependency's)."""
    deployer_of: Callable[[Cluster], Deployer]
    """The tick's deployer of a Cluster, made once its target is checked
    (ClusterNotFound, ClusterUnavailable)."""

    @property
    def force_pending(self) -> bool:
        return self.force_at is not None

    @property
    def name(self) -> str:
        return self.release.name
