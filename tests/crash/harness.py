"""The crash harness: a world of five Releases on the directory cluster one tick before
its interesting moment, a crash injector preloaded into a real tick process (and its git
children), and the comparison of what plain ticks make of it afterwards.

The injector is ``crashshim.c`` (next to this file), compiled once per test session with
the system's C compiler and loaded with ``LD_PRELOAD``; its header says what it counts.
Calls are numbered per kind across every process and thread of the tick, so a crash
point is (kind, n): the n-th call of that kind, killed (SIGKILL of the whole process
group) before the call takes effect, or, with a :class:`Fault`, failed with an errno
instead (``test_fault_points.py``).

Only relative paths and the test's own temporary folders are used; the tick process
runs this checkout's code (``PYTHONPATH`` is the folder above ``tests``).
"""

import contextlib
import hashlib
import io
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from convoy_batch.timefmt import format_time
from tests.support.forked import Forked
from tests.support.scenario import (
    CONFIGMAP,
    DEPLOYMENT,
    FAILURE_POLICY,
    T0,
    Scenario,
    release_yaml,
)

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parents[1]
SHIM_SOURCE = HERE / "crashshim.c"

KINDS = ("rename", "write", "fsync", "unlink", "create", "mkdir")

# The world's Releases (SPEC's five situations of one tick).
FRESH = "fresh"  # (a) a first rollout
RENEW = "renew"  # (b) a new render over a healthy one (its 11th: history drops the 1st)
REVERT = "revert"  # (c) a rollback that prunes the object its failed render added
TRIM = "trim"  # (d) a prune without failurePolicy
SETTLE = "settle"  # (e) Progressing -> Succeeded, its Deployment made ready

# Minutes after T0: the tick that may crash, then the plain ticks after it.
CRASH_MINUTE = 13
FOLLOW_MINUTES = (14, 15)

EXTRA = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${release}-extra}\ndata: {a: b}\n"
NOTES = "notes.txt"  # a tracked file that is no status, for the person's `git commit -am`


def at(minutes: float) -> str:
    return format_time(T0 + timedelta(minutes=minutes))


# --- the injector -------------------------------------------------------------------------


def build_shim(dest: Path) -> Path:
    """Compile the injector into ``dest``; OSError or CalledProcessError without a compiler."""
    out = dest / "crashshim.so"
    cc = os.environ.get("CC", "cc")
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(SHIM_SOURCE), "-ldl"],
        check=True,
        capture_output=True,
    )
    return out


@dataclass
class TickRun:
    code: int  # the tick's exit code; -9 when the injector killed it
    out: str
    err: str
    seconds: float
    hit: str | None = None  # the injector's line for the call it crashed at
    events: list[str] = field(default_factory=list)  # every call, when recording

    @property
    def killed(self) -> bool:
        return self.code == -signal.SIGKILL


def tick_env(extra: Mapping[str, str] = ({})) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "CONVOY_"))}
    env.update(PYTHONPATH=str(CHECKOUT), PYTHONDONTWRITEBYTECODE="1")
    env.update(extra)
    return env


def start_tick(case: Path, minutes: float, extra: Mapping[str, str] = ({})) -> Forked:
    """``reconcile --all --now <minutes>`` over ``case/repo`` and ``case/state``, in a
    process of its own, in a new session (so its process group is its own), forked from a
    server that imported the CLI (``tests/support/forked.py``), with the injector when
    ``extra`` preloads it."""
    argv = ["--repo", "repo", "--state", "state", "reconcile", "--all", "--now", at(minutes)]
    return Forked(argv, case, tick_env(extra))


