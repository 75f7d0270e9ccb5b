"""The server's form of a manifest: ``project``, ``in_sync`` and what ``ServerForms``
remembers in a real parse cache (pure, but for the cache file in ``tmp_path``; no server)."""

import copy
from pathlib import Path
from typing import Any

import pytest

from convoy_batch.deployers.serverform import ServerForms, digest, in_sync, project
from convoy_batch.state.caches import ParseCache

R1 = {"convoy.dev/render": "sha256:1"}
R2 = {"convoy.dev/render": "sha256:2"}


@pytest.mark.parametrize(
    ("obj", "manifest", "expected"),
    [
        pytest.param({"a": 1, "b": 2}, {"a": 5}, [("value", ("a",), 1)], id="only-manifest-paths"),
        pytest.param({"c": "2"}, {"c": "2000m"}, [("value", ("c",), "2")], id="the-stored-value"),
        pytest.param({}, {"a": False}, [("absent", ("a",), None)], id="a-missing-leaf-is-absent"),
        pytest.param({}, {"s": {"t": 0}}, [("absent", ("s",), None)], id="a-missing-mapping"),
        pytest.param({"a": None}, {"a": 0}, [("absent", ("a",), None)], id="a-null-is-absent"),
        pytest.param({"a": "2026"}, {"a": None}, [], id="a-null-in-the-manifest-sets-nothing"),
        pytest.param({"s": {"x": 1}}, {"s": {}}, [], id="an-empty-mapping-has-no-leaf"),
        pytest.param({"s": 3}, {"s": {"t": 1}}, [("value", ("s",), 3)], id="another-type-whole"),
        pytest.param({"s": {"t": 1}}, {"s": 1}, [("value", ("s",), {"t": 1})], id="a-map-whole"),
        pytest.param(
            {"l": [{"n": "a", "d": 0}, {"n": "b"}]},
            {"l": [{"n": "a"}]},
            [("length", ("l",), 2), ("value", ("l", 0, "n"), "a")],
            id="a-list-item-by-item-with-its-length",
        ),
        pytest.param(
            {"l": []},
            {"l": [1, 2]},
            [("length", ("l",), 0), ("absent", ("l", 0), None), ("absent", ("l", 1), None)],
            id="missing-items-are-absent",
        ),
        pytest.param({}, {"l": []}, [("absent", ("l",), None)], id="a-missing-list"),
    ],
)
def test_a_projection_takes_the_object_at_the_paths_the_manifest_sets(
    obj: Any, manifest: Any, expected: list[Any]
) -> None:
    assert project(obj, manifest) == expected


def test_a_projection_follows_the_manifests_order_not_the_objects() -> None:
    obj = {"b": 2, "a": 1}

    assert project(obj, {"a": 0, "b": 0}) == [("value", ("a",), 1), ("value", ("b",), 2)]


@pytest.mark.parametrize(
    "drifted",
    [
        pytest.param({"hostNetwork": True}, id="a-false-the-server-omits-set-true"),
        pytest.param({"minReadySeconds": 5}, id="a-zero-the-server-omits-set"),
        pytest.param({"cpu": "3"}, id="a-normalised-value-changed"),
        pytest.param({"env": [{"name": "A", "value": "1"}, {"name": "B"}]}, id="an-item-added"),
        pytest.param({"env": [{"name": "Z", "value": "1"}]}, id="an-items-key-changed"),
    ],
)
def test_a_change_at_a_managed_path_changes_the_projection(drifted: dict[str, Any]) -> None:
    manifest = {"hostNetwork": False, "minReadySeconds": 0, "cpu": "2000m", "env": [{"name": "A"}]}
    stored = {"cpu": "2", "env": [{"name": "A", "value": "1"}], "dnsPolicy": "ClusterFirst"}

    assert project(stored, manifest) != project({**stored, **drifted}, manifest)


def test_a_change_the_manifest_does_not_set_leaves_the_projection() -> None:
    manifest = {"cpu": "2000m"}
    stored = {"cpu": "2", "resourceVersion": "7"}

    assert project(stored, manifest) == project({**stored, "resourceVersion": "8"}, manifest)


def deployment(annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    meta = {"name": "d", "namespace": "n", "annotations": annotations}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}


