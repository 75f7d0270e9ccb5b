"""A Release's verification by metrics (README "Verification"): the providers (web,
Prometheus, job), the analyses and their CEL conditions. Pure."""

from datetime import timedelta
from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

from convoy_batch.models.base import Duration, Model, Name


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
