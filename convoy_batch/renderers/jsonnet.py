"""Jsonnet: the ``jsonnet`` Python binding (the reference C++ implementation, with
wheels on PyPI), run in a child Python process for a time-out and a memory of its own
(the operator's ``limits``). Reads the export (the file listing) and starts one child
per render.

Every variable (built-ins, Cluster vars, Release vars) is an external variable:
``std.extVar("namespace")``. Imports resolve next to the importing file, then in the
``libraryPaths`` (relative to ``source.path``), never outside the source's export. The
result is an object (one manifest), a list of them, or an object whose values are
manifests or lists of them (in key order).

Decided: ``file`` names the one file to evaluate. Without it, every ``*.jsonnet`` at the
top of ``source.path`` is, in name order (Argo CD's directory behaviour with ``recurse``
false, its default): subfolders and ``*.libsonnet`` are only read when imported. None is
an empty render (the pipeline's ``allowEmpty`` rule). Every file is evaluated in the one
child; each that fails is one line of the error, naming it.
"""

import importlib.metadata
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from convoy_batch.errors import RenderFailed
from convoy_batch.models import JsonnetRender
from convoy_batch.renderers import process
from convoy_batch.renderers.base import Exported
from convoy_batch.renderers.job import Job
from convoy_batch.repo.source import SourceFile

_EVAL = Path(__file__).with_name("jsonnet_eval.py")
_MISSING = "Jsonnet: the jsonnet Python package is not installed; pip install 'jsonnet>=0.21,<0.23'"


def _version() -> str | None:
    if importlib.util.find_spec("_jsonnet") is None:
        return None
    try:
        return str(importlib.metadata.version("jsonnet"))
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def tool_key() -> str:
    return f"jsonnet:{_version()}:{sys.executable}"


def render(spec: JsonnetRender, job: Job) -> list[SourceFile]:
    if _version() is None:
        raise RenderFailed(_MISSING)
    files = _files(spec, job)
    if not files:
        return []
    request = {
        "root": str(job.root),
        "files": [str(f) for f in files],
        "jpath": [str(job.inside(p, "libraryPaths")) for p in spec.library_paths],
        "extVars": dict(job.variables),
    }
    text = process.run(
        "Jsonnet",
        [sys.executable, "-I", str(_EVAL)],
        job.root,
        process.minimal_env(job.home),
        limits=job.limits,
        stdin=json.dumps(request).encode(),
    )
    found = []
    for file, result in zip(files, json.loads(text), strict=True):
        where = file.relative_to(job.root).as_posix()
        found += [
            SourceFile(f"{where} [{key}].json", json.dumps(obj, ensure_ascii=False))
            for key, obj in _manifests(result, where)
        ]
    return found


class Jsonnet(Exported[JsonnetRender]):
    def tool_key(self, spec: JsonnetRender, state_dir: Path) -> str:
        return tool_key()

    def files(self, spec: JsonnetRender, job: Job) -> list[SourceFile]:
        return render(spec, job)


JSONNET = Jsonnet()


def _files(spec: JsonnetRender, job: Job) -> list[Path]:
    """``file``, else every ``*.jsonnet`` at the top of ``source.path``, by name (reads
    the export's listing)."""
    if spec.file is not None:
        main = job.inside(spec.file, "file")
        if not main.is_file():
            raise RenderFailed(f"render.file {spec.file!r}: not found under source.path")
        return [main]
    folder = job.source_dir
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.glob("*.jsonnet") if p.is_file()), key=lambda p: p.name)


def _manifests(value: Any, where: str) -> list[tuple[str, Any]]:
    """(key, manifest): one object, a list of them, or a map of objects or lists."""
    if isinstance(value, list):
        return [(str(i), item) for i, item in enumerate(value)]
    if not isinstance(value, dict):
        raise RenderFailed(f"{where}: the result is not an object, a list or a map of objects")
    if "apiVersion" in value or "kind" in value:
        return [("0", value)]
    found: list[tuple[str, Any]] = []
    for key in sorted(value):
        item = value[key]
        if isinstance(item, list):
            found += [(f"{key}.{i}", entry) for i, entry in enumerate(item)]
        else:
            found.append((key, item))
    return found
