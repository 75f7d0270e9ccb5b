"""The files of the state directory (SPEC 2): bad render blobs are absent, caches carry a
format, leftover temp files go, no symlink leads a store out of the state directory, and
everything is private (folders 0700, files 0600)."""

import errno
import hashlib
import json
import logging
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from convoy_batch.deployers.directory import DirectoryDeployer
from convoy_batch.errors import ApplyFailed, PruneFailed, StateFailed, UsageError
from convoy_batch.models import ObjectKey, ReleaseInventory, TickRecord
from convoy_batch.state.caches import ParseCache, TickStore
from convoy_batch.state.files import LEFTOVER_AGE
from convoy_batch.state.locks import Locks
from convoy_batch.store import InventoryStore, RenderStore, Stores
from tests.support.scenario import Scenario

DATA = b'[{"kind":"ConfigMap","name":"a"}]'
REF = f"sha256:{hashlib.sha256(DATA).hexdigest()}"
OTHER = b'[{"kind":"ConfigMap","name":"b"}]'
OTHER_REF = f"sha256:{hashlib.sha256(OTHER).hexdigest()}"


def config_map(name: str = "settings", namespace: str = "web") -> dict[str, object]:
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"a": "1"}}


def one_line_naming(text: str, path: Path) -> bool:
    return str(path) in text and "\n" not in text.strip()


# --- 1. a render blob that is not a readable file is absent -------------------------------


def test_a_render_blob_that_is_a_folder_is_absent_then_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = RenderStore(tmp_path)
    for ref in (REF, OTHER_REF):
        (store.path(ref) / "inside").mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger="convoy_batch"):
        assert store.get(REF) is None
    assert one_line_naming(caplog.text, store.path(REF))
    RenderStore(tmp_path).put(OTHER_REF, OTHER)  # the folder in its way is moved aside
    assert RenderStore(tmp_path).get(OTHER_REF) == OTHER


def test_an_unreadable_render_blob_is_absent_then_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = RenderStore(tmp_path)
    store.put(REF, DATA)
    real_open = os.open

    def refusing_open(path: object, flags: int, *args: int) -> int:
        if Path(str(path)) == store.path(REF):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", refusing_open)
    with caplog.at_level(logging.WARNING, logger="convoy_batch"):
        assert RenderStore(tmp_path).get(REF) is None
        RenderStore(tmp_path).put(REF, DATA)
    assert "permission denied" in caplog.text
    monkeypatch.undo()
    assert RenderStore(tmp_path).get(REF) == DATA


def test_gc_reports_a_blob_it_cannot_remove_and_removes_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = RenderStore(tmp_path)
    store.put(OTHER_REF, OTHER)
    (store.path(REF) / "inside").mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger="convoy_batch"):
        assert store.gc([]) == [OTHER_REF]
    assert one_line_naming(caplog.text, store.path(REF))


# --- 2. caches carry a format; another one is ignored and rewritten ------------------------

OTHER_SHAPES = {
    "no-format": {"status/web.yaml": ["abc", {"x": 1}]},
    "another-format": {"format": 1, "entries": {"status/web.yaml": ["abc", {"x": 1}]}},
    "entries-not-a-mapping": {"format": 2, "entries": [["status/web.yaml", "abc"]]},
    "not-a-mapping": [1, 2, 3],
}


@pytest.mark.parametrize("content", OTHER_SHAPES.values(), ids=OTHER_SHAPES.keys())
def test_a_parse_cache_of_another_format_is_ignored_and_rewritten(
    tmp_path: Path, content: object
) -> None:
    path = tmp_path / "cache" / "repo.json"
    path.parent.mkdir()
    path.write_text(json.dumps(content))
    cache = ParseCache(path)
    assert cache.get("status/web.yaml", "abc") is None
    cache.save()
    assert json.loads(path.read_text()) == {"format": 2, "entries": {}}


