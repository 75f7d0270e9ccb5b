"""The state directory stores (SPEC 2): atomic writes, render store, inventory, locks, ticks."""

import hashlib
import logging
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

import convoy_batch
from convoy_batch.models import InventoryEntry, ObjectKey, ReleaseInventory, TickRecord
from convoy_batch.state.caches import HealthJournal, TickStore
from convoy_batch.state.files import Writer, fsync_dir, os_problem
from convoy_batch.state.locks import LockBusy, Locks
from convoy_batch.store import Inventories, InventoryStore, RenderStore, atomic_write

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def blob(text: str) -> tuple[str, bytes]:
    data = text.encode()
    return f"sha256:{hashlib.sha256(data).hexdigest()}", data


REF_A, DATA_A = blob('[{"kind":"ConfigMap","name":"a"}]')
REF_B, DATA_B = blob('[{"kind":"ConfigMap","name":"b"}]')
REF_C, DATA_C = blob('[{"kind":"ConfigMap","name":"c"}]')


# --- atomic_write -------------------------------------------------------------------------


def test_atomic_write_replaces_the_content_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "file.json"
    atomic_write(target, b"old")
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new"
    assert os.listdir(target.parent) == ["file.json"]


def test_atomic_write_writes_chunks_as_they_come_and_keeps_the_old_file_if_they_fail(
    tmp_path: Path,
) -> None:
    target = tmp_path / "records.json"
    atomic_write(target, iter([b'{"a":', b"1}", b"\n"]))
    assert target.read_bytes() == b'{"a":1}\n'

    def broken() -> Iterator[bytes]:
        yield b'{"b":'
        raise ValueError("the encoder failed half way")

    with pytest.raises(ValueError):
        atomic_write(target, broken())
    assert target.read_bytes() == b'{"a":1}\n'
    assert os.listdir(tmp_path) == ["records.json"]


def test_atomic_write_makes_files_0600_and_new_folders_0700(tmp_path: Path) -> None:
    target = tmp_path / "new" / "file"
    atomic_write(target, b"first")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    target.chmod(0o644)  # written by an older version
    atomic_write(target, b"again")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


# --- Writer (background atomic writes) ----------------------------------------------------


def test_background_writes_to_one_path_land_in_order_the_newest_last(tmp_path: Path) -> None:
    writer = Writer()
    target = tmp_path / "deep" / "file.json"
    for n in range(50):
        writer.write(target, f"version {n}".encode())
    writer.drain()
    assert target.read_bytes() == b"version 49"
    assert writer.pending(target) is None
    assert os.listdir(target.parent) == ["file.json"]


