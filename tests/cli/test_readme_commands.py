"""Every command of the ``sh`` blocks of the README and then of the getting-started page
(docs/getting-started.md, where the example's stories are told) runs as written, in order,
from a fresh copy of the project (the checkout's tracked files and untracked ones that are
not ignored: a clone with the work not yet committed).

The convention of both: each line of a ``sh`` block is one command (a line ending in
``\\`` goes on), run by bash from the project's folder. A command whose comment ends in
``(until Ctrl-C)`` (``make run``) runs in the background until its UI answers and the
example's first status commits have landed; it is stopped (Ctrl-C to its process group)
when the next such command starts, or at the end. The commands after it run beside it.

The environment is the user's without the project's variables (``CONVOY_*``,
``DAGSTER_*``, ``VIRTUAL_ENV``, make's own) and without the virtualenv on PATH, so a
command that needs them must say so. In place of the install that ``make`` would do, the
copy's ``.venv`` links to this interpreter's virtualenv with a fresh install stamp (make
installs nothing) and ``PYTHONPATH`` names the copy, so its code runs rather than the
checkout the virtualenv was installed from. Bare ``make run`` gets a free port through
``PORT`` (the Makefile reads it from the environment); ``make test`` runs its pytest on one
quick file (``PYTEST_ADDOPTS``), since the suite holds this test.

Before the first ``make run`` is stopped (it runs beside most commands), what it did on
its own meanwhile is checked (:func:`check_unattended`): the schedule evaluated, the
status history, the example's notifications. No command prints a warning of Dagster's
(:func:`~tests.support.dagster_dev.dagster_warnings`: a superseded, deprecated, preview
or beta API; ``make run``'s whole output, read once it is stopped, included). Starts
``dg dev`` twice (about 20 s each with its first tick: once per ``make run`` the two pages
show) and runs ``make test``'s lint once: about a minute and a half. Its name holds
``dagster_dev``, so ``-k 'not dagster_dev'`` leaves it out.
"""

import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from convoy_batch.definitions import NOTHING_WAITING
from convoy_batch.ticks.wakeups import release_names
from tests.support.dagster_dev import (
    dagster_warnings,
    get,
    notified,
    schedule_ticks,
    status_commits,
    stop_group,
    wait_for,
)
from tests.support.loopback import free_port
from tests.support.needs import needs

PROJECT = Path(__file__).resolve().parents[2]
README = PROJECT / "README.md"
GETTING_STARTED = PROJECT / "docs" / "getting-started.md"
DOCUMENTS = (README, GETTING_STARTED)
"""The pages whose commands run, in this order: the README's first commands start the
example, the getting-started page then follows its stories."""
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
UNTIL_STOPPED = "(until Ctrl-C)"
LANGUAGES = {"sh", "yaml", "graphql", ""}
"""``sh`` blocks are run; ``yaml``, ``graphql`` and plain ones (the CLI's synopsis, the layout,
a query for the UI) are not commands. A ``bash``, ``shell`` or ``console`` block would be
missed: refused."""
EXAMPLE_REPO = Path(".convoy/example/repo")
QUICK_TESTS = "-k test_timefmt -p no:cacheprovider"
BANNER_URL = re.compile(r"Dagster UI: +http://127\.0\.0\.1:(\d+)")
TIMED_LINE = re.compile(r"^[0-9a-f]{7,} \d\d:\d\d:\d\d convoy-batch: \S+: ")


@dataclass(frozen=True)
class Block:
    language: str
    lines: tuple[str, ...]


def code_blocks(text: str) -> list[Block]:
    """Fenced blocks, their lines without the fence's indentation (a block in a list)."""
    blocks: list[Block] = []
    indent: str | None = None
    language = ""
    lines: list[str] = []
    for line in text.splitlines():
        match = FENCE.match(line)
        if indent is None and match:
            indent, language, lines = match[1], match[2], []
        elif indent is not None and match and not match[2]:
            blocks.append(Block(language, tuple(lines)))
            indent = None
        elif indent is not None:
            lines.append(line.removeprefix(indent))
    assert indent is None, "a code block is not closed"
    return blocks


def block_commands(block: Block) -> list[str]:
    """One command per line; a line ending in a backslash goes on to the next."""
    commands: list[str] = []
    pending: list[str] = []
    for line in block.lines:
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending.append(line)
        if not line.rstrip().endswith("\\"):
            commands.append("\n".join(pending))
            pending = []
    assert not pending, f"a command ends in a backslash: {pending}"
    return commands


def readme_commands(text: str) -> list[str]:
    return [c for b in code_blocks(text) if b.language == "sh" for c in block_commands(b)]


def documented_commands(project: Path) -> list[str]:
    """The commands of :data:`DOCUMENTS` in ``project``, the README's first."""
    return [
        command
        for document in DOCUMENTS
        for command in readme_commands((project / document.relative_to(PROJECT)).read_text())
    ]


def runs_until_stopped(command: str) -> bool:
    return command.rstrip().endswith(UNTIL_STOPPED)


def audit_trail_command(commands: list[str]) -> str:
    (found,) = [c for c in commands if c.startswith(f"git -C {EXAMPLE_REPO} log")]
    return found


