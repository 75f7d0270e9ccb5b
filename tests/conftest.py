"""Shared fixtures: a scenario harness over a real git repository and a directory cluster,
and the throwaway PostgreSQL server (one per session, started only when a test asks)."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import pg
from tests.scenario import Scenario


@pytest.fixture
def scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Scenario:
    return Scenario(tmp_path, capsys)


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pg.PgServer]:
    """``scripts/pg-testenv`` on a free loopback port; skipped without PostgreSQL's
    binaries (``make test`` installs them), failed instead under ``CI=true``."""
    folder = tmp_path_factory.mktemp("pg")
    try:
        server = pg.start(folder)
    except pg.PgUnavailable as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"PostgreSQL unavailable: {exc}", pytrace=False)
        pytest.skip(f"PostgreSQL unavailable: {exc}")
    try:
        yield server
    finally:
        pg.stop(folder)
