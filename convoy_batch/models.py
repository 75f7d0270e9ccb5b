"""The data model of SPEC sections 1, 2, 4 and 10: Release, Cluster, status, inventory.

Pure pydantic v2 models, no I/O. YAML/JSON field names are camelCase; Python names are
snake_case. Unknown fields are refused (``extra="forbid"``); durations and times go
through :mod:`convoy_batch.timefmt` so they parse and print one way everywhere.
"""

import re
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from functools import cached_property, lru_cache
from typing import Annotated, Any, Final, Literal, Self, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError

from convoy_batch.kinds import group_of
from convoy_batch.names import KIND, VERSION, is_label, is_path_segment, is_subdomain
from convoy_batch.timefmt import format_duration, format_time, parse_duration, parse_time

API_VERSION = "convoy.dev/v1alpha1"
LABEL_RELEASE = "convoy.dev/release"
LABEL_RELEASE_SET = "convoy.dev/release-set"
"""The label of a ReleaseSet member (its Release's metadata): the set's name."""
ANNOTATION_RENDER = "convoy.dev/render"
ANNOTATION_FORCE_SYNC = "convoy.dev/force-sync"
ANNOTATION_SYNC_WAVE = "convoy.dev/sync-wave"
ANNOTATION_HOOK = "convoy.dev/hook"
ANNOTATION_PRUNE = "convoy.dev/prune"
HOOK_FINALIZER = "convoy.dev/hook-finalizer"
"""The finalizer every hook is created with on a Kubernetes Cluster, removed once its end
is on record: a Job that deletes itself once finished (``ttlSecondsAfterFinished``) is
still read finished (``stages/hooks.py``)."""
HISTORY_LIMIT = 10

Duration = Annotated[
    timedelta, BeforeValidator(parse_duration), PlainSerializer(format_duration, return_type=str)
]
Time = Annotated[
    datetime, BeforeValidator(parse_time), PlainSerializer(format_time, return_type=str)
]


def _dns1123_label(name: str) -> str:
    if not is_label(name):
        raise ValueError(f"{name!r} is not a DNS-1123 label (lower case a-z, 0-9, '-', max 63)")
    return name


def _scalar_to_str(value: Any) -> Any:
    """Variables are substituted as text: YAML numbers and booleans become their text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


def field_error(model: str, field: str, message: str) -> ValidationError:
    """A validation error of a model validator, placed at ``field`` (so the message
    names the field's whole path, as a field's own validator would)."""
    kind = PydanticCustomError("value_error", message)
    return ValidationError.from_exception_data(
        model, [InitErrorDetails(type=kind, loc=(field,), input=None)]
    )


Name = Annotated[str, AfterValidator(_dns1123_label)]
VarValue = Annotated[str, BeforeValidator(_scalar_to_str)]


class Model(BaseModel):
    """Base of every model: camelCase aliases, unknown fields refused, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    def dump(self) -> dict[str, Any]:
        """The JSON-compatible form with YAML field names, as stored."""
        return self.model_dump(mode="json", by_alias=True)


# --- Release and Cluster (SPEC 1) ------------------------------------------------------


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


# --- Verification by metrics (README "Verification") ----------------------------------


def _cel_problem(text: str) -> str | None:
    """Why the CEL expression ``text`` does not compile (its first line), or None. The
    library is imported here only, on a Release with analyses (its import costs ~0.1 s)."""
    import cel

    try:
        cel.compile(text)
    except Exception as exc:  # the library reports what it refuses in several types
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return " ".join(first.split())[:200]
    return None


class WebMetric(Model):
    """A measurement by an HTTP request whose answer is JSON; ``jsonPath`` (RFC 9535,
    ``$.data.ok``; Argo Rollouts' ``{$.data.ok}`` too) picks the result, else the whole
    answer is the result. ``${name}`` of the Release's variables, ``${revision}`` and
    ``${renderRef}`` are substituted into ``url``."""

    url: str
    method: Literal["GET", "POST", "PUT"] = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    body: str | None = None
    json_path: str | None = None
    timeout: Duration = timedelta(seconds=10)
    credentials: str | None = None
    """A name in the operator's credentials file: its token or its username and
    password are sent (never the repository's)."""

    @model_validator(mode="after")
    def _body_needs_a_method(self) -> "WebMetric":
        if self.body is not None and self.method == "GET":
            raise ValueError("body: a GET request has no body (method: POST or PUT)")
        return self


