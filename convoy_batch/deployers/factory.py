"""The deployer a Cluster asks for (SPEC 12): the one place a deployer is built, called by
the tick once it has checked that the Cluster may use its target
(:meth:`convoy_batch.engine.tick.Tick.deployer`)."""

import threading
from collections.abc import Callable, Collection
from datetime import datetime
from pathlib import Path

from convoy_batch.deployers.base import Deployer
from convoy_batch.deployers.directory import DirectoryDeployer, cluster_root
from convoy_batch.deployers.simulated import SimulatedDeployer
from convoy_batch.errors import ClusterNotFound
from convoy_batch.models import Cluster
from convoy_batch.state.caches import ParseCache


def make_deployer(
    cluster: Cluster,
    state_dir: Path,
    now: datetime | None = None,
    cache: ParseCache | None = None,
    releases: Collection[str] = (),
) -> Deployer:
    """The deployer a Cluster asks for, once the tick has checked that the Cluster may use
    its target; no target means a directory cluster (SPEC 1), with the simulated
    controller when the Cluster asks for it and ``now`` is given. ``releases``: the
    Releases on the Cluster (a Kubernetes deployer lists their objects); ``cache``: the
    Cluster's parse cache (what either deployer remembers across ticks)."""
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


class Deployers:
    """One deployer per Cluster per tick (so per-tick caches such as discovery hold), made
    by ``deployer_factory`` once the Cluster's target is one it may use; a refused target
    is remembered (ClusterNotFound each time it is asked for). Guards itself."""

    def __init__(self, factory: DeployerFactory) -> None:
        self.deployer_factory = factory
        self._made: dict[str, Deployer | ClusterNotFound] = {}
        self._lock = threading.Lock()

    def get(
        self, cluster: Cluster, check: Callable[[Cluster], None], make: Callable[[], Deployer]
    ) -> Deployer:
        """The Cluster's deployer: ``check`` its target (ClusterNotFound), then ``make``."""
        with self._lock:
            found = self._made.get(cluster.name)
            if found is None:
                try:
                    check(cluster)
                except ClusterNotFound as exc:
                    found = exc
                else:  # one that cannot be made (unreachable) is tried again when asked
                    found = make()
                self._made[cluster.name] = found
        if isinstance(found, ClusterNotFound):
            raise ClusterNotFound(str(found))
        return found

    def clear(self) -> None:
        with self._lock:
            self._made = {}
