"""Each package's docstring is its map: it names every module and subpackage of the
package as ``:mod:`.name```, so a reader finds a module from its package, and a module
added or moved without its line fails here."""

import ast
from pathlib import Path

import pytest

import convoy_batch

PACKAGE_DIR = Path(convoy_batch.__file__).parent


def packages() -> list[Path]:
    return sorted(p.parent for p in PACKAGE_DIR.rglob("*/__init__.py"))


def members(package: Path) -> set[str]:
    """The modules and subpackages directly inside ``package``."""
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    return modules | {p.parent.name for p in package.glob("*/__init__.py")}


def unnamed(package: Path) -> list[str]:
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    return sorted(m for m in members(package) if f":mod:`.{m}`" not in docstring)


@pytest.mark.parametrize("package", packages(), ids=lambda p: p.name)
def test_the_package_docstring_names_each_of_its_modules(package: Path) -> None:
    assert unnamed(package) == [], f"{package.relative_to(PACKAGE_DIR.parent)}/__init__.py"


def test_a_module_the_docstring_does_not_name_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text('"""Has :mod:`.named`; :mod:`.sub`."""\n')
    for name in ("named.py", "forgotten.py", "sub/__init__.py"):
        (package / name).write_text("")

    assert unnamed(package) == ["forgotten"]
