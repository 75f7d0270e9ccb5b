"""``diff`` (issue 13): what reconciling the Releases as they are at a revision would
change, against what is applied now. Reads the repository, the state directory and
(with ``live``) the clusters; writes nothing: no commit, no apply, no store, inventory
or ref write.

Decided:
- The Releases, Clusters and sources of this repository (no ``url``, no ``ref``, no
  ``pin``) are read at the revision; a source with a ``url``, a ``ref`` or a ``pin`` is
  read where the Release at the revision points, as a tick after the merge would (a
  remote source is fetched into the source cache, as a tick does). Statuses are HEAD's.
- "Applied now" is each inventory entry's object as its applied render holds it (the
  render store). A Release this state directory never applied is compared with its
  render at HEAD (a CI job's fresh state directory: what the merge changes); ``live``
  compares with the cluster (every field the render sets, as the server shows it),
  without the hooks their delete policy deleted for this render (a tick does not create
  them again; one still live shows as removed, as the tick deletes it).
- Objects match by identity (group, kind, namespace, name), so a new apiVersion of the
  same object is a change, not a removal and an addition. The convoy label and render
  annotation are left out of the comparison, and so is what sets nothing (a null, an
  empty object or list: ``annotations: {}``), on both sides and against every baseline,
  as the apply reads it (``kubediff.covers``): such a field is neither a change nor
  shown in one.
- ``live`` follows the Release's drift rules (README, "Drift rules"): an existing object
  is compared with what an apply would leave, its live values kept at the paths the rules
  ignore, so a difference there is no change. Each such path is listed under the object,
  its live value and the render's (a Secret's masked) marked ``# ignored (drift rules)``;
  an object whose only differences are there is ``ignored``, as is an object ignored
  whole (created once, never updated) that differs. ``ignored`` is not counted by
  :attr:`ReleaseDiff.changed` nor ``--exit-code``.
- A SOPS-encrypted Secret (README, "SOPS secrets") is compared decrypted, in memory,
  with the Release's key; shown as every Secret is, its values masked. Without the key,
  it is compared and shown by its file and the digest of its ciphertext.
- A Release whose file is gone at the revision is reported as the tick after the merge
  retires it (``engine/retire.py``): each object it would delete ``removed``, each it
  leaves ``kept``, and the retirement's verdict (Delete, Orphan, Adopted, or why it waits
  or the mass-deletion guard holds it) as the plan line.
- ``--exit-code`` counts a Release that :attr:`ReleaseDiff.differs`: an object added,
  changed or removed (not one kept by ``prune: false``), the Release gone, or a plan
  that moves the rollout (its state, or the render it follows). A plan line alone (a
  re-apply of unchanged objects, a gate) is not a change.
"""

import difflib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import yaml

from convoy_batch.deployers.base import Deployer
from convoy_batch.deployers.kubediff import as_stored, covers, sets_nothing
from convoy_batch.engine.retire import (
    Retirement,
    decide_retirements,
    planned_message,
    retired_kept,
)
from convoy_batch.engine.stages.drift import rules_of
from convoy_batch.engine.stages.hooks import deleted_hooks
from convoy_batch.engine.stages.render import stage_render
from convoy_batch.engine.tick import Tick
from convoy_batch.errors import ConvoyError, RenderFailed
from convoy_batch.manifests.drift import MISSING, WHOLE, Rules, managed, restore, value_at
from convoy_batch.manifests.sealed import is_sealed, shown
from convoy_batch.models import (
    ANNOTATION_RENDER,
    LABEL_RELEASE,
    Identity,
    ObjectKey,
    Release,
    ReleaseInventory,
    RenderRecord,
    key_of,
)
from convoy_batch.renderers.pipeline import Manifest, Render, load_render
from convoy_batch.renderers.sops import decrypt, key_file
from convoy_batch.repo.gitops import GitOpsRepo, ReleaseEntry
from convoy_batch.rollout.retire import Fate
from convoy_batch.store import RenderStore
from convoy_batch.views.inspect import plan_entry

