"""Loading YAML text with the limits Kubernetes' own decoder has: no I/O.

A YAML alias makes a document refer to a node again; a few hundred bytes of nested
aliases (an "alias bomb") expand to billions of nodes, which would take a tick's memory.
Every document is composed first (libyaml, through PyYAML's C loader) and measured as
if its aliases were expanded, counting each shared node once per use with a memo, before
anything is constructed:

- at most :data:`MAX_ALIASES` uses of a node already seen (go-yaml's decoder, which
  kubectl and the API server use, refuses excessive aliasing in the same spirit);
- at most :data:`MAX_NODES` nodes once expanded;
- a text of at most :data:`MAX_TEXT` characters.

A document over a limit is :class:`LimitExceeded` (a ValueError), one line naming
``where``.
"""

from typing import Any

import yaml


class LimitExceeded(ValueError):
    """A text or document over a limit; the message is one line naming where."""


MAX_ALIASES = 10_000
MAX_NODES = 1_000_000
MAX_TEXT = 8 * 1024 * 1024


def load_all(text: str, loader: type[yaml.CSafeLoader], where: str) -> list[Any]:
    """Every document of ``text`` (None for an empty one), constructed by ``loader``
    once it is within the limits; yaml.YAMLError for a syntax error."""
    if len(text) > MAX_TEXT:
        raise LimitExceeded(f"{where}: {len(text)} characters; at most {MAX_TEXT} are read")
    parser = loader(text)
    try:
        docs = []
        while parser.check_node():
            node = parser.get_node()
            if node is not None:
                check_expansion(node, where)
            docs.append(parser.construct_document(node) if node is not None else None)
        return docs
    finally:
        parser.dispose()


def check_expansion(root: yaml.Node, where: str) -> None:
    """ValueError when ``root``, its aliases expanded, exceeds the limits (a node that
    contains itself expands without end)."""
    sizes: dict[int, int] = {}
    pending: set[int] = set()
    aliases = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            pending.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(node))
            if sizes[key] > MAX_NODES:
                break
            continue
        if key in sizes:
            aliases += 1  # a node used again: an alias
            if aliases > MAX_ALIASES:
                break
            continue
        if key in pending:
            break  # it contains itself
        pending.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))
    else:
        return
    raise LimitExceeded(
        f"{where}: its aliases expand it past {MAX_NODES} nodes (or use more than "
        f"{MAX_ALIASES}); refused, as Kubernetes' decoder refuses excessive aliasing"
    )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
