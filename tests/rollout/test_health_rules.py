"""Health rules in CEL (``health_rules``): Flux's evaluation order, what an error gives,
precedence (Release over Cluster over built-in), compilation once per tick, results
remembered across ticks, the observer's use of them, and the ``healthChecks`` field as a
spec field."""

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from convoy_batch.deployers.directory import DirectoryDeployer
from convoy_batch.engine.stages.render import render_key
from convoy_batch.health import cel as health_rules
from convoy_batch.health.cel import NO_RULES, Programs, evaluate, rules_for
from convoy_batch.health.observer import assess, observe, unknown_health
from convoy_batch.models import (
    Cluster,
    HealthState,
    InventoryEntry,
    Release,
    ReleaseInventory,
    key_of,
    parse_model,
)
from convoy_batch.state.caches import ParseCache
from tests.engine.test_observer import NOW
from tests.support.fakes import set_status

CURRENT, IN_PROGRESS, FAILED = HealthState.CURRENT, HealthState.IN_PROGRESS, HealthState.FAILED
UNKNOWN, TERMINATING = HealthState.UNKNOWN, HealthState.TERMINATING

READY = "status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')"
BROKEN = "status.conditions.exists(c, c.type == 'Ready' && c.status == 'False')"
BUSY = "status.conditions.exists(c, c.type == 'Busy' && c.status == 'True')"
WIDGET_RULE = {
    "apiVersion": "example.com/v1",
    "kind": "Widget",
    "inProgress": BUSY,
    "failed": BROKEN,
    "current": READY,
}


def widget(*conditions: tuple[str, str], generation: int = 1, **status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "gadget", "namespace": "web", "generation": generation},
        "spec": {"size": 3},
    }
    if conditions or status:
        found = [{"type": t, "status": s} for t, s in conditions]
        obj["status"] = {"conditions": found, **status}
    return obj


def release(*checks: dict[str, Any], name: str = "web") -> Release:
    spec: dict[str, Any] = {"cluster": "staging", "source": {"path": f"apps/{name}"}}
    if checks:
        spec["healthChecks"] = list(checks)
    data = {"apiVersion": "convoy.dev/v1alpha1", "kind": "Release", "metadata": {"name": name}}
    return parse_model(Release, {**data, "spec": spec}, f"releases/{name}.yaml")


def cluster(*checks: dict[str, Any]) -> Cluster:
    data = {
        "apiVersion": "convoy.dev/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "staging"},
        "spec": {"healthChecks": list(checks)},
    }
    return parse_model(Cluster, data, "clusters/staging.yaml")


def judge(obj: dict[str, Any], *checks: dict[str, Any]) -> tuple[HealthState, str]:
    rule = rules_for(release(*checks or (WIDGET_RULE,)), None, Programs()).find(obj)
    assert rule is not None
    return evaluate(rule, obj)


# --- Flux's order (RFC-0009) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        pytest.param([("Ready", "True")], CURRENT, id="current"),
        pytest.param([("Ready", "False")], FAILED, id="failed"),
        pytest.param([("Busy", "True")], IN_PROGRESS, id="in-progress"),
        pytest.param([("Busy", "True"), ("Ready", "False")], IN_PROGRESS, id="in-progress-first"),
        pytest.param([("Busy", "True"), ("Ready", "True")], IN_PROGRESS, id="in-progress-first-2"),
        pytest.param([("Ready", "Unknown")], IN_PROGRESS, id="none-true-is-in-progress"),
        pytest.param([("Ready", "False"), ("Ready", "True")], FAILED, id="failed-before-current"),
    ],
)
def test_the_first_true_expression_in_flux_order_decides(
    conditions: list[tuple[str, str]], expected: HealthState
) -> None:
    state, _ = judge(widget(*conditions))
    assert state == expected


