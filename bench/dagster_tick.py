"""Benchmark: a tick from the CLI and the same tick as a ``convoy_tick`` Dagster run.

Builds bench/tick.py's repository (default 1,000 Releases x 5 objects on a directory
cluster) and measures, in one run, the first tick and a quiet tick (``--all``: every
Release reconciled, nothing changed) three ways, each on its own copy of the repository
and its own state directory:

- CLI: ``run_tick``, the call ``convoy-batch reconcile`` makes;
- sqlite: the ``convoy_tick`` job in process (``execute_in_process``) on an instance with
  Dagster's default storage (sqlite files under a fresh ``DAGSTER_HOME``);
- postgres: the same on an instance stored in PostgreSQL, a throwaway server started
  through ``scripts/pg-testenv`` and stopped at the end (left out by ``--no-postgres``).

Each tick runs in a forked child (bench/tick.py's ``measure``); a Dagster tick's time
includes opening the instance, as a launched run does, and its console log goes to
/dev/null. The tick between the first and the quiet one (the first health observed) is
not timed. The ways take turns within each phase and the quiet tick is the best of
``--repeat`` (default 2), so a busy machine disturbs the ratios less. After the table:
how many events each Dagster run stored.

    python bench/dagster_tick.py [--releases N] [--repeat R] [--no-postgres] [--keep DIR]
"""

import argparse
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import dagster as dg

# This checkout's package (not another one the environment installed) and the tests'
# server helper.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tick import T0, build_repo, measure  # bench/tick.py, next to this script

from convoy_batch.assets import ConvoyResource, tick_job, tick_run_config
from convoy_batch.ticks.runner import run_tick
from convoy_batch.timefmt import format_time
from tests.support import pg

FIRST, WARM, QUIET = 0, 1, 2  # minutes after T0


@dataclass
class Way:
    """One way to run the tick: the CLI's library call (``home`` None) or a Dagster run on
    the instance of ``home``."""

    label: str
    repo: Path
    state: Path
    home: Path | None = None
    events: dict[str, int] = field(default_factory=dict)

    def tick(self, minutes: int, all_releases: bool) -> Callable[[], str]:
        now = T0 + timedelta(minutes=minutes)

        def cli() -> str:
            report = run_tick(self.repo, self.state, now, all_releases=all_releases)
            commits = sum(1 for h in report.handled if h.commit)
            return f"reconciled={len(report.handled)} commits={commits}"

        def dagster() -> str:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)  # this forked child's console log
            resource = ConvoyResource(
                repo=str(self.repo), state=str(self.state), now=format_time(now)
            )
            with dg.DagsterInstance.from_config(str(self.home)) as instance:
                result = tick_job.execute_in_process(
                    run_config=tick_run_config(all_releases=all_releases),
                    instance=instance,
                    resources={"convoy": resource},
                    raise_on_error=False,
                )
            return f"run={result.run_id} success={result.success}"

        return cli if self.home is None else dagster

    def count_events(self, phase: str) -> None:
        """Events the instance's latest run stored (read after the run, not timed)."""
        if self.home is None:
            return
        with dg.DagsterInstance.from_config(str(self.home)) as instance:
            run = instance.get_runs(limit=1)[0]
            self.events[phase] = len(instance.all_logs(run.run_id))


def instance_home(home: Path, server: pg.PgServer | None = None) -> Path:
    """A DAGSTER_HOME whose schema exists: Dagster's default storage (sqlite files under
    it), or ``server``'s database; telemetry off."""
    if server is not None:
        server.dagster_home(home)
    else:
        home.mkdir(parents=True)
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    dg.DagsterInstance.from_config(str(home)).dispose()
    return home


Row = tuple[str, list[float], str]
"""A phase's label, each way's wall seconds and what the CLI's tick did."""


def run_phase(ways: list[Way], label: str, minutes: int, all_releases: bool) -> Row:
    """Every way's tick once, in turn."""
    walls, details = [], []
    for way in ways:
        wall, _, detail = measure(way.tick(minutes, all_releases))
        if "success=False" in detail:
            raise SystemExit(f"{way.label}: the {label} run failed ({detail})")
        way.count_events(label)
        walls.append(wall)
        details.append(detail)
    return label, walls, details[0]


def best(rows: list[Row]) -> Row:
    """Each way's best of the same phase run several times."""
    return rows[0][0], [min(walls) for walls in zip(*(r[1] for r in rows), strict=True)], rows[0][2]


def report(ways: list[Way], rows: list[Row], releases: int) -> None:
    print(f"{releases} Releases x 5 objects, directory cluster; Dagster {dg.__version__}")
    header = f"{'tick':<12} {'CLI s':>7}"
    for way in ways[1:]:
        header += f" {way.label + ' s':>11} {'x CLI':>6}"
    print(header + "  CLI tick")
    for label, walls, detail in rows:
        line = f"{label + ' tick':<12} {walls[0]:7.2f}"
        for wall in walls[1:]:
            line += f" {wall:11.2f} {wall / walls[0]:6.1f}"
        print(f"{line}  {detail}")
    for way in ways[1:]:
        counts = ", ".join(f"{phase} {n}" for phase, n in way.events.items())
        print(f"events stored per run, {way.label}: {counts}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2, help="quiet ticks per way (best kept)")
    parser.add_argument("--no-postgres", action="store_true", help="CLI and sqlite only")
    parser.add_argument("--keep", type=Path, default=None, help="work in (and keep) this folder")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    work = args.keep or Path(tempfile.mkdtemp(prefix="convoy-dagster-bench-"))
    build_repo(work / "source", args.releases)
    ways = [
        Way("CLI", *copies(work, "cli")),
        Way("sqlite", *copies(work, "sqlite"), instance_home(work / "sqlite" / "home")),
    ]
    server = None
    try:
        if not args.no_postgres:
            server = start_postgres(work / "pg")
            home = instance_home(work / "postgres" / "home", server)
            ways.append(Way("postgres", *copies(work, "postgres"), home))
        rows = [run_phase(ways, "first", FIRST, all_releases=False)]
        run_phase(ways, "warm", WARM, all_releases=True)
        rows.append(best([run_phase(ways, "quiet", QUIET, True) for _ in range(args.repeat)]))
    finally:
        if server is not None:
            pg.stop(server.folder)
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    report(ways, rows, args.releases)


def copies(work: Path, label: str) -> tuple[Path, Path]:
    """A copy of the built repository for one way, and its state directory."""
    repo = work / label / "repo"
    shutil.copytree(work / "source", repo)
    return repo, work / label / "state"


def start_postgres(folder: Path) -> pg.PgServer:
    try:
        return pg.start(folder)
    except pg.PgUnavailable as exc:
        message = f"no PostgreSQL ({exc}): scripts/pg-testenv install, or --no-postgres"
        raise SystemExit(message) from None


if __name__ == "__main__":
    main()
