"""Renderers through the CLI: Kustomize (Debian's kubectl), Jsonnet (the binding) and
operator-defined Command renderers, each a real program on a PATH of the test's own;
the render cache that keeps a quiet tick from starting any of them; every error on one
line while the other Releases go on."""

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from convoy_batch.cli import main
from convoy_batch.errors import RenderFailed
from convoy_batch.models import Release
from convoy_batch.renderers import command, process
from tests.support.realworld import realworld
from tests.support.renderer_tools import Tools, kustomize_kubectl
from tests.support.scenario import FAILURE_POLICY, PROJECT, Result, Scenario, release_yaml


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tools:
    monkeypatch.delenv("CONVOY_KUBECTL", raising=False)
    monkeypatch.delenv("CONVOY_RENDERERS", raising=False)
    return Tools(tmp_path / "bin", monkeypatch)


def release(
    name: str, path: str, render: str, extra: str = FAILURE_POLICY, *, url: str = ""
) -> str:
    """Release ``name`` of ``path`` rendered by ``render`` (a flow mapping), of the
    repository ``url`` when given."""
    remote = f", url: '{url}'" if url else ""
    return release_yaml(
        name, source=f"{{path: {path}, render: {render}{remote}}}", spec_extra=extra
    )


def last_attempt(s: Scenario, name: str) -> tuple[str, str]:
    attempted = s.status(name)["lastAttempted"]
    return attempted["reason"], attempted["message"]


def fails_while_plain_goes_on(s: Scenario, reason: str) -> tuple[Result, str]:
    """Add the Plain Release ``plain`` and reconcile every Release: the tick exits 1, the
    last attempt of ``web`` is ``reason`` and ``plain`` is Synced all the same (the others
    go on). Gives the tick's result and the message of web's last attempt."""
    s.app("plain")
    result = s.reconcile(minutes=0)
    assert result.code == 1
    got, message = last_attempt(s, "web")
    assert got == reason
    assert last_attempt(s, "plain")[0] == "Synced"
    return result, message


def check_prunes_then_rolls_back(
    s: Scenario, minutes: float, image: str, pruned: str, previous: str
) -> None:
    """The tick at ``minutes`` applies ``image`` and prunes the ConfigMap ``pruned`` of
    ``web``; its Deployment then fails and the next tick rolls back to ``previous``."""
    s.reconcile("web", minutes=minutes)
    assert s.deployment_image() == image
    assert not s.object_path("web", "configmap", pruned).exists()
    s.deployment_failed()
    s.reconcile("web", minutes=minutes + 1)
    assert s.status()["rollout"]["state"] == "RolledBack"
    assert s.deployment_image() == previous


# --- Kustomize ------------------------------------------------------------------------

BASE = {
    "kustomization.yaml": "bases: []\nresources: [deployment.yaml, configmap.yaml]\n",
    "deployment.yaml": (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n"
        "  replicas: 2\n  selector: {matchLabels: {app: web}}\n  template:\n"
        "    metadata: {labels: {app: web}}\n"
        '    spec: {containers: [{name: app, image: "example/web:1.0"}]}\n'
    ),
    "configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-config}\n"
    'data: {env: "${env}"}\n',
}


def overlay(tag: str) -> str:
    return (
        "bases: [../../base]\ncommonAnnotations: {team: shop}\n"
        f"images:\n- name: example/web\n  newTag: {tag!r}\n"
    )


def kustomize_repo(s: Scenario, tag: str = "1.0") -> None:
    files: dict[str, str | None] = {f"apps/web/base/{k}": v for k, v in BASE.items()}
    files["apps/web/overlays/staging/kustomization.yaml"] = overlay(tag)
    files["apps/web/overlays/prod/kustomization.yaml"] = overlay("0.9")
    files["releases/web.yaml"] = release("web", "apps/web/overlays/staging", "{type: Kustomize}")
    s.commit(files, f"web {tag}")