class PrometheusMetric(Model):
    """An instant query at the tick's ``now``; ``${name}`` of the Release's variables and
    ``${revision}`` (the render's) are substituted into it. A vector's result is the list
    of its sample values, a scalar's the number."""

    address: str
    query: str
    timeout: Duration = timedelta(seconds=10)
    credentials: str | None = None
    """As for ``web``."""


class JobMetric(Model):
    """A Job of the source (``manifest``: a file relative to ``source.path``, the
    Release's variables substituted) applied once per render, named
    ``<its name>-<the renderRef's first 8 digits>``; its completion is a successful
    measurement, its failure a failed one."""

    manifest: str


class MetricProvider(Model):
    """Where a measurement comes from: exactly one provider."""

    web: WebMetric | None = None
    prometheus: PrometheusMetric | None = None
    job: JobMetric | None = None

    @model_validator(mode="after")
    def _one(self) -> "MetricProvider":
        given = [p for p in (self.web, self.prometheus, self.job) if p is not None]
        if len(given) != 1:
            raise ValueError("exactly one provider: web, prometheus or job")
        return self


class Analysis(Model):
    """One analysis of a render once every object is Current (Argo Rollouts' metric):
    a measurement every ``interval`` after ``initialDelay``, each judged by the CEL
    conditions over ``result``; ``count`` measurements conclude it."""

    name: Name
    provider: MetricProvider
    success_condition: str | None = None
    failure_condition: str | None = None
    interval: Duration = timedelta(minutes=1)
    count: int = Field(default=5, ge=1)
    failure_limit: int = Field(default=0, ge=0)
    inconclusive_limit: int = Field(default=0, ge=0)
    initial_delay: Duration = timedelta(0)

    @model_validator(mode="after")
    def _conditions(self) -> "Analysis":
        if self.success_condition is None and self.failure_condition is None:
            raise ValueError("successCondition or failureCondition is needed")
        for field, text in (
            ("successCondition", self.success_condition),
            ("failureCondition", self.failure_condition),
        ):
            if text is not None and (error := _cel_problem(text)) is not None:
                raise ValueError(f"{field}: {error}")
        return self


class Verification(Model):
    analyses: tuple[Analysis, ...] = ()
    templates: tuple[Name, ...] = ()
    """Analyses of the Release's Cluster (``spec.analyses``) by name: the operator's,
    shared by the Releases on it (the snapshot adds them to ``analyses``)."""

    @model_validator(mode="after")
    def _unique(self) -> "Verification":
        if not self.analyses and not self.templates:
            raise ValueError("analyses: at least one analysis or template")
        names = [a.name for a in self.analyses] + list(self.templates)
        if len(set(names)) != len(names):
            raise ValueError("analyses: two analyses have one name")
        return self


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


class DirectoryTarget(Model):
    path: str


class KubernetesTarget(Model):
    kubeconfig: str | None = None
    context: str | None = None


class SimulatedController(Model):
    """Opt-in, directory clusters only: plays the Deployment controller and establishes
    CustomResourceDefinitions, which nothing does there otherwise (see
    :mod:`convoy_batch.deployers.simulated`)."""

    ready_after: Duration = timedelta(seconds=20)
    """A newly applied Deployment generation reports all replicas available this long
    after it was applied."""
    fail_after: Duration = timedelta(seconds=20)
    """A generation whose pod template is annotated ``convoy.dev/simulate: fail`` reports
    ``ProgressDeadlineExceeded`` (health Failed) this long after it was applied."""


