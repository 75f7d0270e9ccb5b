"""Shared fixtures: a scenario harness over a real git repository and a directory cluster."""

from pathlib import Path

import pytest

from tests.scenario import Scenario


@pytest.fixture
def scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Scenario:
    return Scenario(tmp_path, capsys)
