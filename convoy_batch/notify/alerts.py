"""Alerts: ``alerts/<name>.yaml`` in the GitOps repository, after Flux's Alert. Each
says which Releases (by name, Cluster or labels) and which events (by severity, state
and reason) go to which provider; the operator defines the providers (see
:mod:`convoy_batch.notify.providers`).

    apiVersion: convoy.dev/v1alpha1
    kind: Alert
    metadata: {name: rollbacks}
    spec:
      provider: team-slack
      releases: [{name: api}, {cluster: production}, {matchLabels: {team: shop}}]
      severity: error                 # info (default): every event
      states: [RolledBack, Failed]    # the state after the change; default any
      reasons: [ApplyFailed]          # default any

Matching is pure; :func:`load_alerts` reads the files of a commit (git objects).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import git
from pydantic import Field, field_validator

from convoy_batch.models import Metadata, Model, Name, RolloutState
from convoy_batch.names import is_label
from convoy_batch.notify.event import Event, Severity
from convoy_batch.reasons import Reason
from convoy_batch.repo.gitops import load_objects
from convoy_batch.state.caches import ParseCache

ALERTS_DIR = "alerts"
ANY = "*"


class ReleaseSelector(Model):
    """Releases an Alert is about: every field given must match."""

    name: str = ANY
    """A Release name, or ``*`` for every one."""
    cluster: Name | None = None
    match_labels: dict[str, str] = Field(default_factory=dict)
    """Labels of the Release (``metadata.labels``)."""

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if name != ANY and not is_label(name):
            raise ValueError(f"{name!r} is neither a Release name nor {ANY!r}")
        return name

    def matches(self, release: "ReleaseFacts") -> bool:
        if self.name not in (ANY, release.name):
            return False
        if self.cluster is not None and self.cluster != release.cluster:
            return False
        return all(release.labels.get(k) == v for k, v in self.match_labels.items())


class AlertSpec(Model):
    provider: Name
    """A provider of the operator's providers file, by name."""
    releases: tuple[ReleaseSelector, ...] = (ReleaseSelector(),)
    """Any one matching is enough; default every Release."""
    severity: Severity = Severity.INFO
    states: tuple[RolloutState, ...] = ()
    """The rollout state after the change; empty: any (also none)."""
    reasons: tuple[Reason, ...] = ()
    """The event's reason or its outcome's; empty: any."""


class Alert(Model):
    api_version: Literal["convoy.dev/v1alpha1"]
    kind: Literal["Alert"]
    metadata: Metadata
    spec: AlertSpec

    @property
    def name(self) -> str:
        return self.metadata.name

    def wants(self, event: Event, release: "ReleaseFacts") -> bool:
        """Whether ``event`` of ``release`` goes to this Alert's provider."""
        spec = self.spec
        if not any(s.matches(release) for s in spec.releases):
            return False
        if spec.severity == Severity.ERROR and event.severity != Severity.ERROR:
            return False
        if spec.states and event.state not in {s.value for s in spec.states}:
            return False
        reasons = {r.value for r in spec.reasons}
        return not reasons or event.reason in reasons or event.outcome in reasons


@dataclass(frozen=True)
class ReleaseFacts:
    """What a selector reads of a Release: its Cluster and labels (none when its file is
    gone or invalid: then only a name or ``*`` can match)."""

    name: str
    cluster: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Alerts:
    """The Alerts of one commit, and a one-line error for each file that is not one."""

    alerts: tuple[Alert, ...]
    errors: tuple[str, ...]

    @property
    def configured(self) -> bool:
        """Whether the repository has Alert files at all (valid or not)."""
        return bool(self.alerts or self.errors)


def load_alerts(tree: git.Tree, cache: ParseCache | None = None) -> Alerts:
    """Every ``alerts/*.yaml`` of ``tree``; a broken file never stops the others."""
    loaded = load_objects(tree, ALERTS_DIR, Alert, cache)
    alerts = tuple(item.model for item in loaded if item.error is None)
    errors = tuple(item.error for item in loaded if item.error is not None)
    return Alerts(alerts, errors)