Change = Literal["added", "changed", "removed", "kept", "ignored"]
"""``kept``: gone from the render but not pruned (``prune: false``); ``ignored`` (live
only): it differs only where its drift rules leave it to other managers."""
Against = Literal["applied", "live", "HEAD"]
MASK = "***"
IGNORED = "# ignored (drift rules)"
"""What marks a path (or an object ignored whole) the drift rules leave alone."""
_SHOWN = 60
"""The longest value an ignored path's line shows (longer ones are cut)."""
_SERVER_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


@dataclass(frozen=True)
class ObjectChange:
    key: ObjectKey
    change: Change
    diff: tuple[str, ...] = ()
    """The unified diff of the object's YAML (``changed`` only), then one line for each
    path its drift rules ignore where it differs (``changed`` and ``ignored``), Secret
    values masked."""
    ignored: tuple[str, ...] = ()
    """The pointers its drift rules ignore where the live object differs (``""``: the
    whole object); never counted as a change."""


@dataclass(frozen=True)
class ReleaseDiff:
    name: str
    cluster: str | None = None
    against: Against | None = None
    changes: tuple[ObjectChange, ...] = ()
    current: int = 0
    """Objects applied now (the baseline's)."""
    plan: dict[str, Any] | None = None
    plan_line: str = ""
    error: str | None = None
    """One line: the Release cannot be rendered (or read) at the revision."""
    gone: bool = False
    """The Release's file is gone at the revision."""
    warnings: list[str] = field(default_factory=list)
    held: str | None = None
    """The render a rollback or its hold applies instead of the one at the revision (the
    last healthy one): what is compared."""

    @property
    def changed(self) -> bool:
        """An object would be added, changed or removed, or the Release is gone."""
        return self.gone or any(c.change not in ("kept", "ignored") for c in self.changes)

    @property
    def rollout_changes(self) -> bool:
        """The plan moves the rollout: to another state, or to another render (a new
        render that opens a rollout while one is Progressing). A re-apply that changes
        no object, a gate or a wait moves nothing."""
        plan = self.plan or {}
        state = plan.get("from") != plan.get("to")
        return state or plan.get("fromRender") != plan.get("toRender")

    @property
    def differs(self) -> bool:
        """What ``--exit-code`` counts: :attr:`changed` or :attr:`rollout_changes`."""
        return self.changed or self.rollout_changes

    def count(self, change: Change) -> int:
        return sum(1 for c in self.changes if c.change == change)


@dataclass(frozen=True)
class _Baseline:
    """What is there now: identity -> (key, manifest or None when unknown, prunable)."""

    against: Against
    objects: dict[Identity, tuple[ObjectKey, Manifest | None, bool]]


def diff_releases(
    tick: Tick, head: Tick, names: Sequence[str], live: bool
) -> tuple[list[ReleaseDiff], list[str]]:
    """One :class:`ReleaseDiff` per Release (``names``, else every one at the revision
    and every one gone since HEAD), and the cluster-wide warnings."""
    at_rev = tick.snapshot.releases
    diffs = []
    retiring: dict[str, Retirement] | None = None
    deletes = partial(_deletes, tick.repo, tick.snapshot.commit)
    for name in names or sorted(set(at_rev) | set(head.snapshot.releases) | set(tick.opened)):
        if name in at_rev:
            diffs.append(diff_release(tick, head, at_rev[name], live))
            continue
        if retiring is None:  # decided once, over every removed Release (the guard)
            retiring = {r.decided.name: r for r in decide_retirements(tick)}
        diffs.append(_gone(head.inventory(name), name, retiring.get(name), deletes))
    return diffs, cluster_warnings(head.snapshot.releases, head.inventory, diffs)


