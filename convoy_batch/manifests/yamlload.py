"""Every YAML loader of convoy-batch, and loading with the limits Kubernetes' own decoder
has. No I/O.

Three loaders, each PyYAML's C loader with its own scalars, because each reads what
another program wrote:

- :class:`ManifestLoader`: manifests, Release and Cluster files, as kubectl reads them
  (go-yaml v2's YAML 1.1 scalars);
- :class:`StatusLoader`: status files, in the YAML 1.2 core schema that ruamel writes;
- :class:`StoredObjectLoader`: directory-cluster objects, as PyYAML's safe dumper writes
  them, timestamps kept as text.

A YAML alias makes a document refer to a node again; a few hundred bytes of nested
aliases (an "alias bomb") expand to billions of nodes, which would take a tick's memory.
Every document is composed first and measured as if its aliases were expanded, counting
each shared node once per use with a memo, before anything is constructed:

- at most :data:`MAX_ALIASES` uses of a node already seen (go-yaml's decoder, which
  kubectl and the API server use, refuses excessive aliasing in the same spirit);
- at most :data:`MAX_NODES` nodes, and at most :data:`MAX_EXPANDED` characters of
  scalars, once expanded (a long string used many times is as large as a deep tree);
- a text of at most :data:`MAX_TEXT` characters.

A document over a limit is :class:`LimitExceeded` (a ValueError), one line naming
``where``.
"""

import re
from dataclasses import dataclass
from typing import Any

import yaml


class LimitExceeded(ValueError):
    """A text or document over a limit; the message is one line naming where."""


MAX_ALIASES = 10_000
MAX_NODES = 1_000_000
MAX_TEXT = 8 * 1024 * 1024
MAX_EXPANDED = 32 * 1024 * 1024


# --- The loaders ------------------------------------------------------------------------


class ManifestLoader(yaml.CSafeLoader):
    """CSafeLoader with go-yaml v2's implicit scalars (what kubectl uses): YAML 1.1
    booleans including ``y``/``n``, Go integer syntax (``0x``, ``0o``, ``0b``, leading
    ``0`` octal), no base-60 numbers, no timestamps; ``!!binary`` and ``!!timestamp``
    stay text; mapping keys become strings as in JSON."""

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - PyYAML's class registry

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """As SafeConstructor's, with keys turned to text as they are read, so that
        ``1`` and ``true`` stay two keys."""
        if not isinstance(node, yaml.MappingNode):
            return super().construct_mapping(node, deep)  # raises its usual error
        self.flatten_mapping(node)
        mapping = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if type(key) is not str:
                key = _key_text(key, key_node)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _key_text(key: Any, node: yaml.Node) -> str:
    if isinstance(key, list | dict):
        raise yaml.constructor.ConstructorError(
            None, None, "a mapping key must be a scalar", node.start_mark
        )
    if isinstance(key, bool):
        return "true" if key else "false"
    return "null" if key is None else str(key)


def _construct_go_int(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    text = str(loader.construct_scalar(node)).replace("_", "")  # type: ignore[arg-type]
    sign, digits = (-1, text[1:]) if text.startswith("-") else (1, text.removeprefix("+"))
    if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
        return sign * int(digits, 8)  # Go reads a leading 0 as octal
    return sign * int(digits, 0)


def _construct_go_bool(loader: yaml.SafeLoader, node: yaml.Node) -> bool:
    text = str(loader.construct_scalar(node)).lower()  # type: ignore[arg-type]
    return text in ("y", "yes", "true", "on")


def _construct_text(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    return str(loader.construct_scalar(node))  # type: ignore[arg-type]


def _resolve(loader: type[yaml.CSafeLoader], rows: tuple[tuple[str, str, str], ...]) -> None:
    """Implicit resolvers (tag, pattern, first characters); ``null`` also matches the
    empty scalar."""
    for tag, pattern, first in rows:
        loader.add_implicit_resolver(
            f"tag:yaml.org,2002:{tag}",
            re.compile(pattern),
            [*first, ""] if tag == "null" else list(first),
        )


_resolve(
    ManifestLoader,
    (
        (
            "bool",
            r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$",
            "yYnNtTfFoO",
        ),
        ("null", r"^(?:~|null|Null|NULL|)$", "~nN"),
        (
            "int",
            r"^[-+]?(?:0[bB][01_]+|0[oO][0-7_]+|0[xX][0-9a-fA-F_]+|0[0-7_]*|[1-9][0-9_]*)$",
            "-+0123456789",
        ),
        (
            "float",
            r"^(?:[-+]?(?:\.[0-9_]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
            "-+0123456789.",
        ),
        ("merge", r"^<<$", "<"),
    ),
)
ManifestLoader.add_constructor("tag:yaml.org,2002:bool", _construct_go_bool)
ManifestLoader.add_constructor("tag:yaml.org,2002:int", _construct_go_int)
ManifestLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_text)
ManifestLoader.add_constructor("tag:yaml.org,2002:binary", _construct_text)


class StatusLoader(yaml.CSafeLoader):
    """YAML 1.2 core schema (ruamel leaves ``no`` or ``1:20`` unquoted), at C speed."""

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - PyYAML's class registry


_resolve(
    StatusLoader,
    (
        ("null", r"^(?:~|null|Null|NULL|)$", "~nN"),
        ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
        ("int", r"^[-+]?[0-9]+$", "-+0123456789"),
    ),
)
StatusLoader.add_constructor("tag:yaml.org,2002:int", lambda _, node: int(node.value))


class StoredObjectLoader(yaml.CSafeLoader):
    """The C loader, keeping timestamps as the strings they were written as (as kubectl):
    reads what the directory cluster's safe dumper writes."""


StoredObjectLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_text)


