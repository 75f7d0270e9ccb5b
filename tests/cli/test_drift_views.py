"""Drift in the views (README, "Drift rules"): ``status`` names what drifted and since
when, ``diff --live`` marks the paths a Release's drift rules ignore instead of counting
them as changes, and the Dagster check and materialization of a drifted Release say so
while the check still passes. Paths only: a Secret's values never show.

Scenario tests on the directory cluster through the CLI (and, for Dagster, its own
in-process run over the same repository and state directory)."""

import json
import warnings
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pytest

from convoy_batch.assets import ConvoyResource, tick_job, tick_run_config
from convoy_batch.models import (
    Attempt,
    DriftedObject,
    DriftReport,
    ReleaseStatus,
    Rollout,
    RolloutState,
)
from convoy_batch.reasons import Reason
from convoy_batch.rollout.glance import Glance, glance, headline, summary_line
from convoy_batch.timefmt import format_time
from tests.engine.test_drift_cluster import (
    IGNORE_REPLICAS,
    REPORT,
    SEEDED,
    config,
    deployment,
    edit,
    settled,
)
from tests.support.scenario import T0, Scenario

SECRET = "apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\ndata: {password: czNjcjN0}\n"
"""``s3cr3t``; a hand edit makes it ``bGVha2Vk`` (``leaked``)."""
VALUES = ("czNjcjN0", "bGVha2Vk", "s3cr3t", "leaked")


# --- status ------------------------------------------------------------------------------


def test_status_says_what_drifted_and_since_when(scenario: Scenario) -> None:
    s = scenario
    settled(s, REPORT)
    edit(config(s), "env: staging", "env: edited-by-hand")
    s.reconcile("--all", minutes=2)
    ref = s.status()["rollout"]["renderRef"].removeprefix("sha256:")[:12]

    [line] = s.cli("status", "web").out.splitlines()
    [row] = json.loads(s.cli("status", "web", "--output", "json").out)

    assert line.split()[:5] == [
        "web", "Succeeded", "Synced", f"render={ref}", "since=2026-11-29T12:00:00Z",
    ]  # fmt: skip
    assert line.endswith(
        " (drifted since 2026-11-29T12:02:00Z: ConfigMap web/web-config /data/env)"
    ), line
    assert row["state"] == "Succeeded"  # drift never feeds the verdict
    assert row["drift"] == {
        "objects": [
            {"kind": "ConfigMap", "namespace": "web", "name": "web-config", "paths": ["/data/env"]}
        ],
        "since": "2026-11-29T12:02:00Z",
    }
    assert row["lastDriftCorrection"] is None


def test_status_carries_the_last_drift_correction_and_no_drift_once_corrected(
    scenario: Scenario,
) -> None:
    s = scenario
    settled(s, "")
    edit(deployment(s), "replicas: 2", "replicas: 5")
    s.reconcile("--all", minutes=2)  # Correct mode: written back

    [line] = s.cli("status", "web").out.splitlines()
    [row] = json.loads(s.cli("status", "web", "--output", "json").out)

    assert "drifted" not in line
    assert line.endswith("since=2026-11-29T12:00:00Z"), line
    assert row["drift"] is None
    assert row["lastDriftCorrection"] == {
        "time": "2026-11-29T12:02:00Z",
        "objects": [
            {"kind": "Deployment", "namespace": "web", "name": "web", "paths": ["/spec/replicas"]}
        ],
    }


def test_status_of_a_release_that_never_drifted_has_null_drift_fields(
    scenario: Scenario,
) -> None:
    s = scenario
    settled(s, "")
    [row] = json.loads(s.cli("status", "web", "--output", "json").out)
    assert (row["drift"], row["lastDriftCorrection"]) == (None, None)


# --- diff --live -------------------------------------------------------------------------

REPLICAS_IGNORED = "    /spec/replicas: 10  # ignored (drift rules); the render sets 2"


def test_diff_live_marks_an_ignored_path_and_counts_no_change(scenario: Scenario) -> None:
    s = scenario
    settled(s, IGNORE_REPLICAS)
    edit(deployment(s), "replicas: 2", "replicas: 10")  # an autoscaler at peak load

    result = s.cli("diff", "web", "--live", "--exit-code")

    assert result.code == 0, result.out  # no change: the next tick writes nothing
    lines = result.out.splitlines()
    assert lines[1] == ("web: no change, 1 ignored (drift rules) against the live cluster"), (
        result.out
    )
    assert "  # Deployment.apps web/web (ignored paths only)" in lines
    assert REPLICAS_IGNORED in lines
    assert not any(line.lstrip().startswith(("-", "+")) for line in lines[2:]), result.out
    data = json.loads(s.cli("diff", "web", "--live", "--output", "json").out)
    assert data["releases"][0]["changes"] == [
        {
            "object": "Deployment.apps web/web",
            "change": "ignored",
            "diff": [REPLICAS_IGNORED.strip()],
            "ignored": ["/spec/replicas"],
        }
    ]


def test_diff_live_still_reports_a_change_beside_an_ignored_path(scenario: Scenario) -> None:
    s = scenario
    settled(s, IGNORE_REPLICAS)
    edit(deployment(s), "replicas: 2", "replicas: 10")
    edit(deployment(s), "example/web:1.0", "example/web:hotfix")  # not ignored

    result = s.cli("diff", "web", "--live", "--exit-code")

    assert result.code == 1, result.out
    lines = result.out.splitlines()
    assert lines[1] == "web: 0 added, 1 changed, 0 removed against the live cluster", result.out
    at = lines.index("  ~ Deployment.apps web/web")
    shown = lines[at + 1 :]
    assert "    -      - image: example/web:hotfix" in shown, result.out
    assert "    +      - image: example/web:1.0" in shown, result.out
    assert not any("replicas" in line and line.lstrip()[:1] in "-+" for line in shown)
    assert shown[-1] == REPLICAS_IGNORED, result.out  # after the object's diff


