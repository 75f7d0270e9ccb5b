"""One Release per object on a real API server, asserted with the server's own view:
the later Release is refused, the object is never written back and forth, and its
prune spares what the earlier Release owns."""

from typing import Any

from tests.k8s.k8s_scenario import KubeScenario

NAMESPACE = "own-shared"


def shared(owner: str) -> str:
    return (
        "apiVersion: v1\nkind: ConfigMap\n"
        f"metadata: {{name: settings, namespace: {NAMESPACE}}}\n"
        f"data: {{from: {owner}}}\n"
    )


def settings(s: KubeScenario) -> Any:
    return s.configmap(NAMESPACE, "settings")


def test_two_releases_rendering_one_object_on_a_real_server(kscenario: KubeScenario) -> None:
    s = kscenario
    s.kube.core.create_namespace({"metadata": {"name": NAMESPACE}})
    s.app("own-b", extra={"shared.yaml": shared("own-b")})
    assert s.reconcile(minutes=0).code == 0
    assert settings(s).metadata.labels["convoy.dev/release"] == "own-b"

    # own-a comes first in repository order: it takes the object, own-b is refused.
    s.app("own-a", extra={"shared.yaml": shared("own-a")})
    assert s.reconcile(minutes=1).code == 1
    assert s.status("own-b")["lastAttempted"]["reason"] == "OwnershipConflict"
    live = settings(s)
    assert (live.metadata.labels["convoy.dev/release"], live.data) == ("own-a", {"from": "own-a"})
    version = live.metadata.resource_version
    for minute in (2, 3):
        assert s.reconcile("--all", minutes=minute).code == 1
        assert settings(s).metadata.resource_version == version  # never written again

    # own-b lets go of it: its prune leaves own-a's object alone.
    s.commit({"apps/own-b/shared.yaml": None}, "own-b drops the shared ConfigMap")
    assert s.reconcile(minutes=4).code == 0
    assert s.status("own-b")["lastAttempted"]["reason"] == "Synced"
    assert settings(s).metadata.resource_version == version