def stored(sent: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """``sent`` as a server would store it: its spec replaced, fields of its own added."""
    found = copy.deepcopy(sent)
    found["metadata"].update(uid="u", resourceVersion="7", generation=1)
    found["spec"] = spec
    found["status"] = {"replicas": 1}
    return found


SENT = deployment(R1, replicas=1, minReadySeconds=0, cpu="2000m")
ANSWER = stored(SENT, replicas=1, cpu="2", revisionHistoryLimit=10)


@pytest.mark.parametrize(
    ("sent", "live", "expected"),
    [
        pytest.param(SENT, ANSWER, True, id="the-answer-itself"),
        pytest.param(SENT, stored(SENT, replicas=1, cpu="2"), True, id="fields-of-its-own-aside"),
        pytest.param(SENT, stored(SENT, replicas=3, cpu="2"), False, id="a-changed-value"),
        pytest.param(SENT, stored(SENT, replicas=1, cpu="2", minReadySeconds=5), False, id="a-0"),
        pytest.param(deployment(R2, **SENT["spec"]), ANSWER, False, id="another-render"),
        pytest.param(SENT, None, False, id="not-there"),
        pytest.param(deployment({}, **SENT["spec"]), stored(deployment({})), False, id="no-render"),
    ],
)
def test_in_sync_compares_the_answer_and_the_live_copy_on_the_manifests_paths(
    sent: dict[str, Any], live: dict[str, Any] | None, expected: bool
) -> None:
    answer = stored(sent, **ANSWER["spec"])

    assert in_sync(sent, answer, live) is expected


@pytest.mark.parametrize(
    "kind_annotation",
    [{"convoy.dev/hook": "PreSync"}, {"kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent"}],
    ids=["hook", "create-only"],
)
def test_hooks_and_create_only_objects_are_never_in_sync_by_their_fields(
    kind_annotation: dict[str, str],
) -> None:
    sent = deployment(R1 | kind_annotation, replicas=1)

    assert not in_sync(sent, stored(sent, replicas=1), stored(sent, replicas=1))


def secret(**body: Any) -> dict[str, Any]:
    meta = {"name": "s", "namespace": "n", "annotations": R1}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, **body}


def test_a_secrets_string_data_is_projected_as_the_data_the_server_stores() -> None:
    sent = secret(stringData={"token": "v"})
    answer = secret(data={"token": "dg=="}, type="Opaque")

    assert in_sync(sent, answer, answer)
    assert not in_sync(sent, answer, secret(data={"token": "dw=="}, type="Opaque"))


def cache(tmp_path: Path) -> ParseCache:
    """The parse cache of Cluster ``c`` in a state directory, as a tick opens it."""
    (tmp_path / "cache").mkdir(exist_ok=True)
    return ParseCache(tmp_path / "cache" / "cluster-c.json", tmp_path)


def test_a_remembered_answer_settles_the_live_copy_on_a_later_tick(tmp_path: Path) -> None:
    first = cache(tmp_path)
    ServerForms(first).remember(SENT, ANSWER)
    first.save()

    later = ServerForms(cache(tmp_path))

    assert later.matches(SENT, stored(SENT, replicas=1, cpu="2"))
    assert not later.matches(SENT, stored(SENT, replicas=2, cpu="2"))  # drift
    other = deployment(R1, replicas=1, minReadySeconds=0, cpu="3")  # another manifest
    assert not later.matches(other, stored(other, replicas=1, cpu="2"))
    renamed = copy.deepcopy(SENT)
    renamed["metadata"]["name"] = "e"  # another object
    assert not later.matches(renamed, stored(renamed, replicas=1, cpu="2"))


def test_without_a_cache_nothing_is_remembered() -> None:
    remembered = ServerForms(None)
    remembered.remember(SENT, ANSWER)

    assert not remembered.matches(SENT, ANSWER)


def test_the_cache_holds_digests_only_never_a_secrets_value(tmp_path: Path) -> None:
    sent = secret(stringData={"token": "hunter2-value"}, data={"key": "c2VjcmV0LWtleQ=="})
    answer = secret(data={"token": "aHVudGVyMi12YWx1ZQ==", "key": "c2VjcmV0LWtleQ=="})
    first = cache(tmp_path)
    ServerForms(first).remember(sent, answer)
    first.save()

    text = (tmp_path / "cache" / "cluster-c.json").read_text()
    for value in ("hunter2-value", "aHVudGVyMi12YWx1ZQ==", "c2VjcmV0LWtleQ==", "secret-key"):
        assert value not in text
    assert digest(sent) in text  # the file was written, with the manifest's digest
