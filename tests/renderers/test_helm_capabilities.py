"""Helm's ``.Capabilities`` come from a stand-in server answering the Cluster's
discovery alone: the real helm, run as the Helm renderer runs it, sees exactly the
server's API versions and version (never Helm's built-in list), its ``lookup`` finds
nothing, and a chart bringing custom resources with their definitions still renders."""

import json
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import yaml

from convoy_batch.deployers.base import Capabilities
from convoy_batch.renderers import discovery, helm, process
from convoy_batch.renderers.job import Job
from tests.support.renderer_tools import real_helm

SERVER = Capabilities(
    "v1.20.2",
    (
        "apps/v1", "apps/v1/Deployment", "autoscaling/v1",
        "autoscaling/v1/HorizontalPodAutoscaler", "autoscaling/v2beta2",
        "autoscaling/v2beta2/HorizontalPodAutoscaler", "v1", "v1/ConfigMap",
    ),
)  # fmt: skip
CHART = {
    "Chart.yaml": "apiVersion: v2\nname: caps\nversion: 0.1.0\n",
    "templates/told.yaml": """\
apiVersion: v1
kind: ConfigMap
metadata: {name: told}
data:
  hpa: {{ ternary "autoscaling/v2" "autoscaling/v2beta2"
    (.Capabilities.APIVersions.Has "autoscaling/v2") }}
  kube: {{ .Capabilities.KubeVersion.Version | quote }}
  deployments: {{ .Capabilities.APIVersions.Has "apps/v1/Deployment" | quote }}
  policy: {{ .Capabilities.APIVersions.Has "policy/v1" | quote }}
  widgets: {{ .Capabilities.APIVersions.Has "example.com/v1" | quote }}
  lookup: {{ lookup "v1" "ConfigMap" "default" "" | toJson | quote }}
""",
}
CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
"""


def _render(tmp_path: Path, files: dict[str, str], server: Capabilities) -> dict[str, Any]:
    chart = tmp_path / "chart"
    for name, text in files.items():
        (chart / name).parent.mkdir(parents=True, exist_ok=True)
        (chart / name).write_text(text)
    home = tmp_path / "home"
    home.mkdir()
    job = cast(Job, SimpleNamespace(home=home, root=tmp_path, limits=process.Limits()))
    argv = [real_helm(), "template", "r", str(chart), "--namespace", "ns", "--include-crds"]
    text = helm._run_against(server, "helm", argv, job, process.minimal_env(home))
    told = [d for d in yaml.safe_load_all(text) if d and d["metadata"]["name"] == "told"]
    return dict(told[0]["data"])


def test_a_chart_sees_the_servers_api_versions_and_version_alone(tmp_path: Path) -> None:
    told = _render(tmp_path, CHART, SERVER)
    assert told == {
        "hpa": "autoscaling/v2beta2", "kube": "v1.20.2", "deployments": "true",
        "policy": "false", "widgets": "false", "lookup": "{}",
    }  # fmt: skip


def test_a_chart_sees_autoscaling_v2_where_the_server_serves_it(tmp_path: Path) -> None:
    served = (*SERVER.api_versions, "autoscaling/v2", "autoscaling/v2/HorizontalPodAutoscaler")
    told = _render(tmp_path, CHART, Capabilities("v1.23.0", tuple(sorted(served))))
    assert (told["hpa"], told["kube"]) == ("autoscaling/v2", "v1.23.0")


def test_a_chart_bringing_its_custom_resources_renders_without_seeing_them(
    tmp_path: Path,
) -> None:
    widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"
    files = {**CHART, "crds/widgets.yaml": CRD, "templates/widget.yaml": widget}
    served = (*SERVER.api_versions, "apiextensions.k8s.io/v1")
    served += ("apiextensions.k8s.io/v1/CustomResourceDefinition",)
    told = _render(tmp_path, files, Capabilities("v1.20.2", tuple(sorted(served))))
    assert told["widgets"] == "false"


def test_the_stand_in_server_answers_discovery_and_refuses_the_rest(tmp_path: Path) -> None:
    with discovery.serving(SERVER, tmp_path) as kubeconfig:
        url = json.loads(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        assert url.startswith("http://127.0.0.1:")
        apis = json.load(urllib.request.urlopen(f"{url}/apis"))
        assert [g["name"] for g in apis["groups"]] == ["apps", "autoscaling"]
        core = json.load(urllib.request.urlopen(f"{url}/api/v1"))
        assert [r["kind"] for r in core["resources"]] == ["ConfigMap"]
        codes = []
        for method in ("GET", "POST"):
            request = urllib.request.Request(f"{url}/api/v1/namespaces/ns/secrets", method=method)
            try:
                urllib.request.urlopen(request)
            except urllib.error.HTTPError as exc:
                codes.append(exc.code)
        assert codes == [404, 403]