def test_the_message_names_the_expression_and_the_rule() -> None:
    assert judge(widget(("Ready", "True"))) == (
        CURRENT,
        "Widget: current is true (releases/web.yaml spec.healthChecks[0])",
    )
    assert judge(widget(("Ready", "Unknown")))[1] == (
        "Widget: no health expression is true yet (releases/web.yaml spec.healthChecks[0])"
    )


def test_a_rule_with_current_alone_is_in_progress_until_current_holds() -> None:
    only = {"apiVersion": "example.com/v1", "kind": "Widget", "current": READY}
    assert judge(widget(("Ready", "False")), only)[0] == IN_PROGRESS
    assert judge(widget(("Ready", "True")), only)[0] == CURRENT


def test_a_generation_not_yet_observed_is_in_progress_before_any_expression() -> None:
    lagging = widget(("Ready", "True"), generation=3, observedGeneration=2)
    assert judge(lagging) == (IN_PROGRESS, "Widget: generation 3 not yet observed (2)")
    assert judge(widget(("Ready", "True"), generation=3, observedGeneration=3))[0] == CURRENT
    # Not an integer (Argo Rollouts writes a string): left to the rule.
    assert judge(widget(("Ready", "True"), generation=3, observedGeneration="2"))[0] == CURRENT


def test_an_object_being_deleted_is_terminating_whatever_the_rule_says() -> None:
    obj = widget(("Ready", "True"))
    obj["metadata"]["deletionTimestamp"] = "2026-11-29T12:00:00Z"
    assert judge(obj) == (TERMINATING, "Widget: being deleted")


def test_the_top_level_fields_and_self_are_the_variables() -> None:
    rule = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "inProgress": "!has(self.status)",
        "current": "spec.size == 3 && metadata.name == 'gadget' && kind == 'Widget'",
    }
    assert judge(widget(), rule)[0] == IN_PROGRESS  # no status yet: no error
    assert judge(widget(("Ready", "False")), rule)[0] == CURRENT


def test_the_extension_functions_are_there_when_a_rule_calls_them() -> None:
    rule = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "current": "metadata.name.upperAscii() == 'GADGET' && math.greatest([1, spec.size]) == 3",
    }
    assert judge(widget(), rule)[0] == CURRENT


# --- errors: Unknown, never Current ----------------------------------------------------


@pytest.mark.parametrize(
    ("field", "expression", "error"),
    [
        pytest.param("current", "status.conditions.exists(c,", "Failed to parse", id="syntax"),
        pytest.param("current", "status.missing == 1", "no such key: 'missing'", id="no-key"),
        pytest.param("current", "nosuch.field", "nosuch", id="undefined-variable"),
        pytest.param("current", "size(status.conditions)", "not a boolean", id="not-boolean"),
        pytest.param("current", "'a' + 1", "string + int", id="type-error"),
        pytest.param("failed", "1 / 0 == 1", "division by zero", id="in-failed"),
        pytest.param("inProgress", "status.x ==", "Failed to parse", id="in-in-progress"),
    ],
)
def test_an_expression_that_cannot_be_evaluated_makes_the_health_unknown(
    field: str, expression: str, error: str
) -> None:
    rule = {**WIDGET_RULE, field: expression}
    state, message = judge(widget(("Ready", "True")), rule)
    assert state == UNKNOWN
    assert message.startswith(
        f"Widget: health rule releases/web.yaml spec.healthChecks[0].{field}:"
    )
    assert error in message
    assert "\n" not in message


def test_a_rule_that_does_not_compile_is_never_used_even_when_an_earlier_expression_holds() -> None:
    rule = {**WIDGET_RULE, "current": "status.conditions.exists(c,"}
    assert judge(widget(("Busy", "True")), rule)[0] == UNKNOWN


def test_an_object_without_the_field_a_rule_reads_is_unknown_as_in_flux() -> None:
    state, message = judge(widget())  # no status at all
    assert state == UNKNOWN
    assert "'status'" in message


# --- precedence and the observer ---------------------------------------------------------


