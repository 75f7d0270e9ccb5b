"""Renderers through the CLI: Kustomize (Debian's kubectl), Jsonnet (the binding) and
operator-defined Command renderers, each a real program on a PATH of the test's own;
the render cache that keeps a quiet tick from starting any of them; every error on one
line while the other Releases go on."""

from pathlib import Path

import pytest

from convoy_batch.models import Release
from tests.renderer_tools import Tools, debian_kubectl
from tests.scenario import FAILURE_POLICY, Scenario


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tools:
    monkeypatch.delenv("CONVOY_KUBECTL", raising=False)
    monkeypatch.delenv("CONVOY_RENDERERS", raising=False)
    return Tools(tmp_path / "bin", monkeypatch)


def release(name: str, path: str, render: str, extra: str = FAILURE_POLICY) -> str:
    return (
        "apiVersion: convoy.dev/v1alpha1\nkind: Release\n"
        f"metadata: {{name: {name}}}\n"
        f"spec:\n  cluster: staging\n  namespace: {name}\n"
        f"  source:\n    path: {path}\n    render: {render}\n" + extra
    )


def last_attempt(s: Scenario, name: str) -> tuple[str, str]:
    attempted = s.status(name)["lastAttempted"]
    return attempted["reason"], attempted["message"]


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


@pytest.fixture
def kubectl(tools: Tools, monkeypatch: pytest.MonkeyPatch) -> str:
    path = debian_kubectl()
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
    scenario.reconcile("web", minutes=2)
    assert scenario.deployment_image() == "example/web:3.0"
    assert not scenario.object_path("web", "configmap", "web-config").exists()  # pruned
    scenario.deployment_failed()
    scenario.reconcile("web", minutes=3)
    assert scenario.status()["rollout"]["state"] == "RolledBack"
    assert scenario.deployment_image() == "example/web:2.0"


def test_a_quiet_tick_starts_no_renderer_process(
    scenario: Scenario, kubectl: str, tools: Tools
) -> None:
    kustomize_repo(scenario)
    scenario.reconcile("web", minutes=0)
    assert len(tools.call_log()) == 1
    scenario.reconcile("web", minutes=10)  # due again by its interval: nothing changed
    scenario.reconcile("web", minutes=20)
    assert tools.call_log() == ["kubectl kustomize apps/web/overlays/staging"]
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


def test_without_kustomize_or_kubectl_the_render_fails_naming_them(
    scenario: Scenario, tools: Tools
) -> None:
    kustomize_repo(scenario)
    scenario.app("plain")
    result = scenario.reconcile(minutes=0)
    assert result.code == 1
    reason, message = last_attempt(scenario, "web")
    assert reason == "RenderFailed"
    assert "neither kustomize nor kubectl is on PATH" in message
    assert "apt-get install kubectl" in message
    assert "Traceback" not in result.err
    assert last_attempt(scenario, "plain")[0] == "Synced"  # the others go on


def test_a_failing_kustomize_gives_the_end_of_its_stderr(scenario: Scenario, kubectl: str) -> None:
    kustomize_repo(scenario)
    scenario.commit({"apps/web/overlays/staging/kustomization.yaml": "bases: [../missing]\n"})
    assert scenario.reconcile("web", minutes=0).code == 1
    reason, message = last_attempt(scenario, "web")
    assert reason == "RenderFailed"
    assert message.startswith("Kustomize (kubectl kustomize apps/web/overlays/staging) failed")
    assert "missing" in message
    assert "\n" not in message


def test_a_kustomize_on_path_is_preferred_to_kubectl(
    scenario: Scenario, kubectl: str, tools: Tools
) -> None:
    real = tools.script("real-kustomize", f'shift\nexec "{kubectl}" kustomize "$@"\n')
    tools.recorded("kustomize", str(real))
    kustomize_repo(scenario)
    assert scenario.reconcile("web", minutes=0).code == 0
    assert tools.call_log() == ["kustomize build apps/web/overlays/staging"]


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
