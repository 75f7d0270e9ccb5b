"""A measurement judged by the analysis's CEL conditions over ``result`` (a number, a
list or a map), as Argo Rollouts judges one: ``failureCondition`` true is Failed;
``successCondition`` true is Successful; with both given and neither true, Inconclusive;
with one given and false, the other verdict. An error (a condition that fails, that is
no boolean, a NaN) is an Error measurement, never a verdict: it names the cause, and for
an index into an empty result says how to guard it."""

import math
from datetime import datetime
from typing import Any

from convoy_batch.metrics.web import MetricError, fetch
from convoy_batch.models import Analysis
from convoy_batch.rollout.analysis import Judged, Measurement

VALUE_LIMIT = 80
"""A result is kept as text of at most this many characters."""


def measure(analysis: Analysis, now: datetime) -> Measurement:
    """One measurement of ``analysis`` at ``now``: its provider asked, its result judged."""
    assert analysis.provider.web is not None
    try:
        result = _number(fetch(analysis.provider.web))
    except MetricError as exc:
        return Measurement(now, Judged.ERROR, None, str(exc))
    value = _text(result)
    if isinstance(result, float) and math.isnan(result):
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