RESTRICTOR = "--load-restrictor=LoadRestrictionsRootOnly"
"""Passed to every build: a kustomization's files lie in its own folder."""


@pytest.fixture
def kubectl(tools: Tools, monkeypatch: pytest.MonkeyPatch) -> str:
    path = kustomize_kubectl()
    monkeypatch.setenv("CONVOY_KUBECTL", str(tools.recorded("kubectl", path)))
    return path


def test_a_kustomize_overlay_rolls_out_rolls_back_and_prunes(
    scenario: Scenario, kubectl: str
) -> None:
    kustomize_repo(scenario, "2.0")
    result = scenario.reconcile("web", minutes=0)
    assert result.code == 0, result.err
    live = scenario.live("web", "deployment.apps", "web")
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "example/web:2.0"
    assert live["metadata"]["annotations"]["team"] == "shop"
    # Release variables are substituted in the rendered text.
    assert scenario.live("web", "configmap", "web-config")["data"] == {"env": "staging"}
    scenario.deployment_ready()
    scenario.reconcile("web", minutes=1)
    assert scenario.status()["rollout"]["state"] == "Succeeded"

    # The base changes outside source.path: the overlay renders again.
    base_only = {"apps/web/base/kustomization.yaml": "resources: [deployment.yaml]\n"}
    scenario.commit({**base_only, "apps/web/overlays/staging/kustomization.yaml": overlay("3.0")})
    check_prunes_then_rolls_back(scenario, 2, "example/web:3.0", "web-config", "example/web:2.0")


def test_a_quiet_tick_starts_no_renderer_process(
    scenario: Scenario, kubectl: str, tools: Tools
) -> None:
    kustomize_repo(scenario)
    scenario.reconcile("web", minutes=0)
    assert len(tools.call_log()) == 1
    scenario.reconcile("web", minutes=10)  # due again by its interval: nothing changed
    scenario.reconcile("web", minutes=20)
    assert tools.call_log() == [f"kubectl kustomize {RESTRICTOR} apps/web/overlays/staging"]
    # A commit outside what the renderer reads (a status, another Release) changes nothing.
    scenario.commit({"releases/other.yaml": release("other", "apps/other", "{type: Plain}")})
    scenario.reconcile("web", minutes=30)
    assert len(tools.call_log()) == 1
    # Another kubectl (a new file at the same path) is a new tool: it renders again.
    tools.recorded("kubectl", kubectl).write_text(
        tools.recorded("kubectl", kubectl).read_text() + "# upgraded\n"
    )
    scenario.reconcile("web", minutes=40)
    assert len(tools.call_log()) == 2


