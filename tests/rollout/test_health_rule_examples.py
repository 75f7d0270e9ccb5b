"""The documented health rules (docs/guides/health-rules.md), read from the page itself,
on realistic objects of cert-manager, Argo Rollouts and Flux's helm-controller: the docs
and the tests cannot drift apart."""

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from convoy_batch.health.cel import Programs, Rule, evaluate, rules_for
from convoy_batch.models import HealthCheck, HealthState, Release, parse_model

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "health-rules.md"
CURRENT, IN_PROGRESS, FAILED = HealthState.CURRENT, HealthState.IN_PROGRESS, HealthState.FAILED


def documented_checks() -> list[dict[str, Any]]:
    """Every healthChecks entry of the guide, in its YAML blocks."""
    section = GUIDE.read_text().split("# Health rules (CEL)\n", 1)[1]
    checks: list[dict[str, Any]] = []
    for block in re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL):
        data = yaml.safe_load(block)
        if isinstance(data, dict):
            data = data["spec"]["healthChecks"]
        checks.extend(data)
    return checks


def release_with_documented_rules() -> Release:
    data = {
        "apiVersion": "convoy.dev/v1alpha1",
        "kind": "Release",
        "metadata": {"name": "web"},
        "spec": {
            "cluster": "staging",
            "source": {"path": "apps/web"},
            "healthChecks": documented_checks(),
        },
    }
    return parse_model(Release, data, "releases/web.yaml")


RULES = rules_for(release_with_documented_rules(), None, Programs())


def rule_for(obj: dict[str, Any]) -> Rule:
    rule = RULES.find(obj)
    assert rule is not None, f"the guide has no rule for {obj['kind']}"
    return rule


def test_the_guide_documents_a_rule_for_each_example_kind() -> None:
    kinds = {(c["apiVersion"], c["kind"]) for c in documented_checks()}
    assert {
        ("cert-manager.io/v1", "Certificate"),
        ("argoproj.io/v1alpha1", "Rollout"),
        ("helm.toolkit.fluxcd.io/v2", "HelmRelease"),
    } <= kinds


def meta(name: str, generation: int) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": "web",
        "generation": generation,
        "uid": "0b1f6a8c-3c1d-4a5e-9d62-6f2a7c1e9b10",
        "resourceVersion": "48213",
        "labels": {"convoy.dev/release": "web"},
        "annotations": {"convoy.dev/render": "sha256:" + "a" * 64},
    }


def condition(type_: str, status: str, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-11-29T11:58:02Z",
        **extra,
    }


# --- cert-manager Certificate -------------------------------------------------------------


def certificate(*conditions: dict[str, Any], generation: int = 1, **status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": meta("web-tls", generation),
        "spec": {
            "secretName": "web-tls",
            "dnsNames": ["web.example.com"],
            "issuerRef": {
                "name": "letsencrypt",
                "kind": "ClusterIssuer",
                "group": "cert-manager.io",
            },
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
        },
    }
    if conditions or status:
        obj["status"] = {"conditions": list(conditions), **status}
    return obj


