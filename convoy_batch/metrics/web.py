"""The ``web`` provider, and the HTTP request every provider makes (on the pool of
:mod:`convoy_batch.httpclient`, as notifications send theirs): one request whose answer
is JSON; ``jsonPath`` (RFC 9535, by python-jsonpath; Argo Rollouts' ``{$.data.ok}`` too)
picks the result.

Every failure is a :class:`MetricError` of one line (the status code, a time-out, a
refused connection, an answer that is not JSON, a path that matches nothing): an observer
outage, never a verdict. A credential's token or password is sent in a header and never
appears in a message. A redirect is not followed (an answer of its own, ``HTTP 302``), so
a header never goes to a URL the credential was not bound to.

A provider's ``credentials`` is the operator's, sent only when its ``releases`` name the
Release's file and its ``urls`` hold the request's URL (after substitution): else the
measurement is an error naming the field and the URL, a warning line too, and nothing
is sent."""

import base64
import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import jsonpath
import urllib3

from convoy_batch.errors import RenderFailed, one_line
from convoy_batch.httpclient import failure_words, pool
from convoy_batch.manifests.text import substitute
from convoy_batch.metrics.base import Context, CredentialRefused, MetricError
from convoy_batch.metrics.judge import judged
from convoy_batch.models import Analysis, WebMetric
from convoy_batch.rollout.analysis import Measurement
from convoy_batch.state.operator_files import credential_for


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


def _number(value: Any) -> Any:
    """A numeric string (as Prometheus gives samples) is a number to the conditions."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    if isinstance(value, list):
        return [_number(v) for v in value]
    return value


def substituted(text: str, variables: Mapping[str, str]) -> str:
    """``text`` with the Release's variables (MetricError, one line)."""
    try:
        return substitute(text, variables, "provider")
    except RenderFailed as exc:
        raise MetricError(str(exc)) from None


def authorization(name: str | None, field: str, url: str, context: Context) -> dict[str, str]:
    """The ``Authorization`` header of the credential ``name`` of the operator's file,
    for a request to ``url`` (a CredentialRefused, one line naming ``field`` and never a
    value, when it may not be sent there or cannot be read: it holds, as any error
    does, and nothing is sent)."""
    if name is None:
        return {}
    try:
        auth = credential_for(context.state_dir, name, field, context.release.file, url)
    except ValueError as exc:
        raise CredentialRefused(one_line(str(exc))) from None
    if auth.username is None:
        return {"Authorization": f"Bearer {auth.token}"}
    token = base64.b64encode(f"{auth.username}:{auth.password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


class WebProvider:
    def measure(
        self, metric: WebMetric, analysis: Analysis, now: datetime, context: Context
    ) -> Measurement:
        """The request's answer (its URL with the Release's variables), judged."""
        return judged(analysis, now, context, lambda: _result(metric, context))


def _result(metric: WebMetric, context: Context) -> Any:
    metric = metric.model_copy(update={"url": substituted(metric.url, context.variables)})
    auth = authorization(metric.credentials, "provider.web.credentials", metric.url, context)
    return _number(fetch(metric, {**metric.headers, **auth}))


WEB = WebProvider()
