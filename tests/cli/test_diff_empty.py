"""``diff --exit-code`` is exact for manifests with empty mappings, empty lists and nulls
(issue 47): ``annotations: {}`` and ``labels: {}`` set nothing, for the apply as for the
server, so an object applied as written shows no change; a real change beside still
does. Through the CLI, on a directory cluster."""

from datetime import timedelta
from pathlib import Path

import pytest

from convoy_batch.timefmt import format_time
from tests.support.scenario import DEPLOYMENT, T0, Scenario

EMPTY = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-empty
  annotations: {}
  labels: {}
  namespace: null
data: {a: b}
binaryData: {}
"""

EMPTY_DEPLOYMENT = DEPLOYMENT.replace(
    "  name: ${release}\n", "  name: ${release}\n  annotations: {}\n  labels: {}\n"
).replace("    spec:\n", "    spec:\n      volumes: []\n      nodeSelector: null\n")


def at(minutes: float) -> str:
    return format_time(T0 + timedelta(minutes=minutes))


@pytest.fixture
def s(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Scenario:
    return Scenario(tmp_path, capsys)


def with_empties(s: Scenario, image: str = "1.0") -> None:
    deployment = EMPTY_DEPLOYMENT.replace("IMAGE", image)
    s.app(image=image, extra={"empty.yaml": EMPTY, "deployment.yaml": deployment})


def lines(out: str) -> list[str]:
    return [line.strip() for line in out.splitlines()]


def no_change(s: Scenario, minutes: float) -> None:
    for args in ((), ("--live",)):
        result = s.cli("diff", "--all", "--exit-code", *args, "--now", at(minutes))
        assert result.code == 0, result.out + result.err
        assert "no change against" in result.out.splitlines()[1], result.out
        assert not [line for line in lines(result.out) if line.startswith(("~", "+", "-"))]


def test_empty_mappings_show_no_change_right_after_the_tick_that_applied_them(
    s: Scenario,
) -> None:
    with_empties(s)
    assert s.reconcile("web").code == 0
    no_change(s, 0.5)
    s.deployment_ready()
    assert s.reconcile("web", minutes=1).code == 0
    no_change(s, 1.5)


def test_empty_mappings_show_no_change_once_a_rollback_holds_the_render(s: Scenario) -> None:
    with_empties(s)
    assert s.reconcile("web").code == 0
    s.deployment_ready()
    assert s.reconcile("web", minutes=1).code == 0
    with_empties(s, image="2.0")
    assert s.reconcile("web", minutes=2).code == 0
    s.deployment_failed()
    s.reconcile("web", minutes=20)  # past the progress deadline: rolled back
    assert s.status()["rollout"]["state"] == "RolledBack"
    no_change(s, 30)


def test_a_real_change_beside_empty_mappings_still_shows(s: Scenario) -> None:
    with_empties(s)
    assert s.reconcile("web").code == 0
    s.commit({"apps/web/empty.yaml": EMPTY.replace("{a: b}", "{a: c}")}, "a changes")
    for args in ((), ("--live",)):
        result = s.cli("diff", "--all", "--exit-code", *args, "--now", at(1))
        assert result.code == 1, result.out + result.err
        changed = [line for line in lines(result.out) if line.startswith("~")]
        assert changed == ["~ ConfigMap web/web-empty"], result.out
        assert {"-  a: b", "+  a: c"} <= set(lines(result.out)), result.out
        assert "annotations" not in result.out and "labels" not in result.out, result.out
