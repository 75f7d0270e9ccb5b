# ruff: noqa: E501 - a table of literal inputs, each on its line
"""Bad input stays inside its Release, as a table: over a hundred malformed Release
files, Cluster files, source paths and manifests, all in one repository beside healthy
Releases, reconciled in one tick. Every bad Release gets an error status of the expected
reason in one line naming what is wrong, the tick exits 1 without a traceback, and the
healthy Releases reconcile as if the bad ones were not there."""

from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.scenario import CONFIGMAP, DEPLOYMENT, Scenario, release_yaml

HEAD = "apiVersion: convoy.dev/v1alpha1\nkind: Release\n"


def spec(name: str, body: str) -> str:
    return f"{HEAD}metadata: {{name: {name}}}\nspec:\n{body}"


def good_spec(name: str, extra: str = "") -> str:
    return spec(name, f"  cluster: staging\n  source: {{path: apps/{name}}}\n{extra}")


@dataclass(frozen=True)
class Case:
    text: str
    reason: str
    named: str
    """A part of the error line that says what is wrong."""
    files: tuple[tuple[str, str], ...] = ()
    """Source files of the case (default: a ConfigMap)."""


def _cases() -> dict[str, Case]:
    cases: dict[str, Case] = {}

    def add(key: str, text: str, reason: str, named: str, **files: str) -> None:
        cases[key] = Case(text, reason, named, tuple(files.items()))

    invalid = "InvalidRelease"

    def add_field(key: str, extra: str, named: str, reason: str = invalid) -> None:
        """A case of a good Release with ``extra`` lines of its spec."""
        add(key, good_spec(key, extra), reason, named)

    def add_source(key: str, reason: str, named: str, **files: str) -> None:
        """A case of a good Release whose source holds ``files``."""
        add(key, good_spec(key), reason, named, **files)

    # --- the file itself
    add("yaml-syntax", "apiVersion: [\n", invalid, "invalid YAML")
    add("yaml-tab-indent", HEAD + "metadata:\n\tname: x\n", invalid, "invalid YAML")
    add("two-documents", good_spec("two-documents") + "---\nkind: Release\n", invalid, "documents")
    add("a-list", "- a\n- b\n", invalid, "not a mapping")
    add("a-scalar", "just text\n", invalid, "not a mapping")
    add("empty-file", "", invalid, "empty")
    add("only-comments", "# nothing\n", invalid, "empty")
    add("nul-byte", good_spec("nul-byte").replace("staging", "stag\0ing"), invalid, "#x0000")
    add("bell-char", good_spec("bell-char").replace("staging", "stag\x07ing"), invalid, "#x0007")
    # --- the object's frame
    add(
        "wrong-kind",
        good_spec("wrong-kind").replace("kind: Release", "kind: Cluster"),
        invalid,
        "kind",
    )
    add("no-kind", good_spec("no-kind").replace("kind: Release\n", ""), invalid, "kind")
    add(
        "wrong-api-version",
        good_spec("wrong-api-version").replace("v1alpha1", "v9"),
        invalid,
        "apiVersion",
    )
    add(
        "no-api-version",
        good_spec("no-api-version").replace("apiVersion: convoy.dev/v1alpha1\n", ""),
        invalid,
        "apiVersion",
    )
    add(
        "no-metadata",
        HEAD + "spec:\n  cluster: staging\n  source: {path: x}\n",
        invalid,
        "metadata",
    )
    add("no-spec", HEAD + "metadata: {name: no-spec}\n", invalid, "spec")
    add("spec-a-list", HEAD + "metadata: {name: spec-a-list}\nspec: [1]\n", invalid, "spec")
    add("top-unknown-field", good_spec("top-unknown-field") + "status: {}\n", invalid, "status")
    add("name-uppercase", good_spec("Upper"), invalid, "metadata.name")
    add(
        "metadata-unknown",
        good_spec("metadata-unknown").replace(
            "{name: metadata-unknown}", "{name: metadata-unknown, uid: x}"
        ),
        invalid,
        "metadata.uid",
    )
    add(
        "labels-a-list",
        good_spec("labels-a-list").replace(
            "{name: labels-a-list}", "{name: labels-a-list, labels: [a]}"
        ),
        invalid,
        "metadata.labels",
    )
    add(
        "annotations-a-string",
        good_spec("annotations-a-string").replace(
            "{name: annotations-a-string}", "{name: annotations-a-string, annotations: x}"
        ),
        invalid,
        "metadata.annotations",
    )
    # --- spec fields
    add(
        "no-cluster",
        spec("no-cluster", "  source: {path: apps/no-cluster}\n"),
        invalid,
        "spec.cluster",
    )
    add(
        "cluster-a-list",
        spec("cluster-a-list", "  cluster: [a]\n  source: {path: x}\n"),
        invalid,
        "spec.cluster",
    )
    add(
        "cluster-bad-name",
        spec("cluster-bad-name", "  cluster: Staging_1\n  source: {path: x}\n"),
        invalid,
        "spec.cluster",
    )
    add("no-source", spec("no-source", "  cluster: staging\n"), invalid, "spec.source")
    add(
        "source-a-string",
        spec("source-a-string", "  cluster: staging\n  source: apps/x\n"),
        invalid,
        "spec.source",
    )
    add(
        "source-no-path",
        spec("source-no-path", "  cluster: staging\n  source: {ref: main}\n"),
        invalid,
        "spec.source.path",
    )
    add(
        "source-unknown",
        good_spec("source-unknown").replace(
            "{path: apps/source-unknown}", "{path: apps/source-unknown, branch: x}"
        ),
        invalid,
        "spec.source.branch",
    )
    add_field("spec-unknown", "  replicas: 3\n", "spec.replicas")
    add_field("namespace-bad", "  namespace: Web_1\n", "spec.namespace")
    add_field("namespace-a-map", "  namespace: {a: b}\n", "spec.namespace")
    add_field("vars-a-list", "  vars: [a, b]\n", "spec.vars")
    add_field("vars-nested", "  vars: {a: {b: c}}\n", "spec.vars")
    for key, value in {
        "empty": "''",
        "negative": "-5m",
        "no-unit": "5",
        "unknown-unit": "5y",
        "words": "five minutes",
        "overflow": "99999999999999999999h",
        "past-go": "2562048h",
        "a-list": "[5m]",
        "huge-float": "1e400h",
        "trailing-number": "5m5",
        "unit-first": "m5",
        "double-unit": "5mm",
        "two-dots": "0.5.5s",
        "spaces-inside": "5 m",
    }.items():
        add_field(f"interval-{key}", f"  interval: {value}\n", "spec.interval")
    for key, value in {"unknown": "Sometimes", "lower": "auto", "number": "1"}.items():
        add_field(f"mode-{key}", f"  syncPolicy: {{mode: {value}}}\n", "spec.syncPolicy.mode")
    for key, value in {"string": "maybe", "list": "[true]", "map": "{a: b}"}.items():
        add_field(f"prune-{key}", f"  syncPolicy: {{prune: {value}}}\n", "spec.syncPolicy.prune")
    add_field(
        "allow-empty-string", "  syncPolicy: {allowEmpty: perhaps}\n", "spec.syncPolicy.allowEmpty"
    )
    add_field("sync-unknown", "  syncPolicy: {retry: 3}\n", "spec.syncPolicy.retry")
    add_field(
        "waves-strategy", "  syncPolicy: {waves: {healthStrategy: Ready}}\n", "healthStrategy"
    )
    add_field("waves-timeout", "  syncPolicy: {waves: {timeout: soon}}\n", "timeout")
    add_field("waves-unknown", "  syncPolicy: {waves: {count: 2}}\n", "waves.count")
    add_field("rollback-mode", "  failurePolicy: {rollback: Always}\n", "rollback")
    add_field(
        "deadline-bad", "  failurePolicy: {progressDeadline: 10 minutes}\n", "progressDeadline"
    )
    add_field("deadline-negative", "  failurePolicy: {progressDeadline: -1m}\n", "progressDeadline")
    add_field("failure-unknown", "  failurePolicy: {retries: 2}\n", "failurePolicy.retries")
    add_field("failure-a-list", "  failurePolicy: [Auto]\n", "failurePolicy")
    add_field("pin-a-map", "  pin: {sha: x}\n", "spec.pin")
    for key, value in {
        "words": "tomorrow",
        "date-only": "2026-11-29",
        "no-zone": "2026-11-29T12:00:00",
    }.items():
        add(
            f"force-sync-{key}",
            good_spec(f"force-sync-{key}").replace(
                f"{{name: force-sync-{key}}}",
                f"{{name: force-sync-{key}, annotations: {{convoy.dev/force-sync: '{value}'}}}}",
            ),
            invalid,
            "convoy.dev/force-sync",
        )
    # --- the source
    source = "SourceFailed"
    add(
        "path-absolute",
        spec("path-absolute", "  cluster: staging\n  source: {path: /etc}\n"),
        source,
        "absolute",
    )
    add(
        "path-dotdot",
        spec("path-dotdot", "  cluster: staging\n  source: {path: apps/../..}\n"),
        source,
        "..",
    )
    add(
        "path-missing",
        spec("path-missing", "  cluster: staging\n  source: {path: apps/nothing-here}\n"),
        source,
        "apps/nothing-here",
    )
    add(
        "ref-unknown",
        good_spec("ref-unknown").replace(
            "{path: apps/ref-unknown}", "{path: apps/ref-unknown, ref: no-such-branch}"
        ),
        source,
        "no-such-branch",
    )
    add_field("pin-unknown", "  pin: v9.9.9\n", "v9.9.9", source)
    add_field("pin-zeros", f"  pin: '{'0' * 40}'\n", "0000", source)
    add_field("pin-short-hex", "  pin: 'deadbeef'\n", "deadbeef", source)
    add(
        "url-unreachable",
        good_spec("url-unreachable").replace(
            "{path: apps/url-unreachable}", "{path: x, url: /nonexistent/repo.git}"
        ),
        source,
        "source",
    )
    # --- the cluster
    add(
        "cluster-missing",
        spec("cluster-missing", "  cluster: production\n  source: {path: apps/cluster-missing}\n"),
        "ClusterNotFound",
        "production",
    )
    add(
        "cluster-broken",
        spec("cluster-broken", "  cluster: broken\n  source: {path: apps/cluster-broken}\n"),
        "ClusterNotFound",
        "clusters/broken.yaml",
    )
    add(
        "cluster-unknown-field",
        spec(
            "cluster-unknown-field",
            "  cluster: extra\n  source: {path: apps/cluster-unknown-field}\n",
        ),
        "ClusterNotFound",
        "spec.region",
    )
    # --- the manifests
    render = "RenderFailed"
    bad_manifests = {
        "unquoted-reference-in-flow": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${nope}}\n",
        "manifest-syntax": "apiVersion: v1\nkind: ConfigMap\nmetadata: [\n",
        "manifest-a-list": "- apiVersion: v1\n  kind: ConfigMap\n",
        "manifest-a-scalar": "hello\n",
        "no-manifest-kind": "apiVersion: v1\nmetadata: {name: x}\n",
        "no-manifest-name": "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
        "no-manifest-metadata": "apiVersion: v1\nkind: ConfigMap\n",
        "duplicate-objects": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\n",
        "alias-bomb": "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n",
        "self-reference": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\ndata: &d {a: *d}\n",
        "bad-wave": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: w\n  annotations: {convoy.dev/sync-wave: soon}\n",
        "bad-hook": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: h\n  annotations: {convoy.dev/hook: Sometime}\n",
        "manifest-nul": 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: n}\ndata: {a: "\0"}\n',
        "manifest-control": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c\x01}\n",
    }
    for key, text in bad_manifests.items():
        add_source(f"m-{key}", render, "", **{"bad.yaml": text})
    add_source("empty-render", render, "empty", **{"notes.txt": "no manifest\n"})
    dry = "DryRunFailed"
    # fmt: off
    in_c_yaml = {  # the case's one manifest, c.yaml: its reason, what is named
        "bad-object-name": (dry, "", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Not_Valid}\n"),
        "bad-api-version": (dry, "", "apiVersion: 'apps/V 1'\nkind: Deployment\nmetadata: {name: x}\n"),
        "labels-not-strings": (dry, "", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: l, labels: {a: [1]}}\n"),
        "namespace-not-a-string": (render, "metadata.namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: y}\n"),
        "wave-a-list": (render, "", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: w\n  annotations: {convoy.dev/sync-wave: [1]}\n"),
        "manifest-text-huge": (render, "characters", "# " + "x" * (8 * 1024 * 1024) + "\n"),
    }
    # fmt: on
    for key, (reason, named, text) in in_c_yaml.items():
        add_source(key, reason, named, **{"c.yaml": text})
    add(
        "release-self-reference",
        HEAD + "metadata: &m {name: release-self-reference, labels: *m}\n",
        invalid,
        "aliases",
    )
    return cases


CASES = _cases()
HEALTHY = ("web", "api")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Scenario, Any]:
    class _Quiet:
        def readouterr(self) -> Any:
            class Captured:
                out = ""
                err = ""

            return Captured()

    s = Scenario(tmp_path_factory.mktemp("malformed"), _Quiet())  # type: ignore[arg-type]
    files: dict[str, str | None] = {
        "clusters/broken.yaml": "apiVersion: convoy.dev/v1alpha1\nkind: Cluster\nmetadata: [\n",
        "clusters/extra.yaml": "apiVersion: convoy.dev/v1alpha1\nkind: Cluster\n"
        "metadata: {name: extra}\nspec: {region: eu}\n",
    }
    for name in HEALTHY:
        files[f"releases/{name}.yaml"] = release_yaml(name)
        files[f"apps/{name}/deployment.yaml"] = DEPLOYMENT.replace("IMAGE", "1.0")
        files[f"apps/{name}/configmap.yaml"] = CONFIGMAP
    for key, case in CASES.items():
        files[f"releases/{key}.yaml"] = case.text
        for rel, text in case.files or (("configmap.yaml", CONFIGMAP),):
            files[f"apps/{key}/{rel}"] = text
    s.commit(files, "healthy and malformed Releases")
    return s, s.cli_process("reconcile", "--all", "--now", "2026-11-29T12:00:00Z")


