"""A person committing in the same checkout during a 40-Release tick never loses or
reverts a status.

Each round: a repository with 40 new Releases; a real tick (``reconcile --all``, first
rollouts, its own process) while the test, as a person would, adds and commits files of
its own in the same checkout (``git add f; git commit -m ...``, retried while git says
a ``.lock`` file exists or the branch moved). Afterwards:

- every Release's status file is at HEAD and equals what convoy-batch last committed
  for it (the newest commit by convoy-batch touching ``status/<name>.yaml``), and no
  commit of the person touched ``status/``;
- every commit of the person is in the history, its file at HEAD;
- ``git status --porcelain -- status/`` is empty, and ``git fsck --strict`` is clean.

Rounds: 20 (under a second each); ``CONVOY_PERSON_ROUNDS=N`` runs N.
"""

import os
import time
from pathlib import Path

import pytest

from tests.crash import harness as h

pytestmark = pytest.mark.crash

RELEASES = 40
ALL_ROUNDS = 20
ROUNDS = int(os.environ.get("CONVOY_PERSON_ROUNDS") or ALL_ROUNDS)
BOT = "convoy-batch"
RETRYABLE = (".lock", "cannot lock ref")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    template = tmp_path_factory.mktemp("fleet") / "template"
    return template, h.build_fleet(template, RELEASES)


def person_commit(repo: Path, i: int) -> str | None:
    """Add and commit ``person/f<i>.txt`` as a person would, retrying while git reports
    a lock (bounded); None when committed, else git's complaint."""
    rel = f"person/f{i}.txt"
    (repo / "person").mkdir(exist_ok=True)
    (repo / rel).write_text(f"a person's file {i}\n")
    for step in (("add", rel), ("commit", "-q", "-m", f"person {i}")):
        deadline = time.monotonic() + 20
        while True:
            proc = h.git(repo, *step, check=False)
            if proc.returncode == 0:
                break
            complaint = " ".join(proc.stderr.split())
            if not any(r in complaint for r in RETRYABLE) or time.monotonic() > deadline:
                return f"git {step[0]} {rel}: {complaint[:300]}"
            time.sleep(0.01)
    return None


def status_history(repo: Path) -> tuple[dict[str, str], list[str]]:
    """(the blob of each status file in convoy-batch's newest commit touching it, one line
    per commit of anyone else that touched ``status/``), from one ``git log --raw``."""
    log = h.git(repo, "log", "--no-renames", "--raw", "--no-abbrev", "--format=@%H %an\t%s")
    last: dict[str, str] = {}
    foreign: dict[str, dict[str, list[str]]] = {}
    author = commit = ""
    for line in log.stdout.splitlines():
        if line.startswith("@"):
            commit, author = line[1:].split(" ", 1)
        elif line.startswith(":") and "\tstatus/" in line:
            meta, path = line.split("\t", 1)
            name = Path(path).stem
            if not author.startswith(BOT + "\t"):
                subject = author.split("\t", 1)[1]
                changes = foreign.setdefault(f"{commit[:12]} ({subject!r})", {})
                changes.setdefault(meta.split()[-1], []).append(name)
            elif name not in last:
                last[name] = meta.split()[3]
    lines = [
        f"{commit} " + ", ".join(_change(k, v) for k, v in changes.items())
        for commit, changes in reversed(foreign.items())
    ]
    return last, lines


def _change(kind: str, names: list[str]) -> str:
    verb = {"A": "added", "D": "deleted", "M": "changed"}.get(kind, kind)
    return f"{verb} {len(names)} ({' '.join(names[:4])}{' ...' if len(names) > 4 else ''})"


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_a_person_committing_during_a_tick_loses_no_status(
    round_: int, fleet: tuple[Path, list[str]], tmp_path: Path
) -> None:
    template, names = fleet
    with h.case_dir(template, tmp_path / "case") as case:
        repo = case / "repo"
        problems: list[str] = []
        committed: list[int] = []
        proc = h.start_tick(case, 0)
        i = 0
        while proc.poll() is None:
            if (complaint := person_commit(repo, i)) is None:
                committed.append(i)
            else:
                problems.append(complaint)
            i += 1
        during = len(committed)
        _, err = h.finish_tick(proc)
        if proc.returncode != 0:
            problems.append(f"the tick exited {proc.returncode}: {h.last_words(err)}")

        head = {
            Path(path).stem: meta.split()[2]
            for meta, path in (
                entry.split("\t", 1)
                for entry in h.git(repo, "ls-tree", "HEAD", "status/").stdout.splitlines()
            )
        }
        missing = sorted(set(names) - set(head))
        if missing:
            problems.append(f"{len(missing)} statuses missing at HEAD: {missing}")
        last, foreign = status_history(repo)
        for name in sorted(set(head) & set(names)):
            if name not in last:
                problems.append(f"status/{name}.yaml at HEAD was never committed by {BOT}")
            elif last[name] != head[name]:
                problems.append(
                    f"status/{name}.yaml at HEAD ({head[name][:12]}) is not what {BOT}"
                    f" last committed for it ({last[name][:12]})"
                )
        if foreign:
            problems.append(
                f"{len(foreign)} commits of the person changed status files (oldest first):"
                + "".join(f"\n      {line}" for line in foreign[:8])
            )

        subjects = set(h.git(repo, "log", "--format=%s").stdout.splitlines())
        lost = [i for i in committed if f"person {i}" not in subjects]
        at_head = h.git(repo, "ls-tree", "--name-only", "HEAD", "person/").stdout.split()
        gone = [i for i in committed if f"person/f{i}.txt" not in at_head]
        if lost or gone:
            problems.append(f"the person's commits lost: {lost}, files not at HEAD: {gone}")
        dirty = h.git(repo, "status", "--porcelain", "--", "status/").stdout
        if dirty.strip():
            problems.append(f"git status --porcelain -- status/ is not empty: {dirty[:400]!r}")
        problems += h.fsck(repo)

    assert during > 0, "no commit of the person happened during the tick"
    if problems:
        pytest.fail(
            f"round {round_}: {during} commits of the person during the tick;\n  - "
            + "\n  - ".join(problems).replace(f"{tmp_path}/", ""),
            pytrace=False,
        )
