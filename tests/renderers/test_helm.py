"""Helm charts through the CLI with the official ``helm`` (``scripts/k8s-testenv helm``;
no stand-in program pretends to be helm; skipped with the reason without it, failed
under CI): a chart rolls out with its hooks as PreSync hooks, rolls back and prunes; a
failing chart and a missing helm are one-line errors. What Helm is told of a Kubernetes
Cluster's server is tested against the real API server in ``tests/k8s/test_k8s_helm.py``."""

from pathlib import Path

import pytest

from convoy_batch.engine.stages.render import capabilities, resolve_cluster
from convoy_batch.engine.tick import Tick
from tests.renderers.test_renderers import (
    check_prunes_then_rolls_back,
    fails_while_plain_goes_on,
    release,
)
from tests.support.renderer_tools import Tools
from tests.support.scenario import FAILURE_POLICY, T0, Scenario

DEPLOYMENT_TEMPLATE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec:
      containers: [{name: app, image: "IMAGE"}]
"""


def deployment_template(image: str) -> str:
    """A chart's Deployment template, named after the Helm release, running ``image`` (a
    Helm template expression or a plain image)."""
    return DEPLOYMENT_TEMPLATE.replace("IMAGE", image)


CHART = {
    "Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    "values.yaml": "image: example/web:1.0\nreplicas: 1\n",
    "values-staging.yaml": "replicas: 2\n",
    "templates/deployment.yaml": deployment_template("{{ .Values.image }}"),
    "templates/migrate.yaml": """\
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: "{{ .Values.image }}"}]
""",
    "templates/capabilities.yaml": """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-capabilities
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
data:
  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}
  deployments: {{ .Capabilities.APIVersions.Has "apps/v1/Deployment" | quote }}
""",
}
HELM = "{type: Helm, valuesFiles: [values-staging.yaml], values: {image: example/web:2.0}}"


def chart_repo(s: Scenario, name: str = "web", extra: str = FAILURE_POLICY) -> None:
    files: dict[str, str | None] = {f"apps/{name}/{k}": v for k, v in CHART.items()}
    files[f"releases/{name}.yaml"] = release(name, f"apps/{name}", HELM, extra)
    s.commit(files, f"{name} chart")


def migrated(s: Scenario, name: str = "web") -> None:
    """Play the Job controller: the PreSync hook Job of the current render is Complete."""
    s.set_status(name, "job.batch", f"{name}-migrate", {
        "succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}],
    })  # fmt: skip


def test_a_chart_renders_with_its_values_and_its_hooks_as_convoy_hooks(
    scenario: Scenario, helm_tools: Tools
) -> None:
    chart_repo(scenario)
    result = scenario.reconcile("web", minutes=0)
    assert result.code == 0, result.err
    # The pre-install hook is a PreSync hook: it goes first, the Deployment waits.
    assert scenario.status()["lastAttempted"]["reason"] == "WaitingForWaveHealth"
    assert scenario.object_path("web", "job.batch", "web-migrate").exists()
    assert not scenario.object_path("web", "deployment.apps", "web").exists()
    # A directory cluster tells helm nothing: its defaults name no kinds.
    told = scenario.live("web", "configmap", "web-capabilities")["data"]
    assert told["deployments"] == "false"
    migrated(scenario)
    assert scenario.reconcile("web", minutes=1).code == 0
    live = scenario.live("web", "deployment.apps", "web")
    assert live["spec"]["replicas"] == 2  # the values file
    assert scenario.deployment_image() == "example/web:2.0"  # the inline values win
    calls = helm_tools.call_log()
    # A new render is made twice (a chart whose output varies is refused); the second
    # tick reused it.
    assert len(calls) == 2, calls
    assert all(
        c.startswith("helm template web apps/web --namespace web --include-crds ") for c in calls
    )


CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  env: "${env}"
"""


def test_a_chart_rolls_out_rolls_back_and_prunes(scenario: Scenario, helm_tools: Tools) -> None:
    scenario.commit({"apps/web/templates/config.yaml": CONFIG})
    chart_repo(scenario)
    assert scenario.reconcile("web", minutes=0).code == 0
    assert scenario.status()["lastAttempted"]["reason"] == "WaitingForWaveHealth"
    migrated(scenario)
    scenario.reconcile("web", minutes=1)
    # Release variables are substituted in the rendered text.
    assert scenario.live("web", "configmap", "web-config")["data"] == {"env": "staging"}
    scenario.deployment_ready()
    scenario.reconcile("web", minutes=2)
    assert scenario.status()["rollout"]["state"] == "Succeeded"
    assert scenario.deployment_image() == "example/web:2.0"

    # A new render: the ConfigMap's template is gone and the image is 3.0.
    scenario.commit({
        "apps/web/templates/config.yaml": None,
        "releases/web.yaml": release("web", "apps/web", HELM.replace("2.0", "3.0")),
    })  # fmt: skip
    scenario.reconcile("web", minutes=3)
    assert scenario.status()["lastAttempted"]["reason"] == "WaitingForWaveHealth"
    assert scenario.deployment_image() == "example/web:2.0"  # the pre-upgrade hook first
    migrated(scenario)
    # The last healthy render is 2.0.
    check_prunes_then_rolls_back(scenario, 4, "example/web:3.0", "web-config", "example/web:2.0")
    assert scenario.live("web", "configmap", "web-config")["data"] == {"env": "staging"}
    assert len(helm_tools.call_log()) == 4  # one render per commit, each made twice