def diff_release(tick: Tick, head: Tick, entry: ReleaseEntry, live: bool) -> ReleaseDiff:
    name = entry.name
    row, line = plan_entry(tick, entry)
    if entry.release is None or row.get("error"):
        return ReleaseDiff(name, error=line)
    release = entry.release
    read = partial(_readable, release, tick.stores.state_dir)
    try:
        rendered = stage_render(tick, release)  # the render decide made (once a tick)
        healthy = tick.status(name).last_healthy
        applies = row.get("applies")
        render = _applies(tick.stores.renders, healthy, name, rendered.render, applies)
        desired = _desired(read, render)
        if live:
            inventory = tick.inventory(name)
            for ident in deleted_hooks(render, inventory):
                desired.pop(ident, None)  # a tick does not create them again for this render
            baseline = _live(tick.deployer(rendered.cluster), render, inventory)
        else:
            applied = _applied(tick.stores.renders, read, tick.inventory(name))
            baseline = applied or _head_render(head, name)
    except ConvoyError as exc:
        return ReleaseDiff(name, error=f"{name}: {exc.reason}: {exc}")
    rules = rules_of(tick.snapshot.clusters, release)
    changes = compare(desired, baseline, _ignored(rules, render) if live else {})
    held = render.ref if render is not rendered.render else None
    result = ReleaseDiff(
        name,
        rendered.cluster.name,
        baseline.against,
        changes,
        len(baseline.objects),
        row,
        line,
        held=held,
    )
    deleted = result.count("removed")
    if deleted and deleted == len(baseline.objects):
        result.warnings.append(
            f"{name}: would delete every object of the Release ({deleted} objects)"
        )
    return result


def _applies(
    renders: RenderStore,
    healthy: RenderRecord | None,
    name: str,
    render: Render,
    applies: str | None,
) -> Render:
    """What the next reconcile really applies: ``render``, or the last healthy render
    (``healthy``) a rollback (or its hold) applies instead (the plan's ``applies``), from
    the store."""
    if applies is None or applies == render.ref:
        return render
    blob = renders.get(applies)
    if blob is None:
        raise RenderFailed(f"render store has no valid blob for last healthy {applies}")
    revision = healthy.revision if healthy is not None and healthy.render_ref == applies else None
    return load_render(blob, name, revision)


def _gone(
    inventory: ReleaseInventory,
    name: str,
    run: Retirement | None,
    deletes: Callable[[str], bool],
) -> ReleaseDiff:
    """A Release removed at the revision (its ``inventory`` as HEAD's tick has it): what
    its retirement deletes or leaves, and the verdict (``run`` None: it has no status
    file, nothing of it was applied). ``deletes``: whether its last committed version
    deletes its objects (:func:`_deletes`, read only when the verdict waits)."""
    if run is None:
        line = f"{name}: removed at the revision: never reconciled, nothing to delete"
        return ReleaseDiff(name, current=len(inventory.entries), plan_line=line, gone=True)
    decided = run.decided
    try:
        planned = planned_message(run)
    except ConvoyError as exc:
        planned = f"{exc.reason}: {exc}"
    verdict = {Fate.PENDING: "DeletionPending", Fate.BLOCKED: "DeletionBlocked"}
    line = f"{name}: removed at the revision: {verdict.get(decided.fate, decided.fate)}: {planned}"
    deleting = decided.fate == Fate.DELETE or (decided.fate in verdict and deletes(name))
    keeping = retired_kept(run, inventory) if deleting else set()
    changes = tuple(
        ObjectChange(e.key, "removed" if deleting and e.key.identity() not in keeping else "kept")
        for e in sorted(inventory.entries, key=lambda e: e.key.identity())
    )
    return ReleaseDiff(
        name, decided.cluster, "applied", changes, len(inventory.entries), plan_line=line,
        gone=True,
    )  # fmt: skip


