"""A provider's result judged by the analysis's CEL conditions over ``result`` (a number,
a list or a map), as Argo Rollouts judges one: ``failureCondition`` true is Failed;
``successCondition`` true is Successful; with both given and neither true, Inconclusive;
with one given and false, the other verdict. An error (a result that could not be had, a
condition that fails, that is no boolean, a NaN) is an Error measurement, never a
verdict: it names the cause, and for an index into an empty result says how to guard it.
A credential refused is a warning line too."""

import logging
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

from convoy_batch.metrics.base import Context, CredentialRefused, MetricError
from convoy_batch.models import Analysis
from convoy_batch.rollout.analysis import Judged, Measurement

log = logging.getLogger("convoy_batch")

VALUE_LIMIT = 80
"""A result is kept as text of at most this many characters."""


def judged(
    analysis: Analysis, now: datetime, context: Context, result: Callable[[], Any]
) -> Measurement:
    """One measurement of ``analysis`` at ``now``: ``result`` asked (its provider's
    request), its answer judged."""
    try:
        found = result()
    except CredentialRefused as exc:  # the operator's to know: a line on stderr too
        log.warning("%s: verification %s: %s", context.release.name, analysis.name, exc)
        return Measurement(now, Judged.ERROR, None, str(exc))
    except MetricError as exc:
        return Measurement(now, Judged.ERROR, None, str(exc))
    return judge(analysis, now, found)


def judge(analysis: Analysis, now: datetime, result: Any) -> Measurement:
    """``result`` judged by the conditions of ``analysis``."""
    value = _text(result)
    if _nan(result):
        return Measurement(now, Judged.ERROR, value, "result is NaN")
    try:
        failed = _condition(analysis.failure_condition, result, "failureCondition")
        succeeded = _condition(analysis.success_condition, result, "successCondition")
    except ValueError as exc:
        return Measurement(now, Judged.ERROR, value, str(exc))
    if failed:
        verdict = Judged.FAILED
    elif succeeded:
        verdict = Judged.SUCCESSFUL
    elif analysis.success_condition is not None and analysis.failure_condition is not None:
        verdict = Judged.INCONCLUSIVE
    elif analysis.success_condition is not None:
        verdict = Judged.FAILED  # the success condition alone, false
    else:
        verdict = Judged.SUCCESSFUL  # the failure condition alone, false
    return Measurement(now, verdict, value, "")


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


def _text(result: Any) -> str:
    text = result if isinstance(result, str) else repr(result)
    return text if len(text) <= VALUE_LIMIT else text[: VALUE_LIMIT - 3] + "..."