def test_diff_live_shows_an_object_ignored_whole_as_ignored(scenario: Scenario) -> None:
    s = scenario
    seeded = SEEDED
    settled(s, "", extra={"seed.yaml": seeded})
    assert s.cli("diff", "web", "--live").out.splitlines()[1] == (
        "web: no change against the live cluster"
    )
    edit(s.object_path("web", "configmap", "seed"), "value: first", "value: theirs")

    result = s.cli("diff", "web", "--live", "--exit-code")

    assert result.code == 0, result.out
    lines = result.out.splitlines()
    assert lines[1] == "web: no change, 1 ignored (drift rules) against the live cluster"
    at = lines.index("  # ConfigMap web/seed (ignored whole)")
    assert lines[at + 1] == (
        "    (the whole object: created once, never updated)  # ignored (drift rules)"
    )
    assert "theirs" not in result.out


def test_diff_live_masks_a_secret_s_ignored_values(scenario: Scenario) -> None:
    s = scenario
    rule = "  drift:\n    ignore:\n    - paths: [/data/password]\n      target: {kind: Secret}\n"
    settled(s, rule, extra={"secret.yaml": SECRET})
    edit(s.object_path("web", "secret", "creds"), "czNjcjN0", "bGVha2Vk")

    result = s.cli("diff", "web", "--live", "--exit-code")
    markdown = s.cli("diff", "web", "--live", "--output", "markdown")

    assert result.code == 0, result.out
    assert "    /data/password: ***  # ignored (drift rules); the render sets ***" in (
        result.out.splitlines()
    )
    assert "# Secret web/creds (ignored paths only)" in markdown.out
    for text in (result.out, markdown.out):
        for value in VALUES:
            assert value not in text, text


# --- Dagster -----------------------------------------------------------------------------


@pytest.fixture
def quiet_beta() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        yield


def dagster_tick(
    s: Scenario, minutes: int
) -> tuple[dg.AssetMaterialization, dict[str, Any], dg.AssetCheckEvaluation]:
    """A tick of every Release under Dagster, in process: its one materialization, that
    materialization's metadata values, and its one check result."""
    at = format_time(T0.replace(minute=minutes))
    resource = ConvoyResource(repo=str(s.root), state=str(s.state), now=at)
    run = tick_job.execute_in_process(
        run_config=tick_run_config(all_releases=True),
        instance=dg.DagsterInstance.ephemeral(),
        resources={"convoy": resource},
    )
    (event,) = run.get_asset_materialization_events()
    materialization = event.step_materialization_data.materialization
    (check,) = run.get_asset_check_evaluations()
    return materialization, {k: v.value for k, v in materialization.metadata.items()}, check


def test_a_drifted_release_s_check_passes_and_says_what_drifted(
    scenario: Scenario, quiet_beta: None
) -> None:
    s = scenario
    settled(s, REPORT, extra={"secret.yaml": SECRET})
    edit(s.object_path("web", "secret", "creds"), "czNjcjN0", "bGVha2Vk")

    materialization, metadata, check = dagster_tick(s, minutes=2)

    note = "drifted since 2026-11-29T12:02:00Z: Secret web/creds /data/password"
    assert metadata["state"] == "Succeeded"
    assert metadata["drift"] == note
    assert "lastDriftCorrection" not in metadata
    assert materialization.description is not None
    assert materialization.description.endswith(f"; {note}")
    assert check.passed  # drift never feeds the verdict
    assert check.description is not None and check.description.endswith(f"; {note}")
    assert {k: v.value for k, v in check.metadata.items()}["drift"] == note
    told = [materialization.description, check.description, json.dumps(metadata)]
    for text in told:
        for value in VALUES:
            assert value not in text, text


def test_a_corrected_drift_is_named_in_the_materialization(
    scenario: Scenario, quiet_beta: None
) -> None:
    s = scenario
    settled(s, "")
    edit(deployment(s), "replicas: 2", "replicas: 5")

    _, metadata, check = dagster_tick(s, minutes=2)

    assert metadata["lastDriftCorrection"] == (
        "corrected drift at 2026-11-29T12:02:00Z: Deployment web/web /spec/replicas"
    )
    assert "drift" not in metadata
    assert check.passed
    assert "drifted" not in (check.description or "")


def test_drift_never_changes_the_glance_only_its_line() -> None:
    rollout = Rollout(
        state=RolloutState.SUCCEEDED, render_ref="sha256:aa", started_at=T0, reason="Healthy"
    )
    attempt = Attempt(time=T0, reason=Reason.SYNCED, message="in sync")
    clean = ReleaseStatus(rollout=rollout, last_attempted=attempt)
    drifted = DriftedObject(kind="Secret", namespace="web", name="creds", paths=("/data/password",))
    status = clean.model_copy(update={"drift": DriftReport(objects=(drifted,), since=T0)})

    assert glance(status) is glance(clean) is Glance.PASSED
    assert summary_line(clean) == headline(clean) == "Succeeded (Healthy): Synced: in sync"
    assert summary_line(status) == (
        "Succeeded (Healthy): Synced: in sync; "
        "drifted since 2026-11-29T12:00:00Z: Secret web/creds /data/password"
    )