def _deletes(repo: GitOpsRepo, commit: str, name: str) -> bool:
    """Whether a removed Release's last committed version (before ``commit``) deletes its
    objects."""
    version = repo.last_version(name, commit)
    return version is not None and version.release is not None and version.release.spec.deletes


def cluster_warnings(
    releases: Mapping[str, ReleaseEntry],
    inventory_of: Callable[[str], ReleaseInventory],
    diffs: Sequence[ReleaseDiff],
) -> list[str]:
    """A cluster that would lose more than half of its objects (``releases`` and
    ``inventory_of``: HEAD's)."""
    shown = {d.name: d for d in diffs}
    total: dict[str, int] = {}
    deleted: dict[str, int] = {}
    for name, entry in releases.items():
        if entry.release is not None and name not in shown:
            cluster = entry.release.spec.cluster
            total[cluster] = total.get(cluster, 0) + len(inventory_of(name).entries)
    for d in diffs:
        if d.cluster is not None:
            total[d.cluster] = total.get(d.cluster, 0) + d.current
            deleted[d.cluster] = deleted.get(d.cluster, 0) + d.count("removed")
    return [
        f"cluster {cluster}: would delete {gone} of its {total[cluster]} objects (over half)"
        for cluster, gone in sorted(deleted.items())
        if gone * 2 > total[cluster]
    ]


# --- The two sides -----------------------------------------------------------------------


def unstamped(obj: Mapping[str, Any]) -> Manifest:
    """``obj`` without what convoy-batch adds to every object (SPEC 3 step 6)."""
    meta = dict(obj.get("metadata") or {})
    for name, drop in (("labels", LABEL_RELEASE), ("annotations", ANNOTATION_RENDER)):
        if isinstance(meta.get(name), Mapping):
            rest = {k: v for k, v in meta[name].items() if k != drop}
            if rest:
                meta[name] = rest
            else:
                meta.pop(name)
    return {**obj, "metadata": meta}


Readable = Callable[[Manifest], Manifest]
"""An object of a Release's render as it is compared (:func:`_readable`)."""


def _desired(read: Readable, render: Render) -> dict[Identity, tuple[ObjectKey, Manifest]]:
    return {o.key.identity(): (o.key, unstamped(read(o.manifest))) for o in render.objects}


def _readable(release: Release | None, state_dir: Path, obj: Manifest) -> Manifest:
    """A SOPS-sealed object decrypted in memory with its Release's key, so that it is
    compared as the cluster has it (and shown masked, as every Secret); by its file and
    digest when it cannot be decrypted here. Any other object as it is."""
    if not is_sealed(obj):
        return obj
    if release is None or release.spec.source.decryption is None:
        return shown(obj)
    try:
        key = key_file(release, state_dir)
        return decrypt(obj, key, release.spec.source.decryption.key)
    except RenderFailed:
        return shown(obj)


def _applied(renders: RenderStore, read: Readable, inventory: ReleaseInventory) -> _Baseline | None:
    """The inventory's applied objects, as their applied renders hold them."""
    entries = [e for e in inventory.entries if e.applied_render_ref is not None]
    if not entries:
        return None
    seen: dict[str, dict[Identity, Manifest]] = {}
    objects: dict[Identity, tuple[ObjectKey, Manifest | None, bool]] = {}
    for e in entries:
        ref = str(e.applied_render_ref)
        if ref not in seen:
            seen[ref] = _stored_render(renders, read, ref)
        objects[e.key.identity()] = (e.key, seen[ref].get(e.key.identity()), e.prune)
    return _Baseline("applied", objects)


def _stored_render(renders: RenderStore, read: Readable, ref: str) -> dict[Identity, Manifest]:
    """The objects of a render-store blob by identity (empty when absent or bad)."""
    blob = renders.get(ref)
    docs = json.loads(blob) if blob is not None else []
    return {key_of(d).identity(): read(d) for d in docs if isinstance(d, dict)}


