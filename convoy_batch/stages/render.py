"""``stage_render`` (SPEC 4 step 1): resolve the Cluster, fetch the source, render.

Does I/O through the tick's source resolver; raises ClusterNotFound, SourceFailed or
RenderFailed with a one-line message.
"""

from dataclasses import dataclass

from convoy_batch.errors import ClusterNotFound
from convoy_batch.models import Cluster, Release
from convoy_batch.render import Render, render
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


def stage_render(tick: Tick, release: Release) -> Rendered:
    cluster = resolve_cluster(tick, release)
    snapshot = tick.sources.fetch(release)
    return Rendered(cluster=cluster, render=render(snapshot, release, cluster))
