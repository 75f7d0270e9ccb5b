"""Kustomize: ``kustomize build`` when kustomize is on PATH, else ``kubectl kustomize``
(the kubectl named by ``$CONVOY_KUBECTL``, else the one on PATH). Plugins stay disabled
(neither command enables them unless asked)."""

import os

from convoy_batch.errors import RenderFailed
from convoy_batch.renderers import process
from convoy_batch.renderers.job import Job
from convoy_batch.repo.source import SourceFile

KUBECTL_ENV = "CONVOY_KUBECTL"
_MISSING = (
    "Kustomize: neither kustomize nor kubectl is on PATH; install kubectl "
    "(Debian: apt-get install kubectl) or kustomize, or name a kubectl in $CONVOY_KUBECTL"
)


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
    text = process.run(
        f"Kustomize ({' '.join([os.path.basename(argv[0]), argv[1]])} {target})",
        [*argv, target],
        job.root,
        process.minimal_env(job.home),
    )
    return [SourceFile(f"{target} (kustomize build)", text)]