def _head_render(head: Tick, name: str) -> _Baseline:
    """The Release's render at HEAD: nothing when it is not a valid Release there."""
    entry = head.snapshot.releases.get(name)
    if entry is None or entry.release is None:
        return _Baseline("HEAD", {})
    render = stage_render(head, entry.release).render
    read = partial(_readable, entry.release, head.stores.state_dir)
    return _Baseline(
        "HEAD",
        {o.key.identity(): (o.key, unstamped(read(o.manifest)), o.prune) for o in render.objects},
    )


def _live(deployer: Deployer, render: Render, inventory: ReleaseInventory) -> _Baseline:
    """The render's objects and the inventory's as the cluster (``deployer``) shows them."""
    prune = {e.key.identity(): e.prune for e in inventory.entries}
    keys = {o.key.identity(): o.key for o in render.objects}
    keys.update({e.key.identity(): e.key for e in inventory.entries})
    found = deployer.get_many(keys.values())
    objects: dict[Identity, tuple[ObjectKey, Manifest | None, bool]] = {}
    for key, obj in found.items():
        if obj is not None:
            objects[key.identity()] = (key, _from_server(obj), prune.get(key.identity(), True))
    return _Baseline("live", objects)


def _from_server(obj: Mapping[str, Any]) -> Manifest:
    meta = dict(obj.get("metadata") or {})
    if isinstance(meta.get("annotations"), Mapping):
        meta["annotations"] = {
            k: v for k, v in meta["annotations"].items() if k not in _SERVER_ANNOTATIONS
        }
    return unstamped({k: v for k, v in obj.items() if k != "status"} | {"metadata": meta})


# --- Comparing ---------------------------------------------------------------------------


def _ignored(rules: Rules, render: Render) -> dict[Identity, tuple[str, ...]]:
    """The pointers each object's drift rules leave to other managers (none for a hook:
    it is created anew for each render)."""
    found = {o.key.identity(): rules.ignored(o.manifest) for o in render.objects if o.hook is None}
    return {ident: pointers for ident, pointers in found.items() if pointers}


def compare(
    desired: Mapping[Identity, tuple[ObjectKey, Manifest]],
    baseline: _Baseline,
    ignored: Mapping[Identity, tuple[str, ...]] = ({}),
) -> tuple[ObjectChange, ...]:
    """Added, changed or ignored, then removed or kept objects, each in identity order;
    ``ignored``: the pointers each object's drift rules ignore (live only)."""
    now = baseline.objects
    added = [ObjectChange(key, "added") for ident, (key, _) in sorted(desired.items())
             if ident not in now]  # fmt: skip
    changed = []
    for ident, (key, obj) in sorted(desired.items()):
        if ident in now:
            pointers = ignored.get(ident, ())
            if baseline.against == "live":
                found = _live_change(key, now[ident][1], obj, pointers)
            else:
                lines = _object_diff(key, now[ident][1], obj, baseline.against)
                found = ObjectChange(key, "changed", lines) if lines is not None else None
            if found is not None:
                changed.append(found)
    removed = [
        ObjectChange(key, "removed" if prune else "kept")
        for ident, (key, _, prune) in sorted(now.items())
        if ident not in desired
    ]
    return (*added, *changed, *removed)


def _object_diff(
    key: ObjectKey, old: Manifest | None, new: Manifest, against: Against
) -> tuple[str, ...] | None:
    """The unified diff when the object changes; None when it does not."""
    if old is None:
        return (f"# {key}: its applied render is not in the render store",)
    if against == "live":
        new = dict(as_stored(new))
        if covers(new, old):
            return None
        old = project(old, new)
    elif covers(new, old) and covers(old, new):  # equal but for what sets nothing
        return None
    old, new = mask_secrets(key, bare(old), bare(new))
    lines = difflib.unified_diff(
        _yaml(old), _yaml(new), f"{against}/{key}", f"revision/{key}", lineterm=""
    )
    return tuple(lines)


