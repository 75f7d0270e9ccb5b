"""Which Release an object belongs to (one Release per object on a cluster).

A Release *claims* an object when its inventory holds it or its render of this tick
holds it. Of the Releases claiming the same object on one Cluster, the first in
repository order (the order of their files under ``releases/``) owns it: a later one is
refused before it sends anything (``OwnershipConflict``), so the object is never
changed back and forth, and no prune deletes an object another Release still claims.

Key: (Cluster name, object identity). Invariant: for every Release on a Cluster whose
claims were loaded, the index holds exactly the identities of its inventory as the tick
knows it (:meth:`Ownership.note_inventory` is called on every change) and of its last
render this tick. Built lazily, per Cluster, the first time a Release of it syncs.
"""

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

from convoy_batch.errors import ConvoyError, OwnershipConflict
from convoy_batch.models import Identity, ObjectKey, ReleaseInventory


class Ownership:
    def __init__(
        self,
        order: Sequence[str],
        cluster_of: Mapping[str, str],
        inventory: Callable[[str], ReleaseInventory],
    ) -> None:
        """``order``: Release names in repository order; ``cluster_of``: each Release's
        Cluster; ``inventory``: the tick's view of a Release's inventory."""
        self._rank = {name: i for i, name in enumerate(order)}
        self._cluster_of = dict(cluster_of)
        self._inventory = inventory
        self._loaded: set[str] = set()  # Clusters whose Releases' inventories are indexed
        self._held: dict[str, set[Identity]] = {}  # Release -> identities of its inventory
        self._rendered: dict[str, set[Identity]] = {}  # Release -> of its render this tick
        self._claims: dict[tuple[str, Identity], set[str]] = {}
        self._lock = threading.RLock()

    def note_render(self, release: str, keys: Iterable[ObjectKey]) -> None:
        """The objects of the Release's render of this tick."""
        with self._lock:
            self._replace(self._rendered, release, {k.identity() for k in keys})

    def note_inventory(self, inventory: ReleaseInventory) -> None:
        """The tick now knows this inventory (read, recorded or pruned)."""
        with self._lock:
            if self._cluster_of.get(inventory.release) in self._loaded:
                held = {e.key.identity() for e in inventory.entries}
                self._replace(self._held, inventory.release, held)

    def check(self, release: str, keys: Iterable[ObjectKey]) -> None:
        """OwnershipConflict when an object of ``keys`` is claimed by a Release earlier
        in repository order on the same Cluster (the first such object is named)."""
        rank = self._rank.get(release, len(self._rank))
        with self._lock:
            self._load(self._cluster_of.get(release))
            for key in keys:
                earlier = [
                    other
                    for other in self.claimants(release, key)
                    if self._rank.get(other, len(self._rank)) < rank
                ]
                if earlier:
                    first = min(earlier, key=self._rank.__getitem__)
                    raise OwnershipConflict(
                        f"{key} belongs to Release {first}, which renders or holds it and "
                        "comes first in repository order: an object belongs to one Release"
                    )

    def claimants(self, release: str, key: ObjectKey, cluster: str | None = None) -> set[str]:
        """The other Releases on ``release``'s Cluster (``cluster``: for a removed Release,
        which the repository no longer places) that claim ``key``."""
        cluster = cluster or self._cluster_of.get(release)
        if cluster is None:
            return set()
        with self._lock:
            self._load(cluster)
            return self._claims.get((cluster, key.identity()), set()) - {release}

    def _load(self, cluster: str | None) -> None:
        if cluster is None or cluster in self._loaded:
            return
        self._loaded.add(cluster)
        for name, on in self._cluster_of.items():
            if on == cluster:
                try:
                    inventory = self._inventory(name)
                except ConvoyError:  # unreadable: that Release reports it when it syncs
                    continue
                self._replace(self._held, name, {e.key.identity() for e in inventory.entries})

    def _replace(self, table: dict[str, set[Identity]], release: str, new: set[Identity]) -> None:
        cluster = self._cluster_of.get(release)
        if cluster is None:
            return
        old = table.get(release, set())
        other = (self._rendered if table is self._held else self._held).get(release)
        if other == new:  # a synced Release holds what it renders: one set for both
            new = other  # (the tables' sets are replaced, never changed in place)
        table[release] = new
        for identity in old | new:
            claimed = identity in self._held.get(release, ()) or identity in self._rendered.get(
                release, ()
            )
            names = self._claims.setdefault((cluster, identity), set())
            if claimed:
                names.add(release)
            else:
                names.discard(release)
