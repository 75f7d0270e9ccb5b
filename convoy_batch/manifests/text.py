"""A source file's text: its ``${name}`` references substituted, and its documents
parsed (JSON for ``*.json``, else YAML), each within ``yamlload.MAX_TEXT`` characters.
What a render does to each file, and a ``job`` analysis to its Job. Pure: no I/O."""

import json
import re
from collections.abc import Mapping

from convoy_batch.errors import RenderFailed
from convoy_batch.manifests import yamlload

_REFERENCE = re.compile(r"\$(\$?)\{([^}\n]*)\}")


def substitute(text: str, variables: Mapping[str, str], where: str) -> str:
    """Replace ``${name}`` where ``name`` is one of ``variables`` (substitution only where
    asked: a built-in, or declared in ``vars``); ``$${x}`` is a literal ``${x}``; any other
    ``${...}`` is left as written (a shell script's ``${FRONTEND_ADDR}`` in public
    content, which Argo CD never substitutes either). A text that substitution would grow
    past the file limit (``yamlload.MAX_TEXT``) is a RenderFailed before it is made."""
    if "${" not in text:
        return text
    length = len(text)

    def replace(match: re.Match[str]) -> str:
        nonlocal length
        escaped, name = match.group(1), match.group(2)
        if escaped:
            return match.group(0)[1:]
        value = variables.get(name)
        if value is None:
            return match.group(0)
        length += len(value) - len(match.group(0))
        if length > yamlload.MAX_TEXT:
            raise RenderFailed(
                f"{where}: over {yamlload.MAX_TEXT} characters once variables are "
                f"substituted; at most {yamlload.MAX_TEXT} are read"
            )
        return value

    return _REFERENCE.sub(replace, text)


def kept_references(text: str, variables: Mapping[str, str]) -> list[str]:
    """The references :func:`substitute` leaves as written in ``text`` (no such variable
    is declared), each once, sorted; a ``$${x}`` is none."""
    return sorted(
        {
            m.group(0)
            for m in _REFERENCE.finditer(text)
            if not m.group(1) and m.group(2) not in variables
        }
    )


def parse_file(path: str, text: str) -> list[yamlload.Document]:
    """The non-empty documents of one source file: JSON for ``*.json``, else YAML; a
    file of either is at most ``yamlload.MAX_TEXT`` characters."""
    if not path.endswith(".json"):
        try:
            return yamlload.documents(text, path)
        except ValueError as exc:
            raise RenderFailed(str(exc)) from None
    if len(text) > yamlload.MAX_TEXT:
        raise RenderFailed(f"{path}: {len(text)} characters; at most {yamlload.MAX_TEXT} are read")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RenderFailed(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    # JSON has no aliases: its objects are no larger than its text, measured as a whole
    # once the render's JSON is made.
    return [] if doc is None else [yamlload.Document(doc, 0)]
