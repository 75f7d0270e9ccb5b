"""``syncPolicy.createNamespace``: the Release's namespace is created when it is missing,
before anything of its render is sent (dry run included). I/O through the deployer.

The namespace is not an object of the render: it is in no inventory, so it is never
pruned, and once it exists it is left as it is (labels included), as Argo CD's
``CreateNamespace=true`` does. A render that holds its own Namespace of that name
manages it as any other object instead.
"""

import logging

from convoy_batch.deployers.base import Deployer, Manifest
from convoy_batch.models import LABEL_RELEASE, ObjectKey, Release
from convoy_batch.renderers.pipeline import Render

log = logging.getLogger("convoy_batch")


def namespace_manifest(release: Release) -> Manifest:
    """The Namespace created for ``release``: its name, labelled as the Release's."""
    meta = {"name": release.spec.namespace, "labels": {LABEL_RELEASE: release.name}}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def ensure_namespace(release: Release, render: Render, deployer: Deployer) -> bool:
    """With ``createNamespace``, create the namespace when the cluster does not have it
    (read now, not through the labelled listing: a namespace someone else made counts).
    True when it was created. Errors are the deployer's (ApplyFailed, ClusterUnavailable,
    Forbidden)."""
    if not release.spec.sync_policy.create_namespace:
        return False
    key = ObjectKey(api_version="v1", kind="Namespace", name=release.spec.namespace)
    if any(o.key.identity() == key.identity() for o in render.objects):
        return False
    if deployer.get(key) is not None:
        return False
    deployer.apply([namespace_manifest(release)])
    log.info("%s: created %s", release.name, key)
    return True
