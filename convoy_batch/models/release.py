"""A Release (SPEC 1): its source and how it renders, its sync, failure and health
policies, sync windows, drift rules and dependencies. Pure."""

import re
from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from convoy_batch.kinds import group_of
from convoy_batch.models.base import Duration, Model, Name, VarValue, field_error
from convoy_batch.models.verification import Verification
from convoy_batch.names import KIND, VERSION, is_subdomain


class Metadata(Model):
    name: Name
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class PlainRender(Model):
    """The files under ``source.path`` as they are (SPEC 3)."""

    type: Literal["Plain"] = "Plain"


class KustomizeRender(Model):
    """``kustomize build`` of ``source.path`` (``kubectl kustomize`` without kustomize)."""

    type: Literal["Kustomize"]


_CHART_REPOSITORY = re.compile(r"^(https?|oci)://[^\s/]+")
_CHART_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_CHART_VERSION = re.compile(r"^[^-\s][^\n]*$")


class HelmRender(Model):
    """``helm template`` of the chart at ``source.path``, or of the chart ``chart`` at
    ``version`` (exact, or a range such as ``~1.2``) of the chart ``repository``
    (``https://``, or ``oci://`` for a registry)."""

    type: Literal["Helm"]
    release_name: Name | None = None
    """The Helm release name; default the Release's name."""
    values: dict[str, Any] = Field(default_factory=dict)
    values_files: tuple[str, ...] = ()
    """Repository paths relative to ``source.path``, applied in order before ``values``."""
    repository: str | None = None
    chart: str | None = None
    version: str | None = None
    credentials: str | None = None
    """A name in the operator's credentials file (never the repository's), for the
    repository and the chart's dependencies."""
    plain_http: bool = Field(default=False, alias="plainHTTP")
    """An ``oci://`` registry spoken to over HTTP without TLS (helm's ``--plain-http``),
    the repository's and the chart's dependencies'."""

    @model_validator(mode="after")
    def _chart_fields(self) -> "HelmRender":
        problem = self._chart_problem()
        if problem is not None:
            raise field_error("HelmRender", *problem)
        return self

    def _chart_problem(self) -> tuple[str, str] | None:
        """(field, what is wrong) of the first problem of a chart from a repository."""
        named = {"chart": self.chart, "version": self.version}
        if self.repository is None:  # credentials and plainHTTP: for its dependencies
            for field, value in named.items():
                if value:
                    return field, "only with repository (a chart from a repository)"
            return None
        if not _CHART_REPOSITORY.match(self.repository):
            return "repository", "an https://, http:// or oci:// URL"
        for field, value in named.items():
            if value is None:
                return field, "required with repository"
        if not _CHART_NAME.match(self.chart or ""):
            return "chart", f"{self.chart!r} is not a chart name"
        if not _CHART_VERSION.match(self.version or ""):
            return "version", f"{self.version!r} is not a version or a range"
        return None

    @model_serializer(mode="wrap")
    def _local_unsaid(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A chart at ``source.path`` dumps as it did before repositories existed (the
        render keys of existing Releases stay what they were)."""
        data: dict[str, Any] = handler(self)
        for name in ("repository", "chart", "version", "credentials"):
            if data.get(name) is None:
                data.pop(name, None)
        if not data.get("plainHTTP"):
            data.pop("plainHTTP", None)
        return data

    @property
    def from_repository(self) -> bool:
        return self.repository is not None


class JsonnetRender(Model):
    """The Jsonnet file ``file`` (relative to ``source.path``), else every ``*.jsonnet``
    at the top of ``source.path`` in name order, with the variables as external
    variables; ``libraryPaths`` (relative to ``source.path``) are searched for imports."""

    type: Literal["Jsonnet"]
    file: str | None = None
    library_paths: tuple[str, ...] = ()


class CommandRender(Model):
    """An operator-defined renderer, by its name in the state directory's renderers file."""

    type: Literal["Command"]
    name: str
    args: tuple[str, ...] = ()


RenderSpec = Annotated[
    PlainRender | KustomizeRender | HelmRender | JsonnetRender | CommandRender,
    Field(discriminator="type"),
]


class Decryption(Model):
    """SOPS-encrypted documents of the source are decrypted with the operator's key
    ``key`` (a name in the state directory's keys file, never a key itself)."""

    provider: Literal["sops"]
    key: Name


class Source(Model):
    path: str | None = None
    """Required but for a Helm chart from a repository (its values files are read there)."""
    url: str | None = None
    ref: str | None = None
    render: RenderSpec = Field(default_factory=PlainRender)
    decryption: Decryption | None = None

    @model_validator(mode="after")
    def _path_given(self) -> "Source":
        if self.path is None and not self.chart_only:
            message = "required field missing (only a Helm chart from a repository may omit it)"
            raise field_error("Source", "path", message)
        if self.path is None and isinstance(self.render, HelmRender) and self.render.values_files:
            raise field_error("Source", "path", "required with render.valuesFiles (read there)")
        return self

    @property
    def chart_only(self) -> bool:
        """A Helm chart from a repository with no ``path``: nothing is read from git."""
        return isinstance(self.render, HelmRender) and self.render.from_repository and not self.path

    @model_serializer(mode="wrap")
    def _plain_unsaid(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A Plain render and no decryption are not written: a Release dumps as it did
        before they existed, so the render cache keys of existing Releases stay."""
        data: dict[str, Any] = handler(self)
        if isinstance(self.render, PlainRender):
            data.pop("render", None)
        if self.decryption is None:
            data.pop("decryption", None)
        if data.get("path") is None:
            data.pop("path", None)
        return data


class SyncMode(StrEnum):
    AUTO = "Auto"
    MANUAL = "Manual"


class HealthStrategy(StrEnum):
    NONE = "None"
    HEALTHY = "Healthy"


class DeletionPolicy(StrEnum):
    """What a Release's removal from the repository does to its objects."""

    DELETE = "Delete"
    ORPHAN = "Orphan"


class RollbackMode(StrEnum):
    AUTO = "Auto"
    NEVER = "Never"


class WavesPolicy(Model):
    health_strategy: HealthStrategy = HealthStrategy.NONE
    timeout: Duration = timedelta(minutes=5)


class SyncPolicy(Model):
    mode: SyncMode = SyncMode.AUTO
    prune: bool = True
    allow_empty: bool = False
    waves: WavesPolicy = Field(default_factory=WavesPolicy)
    create_namespace: bool = False
    """Create ``spec.namespace``, labelled ``convoy.dev/release: <name>``, when it is
    missing, before anything of the render is sent; it is never pruned."""


class FailurePolicy(Model):
    rollback: RollbackMode = RollbackMode.AUTO
    progress_deadline: Duration = timedelta(minutes=10)


class HealthCheck(Model):
    """A health rule in CEL for one kind (Flux's ``healthCheckExprs`` entry): expressions
    over the live object, evaluated by :mod:`convoy_batch.health.cel`. Only the group of
    ``apiVersion`` counts: the rule holds for every version of the kind."""

    api_version: str
    kind: str
    current: str
    """Required: true when the object reached the state it was asked for."""
    in_progress: str | None = None
    failed: str | None = None

    @property
    def group(self) -> str:
        return group_of(self.api_version)

    @model_validator(mode="after")
    def _well_formed(self) -> "HealthCheck":
        version = self.api_version.rsplit("/", 1)[-1]
        if not VERSION.match(version) or (self.group and not is_subdomain(self.group)):
            raise ValueError(f"apiVersion {self.api_version!r} is not group/version or version")
        if not KIND.match(self.kind):
            raise ValueError(f"kind {self.kind!r} is not a Kubernetes kind")
        for name in ("current", "in_progress", "failed"):
            text = getattr(self, name)
            if text is not None and not text.strip():
                raise ValueError(f"{to_camel(name)}: an empty expression")
        return self


def _one_rule_per_kind(checks: tuple[HealthCheck, ...]) -> tuple[HealthCheck, ...]:
    seen: dict[tuple[str, str], int] = {}
    for index, check in enumerate(checks):
        key = (check.group, check.kind)
        if key in seen:
            what = f"{check.group}/{check.kind}" if check.group else check.kind
            raise ValueError(f"[{index}] is a second rule for {what} (first: [{seen[key]}])")
        seen[key] = index
    return checks


HealthChecks = Annotated[tuple[HealthCheck, ...], AfterValidator(_one_rule_per_kind)]


def _unsaid_when_empty(data: dict[str, Any], field: str) -> dict[str, Any]:
    """Drop an empty optional list from a dump: a spec without it dumps as it did before
    the field existed (render cache keys hash the dump)."""
    if not data.get(field):
        data.pop(field, None)
    return data


class SyncWindow(Model):
    """A time when a Release may (``allow``) or may not (``deny``) be synced, as Argo CD's
    project sync windows. ``schedule``, ``duration`` and ``timeZone`` are kept as written
    and read by :mod:`convoy_batch.rollout.windows`: a window that does not parse is the
    error of the Releases it covers (it fails closed), not an invalid file."""

    name: str | None = None
    kind: Literal["allow", "deny"]
    schedule: str
    """A 5-field cron expression, read on the wall clock of ``timeZone``."""
    duration: str
    """How long each slot lasts from its start (a Go duration: ``2h``, ``90m``)."""
    time_zone: str = "UTC"
    """An IANA zone (``Europe/Berlin``)."""
    manual_sync: bool = False
    """A forced sync may pass this window while it keeps the Release closed."""


SyncWindows = tuple[SyncWindow, ...]


_POINTER = re.compile(r"^(/([^~/]|~[01])*)*$")


def _json_pointer(text: str) -> str:
    """An RFC 6901 JSON pointer: ``""`` (the whole object) or ``/``-separated tokens,
    ``~`` written ``~0`` and ``/`` written ``~1``."""
    if not _POINTER.match(text):
        raise ValueError(
            f"{text!r} is not a JSON pointer (RFC 6901: '' or '/a/b', '~0' for '~', '~1' for '/')"
        )
    return text


JsonPointer = Annotated[str, AfterValidator(_json_pointer)]


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise ValueError(f"{text!r} is not a regular expression: {exc}") from None
    return text


Regex = Annotated[str, AfterValidator(_regex)]


class LabelSelector(Model):
    match_labels: dict[str, str] = Field(default_factory=dict)


class DriftTarget(Model):
    """The objects a drift rule is about, as Flux's helm-controller selects them: every
    field given must match; ``name`` and ``namespace`` are regular expressions matched
    whole."""

    group: str | None = None
    version: str | None = None
    kind: str | None = None
    name: Regex | None = None
    namespace: Regex | None = None
    label_selector: LabelSelector | None = None


class DriftIgnore(Model):
    """Paths of the target's objects that convoy-batch sets when it creates them and never
    writes again (Argo CD's ``ignoreDifferences`` ``jsonPointers``, Flux's ``ignore``)."""

    paths: tuple[JsonPointer, ...]
    target: DriftTarget | None = None


class DriftMode(StrEnum):
    CORRECT = "Correct"
    """Drift is corrected by the next sync (recorded once per episode)."""
    REPORT = "Report"
    """Drift is recorded in the status, never written back."""


class Drift(Model):
    """``spec.drift`` of a Release, or the defaults of a Cluster's Releases."""

    mode: DriftMode | None = None
    """A Release's wins over its Cluster's; neither: Correct."""
    ignore: tuple[DriftIgnore, ...] = ()


def _dependency(value: Any) -> Any:
    """``dependsOn`` takes a name or ``{name, acceptedStates}``."""
    return {"name": value} if isinstance(value, str) else value


class Dependency(Model):
    """A Release that must be ready before this one's new render is applied."""

    name: Name
    accepted_states: tuple[Literal["Succeeded", "RolledBack"], ...] = ("Succeeded",)
    """The dependency's rollout states, at its current render, that count as ready."""


DependsOn = tuple[Annotated[Dependency, BeforeValidator(_dependency)], ...]


class ReleaseSpec(Model):
    cluster: Name
    namespace: Name = "default"
    convoy: str | None = None
    source: Source
    vars: dict[str, VarValue] = Field(default_factory=dict)
    interval: Duration = timedelta(minutes=5)
    pin: str | None = None
    sync_policy: SyncPolicy = Field(default_factory=SyncPolicy)
    failure_policy: FailurePolicy | None = None
    health_checks: HealthChecks = ()
    """Health rules for the Release's own objects; before its Cluster's (``health_rules``)."""
    deletion_policy: DeletionPolicy | None = None
    """Unset: ``Delete`` when ``syncPolicy.prune`` is true, else ``Orphan`` (see
    :attr:`deletes`)."""
    sync_windows: SyncWindows = ()
    """This Release's sync windows, with its Cluster's."""
    depends_on: DependsOn = ()
    """Releases of the repository (any Cluster) ready before a new render is applied."""
    drift: Drift | None = None
    """What convoy-batch does when the cluster changed what the render set."""
    verification: Verification | None = None
    """Analyses by metrics before a render's rollout is Succeeded."""

    @model_serializer(mode="wrap")
    def _checks_unsaid(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = _unsaid_when_empty(handler(self), "healthChecks")
        data = _unsaid_when_empty(data, "verification")
        data = _unsaid_when_empty(data, "syncWindows")
        data = _unsaid_when_empty(data, "drift")
        data = _unsaid_when_empty(data, "dependsOn")
        return _unsaid_when_empty(data, "deletionPolicy")

    @property
    def deletes(self) -> bool:
        """Removing the Release deletes its objects (its ``deletionPolicy`` in force)."""
        if self.deletion_policy is None:
            return self.sync_policy.prune
        return self.deletion_policy == DeletionPolicy.DELETE


class Release(Model):
    api_version: Literal["convoy.dev/v1alpha1"]
    kind: Literal["Release"]
    metadata: Metadata
    spec: ReleaseSpec
    _file: str | None = PrivateAttr(default=None)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def file(self) -> str | None:
        """The file of the GitOps repository the Release was read from (a ReleaseSet
        member: its set's file), e.g. ``releases/web.yaml``; None for a Release not read
        from the repository. Never a field of the YAML, so a repository writer cannot
        say it: the operator's keys and credentials name the files that may use them."""
        return self._file

    def read_from(self, path: str) -> Self:
        """This Release as read from the repository's file ``path``."""
        found = self.model_copy()
        found._file = path
        return found