def finish_tick(proc: Forked, timeout: float = 180) -> tuple[str, str]:
    """Wait for a tick (bounded; killed when it does not end in time). What is left of its
    process group is killed before the tick is reaped (``forked.py``)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        err += b"\n(the tick did not end in time and was killed)"
    return out.decode(errors="replace"), err.decode(errors="replace")


@dataclass(frozen=True)
class Fault:
    """What the injector does at its point instead of a crash: the call fails with
    ``errno`` (a name the injector knows: ENOSPC, EIO, ...), once or, ``sticky``, for
    every call of the kind from there on (a disk that stays full)."""

    errno: str
    sticky: bool = False

    def env(self) -> dict[str, str]:
        return {"CRASH_SHIM_ERRNO": self.errno, "CRASH_SHIM_STICKY": "1" if self.sticky else "0"}

    def __str__(self) -> str:
        return f"{self.errno}{' from there on' if self.sticky else ''}"


def shim_env(
    folder: Path,
    shim: Path,
    kind: str | None = None,
    n: int | None = None,
    fault: Fault | None = None,
) -> dict[str, str]:
    """The environment that loads the injector, its counters and log in ``folder``:
    recording every call without ``kind``, else crashing at the ``n``-th call of ``kind``
    (or, with ``fault``, making it fail)."""
    (folder / "shim-counters").write_bytes(bytes(4096))
    (folder / "shim-log").unlink(missing_ok=True)
    preload = " ".join(filter(None, [str(shim), os.environ.get("LD_PRELOAD", "")]))
    env = {
        "LD_PRELOAD": preload,
        "CRASH_SHIM_COUNTERS": str(folder / "shim-counters"),
        "CRASH_SHIM_LOG": str(folder / "shim-log"),
    }
    if kind is not None:
        env.update(CRASH_SHIM_KIND=kind, CRASH_SHIM_AT=str(n))
        env.update(fault.env() if fault is not None else {})
    return env


def shim_log(folder: Path) -> list[str]:
    """The injector's lines (and its files in ``folder`` removed)."""
    log = folder / "shim-log"
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    for path in (log, folder / "shim-counters"):
        path.unlink(missing_ok=True)
    return lines


def run_tick(
    case: Path,
    minutes: float,
    *,
    shim: Path | None = None,
    kind: str | None = None,
    n: int | None = None,
    fault: Fault | None = None,
) -> TickRun:
    """A tick (``start_tick``) to its end, with the injector when ``shim`` is given."""
    extra = shim_env(case, shim, kind, n, fault) if shim is not None else {}
    start = time.monotonic()
    proc = start_tick(case, minutes, extra)
    out, err = finish_tick(proc)
    assert proc.returncode is not None
    run = TickRun(proc.returncode, out, err, time.monotonic() - start)
    if shim is not None:
        lines = shim_log(case)
        if kind is None:
            run.events = lines
        else:
            assert n is not None
            run.hit = event_line(lines, kind, n)
    return run


def count_events(events: list[str]) -> dict[str, int]:
    counts = dict.fromkeys(KINDS, 0)
    for line in events:
        kind, n = line.split(" ", 2)[:2]
        counts[kind] = max(counts[kind], int(n))
    return counts


def last_words(err: str) -> str:
    """The last line a process wrote to stderr (a traceback's exception), shortened."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return short(lines[-1]) if lines else "(nothing on stderr)"


def event_line(events: list[str], kind: str, n: int) -> str | None:
    return next((ln for ln in events if ln.split(" ", 2)[:2] == [kind, str(n)]), None)


def sample(total: int, size: int) -> list[int]:
    """``size`` call numbers out of 1..total, evenly spread, the first and the last always."""
    if total <= size:
        return list(range(1, total + 1))
    if size <= 1:
        return [1]
    return sorted({1 + round(i * (total - 1) / (size - 1)) for i in range(size)})


# --- the world ------------------------------------------------------------------------------


class _NoCapture:
    """Stands in for pytest's ``capsys`` where a Scenario is built outside a test."""

    class _Captured(NamedTuple):
        out: str
        err: str

    def readouterr(self) -> "_NoCapture._Captured":
        return self._Captured("", "")