NOT_YET = condition(
    "Ready",
    "False",
    "DoesNotExist",
    "Issuing certificate as Secret does not exist",
    observedGeneration=1,
)
ISSUING = condition(
    "Issuing",
    "True",
    "DoesNotExist",
    "Issuing certificate as Secret does not exist",
    observedGeneration=1,
)
ISSUE_FAILED = condition(
    "Issuing",
    "False",
    "Failed",
    "The certificate request has failed to complete and will be retried: Failed to wait for "
    'order resource "web-tls-1-2950853443" to become ready: order is in "errored" state',
    observedGeneration=1,
)
CERT_READY = condition(
    "Ready", "True", "Ready", "Certificate is up to date and has not expired", observedGeneration=1
)
ISSUED = {
    "notBefore": "2026-11-29T10:58:02Z",
    "notAfter": "2027-02-27T10:58:01Z",
    "renewalTime": "2027-01-28T10:58:01Z",
    "revision": 1,
}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(certificate(), IN_PROGRESS, id="just-created-no-status"),
        pytest.param(certificate(NOT_YET, ISSUING), IN_PROGRESS, id="issuing"),
        pytest.param(
            certificate(
                NOT_YET,
                ISSUE_FAILED,
                failedIssuanceAttempts=1,
                lastFailureTime="2026-11-29T11:59:40Z",
            ),
            FAILED,
            id="issuance-failed",
        ),
        pytest.param(certificate(CERT_READY, **ISSUED), CURRENT, id="issued"),
        pytest.param(
            certificate({**CERT_READY, "observedGeneration": 1}, generation=2, **ISSUED),
            IN_PROGRESS,
            id="ready-for-an-older-generation",
        ),
        pytest.param(
            certificate(CERT_READY, {**ISSUING, "reason": "Renewing"}, **ISSUED),
            IN_PROGRESS,
            id="renewing-while-ready",
        ),
    ],
)
def test_the_certificate_rule(obj: dict[str, Any], expected: HealthState) -> None:
    assert evaluate(rule_for(obj), obj)[0] == expected


# --- Argo Rollouts Rollout -----------------------------------------------------------------


def rollout(generation: int = 4, **status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": meta("web", generation),
        "spec": {
            "replicas": 5,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "example/web:2.0"}]},
            },
            "strategy": {
                "canary": {"steps": [{"setWeight": 20}, {"pause": {}}, {"setWeight": 60}]}
            },
        },
    }
    if status:
        obj["status"] = status
    return obj


COUNTS = {
    "replicas": 5,
    "updatedReplicas": 5,
    "readyReplicas": 5,
    "availableReplicas": 5,
    "currentPodHash": "6d4f8c7b9",
    "stableRS": "6d4f8c7b9",
    "currentStepIndex": 3,
    "selector": "app=web",
}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(rollout(), IN_PROGRESS, id="just-created-no-status"),
        pytest.param(
            rollout(**COUNTS, phase="Healthy", observedGeneration="4"), CURRENT, id="healthy"
        ),
        pytest.param(
            rollout(**COUNTS, phase="Healthy", observedGeneration="3"),
            IN_PROGRESS,
            id="healthy-for-an-older-generation",
        ),
        pytest.param(
            rollout(
                **{**COUNTS, "updatedReplicas": 1, "currentStepIndex": 1},
                phase="Paused",
                message="CanaryPauseStep",
                observedGeneration="4",
                pauseConditions=[
                    {"reason": "CanaryPauseStep", "startTime": "2026-11-29T11:59:00Z"}
                ],
            ),
            IN_PROGRESS,
            id="paused-canary",
        ),
        pytest.param(
            rollout(
                **{**COUNTS, "updatedReplicas": 1},
                phase="Progressing",
                message="more replicas need to be updated",
                observedGeneration="4",
            ),
            IN_PROGRESS,
            id="progressing",
        ),
        pytest.param(
            rollout(
                **COUNTS,
                phase="Degraded",
                abort=True,
                observedGeneration="4",
                message="RolloutAborted: Rollout aborted update to revision 3",
            ),
            FAILED,
            id="aborted",
        ),
    ],
)
def test_the_rollout_rule(obj: dict[str, Any], expected: HealthState) -> None:
    assert evaluate(rule_for(obj), obj)[0] == expected


# --- Flux HelmRelease ----------------------------------------------------------------------


def helm_release(
    *conditions: dict[str, Any], generation: int = 3, observed: int = 3
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": meta("web", generation),
        "spec": {
            "interval": "10m",
            "chart": {
                "spec": {
                    "chart": "web",
                    "version": "1.2.x",
                    "sourceRef": {"kind": "HelmRepository", "name": "charts"},
                }
            },
            "upgrade": {"remediation": {"retries": 1, "strategy": "rollback"}},
            "values": {"replicaCount": 2},
        },
    }
    if conditions:
        obj["status"] = {
            "observedGeneration": observed,
            "conditions": list(conditions),
            "lastAttemptedRevision": "1.2.0",
            "lastAttemptedGeneration": generation,
            "history": [{"chartName": "web", "chartVersion": "1.2.0", "version": 3}],
        }
    return obj