def _live_change(
    key: ObjectKey, live: Manifest | None, new: Manifest, pointers: Sequence[str]
) -> ObjectChange | None:
    """How the live object differs from what an apply of ``new`` would leave, its drift
    rules' ``pointers`` left as they are live; None when it does not differ."""
    if not pointers or live is None:
        lines = _object_diff(key, live, new, "live")
        return ObjectChange(key, "changed", lines) if lines is not None else None
    stored = dict(as_stored(new))
    if WHOLE in pointers:  # created once, never updated: any difference is left alone
        if covers(stored, live):
            return None
        line = f"(the whole object: created once, never updated)  {IGNORED}"
        return ObjectChange(key, "ignored", (line,), (WHOLE,))
    marks = _ignored_paths(key, stored, live, pointers)
    after = dict(restore(managed(stored, pointers), live, pointers))
    lines = _object_diff(key, live, after, "live")
    paths = tuple(p for p, _ in marks)
    shown = tuple(line for _, line in marks)
    if lines is None:
        return ObjectChange(key, "ignored", shown, paths) if marks else None
    return ObjectChange(key, "changed", (*lines, *shown), paths)


def _ignored_paths(
    key: ObjectKey, stored: Manifest, live: Manifest, pointers: Sequence[str]
) -> list[tuple[str, str]]:
    """Each pointer where the live object differs from what ``stored`` sets, with its
    line: the live value (which stays) and the render's, a Secret's masked."""
    secret = not key.group and key.kind == "Secret"
    found = []
    for text in pointers:
        wanted, there = value_at(stored, text), value_at(live, text)
        if wanted is MISSING or (there is not MISSING and covers(wanted, there)):
            continue
        now = "(absent)" if there is MISSING else MASK if secret else _shown(there)
        render = MASK if secret else _shown(wanted)
        found.append((text, f"{text}: {now}  {IGNORED}; the render sets {render}"))
    return found


def _shown(value: Any) -> str:
    """A value on one line (JSON), cut at ``_SHOWN`` characters."""
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def bare(value: Any) -> Any:
    """``value`` without the fields that set nothing (nulls, empty objects and lists, as
    :func:`~convoy_batch.deployers.kubediff.covers` reads them): what is shown of either
    side, so a diff never lists ``annotations: {}`` as a change."""
    if isinstance(value, Mapping):
        return {k: bare(v) for k, v in value.items() if not sets_nothing(v)}
    if isinstance(value, list):
        return [bare(v) for v in value]
    return value


def project(live: Any, desired: Any) -> Any:
    """``live`` cut down to the fields ``desired`` sets (lists element by element): the
    fields an apply of ``desired`` would change, without the server's own."""
    if isinstance(desired, Mapping) and isinstance(live, Mapping):
        return {k: project(live[k], desired[k]) for k in desired if k in live}
    if isinstance(desired, list) and isinstance(live, list) and len(desired) == len(live):
        return [project(x, d) for x, d in zip(live, desired, strict=True)]
    return live


def mask_secrets(key: ObjectKey, old: Manifest, new: Manifest) -> tuple[Manifest, Manifest]:
    """A Secret's values (``data`` and ``stringData``) as ``***``, the new side marked
    ``*** (changed)`` where its value differs, so the diff shows which keys change."""
    if key.group or key.kind != "Secret":
        return old, new
    old, new = dict(old), dict(new)
    for part in ("data", "stringData"):
        before, after = _mapping(old.get(part)), _mapping(new.get(part))
        if before is not None:
            old[part] = {k: MASK for k in before}
        if after is not None:
            new[part] = {
                k: MASK if before is None or before.get(k, v) == v else f"{MASK} (changed)"
                for k, v in after.items()
            }
    return old, new


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _yaml(obj: Any) -> list[str]:
    return yaml.safe_dump(obj, sort_keys=True, default_flow_style=False).splitlines()
