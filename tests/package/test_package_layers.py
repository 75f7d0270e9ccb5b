"""The package's layers: every module and package of ``convoy_batch`` has its floor, and
an import only goes down (or stays in its own package). Read with ``ast`` from every
module, lazy imports inside functions and those under ``TYPE_CHECKING`` included; the
Layout (docs/developer/architecture.md) names each unit once, in this order.

So the pure core (``rollout/``, ``manifests/``) and the machinery below the engine never
reach up into it, and the views and the Dagster layer never import each other.
"""

import ast
import re
from pathlib import Path

import pytest

import convoy_batch

PACKAGE_DIR = Path(convoy_batch.__file__).parent
ARCHITECTURE = PACKAGE_DIR.parent / "docs" / "developer" / "architecture.md"

LAYERS: list[set[str]] = [
    {"cli", "definitions"},
    {"defs"},
    {"assets", "views"},
    {"ticks"},
    {"reconcile"},
    {"engine", "notify"},
    {"metrics", "renderers", "health", "status"},
    {"deployers", "repo", "store"},
    {"state"},
    {"rollout", "manifests"},
    {"models", "errors"},
    {"kinds", "names", "timefmt", "reasons", "httpclient"},
]
"""Top floor first. Units of one floor do not import each other."""
FLOOR = {unit: index for index, floor in enumerate(LAYERS) for unit in floor}


def unit_of(module: str) -> str:
    """The top-level module or package of ``convoy_batch`` a dotted name belongs to."""
    return module.split(".")[1]


def units() -> set[str]:
    found = {p.stem for p in PACKAGE_DIR.glob("*.py") if p.stem != "__init__"}
    return found | {p.parent.name for p in PACKAGE_DIR.glob("*/__init__.py")}


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            if node.module == "convoy_batch":
                names.update(f"convoy_batch.{a.name}" for a in node.names)
    return {n for n in names if n.startswith("convoy_batch.")}


def module_files() -> list[Path]:
    return sorted(PACKAGE_DIR.rglob("*.py"))


def test_every_unit_of_the_package_has_a_floor() -> None:
    assert units() == set(FLOOR), (sorted(units() - set(FLOOR)), sorted(set(FLOOR) - units()))


@pytest.mark.parametrize(
    "path", module_files(), ids=lambda p: str(p.relative_to(PACKAGE_DIR.parent))
)
def test_a_module_imports_only_floors_below_its_own(path: Path) -> None:
    relative = path.relative_to(PACKAGE_DIR)
    if relative == Path("__init__.py"):
        return
    own = relative.parts[0].removesuffix(".py")
    upward = sorted(
        name
        for name in imports_of(path)
        if unit_of(name) != own and FLOOR[unit_of(name)] <= FLOOR[own]
    )
    assert not upward, f"{relative} (floor {FLOOR[own]}) imports upward or sideways: {upward}"


def documented_layout_units() -> list[str]:
    text = ARCHITECTURE.read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    return [m.group(1) for m in re.finditer(r"^  (\w+)(?:/|\.py)", block, re.M)]


def test_the_documented_layout_names_every_unit_once_floor_by_floor() -> None:
    named = documented_layout_units()
    assert sorted(named) == sorted(FLOOR), (named, sorted(FLOOR))
    floors = [FLOOR[unit] for unit in named]
    assert floors == sorted(floors), named
