"""Health rules in CEL through the CLI on the directory cluster: a custom resource whose
rule drives a rollout to Succeeded (the Cluster's rule) and to RolledBack (the Release's
``failed`` expression), and a broken expression that gives a clear status and no
transition; a quiet tick takes the rules' results from the state directory without
loading the CEL library. ``tests/k8s/test_k8s_health_rules.py`` plays the same on a real
API server."""

import json
from typing import Any

from tests.support.scenario import CLUSTER, FAILURE_POLICY, Scenario, release_yaml

WIDGET = """\
apiVersion: ${release}.convoy.test/v1
kind: Widget
metadata: {name: gadget}
spec: {size: SIZE}
"""
READY = "status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')"
BROKEN = "status.conditions.exists(c, c.type == 'Ready' && c.status == 'False')"


def health_checks(group: str, *, current: str = READY, failed: str = BROKEN) -> str:
    """A spec's ``healthChecks`` for the Widgets of ``group`` (spec-level YAML)."""
    return (
        "  healthChecks:\n"
        f"    - apiVersion: {group}/v1\n"
        "      kind: Widget\n"
        "      inProgress: '!has(self.status)'\n"
        f'      failed: "{failed}"\n'
        f'      current: "{current}"\n'
    )


def widget_files(size: int = 3) -> dict[str, str]:
    return {"widget.yaml": WIDGET.replace("SIZE", str(size))}


def ready(value: str, reason: str = "Reconciled") -> dict[str, Any]:
    """A Widget status with its Ready condition."""
    return {"conditions": [{"type": "Ready", "status": value, "reason": reason}]}


def observed(s: Scenario, minutes: int) -> str:
    """What ``observe`` prints of the widget."""
    result = s.cli("observe", "web", "--now", f"2026-11-29T12:{minutes:02d}:00Z")
    assert result.code == 0, result.err
    return next(line for line in result.out.splitlines() if "Widget" in line)


def applied_under_the_clusters_rule(s: Scenario) -> None:
    """The web Release with its widget applied (tick 0) under the Cluster's Widget rule,
    its Deployment then ready."""
    s.commit({"clusters/staging.yaml": CLUSTER + health_checks("web.convoy.test")})
    s.app(extra=widget_files())
    assert s.reconcile("web", minutes=0).code == 0
    assert s.status()["rollout"]["state"] == "Progressing"
    s.deployment_ready()


def test_a_clusters_rule_holds_a_custom_resource_without_status_then_its_failed_holds(
    scenario: Scenario,
) -> None:
    s = scenario
    applied_under_the_clusters_rule(s)
    assert s.reconcile("web", minutes=1).code == 0
    # Built in, a Widget without conditions is Current; the rule says "no status yet".
    assert s.status()["rollout"]["state"] == "Progressing"
    assert observed(s, 1) == (
        "web: Widget.web.convoy.test web/gadget: InProgress "
        "Widget: inProgress is true (clusters/staging.yaml spec.healthChecks[0])"
    )

    s.set_status("web", "widget.web.convoy.test", "gadget", ready("False", "Provisioning"))
    assert s.reconcile("web", minutes=2).code == 0
    status = s.status()
    # Ready False is the rule's failed expression: with no healthy render yet, Failed.
    assert status["rollout"]["state"] == "Failed"
    assert status["rollout"]["reason"] == "Unhealthy"


def test_a_custom_resource_current_by_the_clusters_rule_makes_the_rollout_succeed(
    scenario: Scenario,
) -> None:
    s = scenario
    applied_under_the_clusters_rule(s)
    s.set_status("web", "widget.web.convoy.test", "gadget", {"conditions": []})
    assert s.reconcile("web", minutes=1).code == 0
    assert s.status()["rollout"]["state"] == "Progressing"  # no expression true yet

    s.set_status("web", "widget.web.convoy.test", "gadget", ready("True"))
    assert s.reconcile("web", minutes=2).code == 0
    status = s.status()
    assert status["rollout"]["state"] == "Succeeded"
    assert status["lastHealthy"]["renderRef"] == status["rollout"]["renderRef"]


