"""The observer (SPEC 11) over a real directory cluster, and ``health_changed``."""

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from convoy_batch.deployers.directory import DirectoryDeployer
from convoy_batch.errors import ClusterUnavailable
from convoy_batch.health.observer import health_changed, observe
from convoy_batch.models import (
    ANNOTATION_RENDER,
    Health,
    HealthState,
    InventoryEntry,
    ObjectKey,
    ReleaseInventory,
    key_of,
)
from convoy_batch.state.caches import ParseCache
from tests.support.fakes import FailingDeployer, deployment_status_ready, set_status

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
EARLIER = datetime(2026, 11, 29, 11, 0, 0, tzinfo=UTC)
R1 = "sha256:" + "1" * 64
R2 = "sha256:" + "2" * 64


def deployment(name: str, render_ref: str | None = R1) -> dict[str, Any]:
    annotations = {ANNOTATION_RENDER: render_ref} if render_ref else {}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "web", "annotations": annotations},
        "spec": {"replicas": 2},
    }


def inventory_of(*keys: ObjectKey, health: Health | None = None) -> ReleaseInventory:
    entries = tuple(
        InventoryEntry(key=k, wave=i, applied_render_ref=R1, health=health)
        for i, k in enumerate(keys)
    )
    return ReleaseInventory(release="web", entries=entries)


@pytest.fixture
def cluster(tmp_path: Path) -> DirectoryDeployer:
    return DirectoryDeployer(tmp_path / "cluster")


def test_observer_writes_health_with_the_render_ref_of_the_live_object(
    cluster: DirectoryDeployer,
) -> None:
    cluster.apply([deployment("web", R2)])
    key = key_of(deployment("web"))
    set_status(cluster.root, key, deployment_status_ready(2))

    (entry,) = observe(inventory_of(key), cluster, NOW).entries

    assert entry.health == Health(
        state=HealthState.CURRENT,
        assessed_render_ref=R2,
        message="Deployment: 2 of 2 replicas available",
        observed_at=NOW,
    )


