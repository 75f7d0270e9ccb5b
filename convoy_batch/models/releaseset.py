"""A ReleaseSet (README "ReleaseSets"): its generators, matrix, overrides and
``maxInFlight``. Pure."""

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    model_validator,
)

from convoy_batch.models.base import Model, VarValue
from convoy_batch.models.release import Metadata


class SelectorExpression(Model):
    """One ``matchExpressions`` entry of a label selector (Kubernetes' meaning)."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _values_fit(self) -> "SelectorExpression":
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs values")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self


class ClusterSelector(Model):
    """Clusters by their ``metadata.labels``; empty: every Cluster."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: tuple[SelectorExpression, ...] = ()


class ListGenerator(Model):
    elements: tuple[dict[str, Any], ...]
    """Each element names its ``cluster``; its ``vars`` are the member's; any other key is
    ``${element.<key>}`` in the template."""


class ClustersGenerator(Model):
    selector: ClusterSelector = Field(default_factory=ClusterSelector)


class DirectoriesGenerator(Model):
    path: str
    """A glob over the repository's folders at HEAD (``apps/*``)."""


class Generator(Model):
    """Exactly one of ``list``, ``clusters``, ``directories``, ``matrix``."""

    list: ListGenerator | None = None
    clusters: ClustersGenerator | None = None
    directories: DirectoriesGenerator | None = None
    matrix: "Matrix | None" = None

    @model_validator(mode="after")
    def _exactly_one(self) -> "Generator":
        given = [k for k in ("list", "clusters", "directories", "matrix") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError("exactly one of list, clusters, directories, matrix")
        return self


class Matrix(Model):
    """Every combination of two generators' parameters (neither a matrix)."""

    generators: tuple[Generator, Generator]

    @model_validator(mode="after")
    def _flat(self) -> "Matrix":
        if any(g.matrix is not None for g in self.generators):
            raise ValueError("a matrix of a matrix is not supported")
        return self


class Override(Model):
    """Vars for the members whose Cluster the selector matches; the first match wins."""

    selector: ClusterSelector
    vars: dict[str, VarValue] = Field(default_factory=dict)


def _max_in_flight(value: Any) -> Any:
    if isinstance(value, str) and not re.fullmatch(r"[1-9][0-9]?%|100%", value):
        raise ValueError("a whole number of at least 1, or a percentage 1%-100%")
    if isinstance(value, int) and (isinstance(value, bool) or value < 1):
        raise ValueError("a whole number of at least 1, or a percentage 1%-100%")
    return value


class ReleaseSetSpec(Model):
    generators: Annotated[tuple[Generator, ...], Field(min_length=1)]
    template: dict[str, Any]
    """A Release ``spec`` without ``cluster`` (the generator sets it), its strings read
    with ``${cluster}``, ``${cluster.labels.<key>}``, ``${element.<key>}`` and
    ``${path}`` / ``${path.basename}`` replaced for each member."""
    name_template: str | None = None
    overrides: tuple[Override, ...] = ()
    max_in_flight: Annotated[int | str | None, BeforeValidator(_max_in_flight)] = None
    """Members of one Cluster wave not yet Succeeded, at most this many (or this share)."""


class ReleaseSet(Model):
    api_version: Literal["convoy.dev/v1alpha1"]
    kind: Literal["ReleaseSet"]
    metadata: Metadata
    spec: ReleaseSetSpec

    @property
    def name(self) -> str:
        return self.metadata.name


Generator.model_rebuild()
