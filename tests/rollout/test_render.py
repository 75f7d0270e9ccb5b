"""render and load_render (SPEC 3 steps 2-6): pure, from SourceSnapshot values."""

import hashlib
import json
import re
from typing import Any

import pytest
import yaml

from convoy_batch.errors import RenderFailed
from convoy_batch.manifests.yamlload import load_documents
from convoy_batch.models import Cluster, ObjectKey, Release
from convoy_batch.renderers.pipeline import Render, load_render, render
from convoy_batch.repo.source import SourceFile, SourceSnapshot

REVISION = "a" * 40


def make_release(**spec: Any) -> Release:
    return Release.model_validate(
        {
            "apiVersion": "convoy.dev/v1alpha1",
            "kind": "Release",
            "metadata": {"name": "web"},
            "spec": {"cluster": "staging", "namespace": "web-ns", "source": {"path": "app"}} | spec,
        }
    )


CLUSTER = Cluster.model_validate(
    {
        "apiVersion": "convoy.dev/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "staging"},
        "spec": {"vars": {"env": "staging", "replicas": "1"}},
    }
)


def run(files: dict[str, str], **spec: Any) -> Render:
    snapshot = SourceSnapshot(REVISION, tuple(SourceFile(p, t) for p, t in sorted(files.items())))
    return render(snapshot, make_release(**spec), CLUSTER)


def manifests(result: Render) -> dict[str, dict[str, Any]]:
    return {obj.key.name: obj.manifest for obj in result.objects}


def cm(name: str, extra: str = "", meta: str = "") -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{meta}{extra}"


def test_variables_come_from_builtins_then_cluster_then_release() -> None:
    text = cm(
        "${release}-${cluster}", "data: {ns: '${namespace}', env: '${env}', r: '${replicas}'}\n"
    )
    result = run({"app/a.yaml": text}, vars={"replicas": "3"})
    assert manifests(result)["web-staging"]["data"] == {"ns": "web-ns", "env": "staging", "r": "3"}


def test_a_double_dollar_is_a_literal_reference() -> None:
    result = run({"app/a.yaml": cm("a", "data: {script: 'echo $${HOME} $$ ${env}'}\n")})
    assert manifests(result)["a"]["data"]["script"] == "echo ${HOME} $$ staging"


@pytest.mark.parametrize(
    "reference",
    [
        pytest.param("${FRONTEND_ADDR}", id="undeclared"),
        pytest.param("${PODINFO_SVC}/token", id="undeclared-in-a-url"),
        pytest.param("${HOME:-/root}", id="shell-default"),
        pytest.param("${}", id="empty"),
        pytest.param("${a b}", id="not-a-name"),
    ],
)
def test_a_reference_to_no_declared_variable_is_left_as_written(reference: str) -> None:
    result = run({"app/a.yaml": cm("a", f"data: {{x: '{reference} ${{env}}'}}\n")})
    assert manifests(result)["a"]["data"]["x"] == f"{reference} staging"


def test_a_release_variable_is_substituted_where_a_script_also_uses_its_own() -> None:
    script = "data: {run: 'curl -s http://${FRONTEND_ADDR}/ -H x-env:${env}'}\n"
    result = run({"app/a.yaml": cm("a", script)}, vars={"FRONTEND_ADDR": "frontend:80"})
    assert manifests(result)["a"]["data"]["run"] == "curl -s http://frontend:80/ -H x-env:staging"


def test_namespaced_objects_get_the_release_namespace_and_keep_their_own() -> None:
    result = run({"app/a.yaml": cm("a") + "---\n" + cm("b", meta="  namespace: other\n")})
    assert [obj.key.namespace for obj in result.objects] == ["web-ns", "other"]
    assert manifests(result)["a"]["metadata"]["namespace"] == "web-ns"


def test_cluster_scoped_kinds_and_cluster_scoped_crds_get_no_namespace() -> None:
    crd = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec: {group: example.com, scope: Cluster, names: {kind: Widget, plural: widgets}}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: dropped}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g}
