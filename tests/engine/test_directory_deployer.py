"""The directory cluster (SPEC 12.1) on real files, and the FailingDeployer that wraps it."""

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from convoy_batch.deployers.base import Deployer
from convoy_batch.deployers.directory import DirectoryDeployer
from convoy_batch.errors import (
    ApplyFailed,
    ClusterUnavailable,
    DryRunFailed,
    PruneFailed,
)
from convoy_batch.models import ObjectKey, key_of
from tests.support.fakes import FailingDeployer, deployment_status_ready, set_status


def manifest(
    api_version: str | None = "apps/v1",
    kind: str | None = "Deployment",
    name: str | None = "web",
    namespace: str | None = "web",
    **rest: Any,
) -> dict[str, Any]:
    """A manifest; a field given as None is left out."""
    meta = {k: v for k, v in (("name", name), ("namespace", namespace)) if v is not None}
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": meta, **rest}
    return {k: v for k, v in obj.items() if v is not None}


def deployment(replicas: int = 2, **metadata: Any) -> dict[str, Any]:
    obj = manifest(spec={"replicas": replicas, "template": {"spec": {"containers": []}}})
    obj["metadata"].update(metadata)
    return obj


def crd(kind: str, scope: str) -> dict[str, Any]:
    return manifest(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        f"{kind.lower()}s.example.com",
        None,
        spec={"group": "example.com", "scope": scope, "names": {"kind": kind}},
    )


@pytest.fixture
def cluster(tmp_path: Path) -> DirectoryDeployer:
    return DirectoryDeployer(tmp_path / "cluster")


def stored(cluster: DirectoryDeployer, obj: dict[str, Any]) -> dict[str, Any]:
    found = cluster.get(key_of(obj))
    assert found is not None
    return found


# --- layout ---------------------------------------------------------------------------

LAYOUT = {
    "namespaced-with-group": (manifest(), "web/deployment.apps/web.yaml"),
    "namespaced-core": (manifest("v1", "Service"), "web/service/web.yaml"),
    "cluster-scoped-core": (
        manifest("v1", "Namespace", namespace=None),
        "_cluster/namespace/web.yaml",
    ),
    "cluster-scoped-with-group": (
        manifest("rbac.authorization.k8s.io/v1", "ClusterRole", "system:web", None),
        "_cluster/clusterrole.rbac.authorization.k8s.io/system:web.yaml",
    ),
}


@pytest.mark.parametrize(("obj", "path"), LAYOUT.values(), ids=LAYOUT.keys())
def test_each_object_is_one_file_at_its_documented_path(
    cluster: DirectoryDeployer, obj: dict[str, Any], path: str
) -> None:
    assert cluster.path_of(key_of(obj)) == cluster.root / path
    cluster.apply([obj])
    assert (cluster.root / path).is_file()
    assert sorted(
        p.relative_to(cluster.root).as_posix() for p in cluster.root.rglob("*") if p.is_file()
    ) == [path]


def test_stored_file_is_plain_yaml_in_the_manifest_key_order(cluster: DirectoryDeployer) -> None:
    shared = {"app": "web"}
    obj = deployment(labels=shared)
    obj["spec"]["selector"] = {"matchLabels": shared}
    cluster.apply([obj])
    text = cluster.path_of(key_of(obj)).read_text()
    assert "&id" not in text and "*id" not in text
    assert list(yaml.safe_load(text)) == ["apiVersion", "kind", "metadata", "spec"]


# --- apply ----------------------------------------------------------------------------


def test_apply_creates_an_object_at_generation_one(cluster: DirectoryDeployer) -> None:
    cluster.apply([deployment()])
    assert stored(cluster, deployment())["metadata"]["generation"] == 1


def test_apply_keeps_the_stored_status_and_ignores_status_sent_with_the_object(
    cluster: DirectoryDeployer,
) -> None:
    cluster.apply([deployment()])
    set_status(cluster.root, key_of(deployment()), deployment_status_ready(2))
    cluster.apply([{**deployment(3), "status": {"replicas": 99}}])
    assert stored(cluster, deployment())["status"] == deployment_status_ready(2)


