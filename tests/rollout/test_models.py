"""The models of SPEC 1 and 10: defaults, refusals with one-line errors, the status layout."""

from datetime import timedelta
from typing import Any

import pytest

from convoy_batch.models import (
    Cluster,
    HealthStrategy,
    Release,
    ReleaseStatus,
    RollbackMode,
    RolloutState,
    SyncMode,
    parse_model,
)
from tests.support.rollout_builders import T0, R, record, rollout, wave
from tests.support.status_keys import STATUS_KEYS


def release_data(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "convoy.dev/v1alpha1",
        "kind": "Release",
        "metadata": {"name": "web"},
        "spec": {"cluster": "staging", "source": {"path": "apps/web"}, **spec},
    }


def cluster_data(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "convoy.dev/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "staging"},
        "spec": spec,
    }


def refusal(model: type[Release] | type[Cluster], data: dict[str, Any], source: str) -> str:
    with pytest.raises(ValueError) as info:
        parse_model(model, data, source)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_release_defaults_are_those_of_spec_1() -> None:
    spec = parse_model(Release, release_data(failurePolicy={}), "releases/web.yaml").spec

    assert spec.namespace == "default"
    assert spec.interval == timedelta(minutes=5)
    assert (spec.convoy, spec.pin, spec.vars) == (None, None, {})
    assert (spec.source.url, spec.source.ref) == (None, None)
    assert spec.sync_policy.mode == SyncMode.AUTO
    assert (spec.sync_policy.prune, spec.sync_policy.allow_empty) == (True, False)
    assert spec.sync_policy.waves.health_strategy == HealthStrategy.NONE
    assert spec.sync_policy.waves.timeout == timedelta(minutes=5)
    assert spec.failure_policy is not None
    assert spec.failure_policy.rollback == RollbackMode.AUTO
    assert spec.failure_policy.progress_deadline == timedelta(minutes=10)


def test_without_failure_policy_there_is_none() -> None:
    assert parse_model(Release, release_data(), "r.yaml").spec.failure_policy is None


def test_a_full_release_parses_with_camel_case_fields() -> None:
    data = release_data(
        interval="0",
        vars={"replicas": 3, "debug": True},
        syncPolicy={"mode": "Manual", "allowEmpty": True, "waves": {"healthStrategy": "Healthy"}},
        failurePolicy={"rollback": "Never", "progressDeadline": "1h30m"},
    )

    spec = parse_model(Release, data, "releases/web.yaml").spec

    assert spec.interval == timedelta(0)
    assert spec.vars == {"replicas": "3", "debug": "true"}
    assert spec.sync_policy.mode == SyncMode.MANUAL
    assert spec.failure_policy is not None
    assert spec.failure_policy.progress_deadline == timedelta(hours=1, minutes=30)
    assert parse_model(Release, data, "r.yaml").dump()["spec"]["failurePolicy"] == {
        "rollback": "Never",
        "progressDeadline": "1h30m",
    }


def test_an_unknown_field_is_named_with_its_file_and_path_in_one_line() -> None:
    data = release_data(syncPolicy={"waves": {"healthStrategy": "Healthy", "timout": "5m"}})

    message = refusal(Release, data, "releases/web.yaml")

    assert message == "releases/web.yaml: spec.syncPolicy.waves.timout: unknown field"


def test_a_missing_required_field_is_named() -> None:
    data = release_data()
    del data["spec"]["source"]

    assert refusal(Release, data, "releases/web.yaml") == (
        "releases/web.yaml: spec.source: required field missing"
    )


@pytest.mark.parametrize("name", ["Web", "web_1", "-web", "web-", "a" * 64, ""], ids=repr)
def test_a_name_that_is_not_a_dns_label_is_refused(name: str) -> None:
    data = release_data()
    data["metadata"]["name"] = name

    message = refusal(Release, data, "releases/x.yaml")

    assert message.startswith("releases/x.yaml: metadata.name: ")
    assert "DNS-1123" in message


def test_a_bad_duration_is_refused_with_its_path() -> None:
    message = refusal(Release, release_data(interval="5 minutes"), "releases/web.yaml")

    assert message.startswith("releases/web.yaml: spec.interval: not a duration")


def test_several_problems_are_listed_on_one_line() -> None:
    data = release_data(interval="x", color="red")

    message = refusal(Release, data, "releases/web.yaml")

    assert "spec.interval: not a duration" in message
    assert "spec.color: unknown field" in message


def test_a_cluster_with_both_directory_and_kubernetes_is_refused() -> None:
    data = cluster_data(directory={"path": "clusters/staging"}, kubernetes={})

    message = refusal(Cluster, data, "clusters/staging.yaml")

    assert (
        message == "clusters/staging.yaml: spec: at most one of directory and kubernetes may be set"
    )


@pytest.mark.parametrize(
    "spec",
    [{}, {"directory": {"path": "clusters/staging"}}, {"kubernetes": {"context": "kind"}}],
    ids=["no-target", "directory", "kubernetes"],
)
def test_a_cluster_has_at_most_one_target(spec: dict[str, Any]) -> None:
    cluster = parse_model(Cluster, cluster_data(**spec), "clusters/staging.yaml")

    assert cluster.spec.wave == 0
    assert cluster.name == "staging"


def test_the_status_dump_has_the_keys_of_spec_10_in_order() -> None:
    full = ReleaseStatus(
        rollout=rollout(RolloutState.PROGRESSING, R, T0),
        last_healthy=record(),
        waves=(wave("PreSync", T0), wave(0, T0)),
        history=(record(R, "rev1", T0),),
    )

    dumped = full.dump_status()

    assert list(dumped) == STATUS_KEYS
    assert list(dumped["rollout"]) == ["state", "renderRef", "startedAt", "reason", "message"]
    assert dumped["rollout"]["startedAt"] == "2026-11-29T12:00:00Z"
    assert dumped["waves"] == [
        {"wave": "PreSync", "renderRef": R, "startedAt": "2026-11-29T12:00:00Z"},
        {"wave": 0, "renderRef": R, "startedAt": "2026-11-29T12:00:00Z"},
    ]
    assert dumped["lastHandledForceSyncAt"] is None


def test_a_status_dump_loads_back_equal() -> None:
    full = ReleaseStatus(
        rollout=rollout(RolloutState.ROLLED_BACK, R, T0, "WaveTimeout"),
        waves=(wave("PreSync", T0), wave(1, T0)),
        last_handled_force_sync_at=T0,
    )

    assert ReleaseStatus.model_validate(full.dump_status()) == full
