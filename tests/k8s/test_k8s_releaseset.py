"""A ReleaseSet over two Kubernetes Clusters on the real API server (both Cluster files
name the session's server; each member renders into its own namespace): one member per
Cluster with the label, and the member of a Cluster that loses it deleted from the server
by the deletion rules."""

from tests.k8s.k8s_scenario import NAMESPACE, KubeScenario
from tests.k8s.test_k8s_delete_release import deleted
from tests.k8s.testenv import KubeEnv
from tests.support.scenario import cluster_yaml

SET = """\
apiVersion: convoy.dev/v1alpha1
kind: ReleaseSet
metadata: {name: rs}
spec:
  generators:
  - clusters: {selector: {matchLabels: {fleet: rs}}}
  template:
    namespace: "rs-${cluster}"
    source: {path: apps/rs}
    vars: {region: "${cluster.labels.region}"}
"""
CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {region: "${region}", release: "${release}"}
"""


def kube_cluster(kube: KubeEnv, name: str, labels: str) -> str:
    return cluster_yaml(name, labels=labels, kubernetes=f"{{kubeconfig: '{kube.kubeconfig}'}}")


def test_a_set_over_two_kubernetes_clusters(kscenario: KubeScenario) -> None:
    s = kscenario
    s.commit(
        {
            "clusters/east.yaml": kube_cluster(s.kube, "east", "{fleet: rs, region: east}"),
            "clusters/west.yaml": kube_cluster(s.kube, "west", "{fleet: rs, region: west}"),
            "apps/rs/namespace.yaml": NAMESPACE,
            "apps/rs/configmap.yaml": CONFIGMAP,
            "releases/rs.yaml": SET,
        },
        "rs on every rs cluster",
    )

    result = s.reconcile()

    assert result.code == 0, result.err
    east, west = s.configmap("rs-east", "settings"), s.configmap("rs-west", "settings")
    assert east is not None and west is not None
    assert (east.data, west.data) == (
        {"region": "east", "release": "rs-east"},
        {"region": "west", "release": "rs-west"},
    )
    assert east.metadata.labels["convoy.dev/release"] == "rs-east"

    s.commit({"clusters/west.yaml": kube_cluster(s.kube, "west", "{region: west}")}, "west out")
    deleted(s, "rs-west", 1)  # its namespace (named as the member) terminates first

    assert not s.has_status("rs-west")
    assert s.configmap("rs-west", "settings") is None  # deleted from the server
    assert s.configmap("rs-east", "settings") is not None
    assert s.status_log()[0].startswith("rs-west: - -> Deleted (")
