"""The pure core stays pure: ``convoy_batch/rollout/`` does no I/O and never reads the clock.

The modules are parsed with ``ast`` (not imported), so a lazy import inside a function
counts as much as one at the top.
"""

import ast
from pathlib import Path

import pytest

import convoy_batch.rollout

ROLLOUT_DIR = Path(convoy_batch.rollout.__file__).parent
ROLLOUT_FILES = sorted(ROLLOUT_DIR.glob("*.py"))

FORBIDDEN = [
    "dagster",
    "git",
    "ruamel",
    "yaml",
    "kubernetes",
    "filelock",
    "os",
    "sys",
    "subprocess",
    "pathlib",
    "shutil",
    "tempfile",
    "io",
    "socket",
    "time",
    "random",
    "logging",
    "importlib",
    "convoy_batch.deployers",
    "convoy_batch.errors",
]
ALLOWED = {
    "__future__",
    "collections",
    "dataclasses",
    "datetime",
    "enum",
    "functools",
    "itertools",
    "operator",
    "re",
    "types",
    "typing",
    "convoy_batch.models",
    "convoy_batch.names",
    "convoy_batch.reasons",
    "convoy_batch.timefmt",
    "convoy_batch.rollout",
    # The cron library of sync windows: arithmetic on the datetimes it is given, no I/O.
    "croniter",
}
CLOCK_ATTRIBUTES = {"now", "utcnow", "today", "time", "monotonic", "perf_counter", "time_ns"}
IO_BUILTINS = {"open", "print", "input", "exec", "eval", "__import__"}


def imported_modules(tree: ast.AST, package: str = "convoy_batch.rollout") -> set[str]:
    """Every module named by an ``import`` or ``from ... import`` anywhere in the tree,
    relative imports resolved against ``package``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            prefix = ".".join(base) if node.level else ""
            names.add(".".join(p for p in (prefix, node.module or "") if p))
    return names


def impure_calls(tree: ast.AST) -> list[str]:
    """Calls that read the clock (``x.now()``, ``time.time()``) or do I/O (``open()``)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in CLOCK_ATTRIBUTES:
            found.append(f"line {node.lineno}: .{func.attr}()")
        elif isinstance(func, ast.Name) and func.id in IO_BUILTINS | CLOCK_ATTRIBUTES:
            found.append(f"line {node.lineno}: {func.id}()")
    return found


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_the_rollout_package_has_its_modules() -> None:
    names = {path.stem for path in ROLLOUT_FILES}

    assert {"__init__", "plan", "verdict", "waves", "status"} <= names


@pytest.mark.parametrize("forbidden", FORBIDDEN)
def test_rollout_never_imports_an_io_module(forbidden: str) -> None:
    offending = {
        f"{path.name}: {module}"
        for path in ROLLOUT_FILES
        for module in imported_modules(parse(path))
        if within(module, forbidden)
    }

    assert not offending


@pytest.mark.parametrize("path", ROLLOUT_FILES, ids=lambda p: p.name)
def test_rollout_imports_only_pure_modules(path: Path) -> None:
    modules = imported_modules(parse(path))

    outside = {m for m in modules if not any(within(m, ok) for ok in ALLOWED)}
    assert not outside, f"{path.name} imports {sorted(outside)} (not on the pure list)"


@pytest.mark.parametrize("path", ROLLOUT_FILES, ids=lambda p: p.name)
def test_rollout_never_reads_the_clock_or_does_io(path: Path) -> None:
    assert impure_calls(parse(path)) == []


def test_the_checks_catch_what_they_look_for() -> None:
    source = """
import os.path
from datetime import datetime
import time
def f():
    from ruamel.yaml import YAML
    open("x")
    from ..deployers import base
    from .plan import ROWS
    return datetime.now(), time.time(), datetime.utcnow()
"""
    tree = ast.parse(source)

    assert imported_modules(tree) == {
        "os.path",
        "datetime",
        "time",
        "ruamel.yaml",
        "convoy_batch.deployers",
        "convoy_batch.rollout.plan",
    }
    assert impure_calls(tree) == [
        "line 7: open()",
        "line 10: .now()",
        "line 10: .time()",
        "line 10: .utcnow()",
    ]