GENERATION = {
    "same-object": (deployment(2), 1),
    "label-change": (deployment(2, labels={"tier": "front"}), 1),
    "annotation-change": (
        deployment(2, annotations={"convoy.dev/render": "sha256:" + "2" * 64}),
        1,
    ),
    "generation-sent-by-the-client": (deployment(2, generation=7), 1),
    "spec-change": (deployment(3), 2),
    "new-top-level-field": ({**deployment(2), "data": {"x": "1"}}, 2),
}


@pytest.mark.parametrize(("again", "generation"), GENERATION.values(), ids=GENERATION.keys())
def test_apply_bumps_the_generation_only_when_spec_like_content_changed(
    cluster: DirectoryDeployer, again: dict[str, Any], generation: int
) -> None:
    cluster.apply([deployment(2)])
    set_status(cluster.root, key_of(deployment()), {"observedGeneration": 1})
    cluster.apply([again])
    live = stored(cluster, deployment())
    assert live["metadata"]["generation"] == generation
    assert live["status"] == {"observedGeneration": 1}
    assert live["metadata"].get("labels") == again["metadata"].get("labels")


def test_apply_replaces_metadata_but_keeps_server_owned_fields(cluster: DirectoryDeployer) -> None:
    cluster.apply([deployment(labels={"old": "x"})])
    path = cluster.path_of(key_of(deployment()))
    live = yaml.safe_load(path.read_text())
    live["metadata"]["deletionTimestamp"] = "2026-11-29T12:00:00Z"
    path.write_text(yaml.safe_dump(live))
    cluster.apply([deployment(labels={"new": "y"})])
    meta = stored(cluster, deployment())["metadata"]
    assert meta["labels"] == {"new": "y"}
    assert meta["deletionTimestamp"] == "2026-11-29T12:00:00Z"


def test_apply_does_not_rewrite_an_unchanged_object(cluster: DirectoryDeployer) -> None:
    cluster.apply([deployment()])
    path = cluster.path_of(key_of(deployment()))
    before = os.stat(path).st_ino
    cluster.apply([deployment()])
    assert os.stat(path).st_ino == before
    cluster.apply([deployment(5)])
    assert os.stat(path).st_ino != before


def test_apply_leaves_no_temporary_files(cluster: DirectoryDeployer) -> None:
    cluster.apply([deployment(), deployment(3)])
    assert [p.name for p in cluster.path_of(key_of(deployment())).parent.iterdir()] == ["web.yaml"]


def test_apply_fails_with_apply_failed_on_an_io_error(tmp_path: Path) -> None:
    (tmp_path / "not-a-dir").write_text("")
    with pytest.raises(ApplyFailed, match=r"Deployment\.apps web/web"):
        DirectoryDeployer(tmp_path / "not-a-dir").apply([deployment()])


def test_apply_does_not_mutate_the_objects_it_is_given(cluster: DirectoryDeployer) -> None:
    obj = {**deployment(), "status": {"x": 1}}
    before = repr(obj)
    cluster.apply([obj])
    cluster.apply([obj])
    assert repr(obj) == before


# --- dry run and what a server refuses -------------------------------------------------

