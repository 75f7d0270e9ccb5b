"""Verification by metrics on the real API server: a render whose Deployment is
Available waits for its analysis (a local web endpoint the test controls); once its
measurements succeed it is Succeeded, and a later render whose measurement fails is
rolled back on the server to the verified one. A Job of the source verifies a render
once the server's Job controller (the test plays its pod) completes it."""

from collections.abc import Iterator

import pytest

from tests.engine.test_verification import SMOKE, Endpoint, job_spec, verification
from tests.k8s.k8s_scenario import KubeScenario


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    e = Endpoint()
    yield e
    e.close()


def test_a_render_that_fails_verification_is_rolled_back_on_the_server(
    kscenario: KubeScenario, endpoint: Endpoint
) -> None:
    s, name = kscenario, "verified"
    s.app(name, spec_extra=verification(endpoint.url))
    assert s.reconcile(name, minutes=0).code == 0
    s.ready(name)
    for minute in (1, 2, 3):
        assert s.reconcile(name, minutes=minute).code == 0
    assert s.status(name)["rollout"]["state"] == "Succeeded"
    assert endpoint.requests == 3

    s.app(name, image="2.0", spec_extra=verification(endpoint.url))
    assert s.reconcile(name, minutes=4).code == 0
    assert s.deployment_image(name) == f"example/{name}:2.0"
    s.ready(name)
    endpoint.value = 0.5
    result = s.reconcile(name, minutes=5)

    assert result.code == 0, result.err
    rollout = s.status(name)["rollout"]
    assert (rollout["state"], rollout["reason"]) == ("RolledBack", "VerificationFailed")
    assert s.deployment_image(name) == f"example/{name}:1.0"


def test_a_job_of_the_source_verifies_a_render_on_the_server(kscenario: KubeScenario) -> None:
    s, name = kscenario, "smoked"
    s.commit({"checks/smoke.yaml": SMOKE}, "the smoke test")
    s.app(name, spec_extra=job_spec())
    assert s.reconcile(name, minutes=0).code == 0
    s.ready(name)
    ref = s.status(name)["rollout"]["renderRef"].removeprefix("sha256:")[:8]

    assert s.reconcile(name, minutes=1).code == 0  # applied on the server

    job = s.kube.batch.read_namespaced_job(f"smoke-{ref}", name)
    assert job.metadata.labels["convoy.dev/release"] == name
    s.kube.job_succeeded(name, f"smoke-{ref}")
    assert s.reconcile(name, minutes=2).code == 0
    assert s.status(name)["rollout"]["state"] == "Succeeded"
