"""Command renderers: programs the operator defines outside the GitOps repository, in
the state directory's ``renderers.yaml`` (or the file named by ``$CONVOY_RENDERERS``),
and a Release names (``{type: Command, name: ..., args: [...]}``).

A repository writer gains no code execution: the command line comes from the
operator's file only; a Release's ``args`` are passed as arguments after it, never
through a shell; an unknown name is a RenderFailed. The program runs in ``source.path``
of a fresh export, with a minimal environment (``CONVOY_RELEASE``, ``CONVOY_CLUSTER``,
``CONVOY_NAMESPACE``, ``CONVOY_REVISION``, ``CONVOY_VAR_<NAME>`` and the definition's
``env``), a time-out and an output limit; its stdout is the YAML stream.

The same file sets the ``limits`` of every renderer's process (Helm, Kustomize, the
Jsonnet child, Command renderers): its memory (RLIMIT_DATA; a quantity such as ``1Gi``,
``512Mi``, ``2G`` or a number of bytes) and its time-out, 1 GiB and 60 s unless set. A
Command renderer's own ``timeout`` wins for it.

    limits: {memory: 1Gi, timeout: 60s}
    renderers:
      cdk8s:
        command: [npx, cdk8s, synth, --stdout]
        timeout: 2m
"""

import hashlib
import json
import re
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Annotated

from pydantic import BeforeValidator, Field, PlainSerializer, field_validator

from convoy_batch.errors import RenderFailed
from convoy_batch.models import CommandRender, Duration, Model
from convoy_batch.renderers import process
from convoy_batch.renderers.base import Exported
from convoy_batch.renderers.job import Job
from convoy_batch.repo.source import SourceFile
from convoy_batch.state.operator_files import operator_path, read_operator_file, shown

FILE_ENV = "CONVOY_RENDERERS"
FILE_NAME = "renderers.yaml"

_QUANTITY = re.compile(r"^([0-9]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$")
_UNITS = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_UNITS |= {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def parse_memory(value: object) -> int:
    """Bytes of a Kubernetes-style quantity: ``512Mi``, ``1Gi``, ``2G``, ``1000000``."""
    match = _QUANTITY.match(str(value).strip()) if isinstance(value, str | int) else None
    if isinstance(value, bool) or match is None or int(match.group(1)) == 0:
        raise ValueError(f"not a memory size: {value!r} (use a quantity such as 512Mi or 1Gi)")
    return int(match.group(1)) * _UNITS[match.group(2)]


Memory = Annotated[int, BeforeValidator(parse_memory), PlainSerializer(str, return_type=str)]


class Limits(Model):
    """``limits``: what one renderer process may take."""

    memory: Memory = process.DEFAULT_MEMORY
    timeout: Duration = timedelta(seconds=process.DEFAULT_TIMEOUT_S)

    @field_validator("timeout")
    @classmethod
    def _some_time(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("a time-out of 0 would stop every render: give one above 0s")
        return value


class Definition(Model):
    command: tuple[str, ...] = Field(min_length=1)
    timeout: Duration | None = None
    """Unset: ``limits.timeout``."""
    env: dict[str, str] = Field(default_factory=dict)


class RenderersFile(Model):
    limits: Limits = Field(default_factory=Limits)
    renderers: dict[str, Definition] = Field(default_factory=dict)


def definitions_path(state_dir: Path) -> Path:
    return operator_path(state_dir, FILE_ENV, FILE_NAME)


def _definitions(state_dir: Path) -> tuple[Path, RenderersFile | None]:
    """The operator's file (read again only when its size or time changed)."""
    path = definitions_path(state_dir)
    try:
        return path, read_operator_file(path, RenderersFile)
    except ValueError as exc:
        message = str(exc).replace(str(path), shown(path, state_dir))
        raise RenderFailed(f"Renderers: {message}") from None


def limits(state_dir: Path) -> process.Limits:
    """The operator's ``limits`` (the defaults without a file or a ``limits``), each
    named in a message by the file's name and the field (RenderFailed, one line: the
    file cannot be read)."""
    path, file = _definitions(state_dir)
    mine = file.limits if file is not None else Limits()
    return process.Limits(
        memory=mine.memory,
        timeout=mine.timeout.total_seconds(),
        memory_from=f"{path.name} limits.memory",
        timeout_from=f"{path.name} limits.timeout",
    )


def _definition(spec: CommandRender, state_dir: Path) -> Definition:
    path, file = _definitions(state_dir)
    definition = None if file is None else file.renderers.get(spec.name)
    if definition is None:
        where = "no such file" if file is None else "not defined there"
        raise RenderFailed(
            f"Command renderer {spec.name!r}: unknown ({where}: {shown(path, state_dir)}); "
            f"an operator defines renderers in the state directory's {FILE_NAME} or ${FILE_ENV}"
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
    limits = job.limits
    if definition.timeout is not None:
        where = f"{definitions_path(job.state_dir).name} renderers.{spec.name}.timeout"
        limits = replace(limits, timeout=definition.timeout.total_seconds(), timeout_from=where)
    text = process.run(
        f"Command renderer {spec.name!r}",
        [*definition.command, *spec.args],
        job.source_dir,
        process.minimal_env(job.home, env),
        limits=limits,
    )
    return [SourceFile(f"{job.path or '.'} (renderer {spec.name})", text)]


class Command(Exported[CommandRender]):
    """An operator's program: it may write, so it runs in an export of its own, and it
    may call random functions (its output is checked to be stable)."""

    may_vary = True
    runs_program = True

    def tool_key(self, spec: CommandRender, state_dir: Path) -> str:
        return tool_key(spec, state_dir)

    def files(self, spec: CommandRender, job: Job) -> list[SourceFile]:
        return render(spec, job)


COMMAND = Command()