REFUSED = {
    "missing-api-version": (manifest(api_version=None), "apiVersion is missing"),
    "invalid-api-version": (manifest(api_version="apps/V1"), "apiVersion 'apps/V1'"),
    "missing-kind": (manifest(kind=None), "kind is missing"),
    "missing-metadata": ({"apiVersion": "v1", "kind": "ConfigMap"}, "metadata is missing"),
    "missing-name": (manifest(name=None), "metadata.name is missing"),
    "invalid-name": (manifest(name="Web_1"), "not a DNS-1123 subdomain"),
    "path-escape-name": (manifest(name="../x"), "'../x'"),
    "rbac-name-with-slash": (
        manifest("rbac.authorization.k8s.io/v1", "Role", "a/b"),
        "not a valid path segment",
    ),
    "service-name-starting-with-a-digit": (manifest("v1", "Service", "1web"), "DNS-1035"),
    "namespace-name-too-long": (manifest("v1", "Namespace", "n" * 64, None), "DNS-1123 label"),
    "invalid-namespace": (manifest(namespace="../etc"), "metadata.namespace '../etc'"),
    "namespaced-kind-without-namespace": (manifest(namespace=None), "namespaced"),
    "cluster-scoped-kind-with-namespace": (manifest("v1", "Namespace"), "cluster-scoped"),
    "cluster-scoped-custom-kind-with-namespace": (
        manifest("example.com/v1", "Widget"),
        "Widget is cluster-scoped",
    ),
    "non-string-annotation": (
        manifest(metadata={"name": "web", "namespace": "web", "annotations": {"a": 1}}),
        "metadata.annotations",
    ),
}


@pytest.mark.parametrize(("obj", "problem"), REFUSED.values(), ids=REFUSED.keys())
def test_dry_run_refuses_what_an_api_server_refuses_in_one_line(
    cluster: DirectoryDeployer, obj: dict[str, Any], problem: str
) -> None:
    batch = [crd("Widget", "Cluster"), obj]
    with pytest.raises(DryRunFailed) as refused:
        cluster.dry_run(batch)
    assert problem in str(refused.value)
    assert "\n" not in str(refused.value)
    assert not cluster.root.exists()


@pytest.mark.parametrize(("obj", "problem"), REFUSED.values(), ids=REFUSED.keys())
def test_apply_refuses_the_same_objects(
    cluster: DirectoryDeployer, obj: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ApplyFailed, match="apply refused"):
        cluster.apply([crd("Widget", "Cluster"), obj])


def test_refusal_names_the_object(cluster: DirectoryDeployer) -> None:
    with pytest.raises(DryRunFailed, match=r"^dry run refused Deployment\.apps web/Web: "):
        cluster.dry_run([manifest(name="Web")])


def test_dry_run_accepts_a_valid_batch_and_writes_nothing(cluster: DirectoryDeployer) -> None:
    batch = [
        manifest("v1", "Namespace", namespace=None),
        crd("Widget", "Cluster"),
        manifest("example.com/v1", "Widget", namespace=None),
        manifest("example.com/v1", "Gadget"),
        deployment(),
    ]
    cluster.dry_run(batch)
    assert not cluster.root.exists()


def test_a_stored_crd_makes_its_kind_cluster_scoped_for_later_batches(
    cluster: DirectoryDeployer,
) -> None:
    cluster.apply([crd("Widget", "Cluster")])
    cluster.dry_run([manifest("example.com/v1", "Widget", namespace=None)])
    with pytest.raises(DryRunFailed, match="cluster-scoped"):
        cluster.dry_run([manifest("example.com/v1", "Widget")])


def test_nothing_is_ever_written_outside_the_root(tmp_path: Path) -> None:
    cluster = DirectoryDeployer(tmp_path / "cluster")
    for name in ("../x", "../../x", "/x", ".."):
        with pytest.raises(ApplyFailed):
            cluster.apply([manifest("v1", "ConfigMap", name)])
    assert sorted(p.name for p in tmp_path.rglob("*")) == []


UNSAFE_KEYS = {
    "name-with-dots": ObjectKey(api_version="v1", kind="ConfigMap", namespace="web", name=".."),
    "name-with-slash": ObjectKey(api_version="v1", kind="ConfigMap", namespace="web", name="a/b"),
    "namespace-escape": ObjectKey(api_version="v1", kind="ConfigMap", namespace="..", name="x"),
    "kind-with-slash": ObjectKey(api_version="v1", kind="a/b", namespace="web", name="x"),
    "group-escape": ObjectKey(api_version="../v1", kind="ConfigMap", namespace="web", name="x"),
}


