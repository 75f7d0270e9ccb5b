"""``stage_render`` (SPEC 4 step 1): resolve the Cluster, fetch the source, render.

Does I/O through the tick's source resolver (and, for Helm on a Kubernetes Cluster, the
tick's deployer of that Cluster); raises ClusterNotFound, SourceFailed, RenderFailed or
ClusterUnavailable with a one-line message.
"""

import hashlib
import json
from dataclasses import dataclass

from convoy_batch.deployers.base import Capabilities, Describes
from convoy_batch.errors import ClusterNotFound
from convoy_batch.models import Cluster, HelmRender, Release
from convoy_batch.render import Render, load_render
from convoy_batch.renderers import render_inputs, render_release
from convoy_batch.tick import Tick


@dataclass(frozen=True)
class Rendered:
    cluster: Cluster
    render: Render


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
    (ClusterUnavailable when it cannot be); None for another renderer or a directory
    cluster."""
    if cluster.spec.kubernetes is None or not isinstance(release.spec.source.render, HelmRender):
        return None
    deployer = tick.deployer(cluster)
    return deployer.capabilities() if isinstance(deployer, Describes) else None


def render_key(inputs: list[str], release: Release, cluster: Cluster) -> str:
    """Everything a render depends on: the source files (and for a renderer, the tool:
    :func:`~convoy_batch.renderers.render_inputs`), the Release and the Cluster. A
    Plain render's key is what it was before renderers existed; health rules are left
    out (they change no render)."""
    rules = {"spec": {"health_checks"}}
    parts: list[object] = [
        *inputs,
        release.model_dump(mode="json", exclude=rules),
        cluster.model_dump(mode="json", exclude=rules),
    ]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def stage_render(tick: Tick, release: Release) -> Rendered:
    """Render R, or reload it from the render store when none of its inputs changed
    since the last reconcile (the blob is verified; a bad one means a fresh render).
    Once a tick: a second call returns the first one's render (the snapshot is fixed)."""
    with tick.lock:
        done = tick.rendered.get(release.name)
    if isinstance(done, Rendered):
        return done
    cluster = resolve_cluster(tick, release)
    listing = tick.sources.listing(release)
    server = capabilities(tick, release, cluster)
    inputs = render_inputs(release, tick.sources, tick.stores.state_dir, server)
    key = render_key(inputs, release, cluster)
    memo = tick.memo(release.name)
    blob = None
    if memo.render_key == key and memo.render_ref is not None:
        blob = tick.stores.renders.get(memo.render_ref)
    if blob is not None:
        made = load_render(blob, release.name, listing.revision)
    else:
        made = render_release(release, cluster, tick.sources, tick.stores.state_dir, server)
    tick.render_keys[release.name] = (key, made.ref)
    tick.owners().note_render(release.name, (o.key for o in made.objects))
    rendered = Rendered(cluster=cluster, render=made)
    with tick.lock:
        tick.rendered[release.name] = rendered
    return rendered