# --- Loading within the limits -----------------------------------------------------------


@dataclass(frozen=True)
class Document:
    value: Any
    """As constructed (never None: empty documents are left out)."""
    size: int
    """Characters of its scalars, aliases expanded: about its size as JSON, known
    before anything is constructed."""


def documents(
    text: str, where: str, loader: type[yaml.CSafeLoader] = ManifestLoader
) -> list[Document]:
    """The non-empty documents of ``text``, constructed by ``loader`` once they are within
    the limits (LimitExceeded). A syntax error is a ValueError of one line naming
    ``where`` and the line."""
    try:
        return [doc for doc in _load_all(text, loader, where) if doc.value is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise ValueError(f"{where}: {line}invalid YAML: {exc.problem or exc.context}") from None
    except LimitExceeded:
        raise
    except (yaml.YAMLError, ValueError) as exc:  # a ReaderError (control characters) too
        raise ValueError(f"{where}: invalid YAML: {' '.join(str(exc).split())}") from None


def load_documents(
    text: str, where: str, loader: type[yaml.CSafeLoader] = ManifestLoader
) -> list[Any]:
    """The values of :func:`documents`."""
    return [doc.value for doc in documents(text, where, loader)]


def _load_all(text: str, loader: type[yaml.CSafeLoader], where: str) -> list[Document]:
    if len(text) > MAX_TEXT:
        raise LimitExceeded(f"{where}: {len(text)} characters; at most {MAX_TEXT} are read")
    parser = loader(text)
    try:
        docs = []
        while parser.check_node():
            node = parser.get_node()
            if node is None:
                continue
            size = check_expansion(node, where)
            docs.append(Document(parser.construct_document(node), size))
        return docs
    finally:
        parser.dispose()


def check_expansion(root: yaml.Node, where: str) -> int:
    """The characters of ``root``'s scalars with its aliases expanded; LimitExceeded when
    ``root``, expanded, exceeds the limits (a node that contains itself expands without
    end)."""
    sizes: dict[int, tuple[int, int]] = {}  # node -> (nodes, characters), expanded
    pending: set[int] = set()
    aliases = 0
    # (node, None) to visit; (node, its children) once they have been visited
    stack: list[tuple[yaml.Node, list[yaml.Node] | None]] = [(root, None)]
    while stack:
        node, children = stack.pop()
        key = id(node)
        if children is not None:
            pending.discard(key)
            nodes, chars = 1, 0
            for child in children:
                child_nodes, child_chars = sizes[id(child)]
                nodes += child_nodes
                chars += child_chars
            sizes[key] = (nodes, chars)
            if nodes > MAX_NODES or chars > MAX_EXPANDED:
                break
        elif key in sizes:
            aliases += 1  # a node used again: an alias
            if aliases > MAX_ALIASES:
                break
        elif isinstance(node, yaml.ScalarNode):
            sizes[key] = (1, len(node.value))
        elif key in pending:
            break  # it contains itself
        else:
            pending.add(key)
            children = _children(node)
            stack.append((node, children))
            stack.extend((child, None) for child in children)
    else:
        return sizes[id(root)][1]
    raise LimitExceeded(
        f"{where}: its aliases expand it past {MAX_NODES} nodes or {MAX_EXPANDED} "
        f"characters (or use more than {MAX_ALIASES}); refused, as Kubernetes' decoder "
        "refuses excessive aliasing"
    )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