def test_the_renders_of_one_tick_share_one_export_of_the_commit(
    scenario: Scenario, kubectl: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from convoy_batch.repo.source import SourceResolver

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    exports: list[Path] = []
    export = SourceResolver.export

    def counted(self: SourceResolver, release: Any, directory: Path) -> None:
        exports.append(directory)
        export(self, release, directory)

    monkeypatch.setattr(SourceResolver, "export", counted)
    files: dict[str, str | None] = {f"apps/base/{k}": v for k, v in BASE.items()}
    for name in ("a", "b", "c"):
        files[f"apps/{name}/kustomization.yaml"] = (
            f"bases: [../base]\nnamespace: {name}\nnamePrefix: {name}-\n"
        )
        files[f"releases/{name}.yaml"] = release(name, f"apps/{name}", "{type: Kustomize}")
    scenario.commit(files, "three overlays of one base")
    result = scenario.reconcile(minutes=0)
    assert result.code == 0, result.err
    assert scenario.object_path("b", "deployment.apps", "b-web").exists()
    assert len(exports) == 1  # one export for the three renders
    assert list(scratch.iterdir()) == []  # removed when the tick closed


def test_without_kustomize_or_kubectl_the_render_fails_naming_them(
    scenario: Scenario, tools: Tools
) -> None:
    kustomize_repo(scenario)
    result, message = fails_while_plain_goes_on(scenario, "RenderFailed")
    assert "neither kustomize nor kubectl is on PATH" in message
    assert "apt-get install kubectl" in message
    assert "Traceback" not in result.err


def test_a_failing_kustomize_gives_the_end_of_its_stderr(scenario: Scenario, kubectl: str) -> None:
    kustomize_repo(scenario)
    scenario.commit({"apps/web/overlays/staging/kustomization.yaml": "bases: [../missing]\n"})
    assert scenario.reconcile("web", minutes=0).code == 1
    reason, message = last_attempt(scenario, "web")
    assert reason == "RenderFailed"
    assert message.startswith("Kustomize (kubectl kustomize apps/web/overlays/staging) failed")
    assert "missing" in message
    assert "\n" not in message


HELLO_WORLD = "kubernetes-sigs-kustomize/examples/helloWorld"


def test_kustomizes_own_hello_world_builds_as_it_is(scenario: Scenario, kubectl: str) -> None:
    """kustomize's examples/helloWorld as it is (its kustomization has a ``metadata``,
    which kustomize v2.0.3 refused)."""
    files: dict[str, str | None] = {
        f"apps/hello/{p.name}": p.read_text() for p in (realworld() / HELLO_WORLD).iterdir()
    }
    files["releases/hello.yaml"] = release("hello", "apps/hello", "{type: Kustomize}")
    scenario.commit(files)
    result = scenario.reconcile("hello", minutes=0)
    assert result.code == 0, result.err
    live = scenario.live("hello", "deployment.apps", "the-deployment")
    assert live["metadata"]["labels"]["app"] == "hello"


V5_BASE = {
    "kustomization.yaml": (
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "metadata: {name: base}\nresources: [deployment.yaml, configmap.yaml]\n"
    ),
    "deployment.yaml": BASE["deployment.yaml"],
    "configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-config}\n"
    'data: {env: "${env}", image: unset}\n',
}
V5_COMPONENT = """\
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
patches:
- target: {kind: Deployment}
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/env
      value: [{name: TRACING, value: "on"}]
"""
V5_OVERLAY = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../../base]
components: [../../components/tracing]
labels:
- pairs: {team: shop}
patches:
- target: {kind: Deployment, name: web}
  patch: |-
    - op: replace
      path: /spec/replicas
      value: 3
replacements:
- source: {kind: Deployment, name: web, fieldPath: "spec.template.spec.containers.0.image"}
  targets:
  - select: {kind: ConfigMap, name: web-config}
    fieldPaths: [data.image]
