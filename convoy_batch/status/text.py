"""The text of ``status/<name>.yaml`` (SPEC 10): parse and write, no I/O.

Reading uses PyYAML's C parser with the YAML 1.2 core scalars that ruamel writes
(:class:`convoy_batch.manifests.yamlload.StatusLoader`; a quiet tick parses every status).
A file with comments is updated with ruamel.yaml's round trip, so it keeps its comments
and key order. A file without comments (every file convoy-batch wrote) is written fresh
by PyYAML's emitter, in the layout ruamel's round trip gives (:class:`_FreshDumper`):
about 1 ms a status against 2 ms, what a first tick pays for each Release. The comment
handling lifts ruamel's comment tokens (``CommentedMap.ca.items``, written against
ruamel.yaml 0.18) off an entry and puts them back after the merge, so a comment below an
entry stays below it.
"""

import io
import re
import threading
from collections.abc import Mapping
from typing import Any, cast

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.error import YAMLError as RuamelError
from ruamel.yaml.representer import RoundTripRepresenter
from ruamel.yaml.resolver import implicit_resolvers
from ruamel.yaml.scalarstring import DoubleQuotedScalarString
from ruamel.yaml.tokens import CommentToken
from yaml.emitter import ScalarAnalysis

from convoy_batch.manifests import yamlload
from convoy_batch.models import ReleaseStatus, parse_model

_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


# --- Reading ----------------------------------------------------------------------------


def parse_status(text: bytes | str, source: str) -> ReleaseStatus:
    """Parse a status file; ValueError with one line naming ``source`` and the field."""
    text = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    docs = yamlload.load_documents(text, source, yamlload.StatusLoader)
    if len(docs) > 1:
        raise ValueError(f"{source}: holds {len(docs)} documents; a status is one")
    data = docs[0] if docs else None
    return ReleaseStatus() if data is None else parse_model(ReleaseStatus, data, source)


SET_KEY = "releaseSet"
"""The one top-level key of a ReleaseSet's status file (``status/<set>.yaml``)."""


def is_set_status(text: bytes | str) -> bool:
    """Whether a status file is a ReleaseSet's: its first key is :data:`SET_KEY` (as
    :func:`render_set_status` writes it)."""
    head = text[:64].decode(errors="replace") if isinstance(text, bytes) else text[:64]
    return head.lstrip("\ufeff").startswith(f"{SET_KEY}:")


def set_status_members(text: bytes | str) -> list[str]:
    """The member names a ReleaseSet's status file lists (none when it does not parse)."""
    text = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    try:
        docs = yamlload.load_documents(text, "status", yamlload.StatusLoader)
        members = docs[0][SET_KEY]["members"] if docs else []
        return [str(m["name"]) for m in members or []]
    except (ValueError, KeyError, TypeError):
        return []


def render_set_status(data: Mapping[str, Any]) -> str:
    """The text of a ReleaseSet's status file: ``{releaseSet: data}``, written fresh."""
    return _fresh_text(_fresh({SET_KEY: data}))


# --- Writing: ruamel round trip, updated in place ---------------------------------------


class _StatusRepresenter(RoundTripRepresenter):
    """Writes ``null`` for unset keys (ruamel's default leaves the value empty)."""


_StatusRepresenter.add_representer(
    type(None), lambda rep, _: rep.represent_scalar("tag:yaml.org,2002:null", "null")
)


_THREAD = threading.local()


def _rt_yaml() -> YAML:
    """The round-trip YAML of this thread (an instance is not shared between threads)."""
    rt: YAML | None = getattr(_THREAD, "yaml", None)
    if rt is not None:
        return rt
    rt = _THREAD.yaml = YAML(typ="rt")
    rt.Representer = _StatusRepresenter
    rt.preserve_quotes = True
    rt.width = 4096  # a long message stays on one line
    rt.indent(mapping=2, sequence=4, offset=2)
    return rt


def render_status(old_text: str | None, status: ReleaseStatus) -> str:
    """The text of ``status``: ``old_text`` updated in place when it is a YAML mapping."""
    rt = _rt_yaml()
    new = status.dump_status()
    doc = None
    # Only a file with comments needs the (slow) round-trip load: without any, the fresh
    # document is what the update would give for every file convoy-batch wrote.
    if old_text is not None and "#" in old_text:
        try:
            doc = rt.load(old_text)
        except RuamelError:
            _THREAD.yaml = None  # not reused after a failure half-way
            rt = _rt_yaml()
            doc = None
    if isinstance(doc, CommentedMap):
        return _dump(rt, _merge(doc, new))
    return _fresh_text(_fresh(new))


def _dump(rt: YAML, doc: Any) -> str:
    out = io.StringIO()
    try:
        rt.dump(doc, out)
    except BaseException:
        _THREAD.yaml = None  # not reused after a failure half-way
        raise
    return out.getvalue()


class _FreshDumper(yaml.SafeDumper):
    """Writes a fresh document (:func:`_fresh`) as ruamel's round trip does: ruamel's
    YAML 1.2 resolvers decide which strings are quoted (what ruamel, or
    :class:`~convoy_batch.manifests.yamlload.StatusLoader`, would read as another type),
    a sequence is indented under its key, ``null`` is written out and times stay
    double-quoted. PyYAML's C emitter would be faster still, but writes a sequence
    level with its key, which would rewrite the layout of every status file."""

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - PyYAML's class registry

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)

    def choose_scalar_style(self) -> str:
        """ruamel's choice: a string that needs quotes and holds a ``'`` or a line break
        is double-quoted (``"no Cluster named 'web'"``, where PyYAML doubles the quotes)."""
        style: str = super().choose_scalar_style()
        event, analysis = cast(yaml.ScalarEvent, self.event), cast(ScalarAnalysis, self.analysis)
        if style == "'" and not event.style and analysis.allow_double_quoted:
            return '"' if "'" in event.value or "\n" in event.value else style
        return style


