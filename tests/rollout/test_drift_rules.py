"""Drift rules, the first step (``spec.drift``, ``manifests/drift.py``): what a rule is
(JSON pointers, helm-controller's targets), which are refused as ``InvalidRelease`` naming
the rule, and what the rules mean for one manifest: the paths left to other managers, the
manifest an update sends, and the paths where the live object differs."""

from typing import Any

import pytest

from convoy_batch.manifests.annotations import create_only
from convoy_batch.manifests.drift import (
    Rules,
    differences,
    ignored,
    managed,
    matches,
    mode_of,
    pointer,
    restore,
    tokens,
)
from convoy_batch.models import Drift, DriftMode, DriftTarget, Release, parse_model
from tests.rollout.test_models import refusal, release_data
from tests.support.scenario import FAILURE_POLICY, Scenario

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web-api", "namespace": "shop", "labels": {"tier": "api"}},
    "spec": {
        "replicas": 2,
        "template": {"spec": {"containers": [{"name": "app", "image": "api:1"}]}},
    },
}


def drift(**data: Any) -> Drift:
    return Drift.model_validate(data)


def test_pointers_are_rfc_6901() -> None:
    assert tokens("") == ()
    assert tokens("/metadata/annotations/a~1b~0c") == ("metadata", "annotations", "a/b~c")
    assert pointer(["metadata", "annotations", "a/b~c"]) == "/metadata/annotations/a~1b~0c"


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        ({"paths": ["spec/replicas"]}, "spec.drift.ignore.0.paths.0"),
        ({"paths": ["/a~2b"]}, "spec.drift.ignore.0.paths.0"),
        ({"paths": ["/x"], "target": {"name": "web-("}}, "spec.drift.ignore.0.target.name"),
    ],
    ids=["no-leading-slash", "bad-escape", "bad-regex"],
)
def test_a_bad_rule_is_refused_naming_it(rule: dict[str, Any], field: str) -> None:
    message = refusal(Release, release_data(drift={"ignore": [rule]}), "releases/web.yaml")

    assert message.startswith(f"releases/web.yaml: {field}: "), message


def test_an_unknown_mode_is_refused() -> None:
    message = refusal(Release, release_data(drift={"mode": "Ignore"}), "releases/web.yaml")

    assert message.startswith("releases/web.yaml: spec.drift.mode: "), message


def test_a_bad_rule_is_an_invalid_release_and_the_others_sync(scenario: Scenario) -> None:
    s = scenario
    bad = FAILURE_POLICY + "  drift: {ignore: [{paths: [spec/replicas]}]}\n"
    s.app("web", spec_extra=bad)
    s.app("api")

    result = s.reconcile(minutes=0)

    assert result.code == 1
    [line] = result.err.splitlines()
    assert line.startswith("web: InvalidRelease: releases/web.yaml: spec.drift.ignore.0.paths.0:")
    assert s.object_path("api", "deployment.apps", "api").exists()


def test_the_release_s_mode_wins_and_correct_is_the_default() -> None:
    report, correct = drift(mode="Report"), drift(mode="Correct")

    assert mode_of(None, None) == DriftMode.CORRECT
    assert mode_of(None, report) == DriftMode.REPORT
    assert mode_of(correct, report) == DriftMode.CORRECT
    assert mode_of(drift(ignore=[]), report) == DriftMode.REPORT


def test_targets_match_as_helm_controller_s() -> None:
    def target(**fields: Any) -> DriftTarget:
        return DriftTarget.model_validate(fields)

    assert matches(target(kind="Deployment", group="apps", version="v1"), DEPLOYMENT)
    assert matches(target(name="web-.*", namespace="sh.p"), DEPLOYMENT)
    assert not matches(target(name="web"), DEPLOYMENT)  # matched whole, not searched
    assert not matches(target(kind="StatefulSet"), DEPLOYMENT)
    assert matches(target(labelSelector={"matchLabels": {"tier": "api"}}), DEPLOYMENT)
    assert not matches(target(labelSelector={"matchLabels": {"tier": "db"}}), DEPLOYMENT)