"""


def kustomize_v5_repo(s: Scenario, name: str = "web", spec_extra: str = FAILURE_POLICY) -> None:
    """Release ``name`` (its namespace too) of an overlay written for kustomize v5: a
    directory in ``resources``, a ``components`` entry, ``labels``, ``patches`` with
    target selectors and ``replacements`` (kustomize v2.0.3 refused each)."""
    files: dict[str, str | None] = {f"apps/web/base/{k}": v for k, v in V5_BASE.items()}
    files["apps/web/components/tracing/kustomization.yaml"] = V5_COMPONENT
    files["apps/web/overlays/staging/kustomization.yaml"] = V5_OVERLAY
    files[f"releases/{name}.yaml"] = release(
        name, "apps/web/overlays/staging", "{type: Kustomize}", spec_extra
    )
    s.commit(files, f"{name} for kustomize v5")


def check_kustomize_v5_render(deployment: dict[str, Any], configmap: dict[str, Any]) -> None:
    """What each feature of :data:`V5_OVERLAY` did to the objects."""
    assert deployment["spec"]["replicas"] == 3  # patches with a target
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "TRACING", "value": "on"}]  # the component
    assert deployment["metadata"]["labels"]["team"] == "shop"  # labels
    assert "team" not in deployment["spec"]["selector"]["matchLabels"]  # not a selector
    assert configmap["data"] == {"env": "staging", "image": "example/web:1.0"}  # replacements


def test_an_overlay_written_for_kustomize_v5_renders(scenario: Scenario, kubectl: str) -> None:
    kustomize_v5_repo(scenario)
    result = scenario.reconcile("web", minutes=0)
    assert result.code == 0, result.err
    check_kustomize_v5_render(
        scenario.live("web", "deployment.apps", "web"),
        scenario.live("web", "configmap", "web-config"),
    )


def test_a_kustomize_on_path_is_preferred_to_kubectl(
    scenario: Scenario, kubectl: str, tools: Tools
) -> None:
    real = tools.script("real-kustomize", f'shift\nexec "{kubectl}" kustomize "$@"\n')
    tools.recorded("kustomize", str(real))
    kustomize_repo(scenario)
    assert scenario.reconcile("web", minutes=0).code == 0
    assert tools.call_log() == [f"kustomize build {RESTRICTOR} apps/web/overlays/staging"]


# --- Plain stays as it was -------------------------------------------------------------


def test_a_plain_release_dumps_and_renders_as_before_renderers(scenario: Scenario) -> None:
    scenario.app()
    scenario.reconcile("web", minutes=0)
    # Pinned: this renderRef was made before renderers existed.
    ref = scenario.status()["lastAttempted"]["renderRef"]
    assert ref == PINNED_PLAIN_REF
    data = Release.model_validate(
        {"apiVersion": "convoy.dev/v1alpha1", "kind": "Release", "metadata": {"name": "a"},
         "spec": {"cluster": "c", "source": {"path": "p", "render": {"type": "Plain"}}}}
    )  # fmt: skip
    assert "render" not in data.dump()["spec"]["source"]


PINNED_PLAIN_REF = "sha256:66e76030393006b218cbda212426b80f03a6af5e3831ebc8ef08fe357b6789cb"


# --- Jsonnet ----------------------------------------------------------------------------

JSONNET_LIB = """\
{
  deployment(name, image):: {
    apiVersion: 'apps/v1', kind: 'Deployment', metadata: {name: name},
    spec: {replicas: 2, selector: {matchLabels: {app: name}},
           template: {metadata: {labels: {app: name}},
                      spec: {containers: [{name: 'app', image: image}]}}},
  },
}
"""


def jsonnet_main(image: str, extra: str = "") -> str:
    return (
        "local k = import 'k.libsonnet';\n"
        "{\n"
        f"  deployment: k.deployment(std.extVar('release'), '{image}'),\n"
        "  config: {apiVersion: 'v1', kind: 'ConfigMap',\n"
        "           metadata: {name: std.extVar('release') + '-config'},\n"
        "           data: {env: std.extVar('env'), cluster: '${cluster}'}},\n"
        f"{extra}"
        "}\n"
    )


def jsonnet_repo(s: Scenario, image: str, extra: str = "") -> None:
    render = "{type: Jsonnet, file: main.jsonnet, libraryPaths: [../lib]}"
    s.commit(
        {
            "apps/lib/k.libsonnet": JSONNET_LIB,
            "apps/web/main.jsonnet": jsonnet_main(image, extra),
            "releases/web.yaml": release("web", "apps/web", render),
        },
        f"web {image}",
    )


def test_a_jsonnet_release_rolls_out_rolls_back_and_prunes(
    scenario: Scenario, tools: Tools
) -> None:
    extra = "  more: [{apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'extra'}}],\n"
    jsonnet_repo(scenario, "example/web:1.0", extra)
    result = scenario.reconcile("web", minutes=0)
    assert result.code == 0, result.err
    assert scenario.deployment_image() == "example/web:1.0"
    config = scenario.live("web", "configmap", "web-config")
    assert config["data"] == {"env": "staging", "cluster": "staging"}  # ext var, then ${}
    assert scenario.object_path("web", "configmap", "extra").exists()
    scenario.deployment_ready()
    scenario.reconcile("web", minutes=1)
    assert scenario.status()["rollout"]["state"] == "Succeeded"

    jsonnet_repo(scenario, "example/web:2.0")
    check_prunes_then_rolls_back(scenario, 2, "example/web:2.0", "extra", "example/web:1.0")


@pytest.mark.parametrize(
    ("main", "expected"),
    [
        ("{a: error 'boom'}", "failed (exit 1): apps/web/main.jsonnet: RUNTIME ERROR: boom"),
        ("import '/etc/hostname'", "an absolute path leaves the source"),
        ("import '../../../../../etc/hostname'", "leaves the source"),
        ("42", "not an object, a list or a map of objects"),
    ],
)
def test_a_failing_jsonnet_is_one_line(
    scenario: Scenario, tools: Tools, main: str, expected: str
) -> None:
    render = "{type: Jsonnet}"
    scenario.commit(
        {"apps/web/main.jsonnet": main, "releases/web.yaml": release("web", "apps/web", render)}
    )
    assert scenario.reconcile("web", minutes=0).code == 1
    reason, message = last_attempt(scenario, "web")
    assert reason == "RenderFailed"
    assert expected in message, message


# --- Command ----------------------------------------------------------------------------

RENDER_SCRIPT = """\
set -eu
cat <<EOF
apiVersion: v1
kind: ConfigMap
metadata: {name: $CONVOY_RELEASE-generated}
data:
  cluster: "$CONVOY_CLUSTER"
  namespace: "$CONVOY_NAMESPACE"
  revision: "$CONVOY_REVISION"
  tier: "$CONVOY_VAR_TIER"
  args: "$*"
  here: "$(cat input.txt)"
  home: "${HOME:+set}"
  secret: "${SECRET_TOKEN:-unset}"
  env: "\\${env}"
