"""Issue 47, item 2, on a real API server: a commit that changes no source (a notes file)
leaves the next ticks quiet. Three Releases roll out: a public chart copied unmodified
(kube-state-metrics, whose Deployment the server stores in another form than its
manifest), a small chart of the shapes that read differently live (``subjects[].apiGroup:
""``, ``rules: []``, ``env: null``) and a Plain Release. Once a tick only reads, an
unrelated commit is followed by ticks that send GETs alone, not even a dry run
(``kubeapi.COUNTS`` and the server's audit log both read).

The cause it guards: a fresh Helm render orders each mapping's keys as its templates
write them, the render store's copy in sorted order; the server-form memo must find the
same answer for both."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from convoy_batch.deployers import kubeapi
from convoy_batch.deployers.serverform import ServerForms
from convoy_batch.models import ANNOTATION_RENDER
from convoy_batch.state.caches import ParseCache
from tests.k8s.k8s_scenario import KubeScenario
from tests.k8s.testenv import KubeEnv
from tests.support.realworld import (
    KUBE_STATE_METRICS,
    App,
    Write,
    commit_apps,
    convoy_writes,
    play_kube,
    realworld,
    release_yaml,
    states,
)
from tests.support.renderer_tools import Tools, real_helm

SHAPES = App("shapes", "", "{type: Helm, releaseName: shapes}")
SHAPES_CHART = {
    "Chart.yaml": "apiVersion: v2\nname: shapes\nversion: 0.1.0\n",
    "templates/rbac.yaml": """\
apiVersion: v1
kind: ServiceAccount
metadata:
  name: shapes
  namespace: {{ .Release.Namespace }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: quiet-after-commit-shapes
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: quiet-after-commit-shapes
roleRef:
  kind: ClusterRole
  name: quiet-after-commit-shapes
  apiGroup: rbac.authorization.k8s.io
subjects:
- kind: ServiceAccount
  name: shapes
  namespace: {{ .Release.Namespace }}
  apiGroup: ""
""",
    "templates/deployment.yaml": """\
kind: Deployment
apiVersion: apps/v1
metadata:
  labels: {app: shapes}
  name: shapes
spec:
  template:
    metadata: {labels: {app: shapes}}
    spec:
      serviceAccountName: shapes
      containers:
      - name: app
        image: example/shapes:1.0
        env: null
        ports: [{name: http, containerPort: 8080, protocol: TCP}]
        resources: {limits: {cpu: 500m}}
  selector: {matchLabels: {app: shapes}}
  replicas: 1
""",
}
"""A chart of our own, written as charts are: keys in no sorted order, fields the server
stores in another form (or not at all)."""
PLAIN = "plain"
NAMES = (KUBE_STATE_METRICS.name, SHAPES.name, PLAIN)
SETTLE_TICKS = 8


@dataclass
class Sent:
    """What one tick sent: requests by method as convoy-batch counts them (dry runs
    apart), and the writes of the server's audit log (dry runs included)."""

    requests: dict[str, int]
    writes: list[Write]

    def only_reads(self) -> bool:
        return set(self.requests) <= {"GET"} and not self.writes

    def __str__(self) -> str:
        return f"{self.requests}; " + "; ".join(map(str, self.writes))


class Ticks:
    """Ticks of every Release, one minute apart, each noting what it sent."""

    def __init__(self, s: KubeScenario) -> None:
        self.s = s
        self.minute = 0

    def tick(self) -> Sent:
        writes, counts = len(convoy_writes(self.s.kube)), dict(kubeapi.COUNTS)
        result = self.s.reconcile("--all", minutes=self.minute)
        self.minute += 1
        assert result.code == 0, result.out + result.err
        requests = {
            k: v - counts.get(k, 0) for k, v in kubeapi.COUNTS.items() if v != counts.get(k, 0)
        }
        return Sent(requests, convoy_writes(self.s.kube)[writes:])

    def rolled_out(self) -> bool:
        found = states(self.s, [App(name, "") for name in NAMES])
        return all(state == "Succeeded" for state in found.values())


@pytest.fixture
def rolled_out(
    kube: KubeEnv, kscenario: KubeScenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Ticks:
    """The three Releases, ticked (the controllers played between ticks) until every one
    Succeeded and a tick only reads."""
    realworld()
    tools = Tools(tmp_path / "bin", monkeypatch)
    (tools.bin / "helm").symlink_to(real_helm())
    s = kscenario
    s.app(PLAIN)
    files: dict[str, str | None] = {f"apps/{SHAPES.name}/{k}": v for k, v in SHAPES_CHART.items()}
    s.commit({**files, f"releases/{SHAPES.name}.yaml": release_yaml(SHAPES)}, "shapes")
    commit_apps(s, [KUBE_STATE_METRICS])
    ticks = Ticks(s)
    sent = None
    for _ in range(SETTLE_TICKS):
        sent = ticks.tick()
        if ticks.rolled_out() and sent.only_reads():
            return ticks
        for name in NAMES:
            play_kube(kube, name)
    raise AssertionError(f"never quiet: {sent}")


def test_a_commit_outside_every_source_is_followed_by_ticks_that_only_read(
    rolled_out: Ticks,
) -> None:
    ticks = rolled_out
    ticks.s.commit({"notes.txt": "Nothing a Release reads.\n"}, "notes")
    for _ in range(2):
        sent = ticks.tick()
        assert sent.only_reads(), str(sent)


def reordered(value: Any) -> Any:
    """``value`` with every mapping's keys in reverse order (lists keep theirs)."""
    if isinstance(value, dict):
        return {k: reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(item) for item in value]
    return value


def test_the_server_form_memo_does_not_depend_on_the_order_of_a_manifests_keys(
    tmp_path: Path,
) -> None:
    sent = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "b", "namespace": "n", "annotations": {ANNOTATION_RENDER: "r1"}},
        "roleRef": {"kind": "Role", "name": "r", "apiGroup": "rbac.authorization.k8s.io"},
        "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "n", "apiGroup": ""}],
    }
    stored = {**sent, "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "n"}]}
    live = {**stored, "metadata": {**sent["metadata"], "resourceVersion": "7"}}
    cache = ParseCache(tmp_path / "cache" / "cluster-c.json", tmp_path)
    (tmp_path / "cache").mkdir()
    ServerForms(cache).remember(reordered(sent), stored)
    cache.save()

    forms = ServerForms(ParseCache(tmp_path / "cache" / "cluster-c.json", tmp_path))
    assert forms.matches(sent, live)
    assert forms.matches(reordered(sent), reordered(live))
    drifted = {**live, "subjects": [{"kind": "ServiceAccount", "name": "other", "namespace": "n"}]}
    assert not forms.matches(sent, drifted)
