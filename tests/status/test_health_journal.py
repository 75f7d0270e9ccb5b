"""The health journal (``<state>/health.json``): a tick that only sees health change
records it in one file instead of rewriting every inventory; a record applies only to the
inventory file it was observed over, and a journal that cannot be used sends health back
into the inventory files, so none is lost."""

import json
import logging
from pathlib import Path

import pytest

from convoy_batch.models import HealthState, ReleaseInventory
from convoy_batch.store import Stores
from tests.support.scenario import Scenario


def inventory_as_stored(state: Path, name: str = "web") -> ReleaseInventory:
    """The inventory a tick reads: the file, with the journal's health when it applies."""
    stores = Stores.open(state)
    try:
        return stores.inventories.load(name, stores.health)
    finally:
        stores.writer.close()


def states(inventory: ReleaseInventory) -> set[HealthState | None]:
    return {e.health.state if e.health else None for e in inventory.entries}


def rolled_out(scenario: Scenario) -> Path:
    """web and api applied (the first tick: their inventories written, no health yet)."""
    scenario.app("web")
    scenario.app("api")
    assert scenario.reconcile(minutes=0).code == 0
    return scenario.state / "inventory" / "web.json"


def test_a_tick_that_sees_only_health_change_rewrites_no_inventory(scenario: Scenario) -> None:
    path = rolled_out(scenario)
    before = {p.name: (p.stat().st_ino, p.read_bytes()) for p in path.parent.iterdir()}
    assert states(json_inventory(path)) == {None}
    scenario.deployment_ready("web")
    assert scenario.reconcile("web", "api", minutes=1).code == 0
    assert scenario.status("web")["rollout"]["state"] == "Succeeded"
    after = {p.name: (p.stat().st_ino, p.read_bytes()) for p in path.parent.iterdir()}
    assert after == before
    records = json.loads((scenario.state / "health.json").read_text())["records"]
    assert set(records) == {"web", "api"}
    assert states(inventory_as_stored(scenario.state)) == {HealthState.CURRENT}
    # Read back by the next tick: nothing changed, nothing to commit.
    head = scenario.head()
    assert scenario.reconcile("web", minutes=2).code == 0
    assert scenario.head() == head
    assert scenario.status("web")["rollout"]["state"] == "Succeeded"


def json_inventory(path: Path) -> ReleaseInventory:
    return ReleaseInventory.model_validate(json.loads(path.read_text()))


def test_a_record_applies_only_to_the_inventory_file_it_was_observed_over(
    scenario: Scenario,
) -> None:
    path = rolled_out(scenario)
    scenario.deployment_ready("web")
    assert scenario.reconcile("web", minutes=1).code == 0
    journal = scenario.state / "health.json"
    kept = journal.read_bytes()
    scenario.app("web", image="2.0")
    assert scenario.reconcile("web", minutes=2).code == 0  # a new render: the file rewritten
    assert "web" not in json.loads(journal.read_text())["records"]
    # The old record back over the new file, saying Failed so that its use would show.
    journal.write_bytes(kept.replace(b'"Current"', b'"Failed"'))
    stored = inventory_as_stored(scenario.state)
    assert stored == json_inventory(path)
    assert HealthState.FAILED not in states(stored)


@pytest.mark.parametrize("damage", ["a-folder", "another-format", "not-json"])
def test_a_journal_that_cannot_be_used_sends_health_to_the_inventory_files(
    scenario: Scenario, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = rolled_out(scenario)
    journal = scenario.state / "health.json"
    if damage == "a-folder":
        (journal / "inside").mkdir(parents=True)
    else:
        journal.write_text('{"format": 99, "records": []}' if damage == "another-format" else "{")
    scenario.deployment_ready("web")
    with caplog.at_level(logging.WARNING, logger="convoy_batch"):
        assert scenario.reconcile("web", minutes=1).code == 0
    assert scenario.status("web")["rollout"]["state"] == "Succeeded"
    if damage == "a-folder":  # unusable: the health goes into the inventory file
        assert states(json_inventory(path)) == {HealthState.CURRENT}
        assert [r.getMessage() for r in caplog.records if str(journal) in r.getMessage()]
    else:  # ignored and rewritten
        assert states(json_inventory(path)) == {None}
        assert json.loads(journal.read_text())["format"] == 1
    assert states(inventory_as_stored(scenario.state)) == {HealthState.CURRENT}


def test_a_record_that_applies_but_does_not_validate_is_ignored_with_a_warning(
    scenario: Scenario, caplog: pytest.LogCaptureFixture
) -> None:
    path = rolled_out(scenario)
    scenario.deployment_ready("web")
    assert scenario.reconcile("web", minutes=1).code == 0
    journal = scenario.state / "health.json"
    data = json.loads(journal.read_text())
    data["records"]["web"]["health"][0]["state"] = "Splendid"
    journal.write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING, logger="convoy_batch"):
        stored = inventory_as_stored(scenario.state)
    assert stored == json_inventory(path)  # the file's own health, nothing of the record
    assert states(stored) == {None}
    warned = [r.getMessage() for r in caplog.records if "health journal record" in r.getMessage()]
    assert len(warned) == 1 and str(path) in warned[0] and "state" in warned[0]


def test_a_full_resync_that_sees_the_same_health_writes_no_cache_back(
    scenario: Scenario,
) -> None:
    rolled_out(scenario)
    scenario.deployment_ready("web")
    assert scenario.reconcile("web", "api", minutes=1).code == 0
    assert scenario.reconcile(minutes=2, extra=("--all",)).code == 0
    # The parse caches (last-change.json is kept by its own rule, at HEAD's commit).
    caches = sorted(p for p in (scenario.state / "cache").glob("*.json") if p.stem != "last-change")
    assert "observed-staging.json" in [p.name for p in caches]
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in caches}
    assert scenario.reconcile(minutes=3, extra=("--all",)).code == 0  # read, not recalled
    after = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in caches}
    assert after == before