# --- the fresh copy and its environment -------------------------------------------------


def fresh_copy(target: Path) -> Path:
    """The checkout's files as a fresh clone would have them, plus work not yet committed;
    ``.venv`` links to this interpreter's virtualenv, installed (a stamp newer than
    pyproject.toml)."""
    listed = subprocess.run(
        ["git", "-C", str(PROJECT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = PROJECT / name
        if source.is_file():  # a tracked file deleted in the checkout is not copied
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    venv = Path(sys.prefix)
    (target / ".venv").mkdir()
    for entry in venv.iterdir():
        if entry.name != ".installed":
            (target / ".venv" / entry.name).symlink_to(entry)
    (target / ".venv" / ".installed").touch()
    return target


def command_env(project: Path) -> dict[str, str]:
    own = ("CONVOY_", "DAGSTER_", "VIRTUAL_ENV", "PYTHONPATH", "PYTEST_", "MAKE", "MFLAGS")
    env = {k: v for k, v in os.environ.items() if not k.startswith(own)}
    venv_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env.update(PWD=str(project), PYTHONPATH=str(project), PORT=str(free_port()))
    env["PYTEST_ADDOPTS"] = QUICK_TESTS
    return env


def run(command: str, project: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{command}\nexited {done.returncode}:\n{output[-4000:]}"
    return output


# --- commands that run until stopped -----------------------------------------------------


@dataclass
class Example:
    """``make run`` in the background: its own process group, its output in ``log``."""

    command: str
    process: subprocess.Popen[bytes]
    log: Path
    port: int

    def probe_ui(self) -> bytes | None:
        if self.process.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise AssertionError(f"{self.command} ended ({self.process.returncode}):\n{tail}")
        return get(f"http://127.0.0.1:{self.port}/server_info")


def port_of(command: str, env: dict[str, str]) -> int:
    given = re.search(r"\bPORT=(\d+)", command)
    return int(given[1] if given else env["PORT"])


def is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def start_example(command: str, project: Path, env: dict[str, str], log: Path) -> Example:
    port = port_of(command, env)
    assert is_free(port), f"port {port} is taken on this machine; {command!r} needs it"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["bash", "-c", command],
            cwd=project,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    example = Example(command, process, log, port)
    try:
        wait_for("UI", example.probe_ui, 90, log)
        wait_for("status commit", lambda: status_commits(project / EXAMPLE_REPO), 60, log)
    except BaseException:
        stop_group(process)
        raise
    return example


def check_unattended(example: Example, project: Path) -> None:
    """What ``make run``'s ``dg dev`` did on its own meanwhile: the ``convoy_tick``
    schedule was evaluated (a run, or a skip that says nothing waits: the example's
    Releases are due every 5 minutes, and the wake-up sensor may have reconciled the new
    ones first), web's first rollout is in the status history, and the example's Alert
    reached ``make run``'s receiver (a line per event)."""
    log = example.log
    ticks = wait_for("a tick of the schedule", lambda: schedule_ticks(example.port), 80, log)
    assert all(
        (tick["status"], tick["skipReason"]) in {("SUCCESS", None), ("SKIPPED", NOTHING_WAITING)}
        for tick in ticks
    ), ticks
    repo = project / EXAMPLE_REPO
    commits = status_commits(repo) or []
    assert any(c.startswith("convoy-batch: web: none -> Progressing") for c in commits), commits
    told = wait_for("a notification", lambda: notified(repo.parent), 60, log)
    assert any(line.split(" ", 1)[1].startswith("web (staging): none -> Progressing")
               for line in told), told  # fmt: skip


def check_quiet(command: str, output: str) -> None:
    """The output of a command holds no warning of Dagster's."""
    warned = dagster_warnings(output)
    assert not warned, f"{command} printed Dagster's warnings:\n" + "\n".join(warned)


def stop_example(example: Example) -> None:
    """Stop ``make run`` (Ctrl-C); then its whole output holds no warning of Dagster's."""
    stop_group(example.process)
    check_quiet(example.command, example.log.read_text(errors="replace"))


def check_banner(example: Example, audit_trail: str) -> None:
    """The banner names the UI's port and prints the audit-trail command as the README."""
    banner = example.log.read_text(errors="replace")
    url = BANNER_URL.search(banner)
    assert url and int(url[1]) == example.port, banner[:2000]
    assert f"watch the audit trail:   {audit_trail}\n" in banner, banner[:2000]


# --- what each command must show ---------------------------------------------------------

Check = Callable[[str], None]


def reports_commits(project: Path) -> list[str]:
    subjects = status_commits(project / EXAMPLE_REPO) or []
    return [s for s in subjects if s.startswith("convoy-batch: reports: ")]


def forced_sync_of_reports(project: Path) -> Check:
    """A new status commit of reports, ``reports: Synced`` as the README says (a tick may
    commit reports' health meanwhile)."""
    before = len(reports_commits(project))

    def after(output: str) -> None:
        commits = reports_commits(project)
        new = commits[: len(commits) - before]
        assert "convoy-batch: reports: Synced" in new, (commits, output[-3000:])

    return after


def times_every_line(project: Path) -> Check:
    def after(output: str) -> None:
        lines = output.splitlines()
        assert lines and all(TIMED_LINE.match(line) for line in lines), output

    return after


def names_every_release(project: Path) -> Check:
    names = release_names(project / EXAMPLE_REPO)

    def after(output: str) -> None:
        assert names and all(re.search(rf"\b{name}\b", output) for name in names), output

    return after


def lists_the_options(project: Path) -> Check:
    def after(output: str) -> None:
        assert all(option in output for option in ("--port", "--host", "--no-update")), output

    return after


def passes_the_quick_tests(project: Path) -> Check:
    def after(output: str) -> None:
        assert re.search(r"\b\d+ passed\b", output) and "mypy" in output, output[-3000:]

    return after


def shows_notifications(project: Path) -> Check:
    def after(output: str) -> None:
        assert re.search(r"^\d\d:\d\d:\d\d \w+ \(staging\): ", output, re.MULTILINE), output

    return after


CHECKS: dict[str, Callable[[Path], Check]] = {
    "make test": passes_the_quick_tests,
    "make check": passes_the_quick_tests,
    f"git -C {EXAMPLE_REPO} log": times_every_line,
    "make force RELEASE=reports": forced_sync_of_reports,
    "CONVOY_REPO=$PWD/.convoy/example/repo": forced_sync_of_reports,
    ".venv/bin/convoy-batch --repo .convoy/example/repo": names_every_release,
    ".venv/bin/python scripts/run_example.py --help": lists_the_options,
    "cat .convoy/example/notifications.log": shows_notifications,
}
"""Checks by the start of the command: each must start at least one documented command."""


def check_for(command: str, project: Path) -> Check:
    found = [make for start, make in CHECKS.items() if command.startswith(start)]
    return found[0](project) if found else lambda output: None


# --- the tests ---------------------------------------------------------------------------


def test_readme_blocks_are_sh_yaml_or_plain_and_parse() -> None:
    for document in DOCUMENTS:
        languages = {b.language for b in code_blocks(document.read_text())}
        assert languages <= LANGUAGES, (document.name, languages)
    commands = documented_commands(PROJECT)
    for command in commands:
        syntax = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
        assert syntax.returncode == 0, f"{command}: {syntax.stderr}"
    for start in CHECKS:
        assert any(c.startswith(start) for c in commands), f"no command starts {start!r}"
    running = [c.split("#")[0].split() for c in commands if runs_until_stopped(c)]
    assert ["make", "run"] in running, "the README shows no make run"
    first = readme_commands(README.read_text())
    assert first and runs_until_stopped(first[0]), "the README's first command is not make run"
    assert readme_commands(GETTING_STARTED.read_text()), "the getting-started page has no command"
    assert any(re.fullmatch(r"PORT=\d+", w) for c in running for w in c), "nor another port"


def test_the_banner_prints_the_readme_audit_trail_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    script = PROJECT / "scripts" / "run_example.py"
    spec = importlib.util.spec_from_file_location("run_example", script)
    assert spec is not None and spec.loader is not None
    run_example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_example)
    audit_trail = audit_trail_command(documented_commands(PROJECT))
    monkeypatch.chdir(PROJECT)

    run_example.explain(Path(".convoy/example"), "127.0.0.1", 3001)
    banner = capsys.readouterr().out
    assert f"watch the audit trail:   {audit_trail}\n" in banner
    assert "make force RELEASE=reports" in banner
    assert "http://127.0.0.1:3001 " in banner

    run_example.explain(tmp_path, "127.0.0.1", 3000)
    elsewhere = capsys.readouterr().out
    assert f"git -C {tmp_path / 'repo'} log --format=" in elsewhere
    assert "make force" not in elsewhere


@pytest.fixture
@needs("dagster")  # make run: dg dev
def project(tmp_path: Path) -> Iterator[Path]:
    yield fresh_copy(tmp_path / "project")


def test_readme_commands_run_as_written_beside_dagster_dev(project: Path, tmp_path: Path) -> None:
    env = command_env(project)
    commands = documented_commands(project)
    audit_trail = audit_trail_command(commands)
    stamp = subprocess.run(["make", "--question", ".venv/.installed"], cwd=project, env=env)
    assert stamp.returncode == 0, "make would install into the shared virtualenv"
    example: Example | None = None  # the one running
    checked = False  # check_unattended: on the first example, which runs the longest
    try:
        for number, command in enumerate(commands):
            if runs_until_stopped(command):
                if example:
                    if not checked:
                        check_unattended(example, project)
                        checked = True
                    stopping, example = example, None
                    stop_example(stopping)
                log = tmp_path / f"example-{number}.log"
                example = start_example(command, project, env, log)
                check_banner(example, audit_trail)
                continue
            check = check_for(command, project)
            output = run(command, project, env)
            check_quiet(command, output)
            check(output)
        assert example is not None, "no documented command starts the example"
        if not checked:
            check_unattended(example, project)
        stopping, example = example, None
        stop_example(stopping)
    finally:
        if example:
            stop_group(example.process)
