"""The ``web`` provider: one HTTP request (urllib3, as notifications send theirs) whose
answer is JSON; ``jsonPath`` (RFC 9535, by python-jsonpath; Argo Rollouts' ``{$.data.ok}``
too) picks the result.

Every failure is a :class:`MetricError` of one line (the status code, a time-out, a
refused connection, an answer that is not JSON, a path that matches nothing): an observer
outage, never a verdict."""

import json
from typing import Any

import jsonpath
import urllib3

from convoy_batch.models import WebMetric
from convoy_batch.notify.send import failure_words, pool


class MetricError(Exception):
    """A measurement that could not be made (one line)."""


def _path(text: str) -> str:
    """Argo Rollouts' ``{$.data.ok}`` is RFC 9535's ``$.data.ok``."""
    text = text.strip()
    return text[1:-1].strip() if text.startswith("{") and text.endswith("}") else text


def fetch(metric: WebMetric) -> Any:
    """The result: the answer's JSON, or what ``jsonPath`` picks of it (one match: that
    value; several: their list)."""
    where = f"{metric.method} {metric.url}"
    try:
        answer = pool().request(
            metric.method,
            metric.url,
            body=metric.body.encode() if metric.body is not None else None,
            headers=metric.headers,
            timeout=urllib3.Timeout(total=metric.timeout.total_seconds()),
            redirect=False,
            preload_content=True,
        )
    except urllib3.exceptions.HTTPError as exc:
        raise MetricError(f"{where}: {failure_words(exc)}") from None
    except ValueError:
        raise MetricError(f"{where}: not a usable URL") from None
    if answer.status != 200:
        raise MetricError(f"{where}: HTTP {answer.status}")
    try:
        data = json.loads(answer.data)
    except ValueError:
        raise MetricError(f"{where}: the answer is not JSON") from None
    if metric.json_path is None:
        return data
    try:
        found = jsonpath.findall(_path(metric.json_path), data)
    except jsonpath.JSONPathError as exc:
        raise MetricError(f"{where}: jsonPath {metric.json_path!r}: {exc}") from None
    if not found:
        raise MetricError(f"{where}: jsonPath {metric.json_path!r} matches nothing")
    return found[0] if len(found) == 1 else found