def test_a_failed_background_write_is_handed_back_by_drain_once(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    writer = Writer()
    target = tmp_path / "a-file" / "inventory.json"
    writer.write(target, b"{}")
    ((path, exc),) = writer.drain()
    assert path == target and isinstance(exc, OSError)
    assert writer.drain() == []  # reported once
    assert writer.pending(target) is None  # not served from memory as if it had landed


def test_settle_raises_a_failure_a_background_thread_met(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    writer = Writer()
    target = tmp_path / "a-file" / "render.json"
    writer.write(target, b"{}")
    with pytest.raises(OSError):
        writer.settle(target)
    assert writer.drain() == []  # settle reported it
    writer.write(tmp_path / "fine.json", b"{}")
    writer.settle(tmp_path / "fine.json")
    assert (tmp_path / "fine.json").read_bytes() == b"{}"


def test_a_folder_fsync_that_fails_is_a_failed_write_not_swallowed(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        fsync_dir(tmp_path / "gone")  # once swallowed with every other OSError
    fsync_dir(tmp_path)  # a folder that can be synced


def test_a_failed_atomic_write_names_the_file_and_the_operation(tmp_path: Path) -> None:
    (tmp_path / "inventory").write_text("a file where a folder belongs")
    target = tmp_path / "inventory" / "web.json"
    with pytest.raises(OSError) as failed:
        atomic_write(target, b"{}")
    assert os_problem(target, failed.value) == (
        f"{tmp_path / 'inventory'}: mkdir: a file where a folder belongs"
    )


def test_after_close_a_write_is_made_at_once(tmp_path: Path) -> None:
    writer = Writer()
    writer.close()
    writer.write(tmp_path / "late.json", b"late")
    assert (tmp_path / "late.json").read_bytes() == b"late"


def test_the_render_store_reads_its_own_background_writes(tmp_path: Path) -> None:
    writer = Writer()
    renders = RenderStore(tmp_path, writer)
    renders.put(REF_A, DATA_A)
    assert renders.get(REF_A) == DATA_A  # landed or not yet
    writer.close()
    assert RenderStore(tmp_path).get(REF_A) == DATA_A


# --- RenderStore --------------------------------------------------------------------------


def test_render_store_gives_back_what_was_put(tmp_path: Path) -> None:
    store = RenderStore(tmp_path)
    store.put(REF_A, DATA_A)
    assert store.has(REF_A)
    assert store.get(REF_A) == DATA_A
    assert (tmp_path / "renders" / f"{REF_A.removeprefix('sha256:')}.json").read_bytes() == DATA_A


def test_render_store_answers_none_for_an_absent_ref(tmp_path: Path) -> None:
    store = RenderStore(tmp_path)
    assert not store.has(REF_A)
    assert store.get(REF_A) is None


def test_render_store_refuses_content_that_does_not_hash_to_the_ref(tmp_path: Path) -> None:
    store = RenderStore(tmp_path)
    with pytest.raises(ValueError, match="does not hash"):
        store.put(REF_A, DATA_B)
    assert not store.has(REF_A)


def test_render_store_does_not_rewrite_a_valid_blob(tmp_path: Path) -> None:
    store = RenderStore(tmp_path)
    store.put(REF_A, DATA_A)
    inode = store.path(REF_A).stat().st_ino
    store.put(REF_A, DATA_A)
    assert store.path(REF_A).stat().st_ino == inode


def test_a_corrupt_blob_is_reported_and_treated_as_absent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = RenderStore(tmp_path)
    store.put(REF_A, DATA_A)
    store.path(REF_A).write_bytes(DATA_A + b" ")
    with caplog.at_level(logging.WARNING, logger="convoy_batch"):
        assert store.get(REF_A) is None
    assert REF_A in caplog.text
    assert "does not hash" in caplog.text
    assert not store.has(REF_A)


def test_a_corrupt_blob_is_replaced_by_the_next_put(tmp_path: Path) -> None:
    store = RenderStore(tmp_path)
    store.path(REF_A).parent.mkdir(parents=True)
    store.path(REF_A).write_bytes(b"garbage")
    store.put(REF_A, DATA_A)
    assert store.get(REF_A) == DATA_A


def test_gc_keeps_exactly_the_refs_it_is_told_to_keep(tmp_path: Path) -> None:
    store = RenderStore(tmp_path)
    for ref, data in ((REF_A, DATA_A), (REF_B, DATA_B), (REF_C, DATA_C)):
        store.put(ref, data)
    removed = store.gc([REF_B, "sha256:" + "0" * 64])
    assert removed == sorted([REF_A, REF_C])
    assert [store.has(ref) for ref in (REF_A, REF_B, REF_C)] == [False, True, False]


def test_gc_of_an_empty_store_removes_nothing(tmp_path: Path) -> None:
    assert RenderStore(tmp_path).gc([]) == []


BAD_REFS = [
    pytest.param("sha256:../../etc/passwd", id="dots"),
    pytest.param("sha256:" + "A" * 64, id="upper-case-hex"),
    pytest.param("md5:" + "a" * 64, id="other-algorithm"),
    pytest.param("/" + "a" * 64, id="absolute"),
    pytest.param("sha256:" + "a" * 63, id="short"),
]


@pytest.mark.parametrize("ref", BAD_REFS)
def test_render_store_refuses_refs_that_are_not_sha256(tmp_path: Path, ref: str) -> None:
    store = RenderStore(tmp_path)
    for call in (lambda: store.get(ref), lambda: store.has(ref), lambda: store.put(ref, b"")):
        with pytest.raises(ValueError, match="not a renderRef"):
            call()


# --- names that would escape the state directory ---------------------------------------

BAD_NAMES = [
    pytest.param("../web", id="parent"),
    pytest.param("a/b", id="separator"),
    pytest.param(".hidden", id="dot-file"),
    pytest.param("", id="empty"),
    pytest.param("/etc/passwd", id="absolute"),
]


def name_users(state: Path) -> dict[str, Callable[[str], object]]:
    inventories, ticks, locks = InventoryStore(state), TickStore(state), Locks(state)

    def lock(name: str) -> None:
        with locks.release(name):
            pass

    return {
        "inventory.load": inventories.load,
        "inventory.save": lambda name: inventories.save(ReleaseInventory(release=name)),
        "ticks.load": ticks.load,
        "ticks.save": lambda name: ticks.save(name, TickRecord()),
        "locks.release": lock,
    }


@pytest.mark.parametrize("name", BAD_NAMES)
def test_stores_refuse_names_that_would_leave_their_folder(tmp_path: Path, name: str) -> None:
    state = tmp_path / "state"
    for use, call in name_users(state).items():
        with pytest.raises(ValueError, match="not a"):
            call(name)
            pytest.fail(f"{use} accepted {name!r}")
    assert list(tmp_path.rglob("*")) == []


def test_inventory_names_must_be_release_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="DNS-1123"):
        InventoryStore(tmp_path).load("Web_App")


# --- InventoryStore -----------------------------------------------------------------------


def inventory() -> ReleaseInventory:
    key = ObjectKey(api_version="apps/v1", kind="Deployment", namespace="web", name="web")
    return ReleaseInventory(
        release="web",
        entries=(InventoryEntry(key=key, wave=1, applied_render_ref=REF_A, prune=False),),
    )


def test_inventory_round_trips(tmp_path: Path) -> None:
    store = InventoryStore(tmp_path)
    store.save(inventory())
    assert store.load("web") == inventory()
    assert b'"appliedRenderRef"' in store.path("web").read_bytes()


def test_a_tick_lets_go_of_an_inventory_only_once_the_file_holds_what_it_knows(
    tmp_path: Path,
) -> None:
    view = Inventories(InventoryStore(tmp_path), HealthJournal(tmp_path))
    assert view.get("web") == ReleaseInventory(release="web")  # no file yet
    view.note(inventory())
    view.let_go("web")  # not stored yet: kept
    assert view.get("web") == inventory()
    view.save("web")
    view.let_go("web")
    assert "web" not in view.known
    assert view.get("web") == inventory()  # read again from its file


def test_a_missing_inventory_is_empty(tmp_path: Path) -> None:
    assert InventoryStore(tmp_path).load("web") == ReleaseInventory(release="web")


@pytest.mark.parametrize(
    ("content", "says"),
    [
        pytest.param(b"{not json", "inventory/web.json", id="not-json"),
        pytest.param(b'{"release": "web", "entries": 3}', "entries", id="invalid-field"),
        pytest.param(b'{"release": "db"}', "release", id="another-release"),
    ],
)
def test_an_unreadable_inventory_is_empty_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes, says: str
) -> None:
    store = InventoryStore(tmp_path)
    store.path("web").parent.mkdir(parents=True)
    store.path("web").write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="convoy_batch"):
        assert store.load("web") == ReleaseInventory(release="web")
    assert len(caplog.records) == 1
    assert "web.json" in caplog.text
    assert says in caplog.text
    assert "\n" not in caplog.records[0].getMessage()


