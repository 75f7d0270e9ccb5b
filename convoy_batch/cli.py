"""The ``convoy-batch`` command: reconcile, observe, status, plan, diff, history.

Exit codes: 0 every Release reconciled (waiting, gated, rolled back count); 1 at
least one Release errored; 2 usage error, unreadable repository, unknown Release, a
state directory that cannot be used. ``diff`` follows ``git diff``: 0, or 1 with
``--exit-code`` when an object or a rollout would change; 2 when a Release cannot be
rendered.
"""

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from convoy_batch.engine.handler import describe
from convoy_batch.engine.tick import Tick
from convoy_batch.errors import ConvoyError, StateFailed, UsageError, unexpected
from convoy_batch.state.files import os_problem
from convoy_batch.ticks.location import default_state_dir
from convoy_batch.ticks.options import TickOptions, TickReport
from convoy_batch.ticks.runner import observe_release, run_tick, select
from convoy_batch.ticks.shards import run_sharded
from convoy_batch.timefmt import parse_time
from convoy_batch.views import diff_report, history
from convoy_batch.views.diff import diff_releases
from convoy_batch.views.inspect import plan_release, status_rows

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2


DESCRIPTION = "convoy-batch: progressive rollouts from a GitOps repository, one tick at a time."
NOW_HELP = "the tick's clock, e.g. 2026-11-29T12:00:00Z (default: now)"
OUTPUTS = ("text", "yaml", "json")
OUTPUT_HELP = "how results are printed (also accepted after the command)"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="convoy-batch", description=DESCRIPTION)
    p.add_argument("--repo", type=Path, default=Path("."), help="the GitOps repository")
    p.add_argument("--state", type=Path, default=None, help="state directory")
    p.add_argument("--output", choices=OUTPUTS, default="text", help=OUTPUT_HELP)
    p.add_argument("-v", "--verbose", action="store_true", help="log what each tick does")
    sub = p.add_subparsers(dest="command", required=True)
    r = _command(sub, "reconcile", "reconcile due (or named) Releases")
    r.add_argument("names", nargs="*", metavar="NAME", help="these Releases, due or not")
    r.add_argument("--all", action="store_true", help="every Release, due or not")
    r.add_argument("--force", action="store_true", help="forced sync of the named Releases")
    r.add_argument("--no-observe", action="store_true", help="do not refresh health first")
    r.add_argument(
        "--orphan",
        action="store_true",
        help="end the named removed Releases as Orphaned, sending nothing to their cluster",
    )
    r.add_argument(
        "--allow-deletions",
        action="store_true",
        help="let the mass-deletion guard's deletions through",
    )
    r.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="run the tick as N processes, one Cluster each at a time (default 1)",
    )
    r.add_argument("--now", type=parse_time, default=None, help=NOW_HELP)
    o = _command(sub, "observe", "refresh the health of Releases' objects")
    o.add_argument("names", nargs="*", metavar="NAME", help="these Releases (default: all)")
    o.add_argument("--now", type=parse_time, default=None, help=NOW_HELP)
    s = _command(sub, "status", "one line per Release")
    s.add_argument("name", nargs="?", default=None, help="this Release only")
    s.add_argument("--now", type=parse_time, default=None, help=NOW_HELP)
    pl = _command(sub, "plan", "what the next tick would do; changes nothing")
    pl.add_argument("name", help="the Release")
    pl.add_argument("--now", type=parse_time, default=None, help=NOW_HELP)
    d = _command(
        sub,
        "diff",
        "what the Releases at a revision would change; changes nothing",
        (*OUTPUTS, "markdown"),
    )
    d.add_argument("names", nargs="*", metavar="NAME", help="these Releases (default: all)")
    d.add_argument("--all", action="store_true", help="every Release (the default)")
    d.add_argument("--revision", default=None, help="a branch, tag or commit (default HEAD)")
    d.add_argument("--live", action="store_true", help="against the cluster, not the inventory")
    d.add_argument("--exit-code", action="store_true", help="exit 1 on an object or rollout change")
    d.add_argument("--now", type=parse_time, default=None, help=NOW_HELP)
    h = _command(sub, "history", "a Release's status changes, from git log -- status/")
    h.add_argument("name", help="the Release")
    return p


