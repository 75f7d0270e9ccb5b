"""The crash injector itself: it kills the whole process group before the call it is
set to, and numbers calls across the processes and threads that load it."""

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.crash import harness as h

pytestmark = pytest.mark.crash

CRASHING = """
import os, subprocess, sys
child = subprocess.Popen(["sleep", "60"])
open("pid", "w").write(str(child.pid))
open("a", "w").write("x")
os.replace("a", "b")
print("survived")
"""

RECORDING = """
import os, subprocess, threading
def other():
    with open("t.txt", "w") as f:
        f.write("t")
thread = threading.Thread(target=other)
thread.start()
thread.join()
with open("m.txt", "w") as f:
    f.write("m")
subprocess.run(["git", "init", "-q", "r"], check=True)
"""


def running(pid: int) -> bool:
    """Whether the process runs (a zombie, waiting for its parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def run_python(folder: Path, code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=folder,
        env={**h.tick_env(), **env},
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
    )


def test_the_injector_kills_the_process_group_before_the_call(shim: Path, tmp_path: Path) -> None:
    # "a" is created with open(O_CREAT): create #1 is "pid", #2 "a"; rename #1 is the replace.
    proc = run_python(tmp_path, CRASHING, h.shim_env(tmp_path, shim, "rename", 1))
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "survived" not in proc.stdout
    assert (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    (line,) = h.shim_log(tmp_path)
    assert line.startswith("rename 1 ") and "rename(a, b)" in line
    child = int((tmp_path / "pid").read_text())
    deadline = time.monotonic() + 5
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not running(child), "the tick's child outlived the crash"


def test_the_injector_numbers_calls_across_processes_and_threads(
    shim: Path, tmp_path: Path
) -> None:
    proc = run_python(tmp_path, RECORDING, h.shim_env(tmp_path, shim))
    assert proc.returncode == 0, proc.stderr
    events = h.shim_log(tmp_path)
    by_kind: dict[str, list[int]] = {}
    for line in events:
        kind, n = line.split(" ", 2)[:2]
        by_kind.setdefault(kind, []).append(int(n))
    for kind, numbers in by_kind.items():
        assert sorted(numbers) == list(range(1, len(numbers) + 1)), kind
    parsed = [line.split(" ", 5) for line in events]  # kind n pid tid process call
    own = [p for p in parsed if p[0] == "write" and p[5].split(",")[0].endswith(".txt")]
    assert len(own) == 2 and len({p[2] for p in own}) == 1, own
    assert len({p[3] for p in own}) == 2, own  # two threads of one process
    from_git = [p for p in parsed if p[4] == "git"]
    assert {p[0] for p in from_git} >= {"mkdir", "create"}, from_git
    assert {p[2] for p in from_git}.isdisjoint({own[0][2]})
    assert (tmp_path / "r" / ".git").is_dir()


def test_a_tick_forked_from_the_server_counts_and_crashes_as_one_started_afresh(
    shim: Path, tmp_path: Path
) -> None:
    # The tick forks from a server that loaded the injector without settings; the child
    # reads them once its environment is set: recorded, then killed at its first mkdir.
    h.git(tmp_path, "init", "-q", "repo")
    h.git(tmp_path / "repo", "commit", "-q", "--allow-empty", "-m", "empty")
    recorded = h.run_tick(tmp_path, 0, shim=shim)
    assert recorded.code == 0, recorded.err
    first = next(line for line in recorded.events if line.startswith("mkdir 1 "))
    shutil.rmtree(tmp_path / "state")
    crashed = h.run_tick(tmp_path, 0, shim=shim, kind="mkdir", n=1)
    assert crashed.killed and crashed.hit is not None, crashed
    assert crashed.hit.split(" ", 5)[5] == first.split(" ", 5)[5]
    assert not (tmp_path / "state").exists()