def _quiet(scenario: Scenario, *names: str, minutes: float) -> None:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        result = scenario.reconcile(*names, minutes=minutes)
    assert result.code == 0, f"preparing the world: tick at minute {minutes} exited {result.code}"


def build_world(base: Path) -> None:
    """``base/repo`` and ``base/state``: everything up to the tick at CRASH_MINUTE, with
    the changes that tick acts on committed (and the Deployments' statuses written)."""
    s = Scenario(base, _NoCapture())  # type: ignore[arg-type]
    s.commit({NOTES: "notes\n"}, "notes")
    # minute 0: renew, revert, trim roll out; minute 1: all healthy.
    s.app(RENEW)
    s.app(REVERT)
    s.app(TRIM, extra={"extra.yaml": EXTRA}, spec_extra="")
    _quiet(s, minutes=0)
    for name in (RENEW, REVERT, TRIM):
        s.deployment_ready(name)
    _quiet(s, minutes=1)
    assert s.status(RENEW)["rollout"]["state"] == "Succeeded"
    assert s.status(REVERT)["rollout"]["state"] == "Succeeded"
    # minutes 2-10: renew's renders 2 to 10 (history holds ten), the last one healthy.
    for version in range(2, 11):
        s.app(RENEW, image=f"{version}.0")
        _quiet(s, RENEW, minutes=version)
    s.deployment_ready(RENEW)
    _quiet(s, RENEW, minutes=11)
    assert s.status(RENEW)["rollout"]["state"] == "Succeeded"
    assert len(s.status(RENEW)["history"]) == 10
    # minute 12: revert's new render adds an object; settle rolls out.
    s.app(REVERT, image="2.0", extra={"extra.yaml": EXTRA})
    s.app(SETTLE)
    _quiet(s, REVERT, SETTLE, minutes=12)
    assert s.object_path(REVERT, "configmap", f"{REVERT}-extra").exists()
    # For the tick at minute 13: revert's render failed, settle's is ready, trim's
    # render lost an object, renew has an 11th render, fresh is new.
    s.deployment_failed(REVERT)
    s.deployment_ready(SETTLE)
    s.commit({f"apps/{TRIM}/extra.yaml": None}, "trim: no extra")
    s.app(RENEW, image="11.0")
    s.app(FRESH)
    s.repo.close()


def build_fleet(base: Path, count: int) -> list[str]:
    """``base/repo`` with ``count`` new Releases (one commit) and an empty ``base/state``:
    the next tick is the first rollout of each. Returns their names."""
    s = Scenario(base, _NoCapture())  # type: ignore[arg-type]
    names = [f"r{i:02d}" for i in range(count)]
    files: dict[str, str | None] = {NOTES: "notes\n"}
    for name in names:
        files[f"apps/{name}/deployment.yaml"] = DEPLOYMENT.replace("IMAGE", "1.0")
        files[f"apps/{name}/configmap.yaml"] = CONFIGMAP
        files[f"releases/{name}.yaml"] = release_yaml(name, spec_extra=FAILURE_POLICY)
    s.commit(files, f"{count} releases")
    s.repo.close()
    s.state.mkdir()
    return names


def check_reference(snap: "Snapshot", template: "Snapshot") -> None:
    """The tick without a crash does what the world is for (so the world stays meaningful)."""
    st = snap.raw_statuses
    assert st[FRESH]["rollout"]["state"] == "Progressing"
    assert st[RENEW]["rollout"]["state"] == "Progressing"
    assert st[REVERT]["rollout"]["state"] == "RolledBack"
    assert st[TRIM]["rollout"] is None
    assert st[SETTLE]["rollout"]["state"] == "Succeeded"
    assert f"{REVERT}/configmap/{REVERT}-extra.yaml" not in snap.cluster
    assert f"{REVERT}/configmap/{REVERT}-extra.yaml" in template.cluster
    assert f"{TRIM}/configmap/{TRIM}-extra.yaml" not in snap.cluster
    assert f"{TRIM}/configmap/{TRIM}-extra.yaml" in template.cluster
    image = snap.cluster[f"{REVERT}/deployment.apps/{REVERT}.yaml"]["spec"]["template"]
    assert image["spec"]["containers"][0]["image"] == f"example/{REVERT}:1.0"
    collected = template.renders - snap.renders
    assert collected, "the tick collected no render"
    assert len(snap.raw_statuses[RENEW]["history"]) == 10