---
apiVersion: v1
kind: Namespace
metadata: {name: ns}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: role}
"""
    keys = {obj.key.name: obj.key.namespace for obj in run({"app/a.yaml": crd}).objects}
    assert keys == {"widgets.example.com": None, "w": None, "g": "web-ns", "ns": None, "role": None}


@pytest.mark.parametrize(
    ("files", "message"),
    [
        pytest.param(
            {"app/a.yaml": cm("x"), "app/b.yaml": cm("x")},
            "in app/a.yaml and in app/b.yaml",
            id="two-files",
        ),
        pytest.param(
            {"app/a.yaml": cm("x") + "---\n" + cm("x", meta="  namespace: web-ns\n")},
            "in app/a.yaml (document 1) and in app/a.yaml (document 2)",
            id="one-file-defaulted-namespace",
        ),
    ],
)
def test_two_objects_with_one_identity_are_a_render_failure_naming_both_files(
    files: dict[str, str], message: str
) -> None:
    with pytest.raises(
        RenderFailed, match=re.escape(f"ConfigMap web-ns/x is defined twice: {message}")
    ):
        run(files)


def test_the_same_name_in_two_namespaces_or_kinds_is_not_a_duplicate() -> None:
    secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n"
    result = run(
        {"app/a.yaml": cm("x"), "app/b.yaml": cm("x", meta="  namespace: b\n") + "---\n" + secret}
    )
    assert len(result.objects) == 3


@pytest.mark.parametrize(
    "files",
    [
        pytest.param({}, id="no-files"),
        pytest.param({"app/a.yaml": "---\n# only a comment\n---\n"}, id="only-empty-documents"),
    ],
)
def test_an_empty_render_is_a_failure_unless_allow_empty(files: dict[str, str]) -> None:
    with pytest.raises(RenderFailed, match="empty"):
        run(files)
    result = run(files, syncPolicy={"allowEmpty": True})
    assert result.objects == ()
    assert result.canonical == b"[]"
    assert result.ref == "sha256:" + hashlib.sha256(b"[]").hexdigest()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("- a\n", "app/a.yaml: not a mapping", id="list"),
        pytest.param(
            "kind: ConfigMap\nmetadata: {name: a}\n", "app/a.yaml: apiVersion", id="no-api"
        ),
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {}\n", "metadata.name", id="no-name"),
        pytest.param(
            cm("a") + "---\nplain\n", "app/a.yaml (document 2): not a mapping", id="doc-2"
        ),
        pytest.param("a: [\n", "app/a.yaml: line 2: invalid YAML", id="broken-yaml"),
        pytest.param(cm("a", meta="  labels: [x]\n"), "labels: not a mapping", id="labels-list"),
        pytest.param(cm("a", "data: {x: .nan}\n"), "app/a.yaml: holds a number JSON", id="nan"),
    ],
)
def test_a_document_that_is_not_an_object_is_a_failure_naming_the_file(
    text: str, message: str
) -> None:
    with pytest.raises(RenderFailed, match=re.escape(message)):
        run({"app/a.yaml": text})


def test_json_files_are_parsed_as_json() -> None:
    text = json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}, "data": {"on": "yes"}}
    )
    assert manifests(run({"app/a.json": text}))["j"]["data"] == {"on": "yes"}
    with pytest.raises(RenderFailed, match=r"app/b\.json: line 1: invalid JSON"):
        run({"app/b.json": "{"})


SCALARS = [
    ("yes", True), ("on", True), ("y", True), ("No", False), ("OFF", False), ("true", True),
    ("~", None), ("null", None), ("", None), ("12", 12), ("0x1F", 31), ("017", 15), ("0o17", 15),
    ("0b101", 5), ("1_000", 1000), ("-3", -3), ("1.5", 1.5), ("1e3", 1000.0),
    (".inf", float("inf")),
    ("2026-11-29T12:00:00Z", "2026-11-29T12:00:00Z"), ("2001-12-14", "2001-12-14"),
    ("1:20", "1:20"), ("8080:80", "8080:80"), ("=", "="), ("!!binary aGVsbG8=", "aGVsbG8="),
    ("!!timestamp 2001-12-14", "2001-12-14"), ("'yes'", "yes"), ("hello", "hello"),
]  # fmt: skip


@pytest.mark.parametrize(("written", "parsed"), SCALARS, ids=[s[0] for s in SCALARS])
def test_scalars_parse_as_kubectl_parses_them(written: str, parsed: Any) -> None:
    assert load_documents(f"v: {written}\n", "f.yaml") == [{"v": parsed}]


def test_mapping_keys_become_strings_as_in_json() -> None:
    assert load_documents("{1: a, true: b, null: c, 1.5: d}", "f.yaml") == [
        {"1": "a", "true": "b", "null": "c", "1.5": "d"}
    ]


def test_yaml_booleans_and_timestamps_reach_the_object_as_kubectl_sends_them() -> None:
    result = run({"app/a.yaml": cm("a", "immutable: yes\ndata: {at: 2026-11-29T12:00:00Z}\n")})
    assert manifests(result)["a"]["immutable"] is True
    assert manifests(result)["a"]["data"] == {"at": "2026-11-29T12:00:00Z"}


def test_render_ref_is_the_hash_of_the_canonical_json_of_the_sorted_objects() -> None:
    result = run({"app/a.yaml": cm("b", "data: {ü: x}\n") + "---\n" + cm("a")})
    expected = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "web-ns"}}
        for name in ("a", "b")
    ]
    expected[1]["data"] = {"ü": "x"}
    canonical = json.dumps(expected, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert result.canonical == canonical.encode("utf-8")
    assert result.ref == "sha256:" + hashlib.sha256(result.canonical).hexdigest()
    assert result.revision == REVISION


def test_render_ref_does_not_depend_on_key_order_or_file_order() -> None:
    a = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {x: '1', y: '2'}\n"
    a_reordered = "data: {y: '2', x: '1'}\nmetadata: {name: a}\nkind: ConfigMap\napiVersion: v1\n"
    b = cm("b")
    one = run({"app/1.yaml": a, "app/2.yaml": b})
    two = run({"app/1.yaml": b, "app/2.yaml": a_reordered})
    three = run({"app/all.yaml": b + "---\n" + a})
    assert one.ref == two.ref == three.ref
    assert run({"app/1.yaml": a.replace("'1'", "'3'"), "app/2.yaml": b}).ref != one.ref


def test_label_and_annotation_are_added_after_hashing() -> None:
    result = run({"app/a.yaml": cm("a", meta="  labels: {app: a}\n  annotations: {note: hello}\n")})
    meta = result.objects[0].manifest["metadata"]
    assert meta["labels"] == {"app": "a", "convoy.dev/release": "web"}
    assert meta["annotations"] == {"note": "hello", "convoy.dev/render": result.ref}
    assert b"convoy.dev" not in result.canonical


def test_changing_the_namespace_changes_the_render() -> None:
    files = {"app/a.yaml": cm("a")}
    assert run(files).ref != run(files, namespace="elsewhere").ref


def annotated(
    name: str, kind: str = "ConfigMap", wave: str | None = None, hook: str | None = None
) -> str:
    notes = {"convoy.dev/sync-wave": wave, "convoy.dev/hook": hook}
    text = yaml.safe_dump({k: v for k, v in notes.items() if v is not None})
    meta = (
        "  annotations: " + text.strip().replace("\n", ", ").join("{}") + "\n"
        if wave or hook
        else ""
    )
    api = "batch/v1" if kind == "Job" else "apps/v1" if kind == "Deployment" else "v1"
    return f"apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {name}\n{meta}"


def test_waves_and_hooks_are_read_from_annotations() -> None:
    files = {
        "app/a.yaml": "---\n".join(
            [
                annotated("plain"),
                annotated("late", wave="2"),
                annotated("early", wave="-1"),
                annotated("migrate", "Job", hook="PreSync"),
                annotated("smoke", "Job", hook="PostSync", wave="5"),
            ]
        )
    }
    result = run(files)
    by_name = {obj.key.name: obj for obj in result.objects}
    assert {n: (o.wave, o.hook) for n, o in by_name.items()} == {
        "plain": (0, None),
        "late": (2, None),
        "early": (-1, None),
        "migrate": (0, "PreSync"),
        "smoke": (5, "PostSync"),
    }
    assert by_name["smoke"].phase == "PostSync" and by_name["late"].phase == 2
    assert result.phases() == ("PreSync", -1, 0, 2, "PostSync")
    assert [o.key.name for o in result.by_phase(0)] == ["plain"]
    assert [o.key.name for o in result.by_phase("PreSync")] == ["migrate"]


@pytest.mark.parametrize(
    ("wave", "hook", "message"),
    [
        pytest.param("one", None, "sync-wave: 'one' is not an integer", id="wave-not-int"),
        pytest.param("1.5", None, "sync-wave: '1.5' is not an integer", id="wave-float"),
        pytest.param(None, "Sync", "hook: 'Sync' is not PreSync or PostSync", id="unknown-hook"),
    ],
)
def test_a_bad_wave_or_hook_annotation_is_a_failure_naming_file_and_object(
    wave: str | None, hook: str | None, message: str
) -> None:
    with pytest.raises(
        RenderFailed, match=f"app/a.yaml: ConfigMap web-ns/x: annotation convoy.dev/{message}"
    ):
        run({"app/a.yaml": annotated("x", wave=wave, hook=hook)})


def test_prune_false_annotation_is_read() -> None:
    result = run(
        {
            "app/a.yaml": cm("keep", meta="  annotations: {convoy.dev/prune: 'false'}\n")
            + "---\n"
            + cm("go")
        }
    )
    assert {o.key.name: o.prune for o in result.objects} == {"keep": False, "go": True}


def test_objects_apply_in_hook_wave_kind_and_name_order() -> None:
    docs = [
        annotated("z-deploy", "Deployment"),
        annotated("b-cm"),
        annotated("a-cm"),
        annotated("svc", "Service"),
        annotated("ns", "Namespace"),
        annotated("w1", wave="1"),
        annotated("post", "Job", hook="PostSync"),
        annotated("pre", "Job", hook="PreSync"),
        annotated("first", "Secret", wave="-1"),
        annotated("zz", "Widget"),
    ]
    order = [obj.key.name for obj in run({"app/a.yaml": "---\n".join(docs)}).objects]
    assert order == ["pre", "first", "ns", "a-cm", "b-cm", "svc", "z-deploy", "zz", "w1", "post"]


def test_load_render_rebuilds_the_same_render_from_its_blob() -> None:
    docs = [
        annotated("a", wave="1"),
        annotated("job", "Job", hook="PreSync"),
        cm("ü", "data: {n: 1.5, b: yes}\n"),
    ]
    original = run({"app/a.yaml": "---\n".join(docs)})
    loaded = load_render(original.canonical, "web", REVISION)
    assert loaded == original
    assert loaded.objects[0].key == ObjectKey(
        api_version="batch/v1", kind="Job", namespace="web-ns", name="job"
    )


def test_load_render_of_a_blob_that_is_not_a_list_of_objects_fails() -> None:
    with pytest.raises(RenderFailed, match="not a list"):
        load_render(b"{}", "web", None)
    with pytest.raises(RenderFailed, match=r"\(object 1\): kind"):
        load_render(b'[{"apiVersion": "v1", "metadata": {"name": "x"}}]', "web", None)


def test_a_file_that_does_not_parse_names_the_references_it_kept() -> None:
    text = cm("a", "data: {env: ${env}, zone: ${zone}, cost: $${price}}\n")
    with pytest.raises(RenderFailed) as failed:
        run({"app/a.yaml": text})
    assert str(failed.value).endswith(
        " (${zone}: no such variable is declared, left as written)"
    ), failed.value
