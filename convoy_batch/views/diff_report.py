"""``diff``'s output: text for a terminal, Markdown for a pull-request comment (a table,
then one collapsible section per Release), rows for yaml and json. Pure: no I/O."""

from collections.abc import Sequence
from typing import Any

from convoy_batch.manifests.drift import WHOLE
from convoy_batch.rollout.status import short_ref
from convoy_batch.views.diff import ObjectChange, ReleaseDiff

_SIGN = {"added": "+", "changed": "~", "removed": "-", "kept": "=", "ignored": "#"}
_AGAINST = {
    "applied": "the applied render",
    "live": "the live cluster",
    "HEAD": "the render at HEAD (never applied from this state directory)",
}


def summary(d: ReleaseDiff) -> str:
    if d.error is not None or d.gone:
        return d.error or d.plan_line
    counts = ", ".join(f"{d.count(c)} {c}" for c in ("added", "changed", "removed"))
    kept, ignored = d.count("kept"), d.count("ignored")
    counts += f", {kept} kept (prune: false)" if kept else ""
    said = counts if d.changed else "no change"
    said += f", {ignored} ignored (drift rules)" if ignored else ""
    against = _AGAINST[d.against or "applied"]
    held = f" (held at the last healthy render {short_ref(d.held)})" if d.held else ""
    return f"{d.name}: {said} against {against}{held}"


def _object_line(c: ObjectChange, gone: bool = False) -> str:
    notes = {"removed": " (pruned)", "kept": " (left in place: prune false)"}
    if c.change == "ignored":
        notes["ignored"] = " (ignored whole)" if WHOLE in c.ignored else " (ignored paths only)"
    if gone:  # a removed Release's retirement deletes or leaves it
        notes = {"removed": " (deleted)", "kept": " (left in place)"}
    return f"{_SIGN[c.change]} {c.key}{notes.get(c.change, '')}"


def text(revision: str, diffs: Sequence[ReleaseDiff], warnings: Sequence[str]) -> list[str]:
    lines = [f"diff at {revision[:12]}"]
    for d in diffs:
        lines.append(summary(d))
        if d.error is not None:
            continue
        if not d.gone:
            lines.append(f"  plan: {d.plan_line.split(': ', 1)[-1]}")
        for c in d.changes:
            lines.append(f"  {_object_line(c, d.gone)}")
            lines += [f"    {line}" for line in c.diff]
    lines += [f"warning: {w}" for d in diffs for w in d.warnings]
    lines += [f"warning: {w}" for w in warnings]
    return lines


def markdown(revision: str, diffs: Sequence[ReleaseDiff], warnings: Sequence[str]) -> list[str]:
    lines = [
        f"### convoy-batch diff at `{revision[:12]}`",
        "",
        "| Release | Cluster | Added | Changed | Removed | Plan |",
        "|---|---|---:|---:|---:|---|",
    ]
    for d in diffs:
        if d.error is not None:
            lines.append(f"| {d.name} | - | - | - | - | error: {_cell(d.error)} |")
            continue
        plan = _cell(d.plan_line.split(": ", 2)[-1]) if d.gone else _plan_cell(d.plan)
        lines.append(
            f"| {d.name} | {d.cluster or '-'} | {d.count('added')} | {d.count('changed')} "
            f"| {d.count('removed')} | {plan} |"
        )
    every = [w for d in diffs for w in d.warnings] + list(warnings)
    if every:
        lines += ["", *[f"> **Warning:** {w}" for w in every]]
    for d in diffs:
        if (d.changed or d.count("ignored")) and d.changes:
            lines += ["", f"<details><summary>{_cell(summary(d))}</summary>", "", "```diff"]
            for c in d.changes:
                lines.append(_object_line(c, d.gone))
                lines += list(c.diff)
            lines += ["```", "", "</details>"]
    return lines


def _plan_cell(plan: dict[str, Any] | None) -> str:
    if not plan:
        return "-"
    cell = f"{plan['action']} {plan['from']} -> {plan['to']} (row {plan['row']})"
    return cell + (f", gate {plan['gate']}" if plan.get("gate") else "")


def _cell(text: str) -> str:
    """Text safe in a table cell and an HTML summary."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def rows(diffs: Sequence[ReleaseDiff], warnings: Sequence[str]) -> dict[str, Any]:
    """Each Release and its changes; a change's ``ignored`` (the pointers its drift rules
    ignore where the live object differs) only when there is one."""
    releases = [
        {
            "name": d.name,
            "cluster": d.cluster,
            "against": d.against,
            "error": d.error,
            "gone": d.gone,
            "changes": [
                {"object": str(c.key), "change": c.change, "diff": list(c.diff)}
                | ({"ignored": list(c.ignored)} if c.ignored else {})
                for c in d.changes
            ],
            "plan": d.plan,
            "held": d.held,
            "warnings": d.warnings,
        }
        for d in diffs
    ]
    return {"releases": releases, "warnings": list(warnings)}
