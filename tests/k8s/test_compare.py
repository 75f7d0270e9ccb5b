"""When the Kubernetes deployer sends nothing: ``covers``, ``unchanged`` and ``settled``
(pure; no server)."""

from typing import Any

import pytest

from convoy_batch.deployers.kubediff import covers, settled, unchanged

R1 = {"convoy.dev/render": "sha256:1"}
R2 = {"convoy.dev/render": "sha256:2"}


def obj(annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "n", "annotations": annotations},
        "data": spec,
    }


def live(annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    found = obj(annotations, **spec)
    found["metadata"].update(uid="u", resourceVersion="7", labels={"added": "by-server"})
    return found


@pytest.mark.parametrize(
    ("desired", "found", "expected"),
    [
        pytest.param({"a": 1}, {"a": 1, "b": 2}, True, id="server-added-fields-do-not-count"),
        pytest.param({"a": 1}, {"a": 2}, False, id="a-changed-value-counts"),
        pytest.param({"a": 1}, {}, False, id="a-missing-field-counts"),
        pytest.param({"a": None}, {}, True, id="a-null-sets-nothing"),
        pytest.param({"a": None}, {"a": "2026"}, True, id="a-null-sets-nothing-even-if-set"),
        pytest.param({"s": {}}, {}, True, id="an-empty-object-sets-nothing"),
        pytest.param({"s": {}}, {"s": {"x": 1}}, True, id="an-empty-object-covers-defaults"),
        pytest.param({"s": {"t": {}}}, {}, True, id="nested-empty-objects-set-nothing"),
        pytest.param({"s": {"t": 1}}, {}, False, id="an-object-with-a-value-counts"),
        pytest.param({"l": []}, {}, True, id="an-empty-list-sets-nothing"),
        pytest.param({"l": []}, {"l": [1]}, False, id="an-empty-list-clears-a-list"),
        pytest.param([{"n": 1}], [{"n": 1, "d": 0}], True, id="list-elements-may-gain-defaults"),
        pytest.param([1, 2], [1], False, id="list-lengths-must-match"),
        pytest.param([1, 2], [2, 1], False, id="list-order-counts"),
        pytest.param(True, 1, False, id="a-boolean-is-not-a-number"),
        pytest.param(1, 1.0, True, id="numbers-compare-by-value"),
    ],
)
def test_covers_compares_only_the_fields_of_the_manifest(
    desired: Any, found: Any, expected: bool
) -> None:
    assert covers(desired, found) is expected


@pytest.mark.parametrize(
    ("desired", "found", "expected"),
    [
        pytest.param(obj(R1, a="1"), live(R1, a="1"), True, id="same-render-same-values"),
        pytest.param(obj(R1, a="1"), live(R1, a="2"), False, id="drifted-value"),
        pytest.param(obj(R2, a="1"), live(R1, a="1"), False, id="another-render"),
        pytest.param(obj(R1, a="1"), None, False, id="not-there"),
        pytest.param(obj({}, a="1"), live({}, a="1"), False, id="no-render-annotation"),
    ],
)
def test_unchanged_needs_the_same_render_and_no_drift(
    desired: dict[str, Any], found: dict[str, Any] | None, expected: bool
) -> None:
    assert unchanged(desired, found) is expected


HOOK = {"convoy.dev/hook": "PreSync"}


@pytest.mark.parametrize(
    ("desired", "found", "expected"),
    [
        pytest.param(obj(R1 | HOOK), live(R1 | HOOK, done="yes"), True, id="hook-of-this-render"),
        pytest.param(obj(R2 | HOOK), live(R1 | HOOK), False, id="hook-of-another-render"),
        pytest.param(obj(R1 | HOOK), None, False, id="hook-not-there"),
    ],
)
def test_a_hook_is_settled_once_created_for_its_render(
    desired: dict[str, Any], found: dict[str, Any] | None, expected: bool
) -> None:
    assert settled(desired, found) is expected


ARGO_HOOK = {"argocd.argoproj.io/hook": "PreSync"}
ONCE = {"kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent"}


def ours(found: dict[str, Any]) -> dict[str, Any]:
    found["metadata"]["labels"] = {"convoy.dev/release": "web"}
    return found


@pytest.mark.parametrize(
    ("desired", "found", "expected"),
    [
        pytest.param(obj(R1 | ARGO_HOOK), live(R1 | ARGO_HOOK), True, id="argo-hook-this-render"),
        pytest.param(obj(R2 | ARGO_HOOK), live(R1), False, id="argo-hook-another-render"),
        pytest.param(
            ours(obj(R1 | ONCE, a="git")), ours(live(R1, a="hand")), True, id="once-fields-unread"
        ),
        pytest.param(ours(obj(R2 | ONCE)), ours(live(R1)), False, id="once-another-render"),
        pytest.param(ours(obj(R1 | ONCE)), live(R1), False, id="once-without-our-label"),
        pytest.param(ours(obj(R1 | ONCE)), None, False, id="once-not-there"),
    ],
)
def test_argo_hooks_and_create_only_objects_are_settled_by_their_bookkeeping(
    desired: dict[str, Any], found: dict[str, Any] | None, expected: bool
) -> None:
    assert settled(desired, found) is expected


def secret(data: dict[str, str] | None = None, strings: dict[str, str] | None = None) -> Any:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "annotations": {"convoy.dev/render": "sha256:1"}},
    }
    if data is not None:
        body["data"] = data
    if strings is not None:
        body["stringData"] = strings
    return body


@pytest.mark.parametrize(
    ("desired", "found", "expected"),
    [
        pytest.param(secret(strings={"k": "v"}), secret({"k": "dg=="}), True, id="as-stored"),
        pytest.param(secret(strings={"k": "w"}), secret({"k": "dg=="}), False, id="changed"),
        pytest.param(
            secret({"k": "eA==", "j": "eQ=="}, {"k": "v"}),
            secret({"k": "dg==", "j": "eQ=="}),
            True,
            id="stringData-wins-over-data",
        ),
        pytest.param(secret(strings={"k": "v"}), secret({}), False, id="not-stored"),
    ],
)
def test_a_secrets_string_data_is_compared_as_the_data_the_server_stores(
    desired: dict[str, Any], found: dict[str, Any], expected: bool
) -> None:
    assert unchanged(desired, found) is expected
