"""Jsonnet without ``file`` through the CLI: every ``*.jsonnet`` at the top of
``source.path`` in name order (Argo CD's directory source), argocd-example-apps'
jsonnet-guestbook as it is, each failing file one line of the error, and a folder without
one the usual empty render. ``file`` still names one file."""

import pytest

from tests.renderers.test_renderers import last_attempt, release
from tests.support.realworld import realworld
from tests.support.scenario import Scenario

GUESTBOOK = "argoproj-argocd-example-apps/jsonnet-guestbook"


def test_argo_cds_jsonnet_guestbook_renders_every_jsonnet_file_of_its_folder(
    scenario: Scenario,
) -> None:
    """argocd-example-apps' jsonnet-guestbook as it is (no ``main.jsonnet``), no ``file``."""
    s = scenario
    files: dict[str, str | None] = {
        f"apps/guestbook/{p.name}": p.read_text()
        for p in sorted((realworld() / GUESTBOOK).iterdir())
    }
    files["releases/guestbook.yaml"] = release("guestbook", "apps/guestbook", "{type: Jsonnet}")
    s.commit(files)
    result = s.reconcile("guestbook", minutes=0)
    assert result.code == 0, result.err
    assert last_attempt(s, "guestbook")[0] == "Synced"
    name = "jsonnet-guestbook-ui"
    service = s.live("guestbook", "service", name)
    assert (service["spec"]["type"], service["spec"]["ports"]) == (
        "LoadBalancer",
        [{"port": 80, "targetPort": 80}],
    )
    deployment = s.live("guestbook", "deployment.apps", name)
    assert deployment["spec"]["replicas"] == 1
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "gcr.io/google-samples/gb-frontend:v5"
    folder = s.state / "clusters" / "staging" / "guestbook"
    assert sorted(p.parent.name for p in folder.rglob("*.yaml")) == ["deployment.apps", "service"]


def configmap_jsonnet(name: str) -> str:
    return f"{{apiVersion: 'v1', kind: 'ConfigMap', metadata: {{name: '{name}'}}}}\n"


@pytest.mark.parametrize(
    ("render", "made"),
    [
        pytest.param("{type: Jsonnet}", ["a", "b"], id="every-top-level-file"),
        pytest.param("{type: Jsonnet, file: b.jsonnet}", ["b"], id="file-names-one"),
        pytest.param("{type: Jsonnet, file: sub/c.jsonnet}", ["c"], id="file-in-a-subfolder"),
    ],
)
def test_jsonnet_without_file_evaluates_the_top_level_files_and_with_file_that_one(
    scenario: Scenario, render: str, made: list[str]
) -> None:
    scenario.commit(
        {
            "apps/web/b.jsonnet": configmap_jsonnet("b"),
            "apps/web/a.jsonnet": "(import 'lib.libsonnet').a\n",
            "apps/web/lib.libsonnet": "{a: " + configmap_jsonnet("a") + "}",
            "apps/web/sub/c.jsonnet": configmap_jsonnet("c"),  # not at the top: not evaluated
            "releases/web.yaml": release("web", "apps/web", render),
        }
    )
    result = scenario.reconcile("web", minutes=0)
    assert result.code == 0, result.err
    found = sorted(p.stem for p in (scenario.state / "clusters/staging/web/configmap").iterdir())
    assert found == made


def test_each_failing_jsonnet_file_is_one_line_naming_it_in_name_order(
    scenario: Scenario,
) -> None:
    scenario.commit(
        {
            "apps/web/b.jsonnet": "{a: error 'boom-b'}\n",
            "apps/web/good.jsonnet": configmap_jsonnet("good"),
            "apps/web/a.jsonnet": "{a: }\n",
            "releases/web.yaml": release("web", "apps/web", "{type: Jsonnet}"),
        }
    )
    assert scenario.reconcile("web", minutes=0).code == 1
    reason, message = last_attempt(scenario, "web")
    assert reason == "RenderFailed"
    assert "\n" not in message
    head, lines = message.split(": ", 1)
    assert head == "Jsonnet failed (exit 1)"
    first, second = lines.split(" | ")
    assert first.startswith("apps/web/a.jsonnet: STATIC ERROR: apps/web/a.jsonnet:1:5"), first
    assert second.startswith("apps/web/b.jsonnet: RUNTIME ERROR: boom-b; apps/web/b.jsonnet:1:"), (
        second
    )
    assert not scenario.object_path("web", "configmap", "good").exists()


def test_a_folder_without_jsonnet_files_is_an_empty_render(scenario: Scenario) -> None:
    scenario.commit(
        {
            "apps/web/params.libsonnet": "{}\n",
            "releases/web.yaml": release("web", "apps/web", "{type: Jsonnet}"),
        }
    )
    assert scenario.reconcile("web", minutes=0).code == 1
    reason, message = last_attempt(scenario, "web")
    assert (reason, message) == (
        "RenderFailed",
        "source.path 'apps/web': the render is empty (syncPolicy.allowEmpty is false)",
    )
