"""Shared fixtures: a scenario harness over a real git repository and a directory cluster,
and the throwaway PostgreSQL server (one per session, started only when a test asks)."""

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import needs, pg, workers
from tests.support.chart_servers import OciRegistry, docker_registry
from tests.support.renderer_tools import Tools, real_helm
from tests.support.scenario import Scenario

TESTS = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    for marker, what in needs.MARKERS.items():
        config.addinivalue_line("markers", f"{marker}: needs {what}")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test's markers from its folder and fixtures (:mod:`tests.support.needs`), then
    its group and place for the workers (:mod:`tests.support.workers`)."""
    for item in items:
        folders = item.path.relative_to(TESTS).parts[:-1]
        for marker in sorted(needs.markers_of(item, folders)):
            item.add_marker(marker)
    workers.schedule(items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    needs.running(item)
    try:
        return (yield)
    finally:
        needs.running(None)


@pytest.fixture
def scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Scenario:
    return Scenario(tmp_path, capsys)


@pytest.fixture
def helm_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tools:
    """The test's PATH with the real helm on it, each call noted."""
    tools = Tools(tmp_path / "bin", monkeypatch)
    tools.recorded("helm", real_helm())
    return tools


@pytest.fixture
@needs.needs("registry")
def registries(tmp_path: Path, helm_tools: Tools) -> Iterator[Callable[..., OciRegistry]]:
    """``registries(folder, login=None)``: an OCI registry started in ``tmp_path/folder``
    (with a login, when given); every one stopped after the test."""
    started: list[OciRegistry] = []

    def start(folder: str, login: tuple[str, str] | None = None) -> OciRegistry:
        found = OciRegistry(docker_registry(), real_helm(), tmp_path / folder, login)
        started.append(found)
        found.start()
        return found

    yield start
    for found in started:
        found.stop()


@pytest.fixture(scope="session")
@needs.needs("postgres")
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
