"""Command renderers: programs the operator defines outside the GitOps repository, in
the state directory's ``renderers.yaml`` (or the file named by ``$CONVOY_RENDERERS``),
and a Release names (``{type: Command, name: ..., args: [...]}``).

A repository writer gains no code execution: the command line comes from the
operator's file only; a Release's ``args`` are passed as arguments after it, never
through a shell; an unknown name is a RenderFailed. The program runs in ``source.path``
of a fresh export, with a minimal environment (``CONVOY_RELEASE``, ``CONVOY_CLUSTER``,
``CONVOY_NAMESPACE``, ``CONVOY_REVISION``, ``CONVOY_VAR_<NAME>`` and the definition's
``env``), a time-out and an output limit; its stdout is the YAML stream.

    renderers:
      cdk8s:
        command: [npx, cdk8s, synth, --stdout]
        timeout: 2m
"""

import hashlib
import json
import re
from datetime import timedelta
from pathlib import Path

from pydantic import Field

from convoy_batch.errors import RenderFailed
from convoy_batch.models import CommandRender, Duration, Model
from convoy_batch.renderers import process
from convoy_batch.renderers.job import Job
from convoy_batch.repo.source import SourceFile
from convoy_batch.state.operator_files import operator_path, read_operator_file

FILE_ENV = "CONVOY_RENDERERS"
FILE_NAME = "renderers.yaml"


class Definition(Model):
    command: tuple[str, ...] = Field(min_length=1)
    timeout: Duration = timedelta(seconds=process.DEFAULT_TIMEOUT_S)
    env: dict[str, str] = Field(default_factory=dict)


class RenderersFile(Model):
    renderers: dict[str, Definition] = Field(default_factory=dict)


def definitions_path(state_dir: Path) -> Path:
    return operator_path(state_dir, FILE_ENV, FILE_NAME)


def _definitions(state_dir: Path) -> tuple[Path, RenderersFile | None]:
    """The operator's file (read again only when its size or time changed)."""
    path = definitions_path(state_dir)
    try:
        return path, read_operator_file(path, RenderersFile)
    except ValueError as exc:
        raise RenderFailed(f"Command renderers: {exc}") from None


def _definition(spec: CommandRender, state_dir: Path) -> Definition:
    path, file = _definitions(state_dir)
    definition = None if file is None else file.renderers.get(spec.name)
    if definition is None:
        where = "no such file" if file is None else "not defined there"
        raise RenderFailed(
            f"Command renderer {spec.name!r}: unknown ({where}: {path}); an operator "
            f"defines renderers in the state directory's {FILE_NAME} or ${FILE_ENV}"
        )
    return definition


def tool_key(spec: CommandRender, state_dir: Path) -> str:
    """The definition and the program it starts (its path, size and time)."""
    try:
        definition = _definition(spec, state_dir)
    except RenderFailed as exc:
        return f"command:error:{exc}"
    program = definition.command[0]
    tool = process.find_tool(program, definition.env.get("PATH"))
    identity = tool.identity() if tool is not None else "not-found"
    dump = json.dumps(definition.dump(), sort_keys=True)
    return f"command:{hashlib.sha256(dump.encode()).hexdigest()}:{identity}"


def env_name(variable: str) -> str:
    """``CONVOY_VAR_`` and the variable's name in upper case, other characters ``_``."""
    return "CONVOY_VAR_" + re.sub(r"[^A-Z0-9_]", "_", variable.upper())


def render(spec: CommandRender, job: Job) -> list[SourceFile]:
    definition = _definition(spec, job.state_dir)
    release = job.release
    env = {
        "CONVOY_RELEASE": release.name,
        "CONVOY_CLUSTER": job.cluster.name,
        "CONVOY_NAMESPACE": release.spec.namespace,
        "CONVOY_REVISION": job.revision,
        **{env_name(name): value for name, value in job.variables.items()},
        **definition.env,
    }
    text = process.run(
        f"Command renderer {spec.name!r}",
        [*definition.command, *spec.args],
        job.source_dir,
        process.minimal_env(job.home, env),
        timeout=definition.timeout.total_seconds(),
    )
    return [SourceFile(f"{job.path or '.'} (renderer {spec.name})", text)]
