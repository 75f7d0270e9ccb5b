"""A Cluster (SPEC 1): its target (a directory, a Kubernetes API server), its simulated
controllers, variables and health rules. Pure."""

from datetime import timedelta
from typing import Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from convoy_batch.models.base import Duration, Model, VarValue
from convoy_batch.models.release import (
    Drift,
    HealthChecks,
    Metadata,
    SyncWindows,
    _unsaid_when_empty,
)
from convoy_batch.models.verification import Analysis


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