# --- what a case ends with ---------------------------------------------------------------

_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
_BLOB = re.compile(r"^[0-9a-f]{64}\.json$")


def strip_times(value: Any) -> Any:
    """The value without its times: every mapping entry whose value is an RFC 3339 time
    (``startedAt``, ``time``, ``lastTransitionTime``, ``observedAt``, ...) is left out."""
    if isinstance(value, dict):
        return {
            k: strip_times(v)
            for k, v in value.items()
            if not (isinstance(v, str) and _TIME.match(v))
            and not (hasattr(v, "isoformat") and not isinstance(v, str))
        }
    if isinstance(value, list):
        return [strip_times(v) for v in value]
    return value


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = tick_env({"GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"})
    return subprocess.run(
        ["git", "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=check,
    )


def head_statuses(repo: Path) -> dict[str, bytes]:
    """``status/<name>.yaml`` at HEAD, by Release name, as bytes."""
    listing = git(repo, "ls-tree", "-z", "HEAD", "status/").stdout
    out: dict[str, bytes] = {}
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        blob = meta.split()[2]
        data = subprocess.run(
            ["git", "cat-file", "blob", blob], cwd=repo, capture_output=True, check=True
        ).stdout
        out[Path(path).stem] = data
    return out


@dataclass
class Snapshot:
    raw_statuses: dict[str, Any]  # parsed, times kept
    statuses: dict[str, Any]  # parsed, times left out
    cluster: dict[str, Any]  # relative path -> object without metadata.generation
    renders: set[str]  # blob names in the render store
    bad_renders: list[str]  # blobs whose content does not hash to their name


def snapshot(case: Path) -> Snapshot:
    raw = {name: yaml.safe_load(data) for name, data in head_statuses(case / "repo").items()}
    cluster_dir = case / "state" / "clusters" / "staging"
    cluster: dict[str, Any] = {}
    for path in sorted(cluster_dir.rglob("*.yaml")):
        rel = path.relative_to(cluster_dir)
        if any(part.startswith(".") for part in rel.parts):
            continue  # an atomic write's temp file left by a crash is no object
        obj = yaml.safe_load(path.read_text())
        if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
            obj["metadata"].pop("generation", None)
        cluster[rel.as_posix()] = obj
    renders: set[str] = set()
    bad: list[str] = []
    render_dir = case / "state" / "renders"
    for path in render_dir.iterdir() if render_dir.is_dir() else ():
        if _BLOB.match(path.name):
            renders.add(path.name)
            if hashlib.sha256(path.read_bytes()).hexdigest() != path.name[:64]:
                bad.append(path.name)
    return Snapshot(raw, {k: strip_times(v) for k, v in raw.items()}, cluster, renders, bad)


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    """Every difference between ``a`` (the reference) and ``b``, in ``a``'s key order."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            where = f"{path}.{key}" if path else str(key)
            if key not in a:
                out.append(f"{where}: not in the reference, got {b[key]!r}")
            elif key not in b:
                out.append(f"{where}: missing, expected {a[key]!r}")
            else:
                _diff(a[key], b[key], where, out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path or 'value'}: expected {a!r}, got {b!r}")


_LONG_HEX = re.compile(r"\b([0-9a-f]{12})[0-9a-f]{28,52}\b")


def short(text: str, limit: int = 300) -> str:
    """One line: hashes cut to 12 digits, at most ``limit`` characters."""
    text = _LONG_HEX.sub(r"\1", " ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _differences(what: str, a: Any, b: Any, shown: int = 4) -> list[str]:
    out: list[str] = []
    _diff(a, b, "", out)
    if not out:
        return []
    more = f" (and {len(out) - shown} more)" if len(out) > shown else ""
    return [f"{what}: " + "; ".join(short(d, 200) for d in out[:shown]) + more]


def compare(reference: Snapshot, got: Snapshot) -> list[str]:
    """What differs from the reference, one line per file: statuses without times,
    cluster objects (without ``metadata.generation``), render blob names; and blobs that
    do not verify."""
    problems: list[str] = []
    for name in sorted(set(reference.statuses) | set(got.statuses)):
        if name not in got.statuses:
            problems.append(f"status/{name}.yaml: missing at HEAD")
        elif name not in reference.statuses:
            problems.append(f"status/{name}.yaml: at HEAD, not in the reference")
        else:
            a, b = reference.statuses[name], got.statuses[name]
            problems += _differences(f"status/{name}.yaml", a, b)
    only_ref = sorted(set(reference.cluster) - set(got.cluster))
    only_got = sorted(set(got.cluster) - set(reference.cluster))
    if only_ref:
        problems.append(f"cluster objects missing: {only_ref}")
    if only_got:
        problems.append(f"cluster objects not in the reference: {only_got}")
    for rel in sorted(set(reference.cluster) & set(got.cluster)):
        problems += _differences(f"cluster {rel}", reference.cluster[rel], got.cluster[rel])
    if reference.renders != got.renders:
        missing = sorted(n[:12] for n in reference.renders - got.renders)
        extra = sorted(n[:12] for n in got.renders - reference.renders)
        problems.append(f"render store: missing {missing}, not in the reference {extra}")
    if got.bad_renders:
        problems.append(f"render blobs that do not verify: {sorted(got.bad_renders)}")
    return problems


def settled_problems(case: Path, last: TickRun, expected: int, minutes: int) -> list[str]:
    """What a crashed case's checkout shows once plain ticks followed: the last tick's exit
    code against the reference's ``expected``, ``git fsck``, litter and a person's commit."""
    problems = []
    if last.code != expected:
        problems.append(
            f"the tick at minute {minutes} exited {last.code} (reference {expected}): "
            f"{last_words(last.err)}"
        )
    repo = case / "repo"
    return problems + fsck(repo) + litter(repo) + person_commits(repo)


def fsck(repo: Path) -> list[str]:
    proc = git(repo, "fsck", "--strict", "--no-progress", check=False)
    if proc.returncode != 0:
        return [f"git fsck --strict exited {proc.returncode}: {short(proc.stdout + proc.stderr)}"]
    return []


def litter(repo: Path) -> list[str]:
    """Nothing untracked or ignored in the working tree (a temp file of a status write
    would be committed by a person's ``git add -A``), and no scratch folder in ``.git``."""
    proc = git(repo, "status", "--porcelain", "--untracked-files=all", "--ignored")
    found = [line for line in proc.stdout.splitlines() if line[:2] in ("??", "!!")]
    found += [p.name for p in (repo / ".git").glob("convoy-batch-*")]
    return [f"left in the checkout: {short('; '.join(found))}"] if found else []


def person_commits(repo: Path) -> list[str]:
    """A person's ``git commit -am x`` after a change to a tracked file that is no status:
    it must succeed and change no status file."""
    before = head_statuses(repo)
    dirty = git(repo, "status", "--porcelain", "--", "status/").stdout.strip()
    with (repo / NOTES).open("a") as f:
        f.write("a person's change\n")
    proc = git(repo, "commit", "-q", "-am", "x", check=False)
    if proc.returncode != 0:
        return [f"git commit -am x failed: {short(proc.stderr)}"]
    after = head_statuses(repo)
    changed = sorted(n for n in set(before) | set(after) if before.get(n) != after.get(n))
    if changed:
        note = f" (git status showed: {short('; '.join(dirty.splitlines()))})" if dirty else ""
        return [f"a person's git commit -am x changed status files {changed}{note}"]
    return []


@contextlib.contextmanager
def case_dir(template: Path, dest: Path) -> Iterator[Path]:
    """A copy of the template world in ``dest``, removed afterwards unless kept."""
    shutil.copytree(template, dest, symlinks=True)
    try:
        yield dest
    finally:
        if not os.environ.get("CONVOY_CRASH_KEEP"):
            shutil.rmtree(dest, ignore_errors=True)


def every_point(
    kind: str, points: Sequence[int], case: Callable[[int], str | None], parallel: bool = False
) -> None:
    """Run ``case`` at each crash point of ``kind`` (``parallel``: up to four at a time, in
    copies of the world), then fail the test with every point that did not converge, each
    with what ``case`` reported of it."""
    workers = max(1, min(4, len(os.sched_getaffinity(0)))) if parallel else 1
    with ThreadPoolExecutor(workers) as pool:
        failures = [r for r in pool.map(case, points) if r]
    if failures:
        summary = f"{len(failures)} of {len(points)} {kind} points did not converge"
        pytest.fail(summary + ":\n\n" + "\n\n".join(failures), pytrace=False)


# --- a world of one interesting tick -------------------------------------------------------


@dataclass(repr=False)
class TickWorld:
    """A world one tick (at ``minute``) before its interesting moment, and how the run
    without a crash ended: that tick (its calls recorded), then plain ticks at
    ``follow``."""

    template: Path  # repo/ and state/ before the tick
    reference: Path  # the run without a crash
    snapshot: "Snapshot"
    last_code: int
    counts: dict[str, int]
    minute: float
    follow: tuple[float, ...]
    cases: Path

    def __repr__(self) -> str:
        return f"TickWorld(calls {self.counts})"


def tick_world(base: Path, shim: Path, minute: float, follow: tuple[float, ...]) -> TickWorld:
    """The run without a crash of the world built in ``base/template``."""
    template, reference = base / "template", base / "reference"
    shutil.copytree(template, reference, symlinks=True)
    record = run_tick(reference, minute, shim=shim)
    assert record.code == 0, f"the tick without a crash failed:\n{record.err}"
    after = [run_tick(reference, m) for m in follow]
    problems = fsck(reference / "repo") + person_commits(reference / "repo")
    assert not problems, f"the run without a crash: {problems}"
    return TickWorld(
        template, reference, snapshot(reference), after[-1].code, count_events(record.events),
        minute, follow, base / "cases",
    )  # fmt: skip


def converged_case(
    world: TickWorld,
    shim: Path,
    kind: str,
    n: int,
    checks: Callable[[Path], list[str]] = lambda case: [],
) -> str | None:
    """The world's tick killed at call ``n`` of ``kind`` in a copy of the world, plain
    ticks after it, then :func:`compare`, ``checks`` (more, of the case's folder), no
    traceback and :func:`settled_problems`: None when it converged, else the report."""
    with case_dir(world.template, world.cases / f"{kind}-{n}") as case:
        crash = run_tick(case, world.minute, shim=shim, kind=kind, n=n)
        after = [run_tick(case, minutes) for minutes in world.follow]
        problems = compare(world.snapshot, snapshot(case)) + checks(case)
        for minutes, run in zip(world.follow, after, strict=True):
            if "Traceback" in run.err:
                problems.append(f"the tick at minute {minutes}: {last_words(run.err)}")
        problems += settled_problems(case, after[-1], world.last_code, int(world.follow[-1]))
        prefix = f"{case}/"
    if not problems:
        return None
    where = f"crashed at: {crash.hit}" if crash.hit else f"no crash (exit {crash.code})"
    head = f"{kind} #{n} of {world.counts[kind]}, {where}"
    return (head + "".join(f"\n    - {p}" for p in problems)).replace(prefix, "")
