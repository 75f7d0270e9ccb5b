"""Verification by metrics on the real API server: a render whose Deployment is
Available waits for its analysis (a local web endpoint the test controls); once its
measurements succeed it is Succeeded, and a later render whose measurement fails is
rolled back on the server to the verified one."""

from collections.abc import Iterator

import pytest

from tests.k8s.k8s_scenario import KubeScenario
from tests.test_verification import Endpoint, verification


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
