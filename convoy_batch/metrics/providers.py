"""Every provider, by the model of its metric (:data:`PROVIDERS`: the one place a
provider is registered), and a measurement of an analysis by its own (:func:`measure`)."""

from datetime import datetime
from typing import Any

from convoy_batch.metrics import job, prometheus, web
from convoy_batch.metrics.base import Context, Provider
from convoy_batch.models import Analysis, JobMetric, Model, PrometheusMetric, WebMetric
from convoy_batch.rollout.analysis import Measurement

PROVIDERS: dict[type[Model], Provider[Any]] = {
    WebMetric: web.WEB,
    PrometheusMetric: prometheus.PROMETHEUS,
    JobMetric: job.JOB,
}
"""Every provider, by the model of its field of an analysis's ``provider``."""


def metric_of(analysis: Analysis) -> Model:
    """The one metric of the analysis's ``provider`` (its model checks there is one)."""
    provider = analysis.provider
    for name in type(provider).model_fields:
        metric: Model | None = getattr(provider, name)
        if metric is not None:
            return metric
    raise AssertionError("a provider without a metric")


def measure(analysis: Analysis, now: datetime, context: Context) -> Measurement | None:
    """One measurement of ``analysis`` at ``now`` by its provider; None: none yet (a
    ``job`` analysis's Job runs: look again an interval later)."""
    metric = metric_of(analysis)
    return PROVIDERS[type(metric)].measure(metric, analysis, now, context)