def unschedulable_pod(cluster: DirectoryDeployer) -> ObjectKey:
    """A Pod stored 10 s before NOW that the scheduler could not place: InProgress within
    its scheduling window, Failed after."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "one", "namespace": "web"}}
    cluster.apply([pod])
    key = key_of(pod)
    stored = cluster.get(key)
    assert stored is not None
    stored["metadata"]["creationTimestamp"] = "2026-11-29T11:59:50Z"
    stored["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    cluster.write(cluster.path_of(key), stored)
    return key


def test_observer_measures_the_pod_scheduling_window_with_the_ticks_time(
    cluster: DirectoryDeployer,
) -> None:
    key = unschedulable_pod(cluster)

    def state_at(now: datetime) -> HealthState | None:
        (entry,) = observe(inventory_of(key), cluster, now).entries
        return entry.health.state if entry.health else None

    assert state_at(NOW) == HealthState.IN_PROGRESS
    assert state_at(NOW.replace(second=5)) == HealthState.FAILED


def test_observer_marks_a_missing_object_not_found_without_a_render_ref(
    cluster: DirectoryDeployer,
) -> None:
    key = key_of(deployment("gone"))
    (entry,) = observe(inventory_of(key), cluster, NOW).entries
    assert entry.health is not None
    assert (entry.health.state, entry.health.assessed_render_ref) == (HealthState.NOT_FOUND, None)
    assert entry.health.observed_at == NOW


def test_observer_gives_no_render_ref_for_an_object_without_the_annotation(
    cluster: DirectoryDeployer,
) -> None:
    cluster.apply([deployment("web", None)])
    (entry,) = observe(inventory_of(key_of(deployment("web"))), cluster, NOW).entries
    assert entry.health is not None
    assert entry.health.state == HealthState.IN_PROGRESS
    assert entry.health.assessed_render_ref is None


def test_observer_returns_a_new_inventory_and_keeps_everything_but_health(
    cluster: DirectoryDeployer,
) -> None:
    cluster.apply([deployment("web"), deployment("api")])
    old_health = Health(state=HealthState.FAILED, assessed_render_ref=R2, observed_at=EARLIER)
    before = inventory_of(key_of(deployment("web")), key_of(deployment("api")), health=old_health)
    snapshot = before.model_dump()

    after = observe(before, cluster, NOW)

    assert before.model_dump() == snapshot
    assert [e.model_copy(update={"health": None}) for e in after.entries] == [
        e.model_copy(update={"health": None}) for e in before.entries
    ]
    assert after.release == before.release
    assert all(e.health is not None and e.health.observed_at == NOW for e in after.entries)


def test_observer_matches_live_objects_by_identity_not_api_version(
    cluster: DirectoryDeployer,
) -> None:
    cluster.apply([deployment("web")])
    key = key_of(deployment("web")).model_copy(update={"api_version": "apps/v1beta2"})
    (entry,) = observe(inventory_of(key), cluster, NOW).entries
    assert entry.health is not None
    assert entry.health.assessed_render_ref == R1


def test_observer_reads_all_objects_in_one_call_and_not_for_an_empty_inventory(
    cluster: DirectoryDeployer,
) -> None:
    fake = FailingDeployer(cluster)
    fake.unavailable = True
    empty = ReleaseInventory(release="web")
    assert observe(empty, fake, NOW) == empty
    with pytest.raises(ClusterUnavailable):
        observe(inventory_of(key_of(deployment("web"))), fake, NOW)


def health(state: HealthState, ref: str | None = R1, at: datetime = NOW) -> Health:
    return Health(state=state, assessed_render_ref=ref, message=str(state), observed_at=at)


WEB = key_of(deployment("web"))
API = key_of(deployment("api"))
CURRENT = health(HealthState.CURRENT)
HEALTH_CHANGES: dict[str, tuple[ReleaseInventory, ReleaseInventory, bool]] = {
    "state-change": (
        inventory_of(WEB, health=health(HealthState.IN_PROGRESS)),
        inventory_of(WEB, health=CURRENT),
        True,
    ),
    "render-ref-change": (
        inventory_of(WEB, health=health(HealthState.CURRENT, R2)),
        inventory_of(WEB, health=CURRENT),
        True,
    ),
    "first-assessment": (inventory_of(WEB), inventory_of(WEB, health=CURRENT), True),
    "entry-added": (
        inventory_of(WEB, health=CURRENT),
        inventory_of(WEB, API, health=CURRENT),
        True,
    ),
    "entry-removed": (
        inventory_of(WEB, API, health=CURRENT),
        inventory_of(WEB, health=CURRENT),
        True,
    ),
    "entry-replaced": (inventory_of(WEB, health=CURRENT), inventory_of(API, health=CURRENT), True),
    "no-change": (
        inventory_of(WEB, API, health=CURRENT),
        inventory_of(WEB, API, health=CURRENT),
        False,
    ),
    "only-time-and-message-change": (
        inventory_of(
            WEB,
            health=Health(
                state=HealthState.CURRENT,
                assessed_render_ref=R1,
                message="old",
                observed_at=EARLIER,
            ),
        ),
        inventory_of(WEB, health=CURRENT),
        False,
    ),
    "entry-order-does-not-matter": (
        inventory_of(WEB, API, health=CURRENT),
        inventory_of(API, WEB, health=CURRENT),
        False,
    ),
}


@pytest.mark.parametrize(
    ("old", "new", "changed"), HEALTH_CHANGES.values(), ids=HEALTH_CHANGES.keys()
)
def test_health_changed_compares_state_and_render_ref_per_object(
    old: ReleaseInventory, new: ReleaseInventory, changed: bool
) -> None:
    assert health_changed(old, new) is changed


# --- remembered across ticks ---------------------------------------------------------------


def observed_with_memo(
    cluster: DirectoryDeployer, memo_path: Path, inventory: ReleaseInventory, now: datetime = NOW
) -> list[Health | None]:
    """The health of each entry on a tick of its own: the memo read from ``memo_path``
    and saved after, as a tick does."""
    memo = ParseCache(memo_path)
    entries = observe(inventory, cluster, now, memo=memo).entries
    memo.save()
    return [e.health for e in entries]


def doctored(memo_path: Path, state: str) -> None:
    """Every remembered observation says ``state`` (the signatures kept), so that its
    use shows."""
    data = json.loads(memo_path.read_text())
    for entry in data["entries"].values():
        seen = json.loads(entry[1])
        entry[1] = json.dumps([[state, *item[1:]] if item else item for item in seen])
    memo_path.write_text(json.dumps(data))


def test_an_observation_is_remembered_while_the_objects_files_are_unchanged(
    cluster: DirectoryDeployer, tmp_path: Path
) -> None:
    memo_path = tmp_path / "state" / "cache" / "observed-staging.json"
    cluster.apply([deployment("web"), deployment("api")])
    inventory = inventory_of(WEB, API, key_of(deployment("gone")))
    first = observed_with_memo(cluster, memo_path, inventory)
    assert [h.state if h else None for h in first] == [
        HealthState.IN_PROGRESS,
        HealthState.IN_PROGRESS,
        HealthState.NOT_FOUND,
    ]
    assert list(json.loads(memo_path.read_text())["entries"]) == ["web"]  # by Release
    doctored(memo_path, "Failed")
    recalled = observed_with_memo(cluster, memo_path, inventory)
    assert [h.state if h else None for h in recalled] == [HealthState.FAILED] * 3
    # A file written since (a controller's status): the whole Release is read again.
    set_status(cluster.root, API, deployment_status_ready(2))
    again = observed_with_memo(cluster, memo_path, inventory)
    assert [h.state if h else None for h in again] == [
        HealthState.IN_PROGRESS,
        HealthState.CURRENT,
        HealthState.NOT_FOUND,
    ]
    # An object created where none was: read again too.
    doctored(memo_path, "Failed")
    cluster.apply([deployment("gone")])
    created = observed_with_memo(cluster, memo_path, inventory)
    assert [h.state if h else None for h in created] == [
        HealthState.IN_PROGRESS,
        HealthState.CURRENT,
        HealthState.IN_PROGRESS,
    ]


def test_an_observation_that_does_not_recall_reads_every_object_and_remembers_it(
    cluster: DirectoryDeployer, tmp_path: Path
) -> None:
    memo_path = tmp_path / "state" / "cache" / "observed-staging.json"
    cluster.apply([deployment("web")])
    observed_with_memo(cluster, memo_path, inventory_of(WEB))
    doctored(memo_path, "Failed")
    memo = ParseCache(memo_path)
    (read,) = observe(inventory_of(WEB), cluster, NOW, memo=memo, recall=False).entries
    memo.save()
    assert read.health is not None and read.health.state == HealthState.IN_PROGRESS
    (recalled,) = observed_with_memo(cluster, memo_path, inventory_of(WEB))
    assert recalled is not None and recalled.state == HealthState.IN_PROGRESS  # rewritten


def test_a_memo_entry_of_other_objects_or_not_an_observation_is_not_used(
    cluster: DirectoryDeployer, tmp_path: Path
) -> None:
    memo_path = tmp_path / "state" / "cache" / "observed-staging.json"
    cluster.apply([deployment("web"), deployment("api")])
    observed_with_memo(cluster, memo_path, inventory_of(WEB, API))
    doctored(memo_path, "Failed")
    # Another inventory of the same Release (an object less): not its observation.
    (alone,) = observed_with_memo(cluster, memo_path, inventory_of(WEB))
    assert alone is not None and alone.state == HealthState.IN_PROGRESS
    for junk in ('[["Splendid", null, "x"]]', '[["Failed", 7, "x"]]', '{"a": 1}', "[1]"):
        data = json.loads(memo_path.read_text())
        data["entries"]["web"][1] = junk
        memo_path.write_text(json.dumps(data))
        (seen,) = observed_with_memo(cluster, memo_path, inventory_of(WEB))
        assert seen is not None and seen.state == HealthState.IN_PROGRESS, junk


def test_a_pods_scheduling_window_is_measured_every_time_with_a_memo(
    cluster: DirectoryDeployer, tmp_path: Path
) -> None:
    memo_path = tmp_path / "state" / "cache" / "observed-staging.json"
    cluster.apply([deployment("web")])
    inventory = inventory_of(unschedulable_pod(cluster), WEB)
    pod_now, _ = observed_with_memo(cluster, memo_path, inventory, NOW)
    assert pod_now is not None and pod_now.state == HealthState.IN_PROGRESS
    pod_later, web_later = observed_with_memo(cluster, memo_path, inventory, NOW.replace(second=5))
    assert pod_later is not None and pod_later.state == HealthState.FAILED
    assert web_later is not None and web_later.state == HealthState.IN_PROGRESS
    (remembered,) = json.loads(memo_path.read_text())["entries"].values()
    assert json.loads(remembered[1])[0] is None  # the Pod: assessed each time