for _versions, _tag, _pattern, _first in implicit_resolvers:
    if (1, 2) in _versions:
        _FreshDumper.add_implicit_resolver(_tag, _pattern, _first)
_FreshDumper.add_representer(CommentedMap, yaml.SafeDumper.represent_dict)
_FreshDumper.add_representer(CommentedSeq, yaml.SafeDumper.represent_list)
_FreshDumper.add_representer(
    DoubleQuotedScalarString,
    lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", str(text), style='"'),
)
_FreshDumper.add_representer(
    type(None), lambda dumper, _: dumper.represent_scalar("tag:yaml.org,2002:null", "null")
)


def _fresh_text(doc: Any) -> str:
    """The text of a fresh document (see :class:`_FreshDumper`)."""
    text: str = yaml.dump(
        doc, Dumper=_FreshDumper, sort_keys=False, width=4096, allow_unicode=True, indent=2
    )
    return text


def _fresh(value: Any) -> Any:
    """A new node; times become double-quoted strings (SPEC 1: quoted YAML strings)."""
    if isinstance(value, Mapping):
        return CommentedMap((k, _fresh(v)) for k, v in value.items())
    if isinstance(value, list):
        return CommentedSeq(_fresh(v) for v in value)
    if isinstance(value, str) and _TIME.match(value):
        return DoubleQuotedScalarString(value)
    return value


def _merge(node: Any, new: Any) -> Any:
    """``new`` written into ``node``, reusing nodes (and so their comments) where possible."""
    if isinstance(new, Mapping) and isinstance(node, CommentedMap):
        for key in [k for k in node if k not in new]:
            del node[key]
        for key, value in new.items():
            if key in node:
                _merge_entry(node, key, value)
            else:
                node.insert(_insert_at(node, list(new), key), key, _fresh(value))
        return node
    if isinstance(new, list) and isinstance(node, CommentedSeq) and node and new:
        del node[len(new) :]
        for i, value in enumerate(new):
            if i < len(node):
                _merge_entry(node, i, value)
            else:
                node.append(_fresh(value))
        return node
    return node if _same_scalar(node, new) else _fresh(new)


def _merge_entry(parent: Any, key: Any, value: Any) -> None:
    # ruamel keeps the comment lines below an entry on the deepest last node of its
    # value: lift them off and put them back after the merge, so they stay below it.
    tail = _take_tail(parent, key)
    parent[key] = _merge(parent[key], value)
    if tail is not None:
        _put_tail(parent, key, tail)


def _last(node: Any) -> Any:
    """The key or index of a collection's last entry; None for a scalar or empty one."""
    if isinstance(node, CommentedMap | CommentedSeq) and node:
        return list(node)[-1] if isinstance(node, CommentedMap) else len(node) - 1
    return None


def _take_tail(parent: Any, key: Any) -> str | None:
    """Detach the full comment lines that follow ``parent[key]`` (its inline comment stays)."""
    last = _last(parent[key])
    if last is not None:
        return _take_tail(parent[key], last)
    entry, slot = parent.ca.items.get(key), 2 if isinstance(parent, CommentedMap) else 0
    token = entry[slot] if entry else None
    if token is None or "\n" not in token.value.rstrip("\n"):
        return None
    inline, _, rest = token.value.partition("\n")
    entry[slot] = CommentToken(inline + "\n", CommentMark(token.column)) if inline else None
    return str(rest)


def _put_tail(parent: Any, key: Any, tail: str) -> None:
    value, last = parent[key], _last(parent[key])
    if last is not None:
        _put_tail(value, last, tail)
    elif isinstance(value, CommentedMap | CommentedSeq):
        # Below an empty ``[]`` ruamel would print it between the key and the value.
        keys = list(parent) if isinstance(parent, CommentedMap) else []
        following = keys[keys.index(key) + 1 :] if key in keys else []
        if following:
            entry = parent.ca.items.setdefault(following[0], [None] * 4)
            entry[1] = [CommentToken(tail, CommentMark(0)), *(entry[1] or [])]
    else:
        entry = parent.ca.items.setdefault(key, [None] * 4)
        slot = 2 if isinstance(parent, CommentedMap) else 0
        inline = entry[slot].value.rstrip("\n") if entry[slot] is not None else ""
        entry[slot] = CommentToken(f"{inline}\n{tail}", CommentMark(0))


def _insert_at(node: CommentedMap, order: list[str], key: str) -> int:
    """Right after the nearest key that precedes ``key`` in the SPEC order."""
    before = [k for k in order[: order.index(key)] if k in node]
    return list(node).index(before[-1]) + 1 if before else 0


def _same_scalar(old: Any, new: Any) -> bool:
    if isinstance(new, Mapping | list) or isinstance(old, Mapping | list):
        return False
    if isinstance(new, str) and _TIME.match(new) and not isinstance(old, DoubleQuotedScalarString):
        return False  # a time is always written double-quoted
    # A string read back is a ruamel str subclass that remembers its quotes: keep it.
    same_type = type(old) is type(new) or (isinstance(new, str) and isinstance(old, str))
    return same_type and old == new