def test_the_release_rule_replaces_the_clusters_which_replaces_the_built_in_one() -> None:
    cluster_rule = {"apiVersion": "example.com/v2", "kind": "Widget", "current": "true"}
    release_rule = {"apiVersion": "example.com/v1", "kind": "Widget", "current": "false"}
    obj = widget(("Ready", "True"))
    programs = Programs()

    assert NO_RULES.find(obj) is None
    assert assess(obj, NOW).state == CURRENT  # built-in: Ready is True
    by_cluster = rules_for(release(), cluster(cluster_rule), programs)
    assert assess(obj, NOW, by_cluster).message == (
        "Widget: current is true (clusters/staging.yaml spec.healthChecks[0])"
    )
    by_release = rules_for(release(release_rule), cluster(cluster_rule), programs)
    assert assess(obj, NOW, by_release).state == IN_PROGRESS
    assert "releases/web.yaml" in assess(obj, NOW, by_release).message


def test_a_rule_for_a_core_kind_replaces_the_built_in_rule() -> None:
    never = {"apiVersion": "v1", "kind": "ConfigMap", "current": "false"}
    rules = rules_for(release(never), None, Programs())
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert assess(config, NOW).state == CURRENT
    assert assess(config, NOW, rules).state == IN_PROGRESS


def test_a_rule_matches_by_group_and_kind_only() -> None:
    rules = rules_for(release(WIDGET_RULE), None, Programs())
    assert rules.find({**widget(), "apiVersion": "example.com/v2"}) is not None
    assert rules.find({**widget(), "apiVersion": "other.com/v1"}) is None
    assert rules.find({**widget(), "kind": "Gizmo"}) is None


def test_an_object_not_in_the_cluster_is_not_found_whatever_the_rules() -> None:
    rules = rules_for(release(WIDGET_RULE), None, Programs())
    assert assess(None, NOW, rules).state == HealthState.NOT_FOUND


def test_the_observer_applies_the_rules_to_live_objects(tmp_path: Path) -> None:
    deployer = DirectoryDeployer(tmp_path / "cluster")
    obj = widget(("Ready", "False"))
    deployer.apply([obj])
    key = key_of(obj)
    set_status(deployer.root, key, obj["status"])  # the widget's controller
    inventory = ReleaseInventory(release="web", entries=(InventoryEntry(key=key),))
    rules = rules_for(release(WIDGET_RULE), None, Programs())

    (built_in,) = observe(inventory, deployer, NOW).entries  # kstatus: Ready False
    assert built_in.health is not None and built_in.health.state == IN_PROGRESS
    (entry,) = observe(inventory, deployer, NOW, rules).entries
    assert entry.health is not None and entry.health.state == FAILED
    assert unknown_health(ReleaseInventory(release="web", entries=(entry,))) is None


def test_a_remembered_observation_holds_only_for_the_rules_it_was_made_by(
    tmp_path: Path,
) -> None:
    deployer = DirectoryDeployer(tmp_path / "cluster")
    obj = widget(("Ready", "False"))
    deployer.apply([obj])
    set_status(deployer.root, key_of(obj), obj["status"])
    inventory = ReleaseInventory(release="web", entries=(InventoryEntry(key=key_of(obj)),))
    path = tmp_path / "state" / "cache" / "observed-staging.json"

    def state_by(*checks: dict[str, Any]) -> HealthState | None:
        memo = ParseCache(path)
        rules = rules_for(release(*checks), None, Programs(library="cel 1"))
        (entry,) = observe(inventory, deployer, NOW, rules, memo).entries
        memo.save()
        return entry.health.state if entry.health else None

    assert state_by(WIDGET_RULE) == FAILED
    data = json.loads(path.read_text())  # what was remembered now says Current
    data["entries"]["web"][1] = data["entries"]["web"][1].replace('"Failed"', '"Current"')
    path.write_text(json.dumps(data))
    assert state_by(WIDGET_RULE) == CURRENT  # the same rules: remembered
    assert state_by() == IN_PROGRESS  # the built-in rules: kstatus's Ready False
    assert state_by({**WIDGET_RULE, "failed": "false"}) == IN_PROGRESS  # another rule


