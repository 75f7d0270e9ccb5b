"""What a tick's Releases share across threads (:class:`Shared`), and the lock it owns."""

import functools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from convoy_batch.engine.ownership import Ownership
from convoy_batch.health.cel import Programs
from convoy_batch.models import ReleaseStatus
from convoy_batch.renderers.pipeline import Rendered
from convoy_batch.state.caches import ParseCache

CEL_DISTRIBUTION = "common-expression-language"


@functools.cache
def _cel_library() -> str:
    """The CEL library's name and version (read from its installed metadata, not by
    importing it: see :mod:`convoy_batch.health.cel`)."""
    try:
        return f"{CEL_DISTRIBUTION} {metadata.version(CEL_DISTRIBUTION)}"
    except metadata.PackageNotFoundError:
        return CEL_DISTRIBUTION


@dataclass
class Shared:
    """The only mutable object of a tick that crosses threads; it owns :attr:`lock`.

    Releases on Kubernetes Clusters are reconciled on up to 32 threads
    (``runner.PARALLEL_RELEASES``), one Release per thread under its lock. A thread
    writes its own Release's render (:meth:`keep_render`) and new status
    (:meth:`decide`) and nothing of another's; other Releases' statuses and renders are
    read through :meth:`status_of` and :meth:`render_of` (the dependency gate, and the
    cluster-wave gate, which reads lower waves, finished before this wave started). What
    Releases create together is made once, under :attr:`lock`: the ownership index
    (:attr:`ownership`), a ReleaseSet's flights (:meth:`take_flight`), a parse cache
    (:meth:`cache`). The deployers (:class:`Deployers`), the source resolver, the stores,
    the inventories and the status store guard their own state."""

    opened: Mapping[str, ReleaseStatus]
    """Every status file of HEAD as the tick opened it (never written)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    rendered: dict[str, Rendered] = field(default_factory=dict)
    """Release -> its render of this tick (``stages.render.stage_render``, once a tick),
    until the Release is handled (:meth:`Tick.let_go`)."""
    decided: dict[str, ReleaseStatus] = field(default_factory=dict)
    """Release -> the status this tick committed for it (:func:`engine.handler.commit_status`)."""
    flights: dict[str, set[str]] = field(default_factory=dict)
    """ReleaseSet -> its members that started a rollout in this tick (``maxInFlight``,
    ``stages.gates.max_in_flight_gate``)."""
    ownership: Ownership | None = None
    """See :meth:`Tick.owners`."""
    caches: dict[str, ParseCache] = field(default_factory=dict)
    """Parse caches under ``<state>/cache/`` by name, saved by :meth:`Tick.close`."""
    programs: Programs = field(default_factory=lambda: Programs(library=_cel_library()))
    """The health rules' CEL programs, compiled once per tick by expression text."""

    def status_of(self, name: str) -> ReleaseStatus:
        """The Release's status: the one this tick committed, else the one it opened."""
        return self.decided.get(name) or self.opened.get(name) or ReleaseStatus()

    def decide(self, name: str, status: ReleaseStatus) -> None:
        """The status this tick committed for Release ``name`` (its own thread's)."""
        self.decided[name] = status

    def render_of(self, name: str) -> Rendered | None:
        """The Release's render of this tick, while the tick holds it."""
        with self.lock:
            return self.rendered.get(name)

    def keep_render(self, name: str, rendered: Rendered) -> None:
        with self.lock:
            self.rendered[name] = rendered

    def drop_render(self, name: str) -> None:
        with self.lock:
            self.rendered.pop(name, None)

    def take_flight(
        self, set_name: str, name: str, flying: Callable[[set[str]], list[str]], allowed: int
    ) -> list[str]:
        """The members of ReleaseSet ``set_name`` in flight (``flying`` of those started
        this tick); when fewer than ``allowed``, Release ``name`` starts (an empty list)."""
        with self.lock:
            started = self.flights.setdefault(set_name, set())
            found = flying(started)
            if len(found) >= allowed:
                return found
            started.add(name)
            return []

    def cache(self, name: str, folder: Path) -> ParseCache:
        """The parse cache ``<folder>/<name>.json`` (one per name, whichever thread asks
        first)."""
        found = self.caches.get(name)
        if found is None:
            made = ParseCache(folder / f"{name}.json")
            found = self.caches.setdefault(name, made)
        return found
