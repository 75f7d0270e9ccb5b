"""The ``web`` provider, and the HTTP request every provider makes (urllib3, as
notifications send theirs): one request whose answer is JSON; ``jsonPath`` (RFC 9535, by
python-jsonpath; Argo Rollouts' ``{$.data.ok}`` too) picks the result.

Every failure is a :class:`MetricError` of one line (the status code, a time-out, a
refused connection, an answer that is not JSON, a path that matches nothing): an observer
outage, never a verdict. A credential's token or password is sent in a header and never
appears in a message. A redirect is not followed (an answer of its own, ``HTTP 302``), so
a header never goes to a URL the credential was not bound to."""

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import jsonpath
import urllib3

from convoy_batch.models import WebMetric
from convoy_batch.notify.send import failure_words, pool


class MetricError(Exception):
    """A measurement that could not be made (one line)."""


def get_json(
    method: str,
    url: str,
    headers: Mapping[str, str],
    timeout: timedelta,
    body: str | None = None,
    fields: Mapping[str, str] | None = None,
) -> Any:
    """The JSON answer of one request (MetricError, one line, naming ``method`` and the
    URL without its query)."""
    where = f"{method} {url}"
    try:
        answer = pool().request(
            method,
            url,
            body=body.encode() if body is not None else None,
            fields=dict(fields) if fields is not None else None,
            headers=dict(headers),
            timeout=urllib3.Timeout(total=timeout.total_seconds()),
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
        return json.loads(answer.data)
    except ValueError:
        raise MetricError(f"{where}: the answer is not JSON") from None


def _path(text: str) -> str:
    """Argo Rollouts' ``{$.data.ok}`` is RFC 9535's ``$.data.ok``."""
    text = text.strip()
    return text[1:-1].strip() if text.startswith("{") and text.endswith("}") else text


def fetch(metric: WebMetric, headers: Mapping[str, str]) -> Any:
    """The result: the answer's JSON, or what ``jsonPath`` picks of it (one match: that
    value; several: their list). ``headers``: the metric's, with a credential's."""
    data = get_json(metric.method, metric.url, headers, metric.timeout, metric.body)
    if metric.json_path is None:
        return data
    where = f"{metric.method} {metric.url}"
    try:
        found = jsonpath.findall(_path(metric.json_path), data)
    except jsonpath.JSONPathError as exc:
        raise MetricError(f"{where}: jsonPath {metric.json_path!r}: {exc}") from None
    if not found:
        raise MetricError(f"{where}: jsonPath {metric.json_path!r} matches nothing")
    return found[0] if len(found) == 1 else found