def test_the_tick_exits_1_in_one_line_per_error_and_without_a_traceback(world: Any) -> None:
    _, done = world
    assert done.code == 1, done.err[-2000:]
    assert "Traceback" not in done.err
    assert len(CASES) >= 100
    for line in done.err.splitlines():
        assert all(c.isprintable() for c in line), line


@pytest.mark.parametrize("name", HEALTHY)
def test_the_healthy_releases_reconcile(world: Any, name: str) -> None:
    s, _ = world
    assert s.status(name)["lastAttempted"]["reason"] == "Synced"
    assert s.status(name)["lastAttempted"]["applied"] is True
    assert s.live(name, "deployment.apps", name)["spec"]["replicas"] == 2


@pytest.mark.parametrize("key", list(CASES), ids=list(CASES))
def test_a_malformed_input_is_one_error_line_of_its_release(world: Any, key: str) -> None:
    s, done = world
    case = CASES[key]
    lines = [ln for ln in done.err.splitlines() if ln.startswith(f"{key}: ")]
    assert len(lines) == 1, (key, [ln for ln in done.err.splitlines() if key in ln])
    assert lines[0].startswith(f"{key}: {case.reason}: "), lines[0]
    assert case.named in lines[0], lines[0]
    assert s.has_status(key)
    assert s.status(key)["lastAttempted"]["reason"] == case.reason
