"""The modules of ``convoy_batch`` import each other without a cycle.

The graph is read with ``ast`` from every module's top level (an import under
``if TYPE_CHECKING:`` counts, one inside a function does not: a lazy import is the
place for an edge that would close a circle). Importing ``a.b.c`` also runs the package
``a.b``, unless the importing module is inside it already.
"""

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import convoy_batch

PACKAGE_DIR = Path(convoy_batch.__file__).parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def top_level_imports(tree: ast.Module, module: str, is_package: bool) -> Iterator[str]:
    """Every module named by an import outside any function or class."""
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.If | ast.Try | ast.With):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    pending.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])


def edges_of(module: str, imported: set[str]) -> set[str]:
    """The modules of the package that ``module`` runs by importing ``imported``: each one
    and the packages it sits in (but not ``module``'s own packages, already running)."""
    own = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
    found = set()
    for name in imported:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in MODULES and prefix not in own and prefix != module:
                found.add(prefix)
    return found


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        imported = set(top_level_imports(tree, module, path.name == "__init__.py"))
        graph[module] = edges_of(module, imported)
    return graph


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One cycle as a path ``[a, b, ..., a]``; None when the graph is acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_modules_of_convoy_batch_import_each_other_without_a_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_graph_holds_the_imports_that_used_to_close_a_circle() -> None:
    graph = import_graph()
    assert "convoy_batch.manifests.yamlload" in graph["convoy_batch.repo.gitops"]
    assert "convoy_batch.repo.gitops" in graph["convoy_batch.repo.source"]
    assert (
        "convoy_batch.repo.source" in graph["convoy_batch.renderers.pipeline"]
    )  # under TYPE_CHECKING
    assert "convoy_batch.renderers.pipeline" not in graph["convoy_batch.repo.gitops"]
    # a package runs when one of its modules is imported from outside it
    assert "convoy_batch.deployers" in graph["convoy_batch.health.observer"]
    assert "convoy_batch.deployers" not in graph["convoy_batch.deployers.directory"]


def test_a_cycle_is_found_and_shown_as_a_path() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