def test_unknown_health_names_the_object_and_the_rule() -> None:
    rules = rules_for(release({**WIDGET_RULE, "current": "nosuch"}), None, Programs())
    health = assess(widget(("Ready", "True")), NOW, rules)
    entry = InventoryEntry(key=key_of(widget()), health=health)
    note = unknown_health(ReleaseInventory(release="web", entries=(entry,)))
    assert note is not None
    assert note.startswith("Widget.example.com web/gadget is Unknown: Widget: health rule ")
    assert "releases/web.yaml spec.healthChecks[0].current" in note


# --- compiled once per tick ----------------------------------------------------------------


def counting_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each expression compiled (a tick that takes every result from the memo
    compiles none)."""
    compiled: list[str] = []
    real = health_rules._compile

    def counting(text: str) -> health_rules.Compiled:
        compiled.append(text)
        return real(text)

    monkeypatch.setattr(health_rules, "_compile", counting)
    return compiled


def test_each_expression_text_is_compiled_once_per_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = counting_compiles(monkeypatch)
    programs = Programs()
    shared = cluster(WIDGET_RULE)
    # Two Releases use the Cluster's rule, a third its own with the same texts.
    for owner in (release(name="web"), release(name="api"), release(WIDGET_RULE, name="db")):
        rule = rules_for(owner, shared, programs).find(widget())
        assert rule is not None
        assert rule.origin.startswith("releases/db.yaml" if owner.name == "db" else "clusters/")
        for _ in range(10):
            assert evaluate(rule, widget(("Ready", "True")))[0] == CURRENT
    assert sorted(compiled) == sorted([BUSY, BROKEN, READY])
    next_tick = rules_for(release(), shared, Programs()).find(widget())
    assert next_tick is not None and len(compiled) == 3  # compiled on first evaluation
    evaluate(next_tick, widget(("Ready", "True")))
    assert len(compiled) == 6  # the next tick compiles again


# --- remembered across ticks ---------------------------------------------------------------

ORIGIN = "releases/web.yaml spec.healthChecks[0]"
CONFIGMAP_RULE = {"apiVersion": "v1", "kind": "ConfigMap", "current": "true"}


def next_tick(
    path: Path, obj: dict[str, Any], *checks: dict[str, Any], library: str = "cel 1"
) -> tuple[HealthState, str]:
    """``obj``'s health on a tick of its own: new programs, the memo read from ``path``
    and saved after, as a tick does."""
    memo = ParseCache(path)
    programs = Programs(library=library)
    rule = rules_for(release(*checks or (WIDGET_RULE,)), None, programs, memo).find(obj)
    assert rule is not None
    result = evaluate(rule, obj, memo)
    memo.save()
    return result


def test_a_remembered_result_is_the_next_ticks_without_compiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cache" / "health-staging.json"
    compiled = counting_compiles(monkeypatch)
    obj = widget(("Ready", "True"))
    first = next_tick(path, obj)
    assert first == (CURRENT, f"Widget: current is true ({ORIGIN})")
    assert len(compiled) == 3

    assert next_tick(path, copy.deepcopy(obj)) == first
    assert len(compiled) == 3  # nothing compiled, so nothing evaluated
    entries = json.loads(path.read_text())["entries"]
    assert list(entries) == ["example.com/Widget/web/gadget"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param(
            {"obj": widget(("Ready", "False"))},
            (FAILED, f"Widget: failed is true ({ORIGIN})"),
            id="the-object",
        ),
        pytest.param(
            {"checks": ({**WIDGET_RULE, "current": "false"},)},
            (IN_PROGRESS, f"Widget: no health expression is true yet ({ORIGIN})"),
            id="an-expression",
        ),
        pytest.param(
            {"checks": (CONFIGMAP_RULE, WIDGET_RULE)},
            (CURRENT, "Widget: current is true (releases/web.yaml spec.healthChecks[1])"),
            id="where-the-rule-is-written",
        ),
        pytest.param(
            {"library": "cel 2"},
            (CURRENT, f"Widget: current is true ({ORIGIN})"),
            id="the-cel-library",
        ),
    ],
)
def test_a_result_is_evaluated_again_when_what_it_depends_on_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, Any], expected: Any
) -> None:
    path = tmp_path / "cache" / "health-staging.json"
    next_tick(path, widget(("Ready", "True")))
    compiled = counting_compiles(monkeypatch)
    obj = change.get("obj", widget(("Ready", "True")))
    checks = change.get("checks", (WIDGET_RULE,))
    assert next_tick(path, obj, *checks, library=change.get("library", "cel 1")) == expected
    assert compiled  # evaluated, not remembered
    assert next_tick(path, obj, *checks, library=change.get("library", "cel 1")) == expected


def test_a_remembered_entry_that_is_not_a_result_is_evaluated_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cache" / "health-staging.json"
    obj = widget(("Ready", "False"))
    expected = next_tick(path, obj)
    body = json.loads(path.read_text())
    # Each entry keeps its document as JSON text (the parse cache's format 2).
    texts = [
        json.dumps(g) for g in (["Healthy", "made up"], ["Current"], "Current", ["Current", 1])
    ]
    for garbage in [*texts, "[not JSON", ["Current", "a document, not its text"]]:
        body["entries"]["example.com/Widget/web/gadget"][1] = garbage
        path.write_text(json.dumps(body))
        compiled = counting_compiles(monkeypatch)
        assert next_tick(path, obj) == expected
        assert compiled, garbage


def test_an_object_that_is_not_plain_data_is_evaluated_and_not_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cache" / "health-staging.json"
    obj = widget(("Ready", "True"))
    obj["status"]["since"] = datetime(2026, 11, 29, 12, tzinfo=UTC)  # as a YAML loader makes
    assert next_tick(path, obj)[0] == CURRENT
    assert not path.exists()  # nothing to remember, nothing written
    compiled = counting_compiles(monkeypatch)
    assert next_tick(path, obj)[0] == CURRENT
    assert compiled


# --- the field ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("checks", "error"),
    [
        pytest.param(
            [{**WIDGET_RULE, "expr": "true"}],
            "spec.healthChecks.0.expr: unknown field",
            id="unknown",
        ),
        pytest.param(
            [{"apiVersion": "example.com/v1", "kind": "Widget", "failed": BROKEN}],
            "spec.healthChecks.0.current: required field missing",
            id="no-current",
        ),
        pytest.param(
            [WIDGET_RULE, {**WIDGET_RULE, "apiVersion": "example.com/v2"}],
            "spec.healthChecks: [1] is a second rule for example.com/Widget (first: [0])",
            id="twice",
        ),
        pytest.param(
            [{**WIDGET_RULE, "kind": "not a kind"}], "kind 'not a kind' is not", id="bad-kind"
        ),
        pytest.param([{**WIDGET_RULE, "failed": "  "}], "failed: an empty expression", id="empty"),
    ],
)
def test_a_bad_health_check_is_refused_in_one_line_with_file_and_field(
    checks: list[dict[str, Any]], error: str
) -> None:
    with pytest.raises(ValueError) as raised:
        release(*checks)
    message = str(raised.value)
    assert message.startswith("releases/web.yaml: ")
    assert error in message
    assert "\n" not in message


def test_without_health_checks_a_spec_dumps_as_before_the_field_existed() -> None:
    assert "healthChecks" not in release().dump()["spec"]
    assert "healthChecks" not in cluster().dump()["spec"]
    assert release(WIDGET_RULE).dump()["spec"]["healthChecks"][0]["inProgress"] == BUSY


def test_health_rules_are_not_part_of_a_renders_inputs() -> None:
    plain = render_key(["files"], release(), cluster())
    assert render_key(["files"], release(WIDGET_RULE), cluster(WIDGET_RULE)) == plain
    assert render_key(["files"], release(name="api"), cluster()) != plain
