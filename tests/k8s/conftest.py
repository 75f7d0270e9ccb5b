"""Fixtures for the tests against a real kube-apiserver: one control plane per session."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.k8s.k8s_scenario import KubeScenario
from tests.k8s.testenv import KubeEnv, start, stop


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeEnv]:
    env = start(tmp_path_factory.mktemp("k8s"))
    try:
        yield env
    finally:
        stop(env)


@pytest.fixture
def kscenario(kube: KubeEnv, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> KubeScenario:
    return KubeScenario(kube, tmp_path, capsys)
