"""A ReleaseSet's members (README "ReleaseSets"): one Release per generated parameter set.

:func:`generate` turns a set, the Clusters, and the folders its ``directories``
generators matched into members, each a Release or the one-line error that makes that
member alone invalid, and says when the member set itself cannot be told (a Cluster file
that cannot be read, a generator error, a folder that cannot be read): then the caller
keeps the set's last members (the certainty rules).

Pure: a function of models and names, no I/O.
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from convoy_batch.models import (
    LABEL_RELEASE_SET,
    Cluster,
    ClusterSelector,
    Generator,
    Release,
    ReleaseSet,
    parse_model,
)
from convoy_batch.names import is_label

_REFERENCE = re.compile(r"\$(\$?)\{([^}\n]*)\}")
TEMPLATE_NAMES = ("cluster", "element", "path")
"""The roots of the names a template may use: ``${cluster}``, ``${cluster.labels.<k>}``,
``${element.<k>}``, ``${path}``, ``${path.basename}``; any other ``${...}`` is left as
written (the render's own variables)."""


class GenerationFailed(ValueError):
    """The member set cannot be told: one line naming the file and the field."""


@dataclass(frozen=True)
class Params:
    """One parameter set of the generators."""

    cluster: str | None = None
    element: Mapping[str, Any] = field(default_factory=dict)
    path: str | None = None


@dataclass(frozen=True)
class Member:
    name: str
    cluster: str
    release: Release | None
    error: str | None
    """One line naming the set's file and the field; exactly one of release and error."""


@dataclass(frozen=True)
class Generation:
    members: tuple[Member, ...] = ()
    """In generation order (generators in order, Clusters and folders by name)."""
    failed: str | None = None
    """Why the member set cannot be told (``GenerationFailed``): ``members`` are those
    that could be generated, and the caller removes none of the others (it keeps the
    last members)."""


@dataclass(frozen=True)
class Folders:
    """What a ``directories`` pattern matched at HEAD: folder paths, or why not read."""

    found: Mapping[str, Sequence[str]] = field(default_factory=dict)
    errors: Mapping[str, str] = field(default_factory=dict)


def directory_patterns(release_set: ReleaseSet) -> list[str]:
    """The ``directories`` patterns of the set's generators, matrices included."""
    found = []
    for generator in release_set.spec.generators:
        parts = generator.matrix.generators if generator.matrix else (generator,)
        found += [g.directories.path for g in parts if g.directories is not None]
    return found


def selects(selector: ClusterSelector, labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics over a Cluster's ``metadata.labels``."""
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for expr in selector.match_expressions:
        present = expr.key in labels
        if expr.operator == "In" and labels.get(expr.key) not in expr.values:
            return False
        if expr.operator == "NotIn" and present and labels[expr.key] in expr.values:
            return False
        if expr.operator == "Exists" and not present:
            return False
        if expr.operator == "DoesNotExist" and present:
            return False
    return True


def generate(
    release_set: ReleaseSet,
    path: str,
    clusters: Mapping[str, Cluster],
    cluster_errors: Mapping[str, str],
    folders: Folders,
) -> Generation:
    """The set's members (see module doc). ``path``: the set's file, named in errors."""
    reading = _Reading(clusters, cluster_errors, folders)
    try:
        if "cluster" in release_set.spec.template:
            raise GenerationFailed(
                f"{path}: spec.template.cluster: set by the generators, not the template"
            )
        params = _params(release_set, path, reading)
        named = _named(release_set, path, params, clusters)
    except GenerationFailed as exc:
        return Generation(failed=str(exc))
    members = [
        _member(release_set, path, name, p, clusters.get(p.cluster or ""))
        for name, p in named.items()
    ]
    failures = reading.failures
    return Generation(tuple(members), failures[0] if failures else None)


@dataclass
class _Reading:
    """What the generators read, and what they could not (``failures``, in order)."""

    clusters: Mapping[str, Cluster]
    cluster_errors: Mapping[str, str]
    folders: Folders
    failures: list[str] = field(default_factory=list)


def _params(release_set: ReleaseSet, path: str, reading: _Reading) -> list[Params]:
    """Every generator's parameter sets. What one generator cannot read (a Cluster file,
    a folder) goes to ``reading.failures`` and the rest is generated; a set that is
    wrong in itself raises GenerationFailed."""
    found: list[Params] = []

    def one(generator: Generator, where: str) -> list[Params]:
        return _one(generator, where, reading)

    for i, generator in enumerate(release_set.spec.generators):
        where = f"{path}: spec.generators[{i}]"
        if not _names_clusters(generator):
            raise GenerationFailed(
                f"{where}: a member without a cluster (a directories generator needs a "
                "matrix with clusters or a list)"
            )
        if generator.matrix is None:
            found += one(generator, where)
            continue
        first, second = generator.matrix.generators
        for a in one(first, f"{where}.matrix.generators[0]"):
            for b in one(second, f"{where}.matrix.generators[1]"):
                found.append(_combined(a, b, where))
    for p in found:
        if p.cluster is None:  # a list element without one
            raise GenerationFailed(f"{path}: spec.generators: a list element without a cluster")
    return found


def _names_clusters(generator: Generator) -> bool:
    """Whether the generator's parameter sets can name a Cluster."""
    if generator.matrix is not None:
        return any(_names_clusters(g) for g in generator.matrix.generators)
    return generator.directories is None


def _one(generator: Generator, where: str, reading: _Reading) -> list[Params]:
    clusters, cluster_errors, failures = reading.clusters, reading.cluster_errors, reading.failures
    if generator.list is not None:
        found = []
        for j, element in enumerate(generator.list.elements):
            cluster = element.get("cluster")
            if cluster is not None and not isinstance(cluster, str):
                raise GenerationFailed(f"{where}.list.elements[{j}].cluster: not a name")
            if cluster is not None and cluster in cluster_errors:
                failures.append(cluster_errors[cluster])
                continue
            if not isinstance(element.get("vars", {}), dict):
                raise GenerationFailed(f"{where}.list.elements[{j}].vars: not a mapping")
            found.append(Params(cluster=cluster, element=element))
        return found
    if generator.clusters is not None:
        if cluster_errors:  # a Cluster that cannot be read may be one of the members
            failures.extend(sorted(cluster_errors.values()))
        selector = generator.clusters.selector
        return [
            Params(cluster=name)
            for name, cluster in sorted(clusters.items())
            if selects(selector, cluster.metadata.labels)
        ]
    assert generator.directories is not None  # the model allows exactly one
    pattern, folders = generator.directories.path, reading.folders
    if pattern in folders.errors:
        failures.append(f"{where}.directories.path: {pattern}: {folders.errors[pattern]}")
        return []
    return [Params(path=folder) for folder in sorted(folders.found.get(pattern, ()))]


def _combined(a: Params, b: Params, where: str) -> Params:
    if a.cluster is not None and b.cluster is not None and a.cluster != b.cluster:
        raise GenerationFailed(
            f"{where}.matrix: both generators name a cluster ({a.cluster}, {b.cluster})"
        )
    if a.path is not None and b.path is not None:
        raise GenerationFailed(f"{where}.matrix: both generators give a path")
    return Params(
        cluster=a.cluster or b.cluster, element={**a.element, **b.element}, path=a.path or b.path
    )


def _named(
    release_set: ReleaseSet, path: str, params: list[Params], clusters: Mapping[str, Cluster]
) -> dict[str, Params]:
    """Each parameter set by its member's name; a name that is not a DNS-1123 label, or
    that two parameter sets share, cannot be told apart: the generation fails."""
    named: dict[str, Params] = {}
    for p in params:
        template = release_set.spec.name_template
        if template is None:
            base = _basename(p.path) if p.path else None
            parts = [release_set.name, base, p.cluster]
            name = "-".join(part for part in parts if part)
        else:
            try:
                name = _substitute(template, _names(p, clusters.get(p.cluster or "")))
            except KeyError as exc:
                raise GenerationFailed(
                    f"{path}: spec.nameTemplate: ${{{exc.args[0]}}} is not defined "
                    f"for cluster {p.cluster}"
                ) from None
        if not is_label(name):
            raise GenerationFailed(
                f"{path}: spec.nameTemplate: member name {name!r} is not a DNS-1123 label"
            )
        if name in named:
            raise GenerationFailed(f"{path}: spec.nameTemplate: two members are named {name!r}")
        named[name] = p
    return named


def _basename(folder: str) -> str:
    return folder.rstrip("/").rsplit("/", 1)[-1]


def _names(p: Params, cluster: Cluster | None) -> dict[str, str]:
    """The template names of one parameter set (``cluster.labels.*`` when the Cluster is
    read; ``element.*`` scalars only)."""
    names: dict[str, str] = {}
    if p.cluster is not None:
        names["cluster"] = p.cluster
    if cluster is not None:
        names.update({f"cluster.labels.{k}": v for k, v in cluster.metadata.labels.items()})
    for key, value in p.element.items():
        if isinstance(value, str | int | float | bool) and key not in ("cluster", "vars"):
            names[f"element.{key}"] = str(value).lower() if isinstance(value, bool) else str(value)
    if p.path is not None:
        names["path"] = p.path
        names["path.basename"] = _basename(p.path)
    return names


def _substitute(text: str, names: Mapping[str, str]) -> str:
    """``${name}`` replaced for the template's names (KeyError: one of them undefined);
    ``$${x}`` is a literal ``${x}``; any other ``${...}`` is left as written."""

    def replace(match: re.Match[str]) -> str:
        escaped, name = match.group(1), match.group(2)
        if escaped:
            return match.group(0)[1:]
        if name.split(".", 1)[0] not in TEMPLATE_NAMES:
            return match.group(0)
        if name not in names:
            raise KeyError(name)
        return names[name]

    return _REFERENCE.sub(replace, text) if "${" in text else text


def _filled(value: Any, names: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _substitute(value, names)
    if isinstance(value, dict):
        return {k: _filled(v, names) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_filled(v, names) for v in value]
    return value


def _member(
    release_set: ReleaseSet, path: str, name: str, p: Params, cluster: Cluster | None
) -> Member:
    assert p.cluster is not None  # _params refused a member without one
    where = f"{path} (member {name})"
    try:
        spec = _filled(release_set.spec.template, _names(p, cluster))
    except KeyError as exc:
        error = f"{where}: spec.template: ${{{exc.args[0]}}} is not defined for this member"
        return Member(name, p.cluster, None, error)
    if not isinstance(spec.get("vars", {}), dict):
        return Member(name, p.cluster, None, f"{where}: spec.template.vars: not a mapping")
    element_vars = p.element.get("vars") or {}
    override = next(
        (
            o.vars
            for o in release_set.spec.overrides
            if cluster is not None and selects(o.selector, cluster.metadata.labels)
        ),
        {},
    )
    cluster_vars = cluster.spec.vars if cluster is not None else {}
    # template vars < Cluster spec.vars < the element's vars < the first matching override
    merged = {**spec.get("vars", {}), **cluster_vars, **element_vars, **override}
    data = {
        "apiVersion": release_set.api_version,
        "kind": "Release",
        "metadata": {"name": name, "labels": {LABEL_RELEASE_SET: release_set.name}},
        "spec": {**spec, "cluster": p.cluster, **({"vars": merged} if merged else {})},
    }
    try:
        return Member(name, p.cluster, parse_model(Release, data, where), None)
    except ValueError as exc:
        return Member(name, p.cluster, None, str(exc))