def _command(
    sub: Any, name: str, what: str, outputs: Sequence[str] = OUTPUTS
) -> argparse.ArgumentParser:
    """A subcommand that also takes ``--output`` after its name."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=what, description=what)
    parser.add_argument(
        "--output", dest="command_output", choices=outputs, default=None, help=OUTPUT_HELP
    )
    return parser


def _emit(args: argparse.Namespace, rows: list[dict[str, Any]], lines: Sequence[str]) -> None:
    if args.output == "json":
        print(json.dumps(rows, indent=2))
    elif args.output == "yaml":
        print(yaml.safe_dump(rows, sort_keys=False), end="")
    else:
        for line in lines:
            print(line)


def cmd_reconcile(args: argparse.Namespace, repo: Path, state: Path, now: datetime) -> int:
    if args.force and not args.names:
        raise UsageError("--force needs the names of the Releases to force")
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    forced = frozenset(args.names) if args.force else frozenset()
    options = {
        "all_releases": args.all,
        "forced": forced,
        "observe_first": not args.no_observe,
        "orphan": args.orphan,
        "allow_deletions": args.allow_deletions,
    }
    if args.jobs > 1:
        sharded = TickOptions(tuple(args.names), **options)
        report = run_sharded(repo, state, now, args.jobs, sharded)
    else:
        report = run_tick(repo, state, now, args.names, **options)
    for h in report.handled:
        if h.outcome.is_error:
            print(f"{h.name}: {h.outcome.reason}: {h.outcome.message}", file=sys.stderr)
    for line in report.set_warnings:
        print(line, file=sys.stderr)
    if report.commit_error:
        print(f"convoy-batch: {report.commit_error}", file=sys.stderr)
    if report.push_warning:
        print(f"warning: {report.push_warning}", file=sys.stderr)
    lines = [describe(h) for h in report.handled]
    lines += [f"{name}: skipped ({why})" for name, why in report.skipped.items()]
    _emit(args, _report_rows(report), lines)
    return EXIT_ERRORS if report.errored else EXIT_OK


def _report_rows(report: TickReport) -> list[dict[str, Any]]:
    rows = []
    for h in report.handled:
        o = h.outcome
        rows.append(
            {
                "name": h.name,
                "state": h.status.rollout.state.value if h.status.rollout else None,
                "reason": o.reason.value,
                "message": o.message,
                "applied": o.applied,
                "renderRef": o.render.ref if o.render else None,
                "revision": o.render.revision if o.render else None,
                "commit": h.commit,
            }
        )
    return rows


def cmd_observe(args: argparse.Namespace, repo: Path, state: Path, now: datetime) -> int:
    tick = Tick.open(repo, state, now)
    rows = []
    for entry in select(tick, args.names):
        inventory = observe_release(tick, entry)
        for e in inventory.entries if inventory else ():
            h = e.health
            rows.append(
                {
                    "release": entry.name,
                    "object": str(e.key),
                    "state": h.state.value if h else None,
                    "assessedRenderRef": h.assessed_render_ref if h else None,
                    "message": h.message if h else "",
                }
            )
    lines = [f"{r['release']}: {r['object']}: {r['state']} {r['message']}".rstrip() for r in rows]
    _emit(args, rows, lines)
    return EXIT_OK


def cmd_status(args: argparse.Namespace, repo: Path, state: Path, now: datetime) -> int:
    rows, lines = status_rows(repo, state, now, args.name)
    _emit(args, rows, lines)
    return EXIT_OK


def cmd_plan(args: argparse.Namespace, repo: Path, state: Path, now: datetime) -> int:
    row, line = plan_release(repo, state, now, args.name)
    _emit(args, [row], [line])
    return EXIT_ERRORS if row.get("error") else EXIT_OK


def cmd_diff(args: argparse.Namespace, repo: Path, state: Path, now: datetime) -> int:
    if args.all and args.names:
        raise UsageError("diff: name Releases or give --all, not both")
    tick = Tick.open(repo, state, now, revision=args.revision)
    head = Tick.open(repo, state, now) if args.revision else tick
    known = tick.snapshot.releases.keys() | head.snapshot.releases.keys()
    unknown = [n for n in args.names if n not in known]
    if unknown:
        raise UsageError(f"not a Release in releases/: {', '.join(unknown)}")
    try:
        diffs, warnings = diff_releases(tick, head, args.names, args.live)
    finally:  # their exports; nothing of either tick is saved
        tick.sources.close()
        head.sources.close()
    output = args.output
    if output in ("json", "yaml"):
        data = diff_report.rows(diffs, warnings)
        text = json.dumps(data, indent=2) + "\n" if output == "json" else yaml.safe_dump(data)
        print(text, end="")
    else:
        render = diff_report.markdown if output == "markdown" else diff_report.text
        print("\n".join(render(tick.snapshot.commit, diffs, warnings)))
    for d in diffs:
        if d.error is not None:
            print(f"convoy-batch: {d.error}", file=sys.stderr)
    if any(d.error is not None for d in diffs):
        return EXIT_USAGE
    return EXIT_ERRORS if args.exit_code and any(d.differs for d in diffs) else EXIT_OK


def cmd_history(args: argparse.Namespace, repo: Path, state: Path, now: datetime) -> int:
    changes = history.history(repo, args.name)
    _emit(args, [c.row() for c in changes], history.lines(changes))
    return EXIT_OK


COMMANDS = {
    "reconcile": cmd_reconcile,
    "observe": cmd_observe,
    "status": cmd_status,
    "plan": cmd_plan,
    "diff": cmd_diff,
    "history": cmd_history,
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.command_output is not None:  # given after the command: it wins
        args.output = args.command_output
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(message)s",
        stream=sys.stderr,
    )
    repo = args.repo.resolve()
    # The clock is read once per run and passed down (or set by --now).
    now = getattr(args, "now", None) or datetime.now(UTC).replace(microsecond=0)
    try:
        state = args.state or default_state_dir(repo)
        return COMMANDS[args.command](args, repo, state, now)
    except UsageError as exc:
        print(f"convoy-batch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ConvoyError as exc:
        print(f"convoy-batch: {exc.reason}: {exc}", file=sys.stderr)
        return EXIT_ERRORS
    except OSError as exc:  # a file no store turned into its error: still one line
        where = Path(exc.filename) if exc.filename else Path(".")
        print(f"convoy-batch: {StateFailed.reason}: {os_problem(where, exc)}", file=sys.stderr)
        return EXIT_ERRORS
    except Exception as exc:  # a bug: one line, never a traceback or a message with a secret
        print(f"convoy-batch: {unexpected(exc)}", file=sys.stderr)
        return EXIT_ERRORS


if __name__ == "__main__":
    sys.exit(main())
