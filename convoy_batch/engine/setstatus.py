"""A ReleaseSet's own status file, ``status/<set>.yaml`` (README "ReleaseSets"): its
generation and its members with their states, committed in the tick's batch when it
changes, and removed once the set and its members' status files are gone.

Reads the tick's statuses and writes through its status store, both at the tick's
:class:`~convoy_batch.engine.handler.StatusDesk` (no cluster is touched, so nothing is
written ahead).
"""

from collections import Counter
from collections.abc import Callable, Mapping, Set
from typing import Any

from convoy_batch.engine.handler import StatusDesk
from convoy_batch.models import ReleaseStatus
from convoy_batch.repo.gitops import GitOpsSnapshot, ReleaseEntry, SetEntry
from convoy_batch.status.text import render_set_status, set_status_members


def record_sets(desk: StatusDesk, snapshot: GitOpsSnapshot, removed: Set[str]) -> None:
    """Queue, in the tick's batch, each ReleaseSet's status that changed, and the removal
    of a removed set's status once none of its members has a status file left (``removed``:
    the Releases whose status file the tick removes)."""
    store, opened = desk.store, desk.shared.opened
    for name, entry in snapshot.sets.items():
        data = set_status(entry, snapshot.releases, desk.shared.status_of)
        store.commit_text_later(name, render_set_status(data), _subject(name, data))
    for name, text in store.set_statuses.items():
        if name in snapshot.sets:
            continue
        members = set_status_members(text)
        left = [m for m in members if m in opened and m not in removed]
        if not left:
            store.remove_later(name, f"{name}: ReleaseSet removed")


def set_status(
    entry: SetEntry,
    releases: Mapping[str, ReleaseEntry],
    status_of: Callable[[str], ReleaseStatus],
) -> dict[str, Any]:
    """``generation`` (``Generated`` or ``GenerationFailed``, why, and the commit whose
    members a set wrong in itself keeps), ``members`` (name, Cluster, state) and
    ``refused``; each member's Cluster from ``releases`` (the snapshot's), its state from
    its status (``status_of``: the one the tick holds)."""
    generation: dict[str, Any] = {
        "state": "GenerationFailed" if entry.failed else "Generated",
        "message": entry.failed or "",
    }
    if entry.frozen_at is not None:
        generation["frozenAt"] = entry.frozen_at
    members = []
    for member in entry.members:
        release = releases[member].release
        members.append(
            {
                "name": member,
                "cluster": release.spec.cluster if release is not None else None,
                "state": _state(status_of(member)),
            }
        )
    return {"generation": generation, "members": members, "refused": list(entry.refused)}


def _state(status: ReleaseStatus) -> str:
    """The member's rollout state, else its last outcome's reason."""
    if status.rollout is not None:
        return status.rollout.state.value
    attempt = status.last_attempted
    return str(attempt.reason) if attempt is not None else "NeverReconciled"


def _subject(name: str, data: dict[str, Any]) -> str:
    """``web: ReleaseSet of 2 members (1 Progressing, 1 Succeeded)``, and the failure."""
    states = Counter(m["state"] for m in data["members"])
    counts = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
    subject = f"{name}: ReleaseSet of {len(data['members'])} members"
    subject += f" ({counts})" if counts else ""
    if data["generation"]["state"] == "GenerationFailed":
        subject += "; GenerationFailed"
    return subject
