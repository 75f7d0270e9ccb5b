"""A measurement judged by the analysis's CEL conditions over ``result`` (a number, a
list or a map), as Argo Rollouts judges one: ``failureCondition`` true is Failed;
``successCondition`` true is Successful; with both given and neither true, Inconclusive;
with one given and false, the other verdict. An error (a condition that fails, that is
no boolean, a NaN) is an Error measurement, never a verdict: it names the cause, and for
an index into an empty result says how to guard it.

A provider's ``credentials`` is the operator's, sent only when its ``releases`` name the
Release's file and its ``urls`` hold the request's URL (after substitution): else the
measurement is an error naming the field and the URL, a warning line too, and nothing
is sent."""

import base64
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from convoy_batch.errors import RenderFailed, one_line
from convoy_batch.metrics.prometheus import query, query_url
from convoy_batch.metrics.web import MetricError, fetch
from convoy_batch.models import Analysis
from convoy_batch.renderers.pipeline import substitute
from convoy_batch.rollout.analysis import Judged, Measurement
from convoy_batch.state.operator_files import credential_for

log = logging.getLogger("convoy_batch")

VALUE_LIMIT = 80
"""A result is kept as text of at most this many characters."""


@dataclass(frozen=True)
class Context:
    """What a measurement is made with besides its analysis."""

    variables: Mapping[str, str]
    """The Release's variables, ``revision`` and ``renderRef`` (the render's), for a
    query or a URL."""
    state_dir: Path
    """Where the operator's credentials file is."""
    release_file: str | None = None
    """The Release's file in the repository (:attr:`Release.file`): what a credential's
    ``releases`` must name."""
    release: str = ""
    """The Release's name, for the warning of a credential refused."""


class CredentialRefused(MetricError):
    """A credential the analysis names may not be sent: nothing was."""


def measure(analysis: Analysis, now: datetime, context: Context) -> Measurement:
    """One measurement of ``analysis`` at ``now``: its provider asked, its result judged."""
    provider = analysis.provider
    try:
        if provider.web is not None:
            web = provider.web
            web = web.model_copy(update={"url": _substitute(web.url, context.variables)})
            auth = _auth(web.credentials, "provider.web.credentials", web.url, context)
            result = _number(fetch(web, {**web.headers, **auth}))
        else:
            metric = provider.prometheus
            assert metric is not None  # a job analysis is measured by metrics.job
            text = _substitute(metric.query, context.variables)
            field = "provider.prometheus.credentials"
            auth = _auth(metric.credentials, field, query_url(metric), context)
            result = query(metric, text, now, auth)
    except CredentialRefused as exc:  # the operator's to know: a line on stderr too
        log.warning("%s: verification %s: %s", context.release, analysis.name, exc)
        return Measurement(now, Judged.ERROR, None, str(exc))
    except MetricError as exc:
        return Measurement(now, Judged.ERROR, None, str(exc))
    value = _text(result)
    if _nan(result):
        return Measurement(now, Judged.ERROR, value, "result is NaN")
    try:
        failed = _condition(analysis.failure_condition, result, "failureCondition")
        succeeded = _condition(analysis.success_condition, result, "successCondition")
    except ValueError as exc:
        return Measurement(now, Judged.ERROR, value, str(exc))
    if failed:
        judged = Judged.FAILED
    elif succeeded:
        judged = Judged.SUCCESSFUL
    elif analysis.success_condition is not None and analysis.failure_condition is not None:
        judged = Judged.INCONCLUSIVE
    elif analysis.success_condition is not None:
        judged = Judged.FAILED  # the success condition alone, false
    else:
        judged = Judged.SUCCESSFUL  # the failure condition alone, false
    return Measurement(now, judged, value, "")


def _auth(name: str | None, field: str, url: str, context: Context) -> dict[str, str]:
    """The ``Authorization`` header of the credential ``name`` of the operator's file,
    for a request to ``url`` (a MetricError, one line naming ``field`` and never a
    value, when it may not be sent there or cannot be read: it holds, as any error
    does, and nothing is sent)."""
    if name is None:
        return {}
    try:
        auth = credential_for(context.state_dir, name, field, context.release_file, url)
    except ValueError as exc:
        raise CredentialRefused(one_line(str(exc))) from None
    if auth.username is None:
        return {"Authorization": f"Bearer {auth.token}"}
    token = base64.b64encode(f"{auth.username}:{auth.password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def _substitute(text: str, variables: Mapping[str, str]) -> str:
    try:
        return substitute(text, variables, "provider")
    except RenderFailed as exc:
        raise MetricError(str(exc)) from None


def _nan(result: Any) -> bool:
    values = result if isinstance(result, list) else [result]
    return any(isinstance(v, float) and math.isnan(v) for v in values)


def _condition(text: str | None, result: Any, field: str) -> bool:
    if text is None:
        return False
    import cel  # checked at load (models): imported only with analyses

    try:
        value = cel.evaluate(text, {"result": result})
    except Exception as exc:  # the library reports evaluation errors in several types
        why = " ".join(str(exc).split())[:200]
        if _empty(result):
            why = f"result is empty: guard with size(result) > 0 ({why})"
        raise ValueError(f"{field}: {why}") from None
    if not isinstance(value, bool):
        raise ValueError(f"{field}: gives {type(value).__name__}, not a boolean")
    return value


def _empty(result: Any) -> bool:
    return isinstance(result, list | dict) and not result


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


def _text(result: Any) -> str:
    text = result if isinstance(result, str) else repr(result)
    return text if len(text) <= VALUE_LIMIT else text[: VALUE_LIMIT - 3] + "..."