def test_the_releases_failed_expression_rolls_back_to_the_last_healthy_render(
    scenario: Scenario,
) -> None:
    s = scenario
    # The Cluster's rule would call the widget Current; the Release's own replaces it.
    lenient = health_checks("web.convoy.test", current="true", failed="false")
    s.commit({"clusters/staging.yaml": CLUSTER + lenient})
    spec = FAILURE_POLICY + health_checks("web.convoy.test")
    s.app(extra=widget_files(3), spec_extra=spec)
    assert s.reconcile("web", minutes=0).code == 0
    s.deployment_ready()
    s.set_status("web", "widget.web.convoy.test", "gadget", ready("True"))
    assert s.reconcile("web", minutes=1).code == 0
    good = s.status()["rollout"]["renderRef"]
    assert s.status()["rollout"]["state"] == "Succeeded"

    s.app(extra=widget_files(4), spec_extra=spec)
    assert s.reconcile("web", minutes=2).code == 0
    assert s.live("web", "widget.web.convoy.test", "gadget")["spec"] == {"size": 4}
    s.deployment_ready()
    s.set_status("web", "widget.web.convoy.test", "gadget", ready("False", "OutOfGadgets"))
    assert s.reconcile("web", minutes=3).code == 0

    status = s.status()
    assert status["rollout"]["state"] == "RolledBack"
    assert status["rollout"]["reason"] == "Unhealthy"
    assert status["rollout"]["message"] == (
        "Widget.web.convoy.test web/gadget is Failed: "
        "Widget: failed is true (releases/web.yaml spec.healthChecks[0])"
    )
    assert status["lastAttempted"]["renderRef"] == good
    assert s.live("web", "widget.web.convoy.test", "gadget")["spec"] == {"size": 3}


def test_a_broken_expression_gives_a_clear_status_and_no_transition(scenario: Scenario) -> None:
    s = scenario
    spec = FAILURE_POLICY + health_checks("web.convoy.test", current="status.conditions.exists(c,")
    s.app(extra=widget_files(), spec_extra=spec)
    assert s.reconcile("web", minutes=0).code == 0
    s.deployment_ready()
    s.set_status("web", "widget.web.convoy.test", "gadget", ready("True"))
    before = s.status()
    commits = len(s.status_log())

    result = s.reconcile("web", minutes=1)
    assert result.code == 0, result.err
    status = s.status()
    assert status["rollout"] == before["rollout"]  # still Progressing: no transition
    assert status["rollout"]["state"] == "Progressing"
    message = status["lastAttempted"]["message"]
    assert message.startswith(
        "3 objects applied; Widget.web.convoy.test web/gadget is Unknown: Widget: health rule "
        "releases/web.yaml spec.healthChecks[0].current: Failed to parse expression"
    )
    assert "\n" not in message
    assert s.status_log()[0] == "web: Synced"
    assert len(s.status_log()) == commits + 1
    assert observed(s, 1).startswith("web: Widget.web.convoy.test web/gadget: Unknown ")

    # The same error on the next tick changes nothing more; the fix clears it.
    assert s.reconcile("web", minutes=2).code == 0
    assert len(s.status_log()) == commits + 1
    s.commit({"releases/web.yaml": release_yaml(spec_extra=FAILURE_POLICY + health_checks(
        "web.convoy.test"))})  # fmt: skip
    assert s.reconcile("web", minutes=3).code == 0
    status = s.status()
    assert status["rollout"]["state"] == "Succeeded"
    assert status["lastAttempted"]["message"] == "3 objects applied"


def reconcile_in_a_process(s: Scenario, minutes: int) -> tuple[int, bool]:
    """``reconcile web`` in a Python process of its own: its exit code, and whether it
    loaded the CEL library."""
    code, loaded = s.reconcile_in_a_process(minutes, "web", modules=("cel",))
    return code, "cel" in loaded


def test_a_quiet_tick_takes_the_rules_results_from_the_state_directory_without_cel(
    scenario: Scenario,
) -> None:
    s = scenario
    applied_under_the_clusters_rule(s)
    s.set_status("web", "widget.web.convoy.test", "gadget", ready("True"))
    assert s.reconcile("web", minutes=1).code == 0
    assert s.status()["rollout"]["state"] == "Succeeded"
    memo = json.loads((s.state / "cache" / "health-staging.json").read_text())["entries"]
    assert list(memo) == ["web.convoy.test/Widget/web/gadget"]
    assert json.loads(memo["web.convoy.test/Widget/web/gadget"][1]) == [
        "Current",
        "Widget: current is true (clusters/staging.yaml spec.healthChecks[0])",
    ]
    commits = len(s.status_log())

    assert reconcile_in_a_process(s, 2) == (0, False)  # every result remembered
    assert s.status()["rollout"]["state"] == "Succeeded"
    assert len(s.status_log()) == commits

    # The widget changes: the next tick evaluates its rule again.
    s.set_status("web", "widget.web.convoy.test", "gadget", ready("False", "OutOfGadgets"))
    assert reconcile_in_a_process(s, 3) == (0, True)
    assert observed(s, 3) == (
        "web: Widget.web.convoy.test web/gadget: Failed "
        "Widget: failed is true (clusters/staging.yaml spec.healthChecks[0])"
    )
