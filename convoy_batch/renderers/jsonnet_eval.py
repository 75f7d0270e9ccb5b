"""Evaluate one Jsonnet file with the ``jsonnet`` binding, in a process of its own
(run as a script, ``python -I``: it imports nothing of convoy-batch).

Reads a JSON request on stdin: ``root`` (the export), ``file`` (the file to evaluate,
absolute), ``jpath`` (library folders, absolute) and ``extVars``. Writes the result as
JSON on stdout; an error on stderr with exit 1. Imports are read only from inside
``root``: a repository's Jsonnet cannot read the reconciler's files.
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


def main() -> int:
    request = json.load(sys.stdin)
    try:
        import _jsonnet
    except ImportError:
        sys.stderr.write("the jsonnet Python package is not installed\n")
        return 3
    root = os.path.realpath(request["root"])
    try:
        out = _jsonnet.evaluate_file(
            request["file"],
            ext_vars=request["extVars"],
            import_callback=importer(root, request["jpath"]),
        )
    except RuntimeError as exc:
        sys.stderr.write(str(exc).replace(root + os.sep, "") + "\n")
        return 1
    sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
