"""``stage_render`` (SPEC 4 step 1): resolve the Cluster, fetch the source, render.

Does I/O through the tick's source resolver (and, for Helm on a Kubernetes Cluster, the
tick's deployer of that Cluster); raises ClusterNotFound, SourceFailed, RenderFailed or
ClusterUnavailable with a one-line message.
"""

import hashlib
import json
from functools import partial

from convoy_batch.deployers.base import Capabilities, Describes
from convoy_batch.engine.tick import Tick
from convoy_batch.errors import ClusterNotFound, RenderFailed
from convoy_batch.models import Cluster, Release, key_of
from convoy_batch.renderers import render_inputs, render_release, renderer_of, source_revision
from convoy_batch.renderers.pipeline import Render, Rendered, load_render


def resolve_cluster(tick: Tick, release: Release) -> Cluster:
    name = release.spec.cluster
    cluster = tick.snapshot.clusters.get(name)
    if cluster is not None:
        return cluster
    error = tick.snapshot.cluster_errors.get(name)
    if error is not None:
        raise ClusterNotFound(error)
    raise ClusterNotFound(
        f"releases/{release.name}.yaml: spec.cluster: no Cluster named {name!r} in clusters/"
    )


def capabilities(tick: Tick, release: Release, cluster: Cluster) -> Capabilities | None:
    """What a Helm render on a Kubernetes Cluster is told of its server (version, API
    versions), read by the tick's deployer of the Cluster once per tick
    (ClusterUnavailable when it cannot be); None for a renderer that does not read it
    (``reads_server``) or a directory cluster."""
    if cluster.spec.kubernetes is None or not renderer_of(release).reads_server:
        return None
    deployer = tick.deployer(cluster)
    return deployer.capabilities() if isinstance(deployer, Describes) else None


def render_key(inputs: list[str], release: Release, cluster: Cluster) -> str:
    """Everything a render depends on: the source files (and for a renderer, the tool:
    :func:`~convoy_batch.renderers.render_inputs`), the Release and the Cluster. A
    Plain render's key is what it was before renderers existed; health rules, sync
    windows, dependencies, drift rules and the deletion policy are left out (they change
    no render)."""
    rules = {"spec": {"health_checks", "deletion_policy", "sync_windows", "depends_on", "drift"}}
    parts: list[object] = [
        *inputs,
        release.model_dump(mode="json", exclude=rules),
        cluster.model_dump(mode="json", exclude=rules),
    ]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def stage_render(tick: Tick, release: Release) -> Rendered:
    """Render R, or reload it from the render store when none of its inputs changed
    since the last reconcile (the blob is verified; a bad one means a fresh render).
    Once a tick: a second call returns the first one's render (the snapshot is fixed)
    while the tick holds it (:meth:`Tick.let_go`); after that its tick record names that
    render, which a call reloads from the render store."""
    done = tick.shared.render_of(release.name)
    if done is not None:
        return done
    cluster = resolve_cluster(tick, release)
    revision = source_revision(release, tick.sources, tick.charts)
    server = capabilities(tick, release, cluster)
    inputs = render_inputs(release, tick.sources, tick.stores.state_dir, server, tick.charts)
    key = render_key(inputs, release, cluster)
    memo = tick.stores.ticks.load(release.name)
    blob = None
    if memo.render_key == key and memo.render_ref is not None:
        blob = tick.stores.renders.get(memo.render_ref)
    if blob is not None:
        made = load_render(blob, release.name, revision)
    else:
        sources, state_dir, charts = tick.sources, tick.stores.state_dir, tick.charts
        fresh = partial(render_release, release, cluster, sources, state_dir, server, charts)
        made = fresh()
        if _may_vary(release) and made.ref != memo.render_ref:
            _check_stable(release, made, fresh())
    tick.owners().note_render(release.name, (o.key for o in made.objects))
    rendered = Rendered(cluster=cluster, render=made, key=key)
    tick.shared.keep_render(release.name, rendered)
    return rendered


MAX_NAMED = 3
"""Objects a render that varies names, at most (then how many more)."""


def _may_vary(release: Release) -> bool:
    """A renderer whose templates may call random functions (Helm's ``randAlphaNum``, a
    Command's program); Plain, Kustomize and Jsonnet give the same output for the same
    input by construction."""
    return renderer_of(release).may_vary


def _check_stable(release: Release, first: Render, second: Render) -> None:
    """A new render of a renderer that may vary is made twice: two runs that disagree mean
    a render that would be new on every run (and roll out for ever), a RenderFailed naming
    the objects that differ. Only a ref unlike the last one is checked, so an unchanged
    chart costs one run."""
    if first.ref == second.ref:
        return
    ones, twos = _by_identity(first), _by_identity(second)
    differing = sorted(
        {key for key in ones.keys() | twos.keys() if ones.get(key) != twos.get(key)}, key=str
    )
    named = ", ".join(differing[:MAX_NAMED])
    if len(differing) > MAX_NAMED:
        named += f" and {len(differing) - MAX_NAMED} more"
    of = renderer_of(release).subject(release)
    raise RenderFailed(
        f"{release.spec.source.render.type} render of {of} differs from one run to the "
        f"next (random values: set them in the values): {named}"
    )


def _by_identity(render: Render) -> dict[str, str]:
    """Each object of the render's canonical JSON by its key's text."""
    return {
        str(key_of(obj)): json.dumps(obj, sort_keys=True) for obj in json.loads(render.canonical)
    }