@pytest.mark.parametrize("key", UNSAFE_KEYS.values(), ids=UNSAFE_KEYS.keys())
def test_keys_that_could_leave_the_root_have_no_path(
    cluster: DirectoryDeployer, key: ObjectKey
) -> None:
    with pytest.raises(ValueError):
        cluster.path_of(key)
    assert cluster.get(key) is None
    with pytest.raises(PruneFailed):
        cluster.delete(key)


# --- delete and get -------------------------------------------------------------------


def test_delete_removes_the_file_and_is_true_also_when_already_gone(
    cluster: DirectoryDeployer,
) -> None:
    cluster.apply([deployment()])
    key = key_of(deployment())
    assert cluster.delete(key) is True
    assert not cluster.path_of(key).exists()
    assert cluster.get(key) is None
    assert cluster.delete(key) is True


def test_get_many_returns_every_key_with_none_for_missing_objects(
    cluster: DirectoryDeployer,
) -> None:
    namespace = manifest("v1", "Namespace", namespace=None)
    cluster.apply([namespace, deployment()])
    missing = key_of(manifest(name="api"))
    found = cluster.get_many([key_of(namespace), key_of(deployment()), missing])
    assert found[missing] is None
    assert found[key_of(namespace)] == {**namespace, "metadata": {"name": "web", "generation": 1}}
    assert found[key_of(deployment())] == stored(cluster, deployment())


def test_get_keeps_timestamps_written_by_hand_as_strings(cluster: DirectoryDeployer) -> None:
    cluster.apply([deployment()])
    path = cluster.path_of(key_of(deployment()))
    path.write_text(path.read_text() + "status:\n  startTime: 2026-11-29T12:00:00Z\n")
    assert stored(cluster, deployment())["status"] == {"startTime": "2026-11-29T12:00:00Z"}


def test_get_of_a_broken_file_is_cluster_unavailable_naming_the_file(
    cluster: DirectoryDeployer,
) -> None:
    cluster.apply([deployment()])
    path = cluster.path_of(key_of(deployment()))
    path.write_text("status: [unclosed\n")
    with pytest.raises(ClusterUnavailable, match=r"web\.yaml: line 2: invalid YAML"):
        cluster.get(key_of(deployment()))


def test_directory_deployer_satisfies_the_deployer_protocol(cluster: DirectoryDeployer) -> None:
    deployer: Deployer = cluster
    assert deployer.get(key_of(deployment())) is None


# --- FailingDeployer --------------------------------------------------------------------


def test_failing_deployer_applies_objects_before_the_failing_one(
    cluster: DirectoryDeployer,
) -> None:
    fake = FailingDeployer(cluster)
    fake.fail_apply = lambda key: key.name == "b"
    objects = [manifest("v1", "ConfigMap", n) for n in ("a", "b", "c")]
    with pytest.raises(ApplyFailed, match="ConfigMap web/b"):
        fake.apply(objects)
    assert [k.name for k in fake.applied] == ["a"]
    assert cluster.get(key_of(objects[0])) is not None
    assert cluster.get(key_of(objects[2])) is None


def test_failing_deployer_fails_dry_run_delete_and_reads_on_demand(
    cluster: DirectoryDeployer,
) -> None:
    fake = FailingDeployer(cluster)
    key = key_of(deployment())
    fake.fail_dry_run = True
    with pytest.raises(DryRunFailed):
        fake.dry_run([deployment()])
    fake.fail_delete = True
    with pytest.raises(PruneFailed):
        fake.delete(key)
    assert fake.deleted == []
    fake.fail_delete = False
    assert fake.delete(key) is True
    assert fake.deleted == [key]
    fake.unavailable = True
    for call in (
        lambda: fake.get(key),
        lambda: fake.get_many([key]),
        lambda: fake.apply([deployment()]),
    ):
        with pytest.raises(ClusterUnavailable):
            call()
    assert fake.dry_runs == 1
