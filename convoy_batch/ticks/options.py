"""What a tick is asked to do (:class:`TickOptions`) and what it reports
(:class:`TickReport`): the values the CLI, the Dagster assets and the shards pass to and
read from :mod:`convoy_batch.ticks.runner`."""

import logging
from dataclasses import dataclass, field

from convoy_batch.engine.handler import Handled

log = logging.getLogger("convoy_batch")


@dataclass(frozen=True)
class TickOptions:
    """How a tick runs, passed whole (the command line's and the Dagster op's choices)."""

    names: tuple[str, ...] = ()
    """Reconcile these, due or not; none: the due ones."""
    all_releases: bool = False
    """Every Release (``--all``, the full resync of SPEC 13)."""
    forced: frozenset[str] = frozenset()
    """Releases with a forced sync pending (``--force``, a manual materialization)."""
    observe_first: bool = True
    """Refresh health before deciding (``--no-observe``: left to ``observe``)."""
    shard: frozenset[str] | None = None
    """Only these Releases: one part of a tick run by several processes."""
    orphan: bool = False
    """End the named removed Releases as Orphaned, sending nothing (``--orphan``)."""
    allow_deletions: bool = False
    """Let the mass-deletion guard's deletions through (``--allow-deletions``)."""


@dataclass
class TickReport:
    handled: list[Handled] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """Releases not reconciled, with why (not due, busy)."""
    push_warning: str | None = None
    commit_error: str | None = None
    """Why the status commits of the tick were not written (they are on a later tick)."""
    set_warnings: list[str] = field(default_factory=list)
    """One line per ReleaseSet whose members cannot be told (GenerationFailed) and per
    member refused for a name another Release holds."""
    collectable: bool = True
    """Every render of the tick is stored and its statuses are in git, so the render
    garbage collection may read them (a shard's report says so of its part)."""

    @property
    def errored(self) -> bool:
        return self.commit_error is not None or any(h.outcome.is_error for h in self.handled)
