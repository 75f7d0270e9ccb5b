"""Public-style manifests, unmodified, on a real API server: a first rollout through an
Argo CD PreSync hook (the namespace created by convoy-batch), a rollback, a prune, and a
quiet tick that the server's audit log shows wrote nothing."""

from typing import Any

from kubernetes import client

from tests.k8s.k8s_scenario import KubeScenario
from tests.k8s.test_k8s_scenarios import server_writes
from tests.support.wild import GUESTBOOK, change, shop


def commit_app(
    s: KubeScenario, name: str, files: dict[str, str], drop: tuple[str, ...] = ()
) -> None:
    s.commit(change(name, files, drop), name)


def image(s: KubeScenario, namespace: str, name: str) -> str:
    deployment: Any = s.kube.apps.read_namespaced_deployment(name, namespace)
    return str(deployment.spec.template.spec.containers[0].image)


def test_the_guestbook_as_written_on_a_real_server(kscenario: KubeScenario) -> None:
    s, ns = kscenario, "wild-guestbook"
    commit_app(s, ns, GUESTBOOK)
    assert s.reconcile(minutes=0).code == 0
    assert s.status(ns)["lastAttempted"]["reason"] == "Synced"
    service: Any = s.kube.core.read_namespaced_service("guestbook-ui", ns)
    assert service.spec.ports[0].protocol == "TCP"
    s.kube.deployment_ready(ns, "guestbook-ui")
    assert s.reconcile(minutes=1).code == 0
    assert s.status(ns)["rollout"]["state"] == "Succeeded"
    before = server_writes(s, ns)
    assert s.reconcile("--all", minutes=2).code == 0
    assert server_writes(s, ns) == before


def test_the_shop_on_a_real_server(kscenario: KubeScenario) -> None:
    s, ns = kscenario, "wild-shop"
    commit_app(s, ns, shop())
    assert s.reconcile(minutes=0).code == 0
    assert s.status(ns)["lastAttempted"]["reason"] == "WaitingForWaveHealth"
    namespace: Any = s.kube.core.read_namespace(ns)
    assert namespace.metadata.labels["convoy.dev/release"] == ns
    s.kube.job_succeeded(ns, "db-migrate")
    assert s.reconcile(minutes=1).code == 0
    assert s.status(ns)["lastAttempted"]["reason"] == "Synced"
    ingress: Any = client.NetworkingV1Api(s.kube.api).read_namespaced_ingress("shop", ns)
    assert ingress.spec.rules[0].host == "shop.example.com"
    for name in ("frontend", "cart"):
        s.kube.deployment_ready(ns, name)
    assert s.reconcile(minutes=2).code == 0
    assert s.status(ns)["rollout"]["state"] == "Succeeded"

    # A frontend that never becomes ready is rolled back after the progress deadline.
    commit_app(s, ns, shop("example/shop-frontend:v2"))
    assert s.reconcile(minutes=3).code == 0
    s.kube.job_succeeded(ns, "db-migrate")
    assert s.reconcile(minutes=4).code == 0
    assert image(s, ns, "frontend") == "example/shop-frontend:v2"
    assert s.reconcile(minutes=16).code == 0
    assert s.status(ns)["rollout"]["state"] == "RolledBack"
    assert image(s, ns, "frontend") == "example/shop-frontend:v1"

    # A fixed commit without the promotions ConfigMap: rolled out, the ConfigMap pruned.
    commit_app(s, ns, shop("example/shop-frontend:v3", promo=False), drop=("promotions.yaml",))
    assert s.reconcile(minutes=17).code == 0
    s.kube.job_succeeded(ns, "db-migrate")
    assert s.reconcile(minutes=18).code == 0
    assert s.configmap(ns, "promotions") is None
    s.kube.deployment_ready(ns, "frontend")
    assert s.reconcile(minutes=19).code == 0
    assert s.status(ns)["rollout"]["state"] == "Succeeded"

    before = server_writes(s, ns)
    assert s.reconcile("--all", minutes=20).code == 0
    assert server_writes(s, ns) == before
    # The namespace convoy-batch created is never pruned, and still its own.
    assert s.kube.core.read_namespace(ns).metadata.labels["convoy.dev/release"] == ns
