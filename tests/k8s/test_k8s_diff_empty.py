"""``diff --exit-code`` is exact for manifests with empty mappings, empty lists and nulls
(issue 47), on the real API server: ``annotations: {}``, ``labels: {}``, ``binaryData: {}``,
``volumes: []`` and ``nodeSelector: null`` set nothing, for the server-side apply as for
the diff, so an object applied as written shows no change, against the applied render
and against the live cluster, right after the tick that applied it and once an automatic
rollback holds the render; a real change beside them still does, and only it. Through
the CLI; the directory cluster's cases are tests/cli/test_diff_empty.py."""

from datetime import timedelta

from convoy_batch.timefmt import format_time
from tests.k8s.k8s_scenario import KubeScenario
from tests.support.scenario import DEPLOYMENT, T0

EMPTY = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: empty
  annotations: {}
  labels: {}
  namespace: null
data: {a: b}
binaryData: {}
"""

EMPTY_DEPLOYMENT = (
    DEPLOYMENT.replace(
        "  name: ${release}\n", "  name: ${release}\n  annotations: {}\n  labels: {}\n"
    )
    .replace("    spec:\n", "    spec:\n      volumes: []\n      nodeSelector: null\n")
    .replace(':IMAGE"}', ':IMAGE", ports: [{containerPort: 8080, protocol: TCP}]}')
)


def at(minutes: float) -> str:
    return format_time(T0 + timedelta(minutes=minutes))


def with_empties(s: KubeScenario, name: str, image: str = "1.0") -> None:
    deployment = EMPTY_DEPLOYMENT.replace("IMAGE", image)
    s.app(name, image=image, extra={"empty.yaml": EMPTY, "deployment.yaml": deployment})


def lines(out: str) -> list[str]:
    return [line.strip() for line in out.splitlines()]


def no_change(s: KubeScenario, name: str, minutes: float, *, held: bool = False) -> None:
    """``diff --all --exit-code``, against the applied render then the live cluster: exit 0,
    the Release said unchanged, no object line. ``held``: the render is the rollback's."""
    for args, against in (((), "no change against"), (("--live",), "no change against the live")):
        result = s.cli("diff", "--all", "--exit-code", *args, "--now", at(minutes))
        assert result.code == 0, (args, result.out + result.err)
        assert any(line.startswith(f"{name}: {against}") for line in lines(result.out)), (
            args,
            result.out,
        )
        objects = [line for line in lines(result.out) if line.startswith(("~", "+", "-"))]
        assert objects == [], (args, result.out)
        assert "annotations" not in result.out and "labels" not in result.out, result.out
        if held and not args:
            assert "(held at the last healthy" in result.out, result.out


def test_empty_fields_show_no_change_on_the_server_right_after_the_tick_that_applied_them(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    with_empties(s, "dempty")
    assert s.reconcile("dempty").code == 0
    live = s.configmap("dempty", "empty")
    assert live is not None and live.data == {"a": "b"}
    assert s.deployment("dempty").spec.template.spec.containers[0].ports[0].container_port == 8080
    no_change(s, "dempty", 0.5)
    s.ready("dempty")
    assert s.reconcile("dempty", minutes=1).code == 0
    assert s.status("dempty")["rollout"]["state"] == "Succeeded"
    no_change(s, "dempty", 1.5)


def test_a_real_change_beside_empty_fields_still_shows_on_the_server(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    with_empties(s, "dchange")
    assert s.reconcile("dchange").code == 0
    s.commit({"apps/dchange/empty.yaml": EMPTY.replace("{a: b}", "{a: c}")}, "a changes")
    for args in ((), ("--live",)):
        result = s.cli("diff", "--all", "--exit-code", *args, "--now", at(1))
        assert result.code == 1, (args, result.out + result.err)
        changed = [line for line in lines(result.out) if line.startswith(("~", "+", "-"))]
        changed = [line for line in changed if not line.startswith(("---", "+++"))]
        assert changed == ["~ ConfigMap dchange/empty", "-  a: b", "+  a: c"], (args, result.out)
        assert "annotations" not in result.out and "labels" not in result.out, result.out
        assert "binaryData" not in result.out, result.out


def test_empty_fields_show_no_change_on_the_server_once_a_rollback_holds_the_render(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    with_empties(s, "dback")
    assert s.reconcile("dback").code == 0
    s.ready("dback")
    assert s.reconcile("dback", minutes=1).code == 0
    good = s.status("dback")["rollout"]["renderRef"]
    with_empties(s, "dback", image="2.0")
    assert s.reconcile("dback", minutes=2).code == 0
    assert s.deployment_image("dback") == "example/dback:2.0"
    # no kubelet plays the 2.0 pods: they never turn ready, and the deadline (10m) passes
    assert s.reconcile("dback", minutes=13).code == 0
    status = s.status("dback")
    assert status["rollout"]["state"] == "RolledBack", status
    assert status["lastAttempted"]["renderRef"] == good
    assert s.deployment_image("dback") == "example/dback:1.0"
    no_change(s, "dback", 20, held=True)
