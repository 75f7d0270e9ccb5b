"""A damaged state directory (SPEC 2) through the CLI: a folder where a file belongs, a
file where a folder belongs, a symlink leading out of the state directory. Each gives one
line naming the path, never a traceback, and the Releases it does not concern go on.

Two Releases: ``api`` (the one a per-Release damage hits) and ``web``, reconciled after
it, which must still be reconciled and get its status committed.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.scenario import Scenario


def a_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not a folder\n")


def a_folder(path: Path) -> None:
    (path / "inside").mkdir(parents=True)


def leads_out(outside: Path, folder: bool) -> Callable[[Path], None]:
    def plant(path: Path) -> None:
        (outside / "x").mkdir(parents=True, exist_ok=True) if folder else a_file(outside)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(outside)

    return plant


@dataclass(frozen=True)
class Damage:
    where: str
    """The damaged path, relative to the state directory."""
    plant: str
    """a-file, a-folder, leads-out-folder, leads-out-file"""
    code: int
    errored: tuple[str, ...]
    """Releases with the error reason StateFailed (the others reconcile as usual)."""
    lines: int
    """Lines on stderr (warnings included), every one naming the path. A Release's error
    is two: the log line when it happens and the summary line at the end."""
    reason: str = "StateFailed"
    """The error reason of the Releases in ``errored`` (a directory cluster that cannot
    be written refuses the apply, as a server would)."""


DAMAGES = {
    # The render store: every Release that stores a render errors.
    "renders-is-a-file": Damage("renders", "a-file", 1, ("api", "web"), 4),
    "renders-leads-out": Damage("renders", "leads-out-folder", 1, ("api", "web"), 4),
    # The directory cluster's folder under the state directory.
    "clusters-leads-out": Damage(
        "clusters", "leads-out-folder", 1, ("api", "web"), 4, reason="ApplyFailed"
    ),
    # Inventories: the Release whose inventory it is errors (all of them for the folder).
    "inventory-file-is-a-folder": Damage("inventory/api.json", "a-folder", 1, ("api",), 2),
    "inventory-file-leads-out": Damage("inventory/api.json", "leads-out-file", 1, ("api",), 2),
    "inventory-is-a-file": Damage("inventory", "a-file", 1, ("api", "web"), 4),
    "inventory-leads-out": Damage("inventory", "leads-out-folder", 1, ("api", "web"), 4),
    # Hints: a warning, the tick goes on.
    "ticks-json-is-a-folder": Damage("ticks.json", "a-folder", 0, (), 1),
    "ticks-json-leads-out": Damage("ticks.json", "leads-out-file", 0, (), 1),
    "health-json-is-a-folder": Damage("health.json", "a-folder", 0, (), 1),
    "health-json-leads-out": Damage("health.json", "leads-out-file", 0, (), 1),
    "cache-is-a-file": Damage("cache", "a-file", 0, (), 1),
    "cache-leads-out": Damage("cache", "leads-out-folder", 0, (), 1),
    "cache-file-is-a-folder": Damage("cache/repo.json", "a-folder", 0, (), 1),
    # Locks: nothing can be done safely, the tick stops before it starts (exit 2).
    "locks-is-a-file": Damage("locks", "a-file", 2, (), 1),
    "locks-leads-out": Damage("locks", "leads-out-folder", 2, (), 1),
    # A lock file: the tick stops in one line (exit 1) until the runner goes on past it.
    "lock-file-is-a-folder": Damage("locks/release-api.lock", "a-folder", 1, ("api",), 2),
}


def plant(damage: Damage, scenario: Scenario, outside: Path) -> Path:
    path = scenario.state / damage.where
    planters = {
        "a-file": a_file,
        "a-folder": a_folder,
        "leads-out-folder": leads_out(outside, folder=True),
        "leads-out-file": leads_out(outside / "file.json", folder=False),
    }
    planters[damage.plant](path)
    return path


def snapshot(folder: Path) -> dict[str, bytes | None]:
    if not folder.exists():
        return {}
    return {str(p): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


def two_releases_with(scenario: Scenario, tmp_path: Path, damage: Damage) -> Path:
    scenario.app("api")
    scenario.app("web")
    scenario.state.mkdir()
    return plant(damage, scenario, tmp_path / "outside")


@pytest.fixture
def damaged(
    scenario: Scenario, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> Callable[..., Path]:
    """Reconcile both Releases over a damage: no traceback, the exit code, every line of
    stderr (and warning, which the CLI prints there) naming the damaged path (a Release's
    as ``<state>/...``), ``lines`` of them, and nothing changed outside the state
    directory."""

    def run(damage: Damage, lines: set[int] | None = None) -> Path:
        path = two_releases_with(scenario, tmp_path, damage)
        outside = snapshot(tmp_path / "outside")
        with caplog.at_level(logging.WARNING, logger="convoy_batch"):
            result = scenario.reconcile(minutes=0)
        assert "Traceback" not in result.err
        assert result.code == damage.code, result.err
        err = result.err.splitlines() + [r.getMessage() for r in caplog.records]
        # A Release's line names it as <state>/...: a status never says where the state is.
        shown = "<state>/" + path.relative_to(scenario.state).as_posix()
        assert all(str(path) in line or shown in line for line in err), err
        assert all("\n" not in line for line in err), err
        outcomes = [line for line in result.err.splitlines() if line.startswith(("api:", "web:"))]
        assert all(str(scenario.state) not in line for line in outcomes), outcomes
        assert len(err) in (lines or {damage.lines}), err
        assert snapshot(tmp_path / "outside") == outside, "written through a symlink leading out"
        caplog.clear()
        return path

    return run


@pytest.mark.parametrize("damage", DAMAGES.values(), ids=DAMAGES.keys())
def test_damage_gives_one_line_naming_the_path_never_a_traceback(
    damaged: Callable[..., Path], damage: Damage
) -> None:
    damaged(damage)


RUNS_ON = {k: d for k, d in DAMAGES.items() if d.code != 2}


@pytest.mark.parametrize("damage", RUNS_ON.values(), ids=RUNS_ON.keys())
def test_releases_the_damage_does_not_concern_go_on(
    scenario: Scenario, damaged: Callable[..., Path], damage: Damage
) -> None:
    damaged(damage, set(range(1, 9)))  # the previous test counts them
    for name in ("api", "web"):
        assert scenario.has_status(name), name
        reason = scenario.status(name)["lastAttempted"]["reason"]
        assert (reason == damage.reason) == (name in damage.errored), (name, reason)


def test_a_state_directory_that_is_a_file_stops_the_tick_in_one_line(scenario: Scenario) -> None:
    scenario.app("web")
    scenario.state.write_text("not a folder\n")
    result = scenario.reconcile(minutes=0)
    assert (result.code, result.err.count("\n")) == (2, 1)
    assert str(scenario.state) in result.err
    assert not scenario.has_status("web")


def test_a_damaged_cache_is_rebuilt_once_the_damage_is_gone(
    scenario: Scenario, damaged: Callable[..., Path]
) -> None:
    path = damaged(DAMAGES["cache-is-a-file"])
    path.unlink()
    assert scenario.reconcile(minutes=1).code == 0
    assert (scenario.state / "cache" / "repo.json").is_file()
