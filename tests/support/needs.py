"""What a test needs beyond Python, git and the files of the repository, as pytest
markers, so that ``pytest -m`` (and ``make check``) can leave it out.

A test never sets these by hand. Its folder sets them (:data:`FOLDERS`), or a fixture that
starts the thing does, by :func:`needs` under its ``@pytest.fixture``; ``tests/conftest.py``
adds them at collection. A helper that starts the thing calls :func:`require`, which
fails a test whose folder and fixtures did not say so: a new test cannot forget.
"""

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest

MARKERS = {
    "k8s": "a real kube-apiserver, etcd and controller manager (tests/k8s)",
    "dagster": "a Dagster process, instance or webserver (tests/dagster)",
    "crash": "real tick processes killed at system calls or raced by commits (tests/crash)",
    "postgres": "a throwaway PostgreSQL server (Debian's postgresql)",
    "prometheus": "a Prometheus server on loopback (Debian's prometheus)",
    "registry": "an OCI registry on loopback (Debian's docker-registry)",
    "slow": "two seconds or more on a quiet machine, and none of the above",
}
"""Each marker and what it stands for (registered by ``tests/conftest.py``)."""

FOLDERS = ("k8s", "crash", "dagster")
"""The folders under ``tests/`` whose every test needs the marker of the same name."""

F = TypeVar("F", bound=Callable[..., Any])

_ATTRIBUTE = "_convoy_needs"
_running: list[pytest.Item] = []


def needs(*markers: str) -> Callable[[F], F]:
    """Under ``@pytest.fixture``: every test that uses the fixture gets ``markers``."""
    unknown = set(markers) - MARKERS.keys()
    assert not unknown, f"unknown markers {sorted(unknown)}"

    def mark(fixture: F) -> F:
        setattr(fixture, _ATTRIBUTE, (*getattr(fixture, _ATTRIBUTE, ()), *markers))
        return fixture

    return mark


def markers_of(item: pytest.Item, folders: tuple[str, ...]) -> set[str]:
    """The markers ``item`` needs: from the folders it is under (``folders``: the parts of
    its path below ``tests/``) and from every fixture it uses."""
    found = {part for part in folders if part in FOLDERS}
    for definitions in fixture_definitions(item):
        for definition in definitions:
            found.update(getattr(definition.func, _ATTRIBUTE, ()))
    return found


def fixture_definitions(item: pytest.Item) -> list[Sequence[Any]]:
    """The definitions of each fixture ``item`` uses, itself or through another, the
    closest last (pytest's ``FixtureDef``s)."""
    info = getattr(item, "_fixtureinfo", None)
    return list(info.name2fixturedefs.values()) if info else []


def running(item: pytest.Item | None) -> None:
    """The test now set up or run (``tests/conftest.py``), for :func:`require`."""
    _running[:] = [item] if item else []


def require(marker: str) -> None:
    """Fails the running test unless it carries ``marker``: called by what starts a server,
    so a test cannot reach one without its marker."""
    if _running and _running[0].get_closest_marker(marker) is None:
        folder = f" or put the test under tests/{marker}/" if marker in FOLDERS else ""
        pytest.fail(
            f"{_running[0].nodeid} starts what '{marker}' stands for without the marker: "
            f"start it from a fixture under @needs({marker!r}){folder}",
            pytrace=False,
        )
