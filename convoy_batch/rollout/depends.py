"""Order between Releases (``spec.dependsOn``): which dependencies are refused at load
(a name that is no Release, the Release itself, a cycle), the order a tick reconciles
Releases in, and whether a dependency is ready. Pure: over names and statuses.

Ready means Succeeded at the dependency's render of this tick (a Release without
``failurePolicy``: its last healthy render is its current one); ``acceptedStates`` may
admit ``RolledBack`` at that render.
"""

from collections.abc import Collection, Mapping, Sequence

from convoy_batch.models import Dependency, ReleaseStatus


def refused(graph: Mapping[str, Sequence[str]], known: Collection[str]) -> dict[str, str]:
    """Release -> why its ``dependsOn`` is refused (one line, without the file): a name
    that is no Release of ``known``, itself, or a cycle (named whole, for each Release in
    it). ``graph``: each valid Release's dependencies."""
    problems: dict[str, str] = {}
    for name, deps in graph.items():
        unknown = [d for d in deps if d not in known]
        if name in deps:
            problems[name] = f"spec.dependsOn: {name!r} depends on itself"
        elif unknown:
            problems[name] = f"spec.dependsOn: {unknown[0]!r} is no Release in releases/"
    for cycle in _cycles({n: [d for d in deps if d in graph] for n, deps in graph.items()}):
        text = " -> ".join([*cycle, cycle[0]])
        for name in cycle:
            problems.setdefault(name, f"spec.dependsOn: a dependency cycle: {text}")
    return problems


def _cycles(graph: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """The cycles of more than one Release (strongly connected components, Tarjan's), each
    from its first name in sorted order, following its edges."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(_walk(sorted(component), graph))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _walk(members: list[str], graph: Mapping[str, Sequence[str]]) -> list[str]:
    """A path through a cycle's members from the first, each step along an edge."""
    inside = set(members)
    path = [members[0]]
    while True:
        nxt = next((d for d in graph[path[-1]] if d in inside and d not in path), None)
        if nxt is None:
            return path
        path.append(nxt)


def in_order(names: Sequence[str], graph: Mapping[str, Sequence[str]]) -> list[str]:
    """``names`` with each one's dependencies among them before it, otherwise in the
    order given (a stable topological order; a cycle keeps the given order)."""
    chosen = set(names)
    placed: list[str] = []
    done: set[str] = set()

    def place(name: str, trail: frozenset[str]) -> None:
        if name in done or name in trail:
            return
        for dep in graph.get(name, ()):
            if dep in chosen:
                place(dep, trail | {name})
        if name not in done:
            done.add(name)
            placed.append(name)

    for name in names:
        place(name, frozenset())
    return placed


def depth(names: Sequence[str], graph: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Each name's layer among ``names``: 0 without a dependency among them, else one more
    than its deepest one (Releases of one layer may be reconciled side by side)."""
    chosen = set(names)
    found: dict[str, int] = {}
    for name in in_order(names, graph):
        deps = [found[d] for d in graph.get(name, ()) if d in chosen and d in found]
        found[name] = 1 + max(deps) if deps else 0
    return found


def missing(
    dependency: Dependency,
    status: ReleaseStatus,
    render_ref: str,
    failure_policy: bool,
) -> str | None:
    """Why ``dependency`` is not ready (None: it is): its ``status`` against its render of
    this tick, ``render_ref``. ``failure_policy``: the dependency has one (else its last
    healthy render must be its current one)."""
    short = render_ref.removeprefix("sha256:")[:12]
    if not failure_policy:
        healthy = status.last_healthy
        if healthy is not None and healthy.render_ref == render_ref:
            return None
        return f"{dependency.name} is not yet healthy at its render {short}"
    rollout = status.rollout
    accepted = dependency.accepted_states
    wanted = " or ".join(accepted)
    if rollout is not None and rollout.render_ref == render_ref:
        if rollout.state in accepted:
            return None
        return f"{dependency.name} is {rollout.state} at its render {short}, not {wanted}"
    state = rollout.state.value if rollout is not None else "never rolled out"
    where = " at an older render" if rollout is not None else ""
    return f"{dependency.name} is {state}{where}, not {wanted} at its render {short}"