def test_a_parse_cache_round_trips_with_its_format(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "repo.json"
    cache = ParseCache(path)
    cache.put("status/web.yaml", "abc", {"x": 1})
    cache.save()
    assert json.loads(path.read_text())["format"] == 2
    assert ParseCache(path).get("status/web.yaml", "abc") == {"x": 1}


@pytest.mark.parametrize(
    "content",
    [
        pytest.param({"web": {"releaseBlob": "w" * 40}}, id="no-format"),
        pytest.param({"format": 2, "records": {"web": {"releaseBlob": "w" * 40}}}, id="another"),
        pytest.param({"format": 1, "records": ["web"]}, id="records-not-a-mapping"),
    ],
)
def test_tick_records_of_another_format_are_ignored_and_rewritten(
    tmp_path: Path, content: object
) -> None:
    store = TickStore(tmp_path)
    store.path.write_text(json.dumps(content))
    assert store.load("web") == TickRecord()
    store.save("db", TickRecord(release_blob="d" * 40))
    store.flush()
    written = json.loads(store.path.read_text())
    assert (written["format"], list(written["records"])) == (1, ["db"])


# --- 4. leftover temp files of atomic writes are removed when a tick opens -----------------


def leftover(folder: Path, name: str, age: float) -> Path:
    """A temp file as atomic_write makes them (``.<name>.<8 random>.tmp``), ``age`` old."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f".{name}.k3j_9x2a.tmp"
    path.write_bytes(b"half")
    then = time.time() - age
    os.utime(path, (then, then))
    return path


def test_opening_the_state_directory_removes_old_leftovers_of_atomic_writes(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    folders = [state, state / "renders", state / "inventory", state / "cache"]
    old = [leftover(folder, "x.json", LEFTOVER_AGE + 60) for folder in folders]
    fresh = [leftover(folder, "y.json", 1) for folder in folders]  # may be in flight
    kept = [state / "renders" / ".notes.tmp", state / "inventory" / "web.json.tmp"]
    for path in kept:
        path.write_text("not ours")
        os.utime(path, (0, 0))
    Stores.open(state)
    assert [p for p in old if p.exists()] == []
    assert all(p.exists() for p in fresh + kept)


def test_the_directory_cluster_removes_old_leftovers_where_it_writes(tmp_path: Path) -> None:
    cluster = DirectoryDeployer(tmp_path / "cluster")
    folder = cluster.path_of(
        ObjectKey(api_version="v1", kind="ConfigMap", namespace="web", name="x")
    ).parent
    old, fresh = leftover(folder, "x.yaml", LEFTOVER_AGE + 60), leftover(folder, "y.yaml", 1)
    cluster.apply([config_map()])
    assert (not old.exists(), fresh.exists()) == (True, True)


# --- 5. nothing is written through a symlink leading out of the state directory -----------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "web.json").write_text("outside\n")
    (folder / f"{REF.removeprefix('sha256:')}.json").write_bytes(b"outside")
    return folder


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


STORE_USES: dict[str, tuple[str, Callable[[Path], object]]] = {
    "inventory.load": ("inventory", lambda state: InventoryStore(state).load("web")),
    "inventory.save": (
        "inventory",
        lambda state: InventoryStore(state).save(ReleaseInventory(release="web")),
    ),
    "renders.put": ("renders", lambda state: RenderStore(state).put(REF, DATA)),
}


@pytest.mark.parametrize(("folder", "use"), STORE_USES.values(), ids=STORE_USES.keys())
def test_a_store_folder_leading_out_is_refused_in_one_line(
    tmp_path: Path, outside: Path, folder: str, use: Callable[[Path], object]
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / folder).symlink_to(outside)
    before = contents(outside)
    with pytest.raises(StateFailed) as caught:
        use(state)
    assert one_line_naming(str(caught.value), state / folder)
    assert contents(outside) == before


def test_gc_never_deletes_through_a_renders_folder_leading_out(
    tmp_path: Path, outside: Path
) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "renders").symlink_to(outside)
    before = contents(outside)
    assert RenderStore(tmp_path / "state").gc([]) == []
    assert contents(outside) == before


def test_an_inventory_file_leading_out_is_refused_in_one_line(
    tmp_path: Path, outside: Path
) -> None:
    store = InventoryStore(tmp_path / "state")
    store.root.mkdir(parents=True)
    store.path("web").symlink_to(outside / "web.json")
    for call in (lambda: store.load("web"), lambda: store.save(ReleaseInventory(release="web"))):
        with pytest.raises(StateFailed) as caught:
            call()
        assert one_line_naming(str(caught.value), store.path("web"))
    assert (outside / "web.json").read_text() == "outside\n"


def test_a_symlink_that_stays_inside_the_state_directory_is_followed(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "elsewhere").mkdir(parents=True)
    (state / "inventory").symlink_to(state / "elsewhere")
    InventoryStore(state).save(ReleaseInventory(release="web"))
    assert (state / "elsewhere" / "web.json").is_file()


def test_tick_records_leading_out_are_a_warning_and_never_written(
    tmp_path: Path, outside: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = TickStore(tmp_path / "state")
    store.path.parent.mkdir()
    store.path.symlink_to(outside / "web.json")
    with caplog.at_level(logging.WARNING, logger="convoy_batch"):
        assert store.load("web") == TickRecord()
        store.save("web", TickRecord(release_blob="w" * 40))
        store.flush()
    assert len(caplog.records) == 1
    assert one_line_naming(caplog.text, store.path)
    assert (outside / "web.json").read_text() == "outside\n"


def test_a_lock_file_leading_out_is_refused_in_one_line(tmp_path: Path, outside: Path) -> None:
    locks = Locks(tmp_path / "state")
    locks.root.mkdir(parents=True)
    (locks.root / "release-web.lock").symlink_to(outside / "created.lock")
    with pytest.raises(StateFailed, match="leading out"), locks.release("web"):
        pass
    assert not (outside / "created.lock").exists()


def test_release_lock_files_are_made_ahead_private_and_what_is_there_is_left(
    tmp_path: Path, outside: Path
) -> None:
    locks = Locks(tmp_path / "state")
    locks.make_release_locks(["web", "api", "../escape"])  # no locks folder yet; a bad name
    assert sorted(p.name for p in locks.root.iterdir()) == ["release-api.lock", "release-web.lock"]
    assert stat.S_IMODE(locks.root.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in locks.root.iterdir()} == {0o600}
    (locks.root / "release-db.lock").symlink_to(outside / "created.lock")
    locks.make_release_locks(["web", "db"])
    assert not (outside / "created.lock").exists()
    with locks.release("web"):
        pass


def test_lock_files_that_cannot_be_made_ahead_are_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    locks = Locks(tmp_path / "state")
    locks.root.parent.mkdir()
    locks.root.write_text("a file where the locks folder belongs\n")
    with caplog.at_level(logging.WARNING, logger="convoy_batch"):
        locks.make_release_locks([])  # nothing to reconcile: the folder is not even read
        assert caplog.records == []
        locks.make_release_locks(["web", "api"])
    assert len(caplog.records) == 1
    assert one_line_naming(caplog.text, locks.root)


def test_a_locks_folder_leading_out_stops_the_tick_before_it_starts(
    tmp_path: Path, outside: Path
) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "locks").symlink_to(outside)
    with pytest.raises(UsageError, match="locks"):
        Stores.open(tmp_path / "state")


def test_the_directory_cluster_never_writes_or_deletes_through_a_folder_leading_out(
    tmp_path: Path, outside: Path
) -> None:
    cluster = DirectoryDeployer(tmp_path / "cluster")
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "web").symlink_to(outside)
    (outside / "configmap").mkdir()
    (outside / "configmap" / "settings.yaml").write_text("outside: true\n")
    with pytest.raises(ApplyFailed, match="leads out"):
        cluster.apply([config_map()])
    key = ObjectKey(api_version="v1", kind="ConfigMap", namespace="web", name="settings")
    with pytest.raises(PruneFailed, match="leads out"):
        cluster.delete(key)
    assert (outside / "configmap" / "settings.yaml").read_text() == "outside: true\n"


def test_the_directory_cluster_never_replaces_an_object_file_leading_out(
    tmp_path: Path, outside: Path
) -> None:
    cluster = DirectoryDeployer(tmp_path / "cluster")
    key = ObjectKey(api_version="v1", kind="ConfigMap", namespace="web", name="settings")
    cluster.path_of(key).parent.mkdir(parents=True)
    (outside / "settings.yaml").write_text("outside: true\n")
    cluster.path_of(key).symlink_to(outside / "settings.yaml")
    with pytest.raises(ApplyFailed, match="leading out"):
        cluster.apply([config_map()])
    assert (outside / "settings.yaml").read_text() == "outside: true\n"


def test_a_directory_cluster_outside_the_state_directory_is_its_own_root(
    tmp_path: Path,
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    DirectoryDeployer(tmp_path / "link").apply([config_map()])
    assert (tmp_path / "real" / "web" / "configmap" / "settings.yaml").is_file()


# --- 6. permissions: the state directory 0700, its files 0600 -----------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_the_state_directory_is_made_0700_and_an_existing_one_tightened(tmp_path: Path) -> None:
    Stores.open(tmp_path / "new")
    assert mode(tmp_path / "new") == 0o700
    (tmp_path / "old").mkdir(mode=0o755)
    os.chmod(tmp_path / "old", 0o755)
    Stores.open(tmp_path / "old")
    assert mode(tmp_path / "old") == 0o700


def test_every_file_a_tick_writes_in_the_state_directory_is_0600(scenario: Scenario) -> None:
    scenario.app()
    assert scenario.reconcile("web", minutes=0).code == 0
    files = [p for p in scenario.state.rglob("*") if p.is_file()]
    kinds = {p.relative_to(scenario.state).parts[0] for p in files}
    assert {"renders", "inventory", "locks", "cache", "clusters", "ticks.json"} <= kinds
    assert {str(p): oct(mode(p)) for p in files if mode(p) != 0o600} == {}
    assert mode(scenario.state) == 0o700