UPGRADED = "Helm upgrade succeeded for release web/web.v3 with chart web@1.2.0"
"""The message of both conditions a HelmRelease sets after an upgrade succeeded."""
HR_READY = condition("Ready", "True", "UpgradeSucceeded", UPGRADED)
RELEASED = condition("Released", "True", "UpgradeSucceeded", UPGRADED)
RECONCILING = condition("Reconciling", "True", "Progressing", "Fulfilling prerequisites")
HR_UNKNOWN = condition("Ready", "Unknown", "Progressing", "Fulfilling prerequisites")
UPGRADE_FAILED = condition(
    "Ready",
    "False",
    "UpgradeFailed",
    "Helm upgrade failed for release web/web with chart web@1.2.0: context deadline exceeded",
)
STALLED = condition("Stalled", "True", "RetriesExceeded", "Failed to upgrade after 1 attempt(s)")
ROLLED_BACK = [
    condition(
        "Ready",
        "False",
        "RollbackSucceeded",
        "Helm rollback to previous release web/web.v2 with chart web@1.1.0 succeeded",
    ),
    condition(
        "Remediated",
        "True",
        "RollbackSucceeded",
        "Helm rollback to previous release web/web.v2 with chart web@1.1.0 succeeded",
    ),
]
WAITING = condition("Ready", "False", "DependencyNotReady", "dependency 'web/db' is not ready")


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(helm_release(), IN_PROGRESS, id="just-created-no-status"),
        pytest.param(helm_release(HR_READY, RELEASED), CURRENT, id="upgraded"),
        pytest.param(helm_release(RECONCILING, HR_UNKNOWN), IN_PROGRESS, id="reconciling"),
        pytest.param(helm_release(UPGRADE_FAILED), FAILED, id="upgrade-failed"),
        pytest.param(helm_release(UPGRADE_FAILED, STALLED), FAILED, id="stalled"),
        pytest.param(helm_release(*ROLLED_BACK), FAILED, id="remediated-by-rollback"),
        pytest.param(helm_release(WAITING), IN_PROGRESS, id="waiting-for-a-dependency"),
        pytest.param(
            helm_release(HR_READY, RELEASED, generation=4, observed=3),
            IN_PROGRESS,
            id="ready-for-an-older-generation",
        ),
    ],
)
def test_the_helm_release_rule(obj: dict[str, Any], expected: HealthState) -> None:
    assert evaluate(rule_for(obj), obj)[0] == expected


# --- the section's opening example and its advice ----------------------------------------


def sealed_secret(synced: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "apiVersion": "bitnami.com/v1alpha1",
        "kind": "SealedSecret",
        "metadata": meta("db-credentials", 1),
        "spec": {"encryptedData": {"password": "AgBy8hCF..."}, "template": {"type": "Opaque"}},
        "status": {
            "observedGeneration": 1,
            "conditions": [condition("Synced", synced, reason, message)],
        },
    }


def test_the_sealed_secret_rule_of_flux_s_library_works_as_it_is() -> None:
    good = sealed_secret("True", "", "")
    bad = sealed_secret("False", "ErrUnsealFailed", "no key could decrypt secret (password)")
    assert evaluate(rule_for(good), good)[0] == CURRENT
    assert evaluate(rule_for(bad), bad)[0] == FAILED


def test_filter_all_holds_on_a_certificate_that_is_not_issuing_as_the_guide_warns() -> None:
    text = "status.conditions.filter(e, e.type == 'Issuing').all(e, e.status == 'True')"
    assert text in GUIDE.read_text()
    check = HealthCheck(
        api_version="cert-manager.io/v1", kind="Certificate", in_progress=text, current="true"
    )
    rule = Rule("the guide's warning", check, Programs())
    assert evaluate(rule, certificate(CERT_READY, **ISSUED))[0] == IN_PROGRESS