def test_a_failing_chart_gives_the_end_of_helms_stderr(
    scenario: Scenario, helm_tools: Tools
) -> None:
    chart_repo(scenario)
    scenario.commit({"apps/web/templates/broken.yaml": "kind: {{ .Values.missing.field }}\n"})
    _, message = fails_while_plain_goes_on(scenario, "RenderFailed")
    assert message.startswith("Helm (helm template apps/web) failed (exit 1): Error:"), message
    assert "broken.yaml" in message and "nil pointer" in message
    assert "\n" not in message


def test_without_helm_a_chart_fails_in_one_line_naming_helm(
    scenario: Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Tools(tmp_path / "bin", monkeypatch)  # a PATH without helm
    chart_repo(scenario)
    result, message = fails_while_plain_goes_on(scenario, "RenderFailed")
    assert "helm is not on PATH" in message and "\n" not in message
    assert "Traceback" not in result.err


def test_a_directory_cluster_tells_helm_nothing(scenario: Scenario) -> None:
    chart_repo(scenario)
    tick = Tick.open(scenario.root, scenario.state, T0)
    try:
        entry = tick.snapshot.releases["web"]
        assert entry.release is not None
        told = capabilities(tick, entry.release, resolve_cluster(tick, entry.release))
    finally:
        tick.close()
    assert told is None


def test_a_kubernetes_server_out_of_reach_is_cluster_unavailable_for_its_chart_alone(
    scenario: Scenario, tmp_path: Path
) -> None:
    scenario.unreachable_cluster("remote")
    chart_repo(scenario)
    scenario.commit(
        {
            "releases/web.yaml": release("web", "apps/web", HELM).replace(
                "cluster: staging", "cluster: remote"
            ),
        }
    )
    result, message = fails_while_plain_goes_on(scenario, "ClusterUnavailable")
    assert "clusters/remote.yaml" in message and "\n" not in message
    assert "Traceback" not in result.err


TEST_HOOK = """\
apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-test-{{ randAlphaNum 5 | lower }}
  annotations:
    helm.sh/hook: test-success
spec:
  restartPolicy: Never
  containers: [{name: curl, image: curlimages/curl, command: [sh, -c, "curl ${WEB_SVC}/"]}]
"""


def test_a_chart_renders_once_per_change_whatever_its_test_hooks_are_named(
    scenario: Scenario, helm_tools: Tools
) -> None:
    s = scenario
    s.commit({"apps/web/templates/tests/curl.yaml": TEST_HOOK})
    chart_repo(s)
    assert s.reconcile("web", minutes=0).code == 0
    migrated(s)
    assert s.reconcile("web", minutes=1).code == 0
    s.deployment_ready()
    assert s.reconcile("web", minutes=2).code == 0
    assert s.status()["rollout"]["state"] == "Succeeded"
    first = s.status()["lastAttempted"]["renderRef"]
    runs, log = len(helm_tools.call_log()), s.status_log()
    # An unrelated commit is an input of the chart's render (every file of the commit):
    # helm runs again, and its randomly named test Pod changes nothing.
    s.commit({"docs/NOTES.md": "nothing the chart reads\n"}, "notes")
    result = s.reconcile("web", minutes=3)
    assert result.code == 0, result.err
    assert len(helm_tools.call_log()) == runs + 1  # the same ref as before: made once
    assert s.status()["lastAttempted"]["renderRef"] == first
    assert s.status_log() == log  # no new render, no status commit
    assert not list((s.state / "clusters" / "staging").rglob("*web-test-*"))


RANDOM_CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-password
data:
  password: {{ randAlphaNum 16 | quote }}
"""


def test_a_chart_whose_objects_are_random_on_every_run_is_refused_naming_them(
    scenario: Scenario, helm_tools: Tools
) -> None:
    s = scenario
    s.commit({"apps/web/templates/password.yaml": RANDOM_CONFIG})
    chart_repo(s)
    result, message = fails_while_plain_goes_on(s, "RenderFailed")
    assert "differs from one run to the next" in message
    assert "ConfigMap web/web-password" in message and "\n" not in message
    assert f"web: RenderFailed: {message}" in result.err
    assert not s.object_path("web", "configmap", "web-password").exists()
