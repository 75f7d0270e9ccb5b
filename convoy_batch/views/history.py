"""``convoy-batch history NAME``: a Release's status log, ``git log -- status/<name>.yaml``
read as a table: when, old -> new state, reason, render, revision, commit.

Reads committed git objects only (never the working tree or the state directory).
"""

from dataclasses import dataclass
from typing import Any

import git

from convoy_batch.errors import UsageError
from convoy_batch.models import ReleaseStatus
from convoy_batch.rollout.retire import parse_retired
from convoy_batch.rollout.status import short_ref, transition, written_at
from convoy_batch.status.text import parse_status
from convoy_batch.timefmt import format_time


@dataclass(frozen=True)
class Change:
    commit: str
    time: str
    before: str
    after: str
    reason: str
    message: str
    render: str | None
    revision: str | None
    verification: str | None = None
    """The status's verification at that commit: its phase and render (None: none)."""

    def row(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "from": self.before,
            "to": self.after,
            "reason": self.reason,
            "message": self.message,
            "renderRef": self.render,
            "revision": self.revision,
            "commit": self.commit,
            "verification": self.verification,
        }


def _status_at(commit: git.Commit, path: str) -> ReleaseStatus | None:
    try:
        blob = commit.tree / path
    except KeyError:
        return None
    try:
        return parse_status(blob.data_stream.read(), f"{path} at {commit.hexsha[:12]}")
    except ValueError:
        return None  # a version that does not parse reads as no status


def history(repo_path: Any, name: str) -> list[Change]:
    """The changes of ``status/<name>.yaml`` on HEAD's history, oldest first."""
    repo = git.Repo(repo_path)
    path = f"status/{name}.yaml"
    commits = list(repo.iter_commits("HEAD", paths=path))
    if not commits:
        raise UsageError(f"{path}: no status history")
    changes = []
    for commit in reversed(commits):
        after = _status_at(commit, path)
        before = _status_at(commit.parents[0], path) if commit.parents else None
        attempt = after.last_attempted if after is not None else None
        old, new, reason = transition(before, after)
        message = attempt.message if attempt else ""
        if after is None and before is not None:  # removed: the Release was retired
            new, reason, message = _retired(commit.summary, new)
        when = written_at(after) or commit.committed_datetime
        changes.append(
            Change(
                commit=commit.hexsha,
                time=format_time(when),
                before=old,
                after=new,
                reason=reason,
                message=message,
                render=attempt.render_ref if attempt else None,
                revision=attempt.revision if attempt else None,
                verification=_verification(after),
            )
        )
    return changes


def _verification(status: ReleaseStatus | None) -> str | None:
    block = status.verification if status is not None else None
    return f"{block.phase} {short_ref(block.render_ref)}" if block is not None else None


def _retired(summary: str | bytes, fallback: str) -> tuple[str, str, str]:
    """(state, reason, message) of the commit that removed a retired Release's status
    file, read from its subject (``web: Succeeded -> Deleted (2 objects deleted, 0 kept)``)."""
    text = summary.decode(errors="replace") if isinstance(summary, bytes) else summary
    found = parse_retired(text)
    if found is None:
        return fallback, "-", ""
    state, detail = found
    return state, state, detail


def short_revision(revision: str | None) -> str:
    """A commit's first 12 digits; a chart's version with its digest's first 12."""
    if revision is None:
        return "-"
    version, at, digest = revision.partition("@sha256:")
    return f"{version}@sha256:{digest[:12]}" if at else revision[:12]


def lines(changes: list[Change]) -> list[str]:
    """A table a person reads: one line per status commit."""
    verified = any(c.verification for c in changes)  # a column only where there is one
    head: tuple[str, ...] = ("TIME", "STATE", "REASON", "RENDER", "REVISION", "COMMIT")
    rows = [head + (("VERIFICATION",) if verified else ())]
    for c in changes:
        row = (
            c.time,
            f"{c.before} -> {c.after}",
            c.reason,
            short_ref(c.render),
            short_revision(c.revision),
            c.commit[:12],
        )
        rows.append(row + ((c.verification or "-",) if verified else ()))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