class ClusterSpec(Model):
    wave: int = 0
    vars: dict[str, VarValue] = Field(default_factory=dict)
    directory: DirectoryTarget | None = None
    kubernetes: KubernetesTarget | None = None
    simulate: SimulatedController | None = None
    health_checks: HealthChecks = ()
    """The operator's health rules for every Release on the Cluster (``health_rules``)."""
    sync_windows: SyncWindows = ()
    """Sync windows of every Release on the Cluster."""
    drift: Drift | None = None
    """Drift defaults of its Releases: its ``ignore`` rules apply with theirs."""
    analyses: tuple[Analysis, ...] = ()
    """Analyses its Releases name in ``verification.templates``."""

    @model_serializer(mode="wrap")
    def _checks_unsaid(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = _unsaid_when_empty(handler(self), "healthChecks")
        data = _unsaid_when_empty(data, "drift")
        data = _unsaid_when_empty(data, "analyses")
        return _unsaid_when_empty(data, "syncWindows")

    @model_validator(mode="after")
    def _one_target(self) -> "ClusterSpec":
        if self.directory is not None and self.kubernetes is not None:
            raise ValueError("at most one of directory and kubernetes may be set")
        if self.simulate is not None and self.kubernetes is not None:
            raise ValueError("simulate is for directory clusters only, not with kubernetes")
        return self


class Cluster(Model):
    api_version: Literal["convoy.dev/v1alpha1"]
    kind: Literal["Cluster"]
    metadata: Metadata
    spec: ClusterSpec = Field(default_factory=ClusterSpec)

    @property
    def name(self) -> str:
        return self.metadata.name


# --- ReleaseSet (README "ReleaseSets") ---------------------------------------------------


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


# --- Status (SPEC 10) ------------------------------------------------------------------


class RolloutState(StrEnum):
    PROGRESSING = "Progressing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    ROLLED_BACK = "RolledBack"


class Rollout(Model):
    state: RolloutState
    render_ref: str
    started_at: Time
    reason: str
    message: str = ""


class Attempt(Model):
    render_ref: str | None = None
    revision: str | None = None
    time: Time
    applied: bool = False
    reason: str
    message: str = ""

    def same_attempt(self, other: "Attempt | None") -> bool:
        """Equal but for the time: the same attempt seen on a later tick."""
        return other is not None and self.model_copy(update={"time": other.time}) == other


class RenderRecord(Model):
    render_ref: str
    revision: str | None = None
    time: Time


PhaseName = Literal["PreSync", "Sync", "PostSync", "SyncFail"]
"""The hook phases (SPEC 7): PreSync, Sync and PostSync run in that order around the
waves; SyncFail only when a sync fails."""
Phase = int | PhaseName
PRE_SYNC: Final = "PreSync"
SYNC: Final = "Sync"
POST_SYNC: Final = "PostSync"
SYNC_FAIL: Final = "SyncFail"


def is_hook_phase(phase: Phase) -> bool:
    """A hook phase (PreSync, Sync, PostSync, SyncFail), not a sync wave."""
    return isinstance(phase, str)


def phase_label(phase: Phase) -> str:
    return f"wave {phase}" if isinstance(phase, int) else f"{phase} hooks"


def order_phases(waves: Sequence[int], hooks: Collection[Phase]) -> tuple[Phase, ...]:
    """PreSync, Sync, the sorted distinct waves, PostSync: the phases of a sync, the hook
    phases among ``hooks`` (SyncFail is never one)."""
    phases: list[Phase] = [p for p in (PRE_SYNC, SYNC) if p in hooks]
    phases.extend(sorted(set(waves)))
    if POST_SYNC in hooks:
        phases.append(POST_SYNC)
    return tuple(phases)


class WaveStatus(Model):
    wave: Phase
    render_ref: str
    started_at: Time


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(Model):
    type: str
    status: ConditionStatus
    reason: str
    message: str = ""
    last_transition_time: Time


class DriftedObject(Model):
    """One object whose live state differs from what convoy-batch applied: the paths
    (RFC 6901 pointers; ``""`` the whole object, gone), never a value."""

    kind: str
    namespace: str | None = None
    name: str
    paths: tuple[str, ...]

    def describe(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where} {', '.join(p or '(deleted)' for p in self.paths)}"


class DriftReport(Model):
    """``status.drift`` (Report mode): what drifted and is left as it is, since when."""

    objects: tuple[DriftedObject, ...]
    since: Time


class DriftCorrection(Model):
    """``status.lastDriftCorrection`` (Correct mode): the first correction of the last
    drift episode (ticks in a row that found drift), and what it corrected then."""

    time: Time
    objects: tuple[DriftedObject, ...]


DRIFT_FIELDS = frozenset({"drift", "lastDriftCorrection"})


class AnalysisPhase(StrEnum):
    """Where an analysis (and a verification, all of its analyses) stands."""

    RUNNING = "Running"
    SUCCESSFUL = "Successful"
    FAILED = "Failed"
    INCONCLUSIVE = "Inconclusive"


class AnalysisStatus(Model):
    name: str
    phase: AnalysisPhase
    successful: int = 0
    failed: int = 0
    inconclusive: int = 0
    errors: int = 0
    errors_in_a_row: int = 0
    last_value: str | None = None
    message: str = ""


class VerificationStatus(Model):
    """The verification of ``renderRef``: its phase and each analysis's counts, as they
    were when the phase last changed (the state directory keeps every measurement)."""

    render_ref: str
    phase: AnalysisPhase
    analyses: tuple[AnalysisStatus, ...] = ()
    message: str = ""


WHEN_SET_FIELDS = DRIFT_FIELDS | {"verification"}
"""Status keys written only when set (the others: every key, null when unset)."""
"""Status keys written only when set (README, "Drift rules"), after SPEC 10's."""


class ReleaseStatus(Model):
    rollout: Rollout | None = None
    last_attempted: Attempt | None = None
    last_successful: RenderRecord | None = None
    last_healthy: RenderRecord | None = None
    waves: tuple[WaveStatus, ...] = ()
    history: tuple[RenderRecord, ...] = ()
    conditions: tuple[Condition, ...] = ()
    last_handled_force_sync_at: Time | None = None
    drift: DriftReport | None = None
    last_drift_correction: DriftCorrection | None = None
    verification: VerificationStatus | None = None

    def dump_status(self) -> dict[str, Any]:
        """The stored form: every key of SPEC 10, in its order, ``null`` when unset; the
        drift and verification keys only when set."""
        data = self.model_dump(mode="json", by_alias=True)
        return {k: v for k, v in data.items() if v is not None or k not in WHEN_SET_FIELDS}


# --- Inventory and health (SPEC 4, 11) -------------------------------------------------


class HealthState(StrEnum):
    """kstatus states, shared by the observer and the verdict."""

    CURRENT = "Current"
    IN_PROGRESS = "InProgress"
    FAILED = "Failed"
    NOT_FOUND = "NotFound"
    TERMINATING = "Terminating"
    UNKNOWN = "Unknown"
    """The health could not be computed (a health rule that does not compile or fails)."""


class Health(Model):
    state: HealthState
    assessed_render_ref: str | None = None
    message: str = ""
    observed_at: Time


Identity = tuple[str, str, str, str]
"""(group, kind, namespace or "", name): what makes two objects the same object (SPEC 3)."""


def _key_text(group: str, kind: str, namespace: str | None, name: str) -> str:
    """An object's identity in words: ``Deployment.apps web/api``, ``Namespace web``."""
    kind_text = f"{kind}.{group}" if group else kind
    return f"{kind_text} {namespace}/{name}" if namespace else f"{kind_text} {name}"


@lru_cache(maxsize=4096)
def _name_problem(group: str, kind: str, namespace: str | None, name: str) -> str | None:
    """:meth:`ObjectKey.name_problem`. Key: the identity; a pure function of it. An
    object's key is checked where its inventory is read, where it is observed and where
    a directory cluster stores it, one after the other: the last 4,096 (a few hundred
    Releases' objects, about 2 MiB) are kept."""
    where = _key_text(group, kind, namespace, name)
    if namespace is not None and not is_label(namespace):
        return f"{where}: namespace {namespace!r} is not a DNS-1123 label"
    if not KIND.match(kind) or (group and not is_subdomain(group)):
        return f"{where}: kind or group is not valid"
    if not is_path_segment(name):
        return f"{where}: name {name!r} cannot be a file name"
    return None


class ObjectKey(Model):
    """Identity of an object: (group, kind, namespace, name); ``version`` for the API."""

    api_version: str
    kind: str
    namespace: str | None = None
    name: str

    @cached_property
    def group(self) -> str:
        """Worked out once per key (an identity is asked for a few dozen times a tick per
        object): a key is immutable, and :meth:`model_copy` forgets it."""
        return group_of(self.api_version)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop("group", None)  # worked out again from its own apiVersion
        return copied

    def identity(self) -> Identity:
        return (self.group, self.kind, self.namespace or "", self.name)

    def name_problem(self) -> str | None:
        """Why this key cannot name a stored object (None: it can): a namespace that is
        not a DNS-1123 label, a kind or group that is not valid, a name that is no path
        segment. A directory cluster keeps each object in a file named from its identity,
        and an inventory's entries name objects to prune: an identity that is not a
        Kubernetes name could name a path outside the cluster."""
        return _name_problem(self.group, self.kind, self.namespace, self.name)

    def __str__(self) -> str:
        return _key_text(self.group, self.kind, self.namespace, self.name)


def key_of(manifest: Mapping[str, Any]) -> ObjectKey:
    """The key of a manifest; missing fields become empty text (a deployer names what it
    refuses with it)."""
    meta = manifest.get("metadata") or {}
    return ObjectKey(
        api_version=str(manifest.get("apiVersion", "")),
        kind=str(manifest.get("kind", "")),
        namespace=meta.get("namespace") or None,
        name=str(meta.get("name", "")),
    )


class InventoryEntry(Model):
    key: ObjectKey
    wave: Phase = 0
    applied_render_ref: str | None = None
    """The renderRef this object was last applied with (None: not applied yet)."""
    prune: bool = True
    """False when the object carries ``convoy.dev/prune: "false"``."""
    retain: bool = False
    """True when the object is left in place as its Release is removed (Argo CD
    ``Delete=false``)."""
    health: Health | None = None
    """Written only by the observer."""
    hook_deleted: bool = False
    """A hook deleted by its delete policy (HookSucceeded, HookFailed) once it finished:
    the entry keeps the health it had then, which the observer leaves alone."""


class ReleaseInventory(Model):
    release: str
    entries: tuple[InventoryEntry, ...] = ()


# --- Errors of validation, one line ----------------------------------------------------


def describe_validation_error(source: str, error: ValidationError) -> str:
    """One line naming the file and the field path of every problem pydantic found."""
    parts = []
    for err in error.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "missing":
            msg = "required field missing"
        parts.append(f"{loc or '<root>'}: {msg}")
    return f"{source}: " + "; ".join(parts)


class TickRecord(Model):
    """What the wake-ups of SPEC 13 remember of a Release's last reconcile."""

    last_reconcile_at: Time | None = None
    release_blob: str | None = None
    """Blob SHA of the Release file at the last reconcile."""
    source_revision: str | None = None
    """Source revision seen at the last reconcile."""
    health: tuple[tuple[str, str, str | None], ...] = ()
    """(object identity, state, assessedRenderRef) of each inventory entry then."""
    render_key: str | None = None
    """Fingerprint of the last render's inputs (source files, Release, Cluster)."""
    render_ref: str | None = None
    """The renderRef those inputs gave: a render-cache hit reloads it from the store."""
    drifted: bool = False
    """The last reconcile found drift (Correct mode: a drift episode goes on)."""


M = TypeVar("M", bound=Model)


def parse_model(model: type[M], data: Mapping[str, Any] | Any, source: str) -> M:
    """Validate ``data`` as ``model``; a failure raises ValueError with a one-line message."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ValueError(describe_validation_error(source, exc)) from None