def test_a_release_s_rules_apply_with_its_cluster_s() -> None:
    release = drift(ignore=[{"paths": ["/spec/replicas"], "target": {"kind": "Deployment"}}])
    cluster = drift(ignore=[{"paths": ["/metadata/annotations"], "target": {"kind": "Job"}},
                            {"paths": ["/spec/replicas", "/metadata/labels/team"]}])  # fmt: skip

    assert ignored(DEPLOYMENT, release, cluster) == ("/spec/replicas", "/metadata/labels/team")
    assert ignored(DEPLOYMENT, None, None) == ()


@pytest.mark.parametrize(
    "annotations",
    [{"convoy.dev/drift": "ignore"}, {"helm.toolkit.fluxcd.io/driftDetection": "disabled"}],
)
def test_the_annotation_ignores_the_whole_object(annotations: dict[str, str]) -> None:
    annotated = {**DEPLOYMENT, "metadata": {**DEPLOYMENT["metadata"], "annotations": annotations}}

    assert ignored(annotated, None) == ("",)
    assert Rules().ignored(annotated) == ("",)
    assert create_only(annotated)  # never updated


def test_a_rule_for_the_whole_object_makes_it_create_only() -> None:
    form = managed(DEPLOYMENT, [""])

    assert create_only(form) and not create_only(DEPLOYMENT)
    assert form["metadata"]["annotations"] == {"convoy.dev/drift": "ignore"}


def test_an_update_leaves_the_ignored_paths_out() -> None:
    sent = managed(DEPLOYMENT, ["/spec/replicas", "/spec/template/spec/containers/0/image"])

    assert "replicas" not in sent["spec"]
    assert sent["spec"]["template"]["spec"]["containers"] == [{"name": "app"}]
    assert DEPLOYMENT["spec"]["replicas"] == 2  # the render's own is untouched
    assert managed(DEPLOYMENT, ["/spec/nothing/here"]) == DEPLOYMENT


def test_convoy_s_label_and_render_annotation_are_never_left_out() -> None:
    stamped = {
        **DEPLOYMENT,
        "metadata": {
            **DEPLOYMENT["metadata"],
            "labels": {"convoy.dev/release": "web", "tier": "api"},
            "annotations": {"convoy.dev/render": "sha256:1", "team": "a"},
        },
    }

    sent = managed(stamped, ["/metadata/labels", "/metadata/annotations"])

    assert sent["metadata"]["labels"] == {"convoy.dev/release": "web"}
    assert sent["metadata"]["annotations"] == {"convoy.dev/render": "sha256:1"}


def test_an_update_puts_back_the_live_values_it_keeps() -> None:
    live = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replicas": 7}}
    pointers = ["/spec/replicas", "/spec/template/spec/containers/0/image", "/spec/paused"]
    form = managed(DEPLOYMENT, pointers)

    sent = restore(form, live, pointers)

    assert sent["spec"]["replicas"] == 7
    assert sent["spec"]["template"]["spec"]["containers"] == [{"name": "app", "image": "api:1"}]
    assert "paused" not in sent["spec"]  # live holds nothing there
    assert "replicas" not in form["spec"]  # the form is untouched


def test_drift_is_the_paths_where_live_differs_from_what_an_apply_leaves() -> None:
    live = {
        **DEPLOYMENT,
        "metadata": {**DEPLOYMENT["metadata"], "uid": "1", "labels": {"tier": "web"}},
        "spec": {**DEPLOYMENT["spec"], "replicas": 10, "paused": False},
        "status": {"replicas": 10},
    }

    assert differences(DEPLOYMENT, live) == [
        "/metadata/labels/tier",
        "/spec/replicas",
        "/spec/paused",
    ]
    assert differences(DEPLOYMENT, DEPLOYMENT) == []


def test_drift_rules_change_no_render() -> None:
    plain = parse_model(Release, release_data(), "r.yaml")
    ruled = parse_model(Release, release_data(drift={"mode": "Report", "ignore": []}), "r.yaml")

    assert "drift" not in plain.spec.model_dump(by_alias=True)
    assert ruled.spec.drift is not None and ruled.spec.drift.mode == DriftMode.REPORT