# --- Locks --------------------------------------------------------------------------------

HOLDER = """
import sys
from pathlib import Path
from convoy_batch.state.locks import Locks
locks = Locks(Path(sys.argv[1]))
with (locks.repo() if sys.argv[2] == "repo" else locks.release(sys.argv[2])):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def hold(tmp_path: Path) -> Iterator[Callable[[str], None]]:
    """Start another process holding a lock until the test ends."""
    children: list[subprocess.Popen[str]] = []
    package_root = Path(convoy_batch.__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(package_root)}

    def start(which: str) -> None:
        child = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(tmp_path), which],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        children.append(child)
        assert child.stdout is not None
        assert child.stdout.readline() == "held\n"

    yield start
    for child in children:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()


def test_a_release_lock_held_by_another_process_is_busy(
    tmp_path: Path, hold: Callable[[str], None]
) -> None:
    hold("web")
    locks = Locks(tmp_path)
    with pytest.raises(LockBusy), locks.release("web"):
        pass
    with locks.release("db"):
        pass


def test_the_repo_lock_held_by_another_process_is_busy(
    tmp_path: Path, hold: Callable[[str], None]
) -> None:
    hold("repo")
    with pytest.raises(LockBusy), Locks(tmp_path).repo(timeout=0):
        pass


def test_a_lock_is_free_again_once_released(tmp_path: Path) -> None:
    locks = Locks(tmp_path)
    with locks.release("web"):
        pass
    with locks.release("web"):
        entered = True
    assert entered


# --- TickStore ----------------------------------------------------------------------------


def test_tick_record_round_trips(tmp_path: Path) -> None:
    record = TickRecord(
        last_reconcile_at=T0,
        release_blob="a" * 40,
        source_revision="b" * 40,
        health=(
            ("apps/Deployment/web/web", "Current", REF_A),
            ("/Service/web/web", "NotFound", None),
        ),
    )
    store = TickStore(tmp_path)
    store.save("web", record)
    assert store.load("web") == record
    assert TickStore(tmp_path).load("web") == TickRecord()
    store.flush()
    assert TickStore(tmp_path).load("web") == record


def test_tick_records_of_two_processes_are_merged_on_flush(tmp_path: Path) -> None:
    first, second = TickStore(tmp_path), TickStore(tmp_path)
    first.load("web")
    second.save("db", TickRecord(release_blob="d" * 40))
    second.flush()
    first.save("web", TickRecord(release_blob="w" * 40))
    first.flush()
    fresh = TickStore(tmp_path)
    assert fresh.load("db").release_blob == "d" * 40
    assert fresh.load("web").release_blob == "w" * 40


def test_a_stored_tick_record_is_let_go_once_a_new_one_is_pending(tmp_path: Path) -> None:
    """A tick of 10,000 holds one record per Release: the stored one goes once the new
    one is saved. Forgetting the Release afterwards still removes it from the file."""
    first = TickStore(tmp_path)
    first.save("web", TickRecord(release_blob="a" * 40))
    first.save("db", TickRecord(release_blob="d" * 40))
    first.flush()
    store = TickStore(tmp_path)
    assert store.load("web").release_blob == "a" * 40
    assert store.stored("web") is not None

    store.save("web", TickRecord(release_blob="b" * 40))

    assert store.stored("web") is None and store.stored("db") is not None
    assert store.load("web").release_blob == "b" * 40
    store.forget("web")
    store.flush()
    fresh = TickStore(tmp_path)
    assert fresh.load("web") == TickRecord() and fresh.load("db").release_blob == "d" * 40


def test_a_missing_tick_record_has_the_defaults(tmp_path: Path) -> None:
    assert TickStore(tmp_path).load("web") == TickRecord()


def test_an_unreadable_tick_record_has_the_defaults_and_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = TickStore(tmp_path)
    store.path.write_text('{"format": 1, "records": {"web": {"lastReconcileAt": "yesterday"}}}')
    with caplog.at_level(logging.WARNING, logger="convoy_batch"):
        assert store.load("web") == TickRecord()
    assert "lastReconcileAt" in caplog.text