EOF
"""


def operator_file(state: Path, body: str) -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / "renderers.yaml").write_text(body)


def command_repo(s: Scenario, render: str) -> str:
    return s.commit(
        {
            "apps/web/input.txt": "from git",
            "releases/web.yaml": release(
                "web", "apps/web", render, "  vars: {tier: gold}\n" + FAILURE_POLICY
            ),
        }
    )


def test_a_command_renderer_gets_the_release_its_vars_and_args(
    scenario: Scenario, tools: Tools, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "do-not-pass")
    script = tools.script("render-cm", RENDER_SCRIPT)
    operator_file(scenario.state, f"renderers:\n  cm:\n    command: [{script}, --fixed]\n")
    commit = command_repo(scenario, "{type: Command, name: cm, args: ['a b', '$(id)']}")
    (scenario.root / "apps/web/input.txt").write_text("from the working tree")
    result = scenario.reconcile("web", minutes=0)
    assert result.code == 0, result.err
    data = scenario.live("web", "configmap", "web-generated")["data"]
    assert data == {
        "cluster": "staging",
        "namespace": "web",
        "revision": commit,
        "tier": "gold",
        "args": "--fixed a b $(id)",  # passed as arguments, never through a shell
        "here": "from git",  # the export, never the working tree
        "home": "set",
        "secret": "unset",  # a minimal environment
        "env": "staging",  # Release variables substituted in the output
    }


@pytest.mark.parametrize(
    ("operator", "body", "expected"),
    [
        (None, "", "Command renderer 'cm': unknown (no such file"),
        ("renderers: {other: {command: [cat]}}\n", "", "unknown (not defined there"),
        ("renderers: {cm: {command: [SCRIPT]}}\n", "echo bad >&2; echo worse >&2; exit 3",
         "Command renderer 'cm' failed (exit 3): bad | worse"),
        ("renderers: {cm: {command: [SCRIPT], timeout: 1s}}\n", "sleep 30",
         "Command renderer 'cm': timed out after 1 s (renderers.yaml renderers.cm.timeout)"),
        ("limits: {timeout: 1s}\nrenderers: {cm: {command: [SCRIPT]}}\n", "sleep 30",
         "Command renderer 'cm': timed out after 1 s (renderers.yaml limits.timeout)"),
        ("limits: {timeout: 30s}\nrenderers: {cm: {command: [SCRIPT], timeout: 1s}}\n",
         "sleep 30", "timed out after 1 s (renderers.yaml renderers.cm.timeout)"),
        ("limits: {memory: 100Mi}\nrenderers: {cm: {command: [SCRIPT]}}\n",
         "exec PYTHON -c 'bytearray(300 * 2**20)'",
         "Command renderer 'cm': over its memory limit of 100 MiB (renderers.yaml limits.memory)"),
        ("renderers: {cm: {command: [no-such-program]}}\n", "",
         "Command renderer 'cm': cannot start no-such-program"),
        ("renderers: {cm: {command: [SCRIPT]}}\n", "echo 'kind: [' ", "web (renderer cm)"),
    ],
)  # fmt: skip
def test_command_renderer_errors_are_one_line_and_others_go_on(
    scenario: Scenario, tools: Tools, operator: str | None, body: str, expected: str
) -> None:
    script = tools.script("render-cm", body.replace("PYTHON", sys.executable))
    if operator is not None:
        operator_file(scenario.state, operator.replace("SCRIPT", str(script)))
    command_repo(scenario, "{type: Command, name: cm}")
    result, message = fails_while_plain_goes_on(scenario, "RenderFailed")
    assert expected in message, message
    assert str(scenario.state) not in message  # named as <state>/renderers.yaml
    assert "Traceback" not in result.err


def test_output_over_the_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RenderFailed, match="wrote more than 1,000 bytes"):
        process.run("big", ["sh", "-c", "yes"], tmp_path, process.minimal_env(tmp_path), limit=1000)


def test_a_renderers_process_runs_with_its_memory_limit_set_before_it_starts(
    tmp_path: Path,
) -> None:
    """The limit is the data segment's (RLIMIT_DATA), soft and hard: the program cannot
    raise it again. ``ulimit -d`` reads it in KiB."""
    env = process.minimal_env(tmp_path)
    limits = process.Limits(memory=200 * 1024**2)
    shown = process.run(
        "limits", ["sh", "-c", "ulimit -d; ulimit -H -d"], tmp_path, env, limits=limits
    )
    assert shown.split() == ["204800", "204800"]
    default = process.run("limits", ["sh", "-c", "ulimit -d"], tmp_path, env)
    assert default.strip() == str(1024**2)  # 1 GiB unless the operator says otherwise


@pytest.mark.parametrize(
    ("text", "size"),
    [("1Gi", 1024**3), ("200Mi", 200 * 1024**2), ("2G", 2 * 10**9), ("512Ki", 512 * 1024),
     (1048576, 1024**2), ("1000", 1000)],
)  # fmt: skip
def test_a_memory_limit_is_a_quantity(text: str | int, size: int) -> None:
    assert command.parse_memory(text) == size


@pytest.mark.parametrize("text", ["0", "lots", "1.5Gi", "-1Gi", "1 Gi", "1gi", True, 0])
def test_a_memory_limit_that_is_not_a_quantity_is_refused(text: str | int) -> None:
    with pytest.raises(ValueError, match="not a memory size"):
        command.parse_memory(text)


def test_the_example_kustomize_release_renders_and_rolls_out(
    tmp_path: Path, kubectl: str, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location(
        "run_example", PROJECT / "scripts" / "run_example.py"
    )
    assert spec is not None and spec.loader is not None
    run_example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_example)
    repo = run_example.make_example_repo(tmp_path / "repo")
    state = tmp_path / "state"
    code = main(["--repo", str(repo), "--state", str(state), "reconcile", "shop"])
    assert code == 0, capsys.readouterr().err
    shop = state / "clusters" / "staging" / "shop" / "deployment.apps" / "shop.yaml"
    deployment = yaml.safe_load(shop.read_text())
    assert deployment["spec"]["replicas"] == 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example/shop:1.2.0"
    assert container["env"] == [{"name": "ENV", "value": "staging"}]
