"""Which Releases a commit retired, and what becomes of each (issue: deleting a Release).
Pure: decides over values the tick read; nothing here reads git or a cluster.

A Release is *gone* when its status file exists and no file under ``releases/`` at HEAD is
(or could be) that Release. A gone Release is retired only when nothing could make the
reading wrong, and never in a batch that looks like an accident:

- **Pending.** While the repository read failed or any Release file is unreadable or
  invalid, no Release is retired (that file could be the gone one): each gone Release
  waits, naming the file that stops it.
- **Adopted.** A gone Release whose objects another Release on the same Cluster now
  renders hands them over: nothing is deleted, and it is not counted by the guard.
- **Blocked.** At least two retirements that take more than half of the Releases of one
  Cluster, or every Release of the repository, counted over the Releases at the last
  tick's HEAD (the mass-deletion guard), are all held, except those a commit allows
  (``Convoy-Allow-Delete: all`` or a list of names) or ``--allow-deletions``. Members
  of a ReleaseSet are counted per set too: retirements that take more than half of a
  set's members at the last tick's HEAD, or all of them, are held the same way.
- Otherwise a gone Release is deleted or orphaned as its last committed version's
  ``deletionPolicy`` says.
"""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from convoy_batch.reasons import Reason

ALLOW_DELETE_TRAILER = "Convoy-Allow-Delete"
"""The commit trailer that lets the guard's deletions go ahead: ``all``, or names."""


class Fate(StrEnum):
    """What becomes of a gone Release this tick."""

    DELETE = "Delete"
    ORPHAN = "Orphan"
    ADOPTED = "Adopted"
    PENDING = "Pending"
    BLOCKED = "Blocked"


WAITING: Mapping[Fate, Reason] = MappingProxyType(
    {Fate.PENDING: Reason.DELETION_PENDING, Fate.BLOCKED: Reason.DELETION_BLOCKED}
)
"""The reason a removed Release's status gets while its retirement waits: what the
retirement pass commits and what ``plan`` says of such a fate."""


@dataclass(frozen=True)
class Gone:
    """A Release whose file a commit removed, as its last committed version said."""

    name: str
    cluster: str
    delete: bool
    """Its ``deletionPolicy`` is ``Delete`` (else ``Orphan``)."""
    adopted_by: str | None = None
    """The Release on the same Cluster that now renders its objects."""
    release_set: str | None = None
    """The ReleaseSet it was a member of at the last tick's HEAD (None: hand-written)."""


@dataclass(frozen=True)
class Retirement:
    name: str
    fate: Fate
    message: str


@dataclass(frozen=True)
class Allowed:
    """The deletions the guard lets through: every one, or these names."""

    every: bool = False
    names: frozenset[str] = frozenset()

    def __contains__(self, name: object) -> bool:
        return self.every or name in self.names


def allowed_by_trailers(values: Sequence[str]) -> Allowed:
    """The deletions the values of ``Convoy-Allow-Delete`` trailers allow (``all``, or
    names separated by commas or spaces)."""
    names: set[str] = set()
    for value in values:
        words = value.replace(",", " ").split()
        if any(w.lower() == "all" for w in words):
            return Allowed(every=True)
        names.update(words)
    return Allowed(names=frozenset(names))


def retire(
    gone: Sequence[Gone],
    *,
    unreadable: str | None,
    last_releases: Mapping[str, str],
    allowed: Allowed = Allowed(),
    last_sets: Mapping[str, Collection[str]] | None = None,
) -> list[Retirement]:
    """The fate of each gone Release. ``unreadable``: the first repository or Release
    file problem of the tick (None: the whole repository was read); ``last_releases``:
    Release -> Cluster at the last tick's HEAD (the guard's counts); ``last_sets``:
    ReleaseSet -> its members there."""
    if unreadable is not None:
        message = f"deletion waits: {unreadable}"
        return [Retirement(g.name, Fate.PENDING, message) for g in gone]
    leaving = [g for g in gone if g.adopted_by is None]
    blocked = _guard(leaving, last_releases)
    set_blocked = _set_guard(leaving, last_sets or {})
    found = []
    for g in gone:
        held = blocked or set_blocked.get(g.release_set or "")
        if g.adopted_by is not None:
            found.append(Retirement(g.name, Fate.ADOPTED, f"adopted by {g.adopted_by}"))
        elif held is not None and g.name not in allowed:
            found.append(Retirement(g.name, Fate.BLOCKED, held))
        else:
            fate = Fate.DELETE if g.delete else Fate.ORPHAN
            found.append(Retirement(g.name, fate, ""))
    return found


def _guard(leaving: Collection[Gone], last_releases: Mapping[str, str]) -> str | None:
    """Why the guard holds these retirements (the counts), or None."""
    if len(leaving) < 2:
        return None
    per_cluster: dict[str, int] = {}
    for g in leaving:
        per_cluster[g.cluster] = per_cluster.get(g.cluster, 0) + 1
    known = {**{g.name: g.cluster for g in leaving}, **last_releases}
    if len(leaving) >= len(known):
        return f"mass deletion: {len(leaving)} of {len(known)} Releases of the repository"
    for cluster in sorted(per_cluster):
        total = sum(1 for c in known.values() if c == cluster)
        if per_cluster[cluster] * 2 > total:
            return f"mass deletion: {per_cluster[cluster]} of {total} Releases of {cluster}"
    return None


def _set_guard(
    leaving: Collection[Gone], last_sets: Mapping[str, Collection[str]]
) -> dict[str, str]:
    """ReleaseSet -> why the guard holds its members' retirements: more than half of its
    members at the last tick's HEAD, or all of them."""
    per_set: dict[str, int] = {}
    for g in leaving:
        if g.release_set is not None:
            per_set[g.release_set] = per_set.get(g.release_set, 0) + 1
    held = {}
    for name, count in sorted(per_set.items()):
        total = len(last_sets.get(name, ())) or count
        if count * 2 > total:  # all of them too
            held[name] = f"mass deletion: {count} of {total} members of ReleaseSet {name}"
    return held


RETIRED = (Reason.DELETED, Reason.ORPHANED)
"""The states a retirement's commit gives a Release (its status file removed)."""


def retired_subject(name: str, old_state: str, state: Reason, detail: str) -> str:
    """The subject of the commit that removes a retired Release's status file:
    ``web: Succeeded -> Deleted (2 objects deleted, 0 kept)``."""
    return f"{name}: {old_state} -> {state} ({detail})"


def parse_retired(subject: str) -> tuple[Reason, str] | None:
    """(state, detail) of a subject :func:`retired_subject` made; None for another."""
    _, arrow, rest = subject.partition(" -> ")
    state, paren, detail = rest.partition(" (")
    if not arrow or not paren or state not in RETIRED:
        return None
    return Reason(state), detail.removesuffix(")")
