"""Kustomize: ``kustomize build`` when kustomize is on PATH, else ``kubectl kustomize``
(the kubectl named by ``$CONVOY_KUBECTL``, else the one on PATH). Plugins stay disabled
(neither command enables them unless asked).

A render reads the repository at its revision, and nothing else of the machine. Before
kustomize runs, the kustomizations it would load are walked from the target in the
export (:func:`check_confined`; reads those files, starts nothing): every local path in
a field that loads a directory or a file (:data:`LOADED`) must resolve, links resolved,
inside the export, and a directory there is walked in turn (each once, at most
:data:`MAX_KUSTOMIZATIONS` of them, :data:`MAX_DEPTH` deep). A ``file:`` URL, or a
``git::`` of a local path, is refused wherever it is; a remote (``https://``,
``ssh://``, ``git@host:``...) is kustomize's to fetch, by a git that may use no local
transport (``GIT_ALLOW_PROTOCOL``), so a remote kustomization cannot name a repository
of the machine either. kustomize runs with ``--load-restrictor=LoadRestrictionsRootOnly``
(its default, passed so that nothing changes it): the files a kustomization reads lie
under its own folder.
"""

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from convoy_batch.errors import RenderFailed
from convoy_batch.manifests import yamlload
from convoy_batch.models import KustomizeRender
from convoy_batch.renderers import process
from convoy_batch.renderers.base import Exported
from convoy_batch.renderers.job import Job
from convoy_batch.repo.source import SourceFile

KUBECTL_ENV = "CONVOY_KUBECTL"
_MISSING = (
    "Kustomize: neither kustomize nor kubectl is on PATH; install kubectl "
    "(Debian: apt-get install kubectl) or kustomize, or name a kubectl in $CONVOY_KUBECTL"
)
LOAD_RESTRICTOR = "--load-restrictor=LoadRestrictionsRootOnly"
GIT_PROTOCOLS = "https:http:ssh:git"
"""What the git kustomize starts for a remote may speak: no ``file``, no local path."""

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
LOADED = (
    "resources[]",
    "bases[]",
    "components[]",
    "crds[]",
    "configurations[]",
    "generators[]",
    "transformers[]",
    "validators[]",
    "patchesStrategicMerge[]",
    "patches[].path",
    "patchesJson6902[].path",
    "replacements[].path",
    "configMapGenerator[].files[]",
    "configMapGenerator[].envs[]",
    "configMapGenerator[].env",
    "secretGenerator[].files[]",
    "secretGenerator[].envs[]",
    "secretGenerator[].env",
    "openapi.path",
    "helmGlobals.chartHome",
    "helmGlobals.configHome",
    "helmCharts[].valuesFile",
    "helmCharts[].additionalValuesFiles[]",
)
"""The fields of a kustomization (or a Component) whose entries kustomize loads: a
directory (a kustomization: walked), a file, or a URL. ``[]``: each item of a list (a
single text is read as a list of one). A generator's ``files`` entry may be
``key=path``. An entry holding a line break is inline YAML, not a path."""
MAX_KUSTOMIZATIONS = 1000
MAX_DEPTH = 64

_FILE_URL = re.compile(r"(?<![a-z0-9])file:", re.IGNORECASE)
_GIT_PREFIX = re.compile(r"^git::", re.IGNORECASE)
_REMOTE = re.compile(r"^[a-z][a-z0-9+.-]*://|^[^/\s@]+@[^/\s:]+:", re.IGNORECASE)


def _command() -> tuple[list[str], process.Tool] | None:
    tool = process.find_tool("kustomize")
    if tool is not None:
        return [tool.path, "build"], tool
    named = os.environ.get(KUBECTL_ENV)
    tool = process.Tool("kubectl", named) if named else process.find_tool("kubectl")
    if tool is None or not os.access(tool.path, os.X_OK):
        return None
    return [tool.path, "kustomize"], tool


def tool_key() -> str:
    found = _command()
    if found is None:
        return "kustomize:none"
    argv, tool = found
    return f"{tool.name} {argv[1]}:{tool.identity()}"


