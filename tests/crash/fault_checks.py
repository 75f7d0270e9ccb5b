"""What a tick that met a failing system call (ENOSPC, EIO, ...) may say and leave, checked
right after it and before any later tick repairs anything.

- its exit code and stderr are the README's: no traceback, every line of stderr one
  message of a known shape, exit 1 (or 2) exactly when an error is reported, stdout a
  line per Release when the tick ran; a call of its own that failed is never silent (at
  least a warning);
- nothing is claimed that did not happen: every render a status at HEAD, a write-ahead
  record or a cluster object (its ``convoy.dev/render``) names is in the render store and
  verifies; "status commits not written" only when HEAD did not move, and a HEAD that
  moved is not reported so;
- with a single failing call: ``status/`` of the working tree and the index equal HEAD
  (nothing untracked, nothing modified, no ``index.lock`` left), and a person's
  ``git commit -am`` then changes no status.

Reads the case's folders and runs git; changes nothing but what ``person_commits`` does.
"""

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from tests.crash import harness as h

RENDER_ANNOTATION = "convoy.dev/render"
NOT_WRITTEN = "status commits not written"
_REASON_LINE = re.compile(r"^[a-z0-9][a-z0-9-]*: [A-Z][A-Za-z]+: \S")
_LOG_LINE = re.compile(r"^(WARNING|ERROR|INFO) \S")
_TOOL_LINE = re.compile(r"^(convoy-batch|warning): \S")
_REF = re.compile(r"^sha256:([0-9a-f]{64})$")


def output_problems(run: h.TickRun, releases: int) -> list[str]:
    """The exit code and the lines of a tick that met a fault, as the README says."""
    lines = [ln for ln in run.err.splitlines() if ln.strip()]
    problems = []
    if "Traceback" in run.err:
        problems.append(f"a traceback on stderr: {h.last_words(run.err)}")
    odd = [
        ln
        for ln in lines
        if not (_REASON_LINE.match(ln) or _LOG_LINE.match(ln) or _TOOL_LINE.match(ln))
    ]
    if odd and "Traceback" not in run.err:
        problems.append(f"stderr lines of no known shape: {h.short('; '.join(odd[:3]))}")
    errors = [ln for ln in lines if _REASON_LINE.match(ln) or ln.startswith("convoy-batch: ")]
    if run.code not in (0, 1, 2):
        problems.append(f"exit {run.code}")
    elif run.code == 0 and errors:
        problems.append(f"exit 0 with errors reported: {h.short(errors[0])}")
    elif run.code != 0 and not errors:
        problems.append(f"exit {run.code} without an error line: {h.last_words(run.err)}")
    if run.hit is not None and not lines and _own_call(run.hit):
        problems.append("its own call failed, yet nothing was said (a failure swallowed)")
    shown = [ln for ln in run.out.splitlines() if ln.strip()]
    if run.code in (0, 1) and len(shown) != releases:
        problems.append(f"stdout has {len(shown)} lines for {releases} Releases")
    return problems


def _own_call(hit: str) -> bool:
    """Whether the injector's line is a call of the tick's own process (git's are git's to
    handle: fast-import keeps its pack when loosening it into objects fails)."""
    fields = hit.split(" ", 5)
    return len(fields) > 4 and fields[4].startswith("python")


def _status_refs(status: Any) -> set[str]:
    """Every render a status names, applied or not: rollout, lastAttempted,
    lastSuccessful, lastHealthy, history and the waves started (a render is stored before
    its status names it, and one that cannot be stored is named nowhere)."""
    if not isinstance(status, dict):
        return set()
    records = [status.get("rollout"), status.get("lastAttempted")]
    records += [status.get("lastSuccessful"), status.get("lastHealthy")]
    records += [*(status.get("history") or []), *(status.get("waves") or [])]
    return {r["renderRef"] for r in records if isinstance(r, dict) and r.get("renderRef")}


def named_renders(case: Path, snap: h.Snapshot) -> dict[str, str]:
    """renderRef -> who names it: statuses at HEAD, write-ahead records, cluster objects."""
    named: dict[str, str] = {}
    for name, status in snap.raw_statuses.items():
        for ref in _status_refs(status):
            named.setdefault(ref, f"status/{name}.yaml at HEAD")
    intents = case / "state" / "intents"
    for path in sorted(intents.glob("*.json")) if intents.is_dir() else ():
        step = json.loads(path.read_text()).get("step", {})
        named.setdefault(
            step.get("renderRef") or step.get("render_ref") or "", f"intents/{path.name}"
        )
    for rel, obj in snap.cluster.items():
        ref = ((obj or {}).get("metadata") or {}).get("annotations", {}).get(RENDER_ANNOTATION)
        if ref:
            named.setdefault(ref, f"cluster object {rel}")
    named.pop("", None)
    return named


def claim_problems(case: Path, snap: h.Snapshot) -> list[str]:
    """Renders that a status, a record or a cluster object names but the store lacks."""
    problems = []
    renders = case / "state" / "renders"
    for ref, who in sorted(named_renders(case, snap).items()):
        match = _REF.match(ref)
        blob = renders / f"{match.group(1)}.json" if match else None
        if blob is None or not blob.is_file():
            problems.append(f"{who} names {ref[:19]}, not in the render store")
        elif hashlib.sha256(blob.read_bytes()).hexdigest() != match.group(1):  # type: ignore[union-attr]
            problems.append(f"{who} names {ref[:19]}, whose blob does not verify")
    return problems


def commit_report_problems(repo: Path, run: h.TickRun, head_before: str) -> list[str]:
    """Commits that landed reported as not written (``head_before``: HEAD before the tick)."""
    moved = head(repo) != head_before
    said = NOT_WRITTEN in run.err
    if moved and said:
        return ["the status commits landed (HEAD moved) but the tick said they were not written"]
    return []


def tidy_problems(repo: Path) -> list[str]:
    """``status/`` of the index and working tree as HEAD has it, no lock of git left."""
    problems = []
    proc = h.git(repo, "status", "--porcelain", "--untracked-files=all", "--", "status/")
    if proc.stdout.strip():
        problems.append(
            f"status/ differs from HEAD: {h.short('; '.join(proc.stdout.splitlines()))}"
        )
    locks = sorted(str(p.relative_to(repo)) for p in (repo / ".git").rglob("*.lock"))
    if locks:
        problems.append(f"git lock files left: {locks}")
    return problems + h.litter(repo)


def head(repo: Path) -> str:
    return h.git(repo, "rev-parse", "HEAD").stdout.strip()
