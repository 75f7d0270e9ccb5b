"""Evaluate Jsonnet files with the ``jsonnet`` binding, in a process of its own (run as
a script, ``python -I``: it imports nothing of convoy-batch).

Reads a JSON request on stdin: ``root`` (the export), ``files`` (the files to evaluate,
absolute, in order), ``jpath`` (library folders, absolute) and ``extVars``. Writes the
results, a JSON list in the order of ``files``, on stdout. Every file is evaluated; each
that fails is one line on stderr (its path in the export, then the error's lines joined
by "; "), and the exit code is 1. Imports are read only from inside ``root``: a
repository's Jsonnet cannot read the reconciler's files.
"""

import json
import os
import sys
from collections.abc import Callable


def importer(root: str, jpath: list[str]) -> Callable[[str, str], tuple[str, bytes]]:
    def load(base: str, rel: str) -> tuple[str, bytes]:
        if os.path.isabs(rel):
            raise RuntimeError(f"import {rel!r}: an absolute path leaves the source")
        for folder in (base, *jpath):
            found = os.path.normpath(os.path.join(folder, rel))
            real = os.path.realpath(found)
            if real != root and not real.startswith(root + os.sep):
                raise RuntimeError(f"import {rel!r}: leaves the source")
            if os.path.isfile(real):
                with open(real, "rb") as file:
                    return found, file.read()
        raise RuntimeError(f"import {rel!r}: file not found")

    return load


def error_line(file: str, message: str, roots: tuple[str, ...]) -> str:
    """One line naming ``file``: the error's lines, joined, paths relative to the export
    (``roots``: its path as given and as resolved)."""
    for root in roots:
        file, message = file.replace(root + os.sep, ""), message.replace(root + os.sep, "")
    lines = (" ".join(line.split()) for line in message.splitlines())
    return f"{file}: " + "; ".join(line for line in lines if line)


def main() -> int:
    request = json.load(sys.stdin)
    try:
        import _jsonnet
    except ImportError:
        sys.stderr.write("the jsonnet Python package is not installed\n")
        return 3
    root = os.path.realpath(request["root"])
    load = importer(root, request["jpath"])
    results, failed = [], False
    for file in request["files"]:
        try:
            out = _jsonnet.evaluate_file(file, ext_vars=request["extVars"], import_callback=load)
        except RuntimeError as exc:
            roots = (request["root"], root)
            sys.stderr.write(error_line(file, str(exc), roots) + "\n")
            failed = True
            continue
        results.append(json.loads(out))
    if failed:
        return 1
    json.dump(results, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