def render(job: Job) -> list[SourceFile]:
    found = _command()
    if found is None:
        raise RenderFailed(_MISSING)
    argv, _ = found
    target = job.path or "."
    check_confined(job, target)
    text = process.run(
        f"Kustomize ({' '.join([os.path.basename(argv[0]), argv[1]])} {target})",
        [*argv, LOAD_RESTRICTOR, target],
        job.root,
        process.minimal_env(job.home, {"GIT_ALLOW_PROTOCOL": GIT_PROTOCOLS}),
        limits=job.limits,
    )
    return [SourceFile(f"{target} (kustomize build)", text)]


class Kustomize(Exported[KustomizeRender]):
    def tool_key(self, spec: KustomizeRender, state_dir: Path) -> str:
        return tool_key()

    def files(self, spec: KustomizeRender, job: Job) -> list[SourceFile]:
        return render(job)


KUSTOMIZE = Kustomize()


# --- What a build may read -----------------------------------------------------------------


def check_confined(job: Job, target: str) -> None:
    """Walk the kustomizations reachable from ``target`` (relative to the export's root)
    through the local directories of :data:`LOADED`; RenderFailed, one line naming the
    kustomization file, the field and the entry as written, for an entry that leaves
    the repository or is a local URL, and when the walk is over its bounds."""
    pending = [(job.root / target, 0)]
    seen: set[str] = set()
    while pending:
        folder, depth = pending.pop()
        real = os.path.realpath(folder)
        if real in seen:
            continue  # reached again (a shared base, or a cycle kustomize refuses)
        seen.add(real)
        if len(seen) > MAX_KUSTOMIZATIONS:
            raise RenderFailed(
                f"Kustomize ({target}): more than {MAX_KUSTOMIZATIONS:,} kustomizations are "
                "reachable from it"
            )
        if depth > MAX_DEPTH:
            raise RenderFailed(
                f"Kustomize ({target}): kustomizations nest more than {MAX_DEPTH} deep"
            )
        for file in _kustomization_files(folder):
            where = Path(os.path.realpath(file)).relative_to(os.path.realpath(job.root))
            for field, entry in _entries(_read(file, where.as_posix())):
                found = _checked(job, Path(real), entry, f"Kustomize: {where}: {field}")
                if found is not None:
                    pending.append((found, depth + 1))


def _kustomization_files(folder: Path) -> list[Path]:
    return [folder / name for name in KUSTOMIZATION_FILES if (folder / name).is_file()]


def _read(file: Path, where: str) -> list[Any]:
    """The documents of a kustomization file (RenderFailed, one line: it does not
    parse; what kustomize would load from it cannot be known)."""
    try:
        return [doc.value for doc in yamlload.documents(file.read_text(encoding="utf-8"), where)]
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RenderFailed(f"Kustomize: {where}: {' '.join(str(exc).split())}") from None


def _entries(docs: list[Any]) -> Iterator[tuple[str, str]]:
    """(field as a message names it, entry as written) of every :data:`LOADED` entry."""
    for doc in docs:
        for spec in LOADED:
            yield from _values(doc, spec.split("."), "")


def _values(node: Any, parts: list[str], name: str) -> Iterator[tuple[str, str]]:
    if not parts:
        if isinstance(node, str):
            yield name, node
        return
    key, each = parts[0].removesuffix("[]"), parts[0].endswith("[]")
    value = node.get(key) if isinstance(node, dict) else None
    field = f"{name}.{key}" if name else key
    if not each:
        yield from _values(value, parts[1:], field)
        return
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    for index, item in enumerate(items):
        if isinstance(item, str) and key == "files":
            item = item.split("=", 1)[-1]  # key=path
        yield from _values(item, parts[1:], f"{field}[{index}]")


def _checked(job: Job, folder: Path, entry: str, where: str) -> Path | None:
    """The directory to walk next for ``entry`` of the kustomization in ``folder``, None
    when there is none (a file, a remote, inline YAML, or nothing there: kustomize then
    reads it as a remote, or says it is missing); RenderFailed when it is refused."""
    if "\n" in entry:
        return None
    shown = repr(job.masked(entry))
    if _FILE_URL.search(entry):
        raise RenderFailed(f"{where} {shown}: a file: URL is never read (only remote ones)")
    local = _GIT_PREFIX.sub("", entry)
    if _REMOTE.match(local):
        return None
    if local != entry:
        raise RenderFailed(f"{where} {shown}: a git:: of a local path is never read")
    path = folder / entry
    if not job.contains(path):
        raise RenderFailed(f"{where} {shown}: leaves the repository")
    return path if path.is_dir() else None
