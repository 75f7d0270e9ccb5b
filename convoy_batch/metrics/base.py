"""The ``Provider`` protocol: where a measurement comes from (an analysis's ``provider``).
Each is implemented once, in its module, and registered once, by the model of its
metric, in :data:`convoy_batch.metrics.providers.PROVIDERS`; what every provider is
given (:class:`Context`) and what it raises (:class:`MetricError`)."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol, TypeVar

from convoy_batch.deployers.base import Deployer
from convoy_batch.models import Analysis, Release
from convoy_batch.rollout.analysis import Measurement


class MetricError(Exception):
    """A measurement that could not be made (one line)."""


class CredentialRefused(MetricError):
    """A credential the analysis names may not be sent: nothing was."""


@dataclass(frozen=True)
class Context:
    """What a measurement is made with besides its analysis."""

    release: Release
    """The Release under verification: its file (:attr:`Release.file`) is what a
    credential's ``releases`` must name, its name is in the warning of one refused."""
    ref: str
    """The render under verification (its renderRef)."""
    variables: Mapping[str, str]
    """The Release's variables, ``revision`` and ``renderRef`` (the render's), for a
    query or a URL."""
    state_dir: Path
    """Where the operator's credentials file is."""
    source_file: Callable[[str], str | None]
    """The text of a file of the Release's source (relative to ``source.path``; None:
    there is none; SourceFailed, one line, when it cannot be read)."""
    deployer: Callable[[], Deployer]
    """The deployer of the Release's Cluster (MetricError or a ConvoyError, one line,
    when there is none)."""


M = TypeVar("M", contravariant=True)
"""A provider's metric (the model of its field of ``provider``)."""


class Provider(Protocol[M]):
    """One field of an analysis's ``provider``: how a measurement is made of its metric."""

    def measure(
        self, metric: M, analysis: Analysis, now: datetime, context: Context
    ) -> Measurement | None:
        """One measurement of ``analysis`` at ``now`` (a failure to make it is an Error
        measurement, never an exception); None: none yet (look again an interval later)."""
        ...
