"""The status commits after a known one, as events. Does git I/O (one ``git log`` and
the status blobs it names, through GitPython).

``git log --cherry-pick --right-only <cursor>...<head> -- status/`` lists them oldest
first. While the cursor is on the head's history that is ``<cursor>..<head>``; after a push
replayed the local commits onto the remote's (new SHAs, the same changes),
``--cherry-pick`` leaves out the copies of the commits the cursor already covers.
"""

from collections.abc import Iterator
from dataclasses import dataclass, replace

import git

from convoy_batch.models import ReleaseStatus
from convoy_batch.status.push import STATUS_DIR
from convoy_batch.status.text import parse_status

_NO_BLOB = "0" * 40
_LINK_MODE = "120000"


@dataclass(frozen=True)
class StatusChange:
    """One status file changed by one commit."""

    commit: str
    release: str
    before: str | None
    """The blob before the commit (None: the file is new)."""
    after: str | None
    """The blob after the commit (None: the file removed, its Release retired)."""
    committed_at: str
    """The commit's date (RFC 3339), for an event whose status holds no time."""
    subject: str = ""
    """The commit's subject (a retirement's tells what became of the Release)."""


class CursorGone(Exception):
    """The cursor names no commit of this repository (it was replaced or rewritten)."""


def status_changes(repo: git.Repo, since: str, head: str) -> list[StatusChange]:
    """The changes of ``status/*.yaml`` by the commits after ``since`` up to ``head``,
    oldest first (merges left out: a status commit has one parent)."""
    try:
        repo.git.rev_parse("--verify", "--quiet", f"{since}^{{commit}}")
    except git.GitCommandError:
        raise CursorGone(since) from None
    out = repo.git.log(
        "--reverse",
        "--no-merges",
        "--no-renames",
        "--cherry-pick",
        "--right-only",
        "--raw",
        "--no-abbrev",
        "--format=%x00%H %cI %s",
        f"{since}...{head}",
        "--",
        f"{STATUS_DIR}/",
    )
    return list(_parse_log(out))


def _parse_log(out: str) -> Iterator[StatusChange]:
    for chunk in filter(None, out.split("\0")):
        head, *lines = chunk.strip().splitlines()
        commit, committed_at, *said = head.split(" ", 2)
        subject = said[0] if said else ""
        for line in lines:
            change = _raw_line(line, commit, committed_at)
            if change is not None:
                yield replace(change, subject=subject)


def _raw_line(line: str, commit: str, committed_at: str) -> StatusChange | None:
    """A ``--raw`` line (``:<mode> <mode> <blob> <blob> <M|A|D>\\t<path>``) of a status
    file that is there after the commit, or that the commit removed; None for anything
    else."""
    if not line.startswith(":") or "\t" not in line:
        return None
    info, path = line[1:].split("\t", 1)
    _old_mode, new_mode, old, new, _kind = info.split()
    folder, _, name = path.partition("/")
    if folder != STATUS_DIR or "/" in name or not name.endswith(".yaml"):
        return None
    if new_mode == _LINK_MODE:
        return None
    before = None if old == _NO_BLOB else old
    after = None if new == _NO_BLOB else new
    if before is None and after is None:
        return None
    return StatusChange(commit, name.removesuffix(".yaml"), before, after, committed_at)


class StatusBlobs:
    """Status files by blob id, each parsed once (a commit's "after" is often the next
    one's "before"); a blob that does not parse reads as no status."""

    def __init__(self, repo: git.Repo) -> None:
        self.repo = repo
        self._parsed: dict[str, ReleaseStatus | None] = {}

    def get(self, blob: str | None, name: str) -> ReleaseStatus | None:
        if blob is None:
            return None
        if blob not in self._parsed:
            data = git.Blob(self.repo, bytes.fromhex(blob)).data_stream.read()
            try:
                self._parsed[blob] = parse_status(data, f"{STATUS_DIR}/{name}.yaml {blob[:12]}")
            except ValueError:
                self._parsed[blob] = None
        return self._parsed[blob]
