"""The ``prometheus`` provider: an instant query (``/api/v1/query``) at the tick's
``now``, so a tick run with ``--now`` measures the same. A vector's result is the list of
its sample values (``result[0] >= 0.95``; an empty vector is ``[]``), a scalar's the
number; another result type, or an error of Prometheus's, is a MetricError."""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from convoy_batch.metrics.base import Context, MetricError
from convoy_batch.metrics.judge import judged
from convoy_batch.metrics.web import authorization, get_json, substituted
from convoy_batch.models import Analysis, PrometheusMetric
from convoy_batch.rollout.analysis import Measurement


def query_url(metric: PrometheusMetric) -> str:
    """Where the query goes (a credential must be bound to it)."""
    return f"{metric.address.rstrip('/')}/api/v1/query"


def query(metric: PrometheusMetric, text: str, now: datetime, headers: Mapping[str, str]) -> Any:
    url = query_url(metric)
    fields = {"query": text, "time": f"{now.timestamp():.3f}"}
    answer = get_json("GET", url, headers, metric.timeout, fields=fields)
    if not isinstance(answer, dict) or answer.get("status") != "success":
        error = answer.get("error") if isinstance(answer, dict) else None
        raise MetricError(f"GET {url}: {error or 'not a Prometheus answer'}")
    data = answer.get("data") or {}
    kind, result = data.get("resultType"), data.get("result")
    if kind == "vector" and isinstance(result, list):
        return [_sample(s, url) for s in result]
    if kind == "scalar" and isinstance(result, list) and len(result) == 2:
        return _number(result[1], url)
    raise MetricError(f"GET {url}: a {kind} result; the query must give a vector or a scalar")


def _sample(sample: Any, url: str) -> float:
    value = sample.get("value") if isinstance(sample, dict) else None
    if not isinstance(value, list) or len(value) != 2:
        raise MetricError(f"GET {url}: a sample without a value")
    return _number(value[1], url)


def _number(text: Any, url: str) -> float:
    try:
        return float(text)  # Prometheus writes "NaN", "+Inf" as floats read them
    except (TypeError, ValueError):
        raise MetricError(f"GET {url}: {text!r} is not a number") from None


class PrometheusProvider:
    def measure(
        self, metric: PrometheusMetric, analysis: Analysis, now: datetime, context: Context
    ) -> Measurement:
        """The query's result (the Release's variables in it) at ``now``, judged."""
        return judged(analysis, now, context, lambda: _result(metric, now, context))


def _result(metric: PrometheusMetric, now: datetime, context: Context) -> Any:
    text = substituted(metric.query, context.variables)
    field = "provider.prometheus.credentials"
    auth = authorization(metric.credentials, field, query_url(metric), context)
    return query(metric, text, now, auth)


PROMETHEUS = PrometheusProvider()
