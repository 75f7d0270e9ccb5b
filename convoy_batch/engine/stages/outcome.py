"""An error's outcome: the one way a typed error of the I/O edges (``errors.py``) becomes
the outcome of a reconcile (SPEC 4). Pure."""

from convoy_batch.errors import ConvoyError
from convoy_batch.models import Rollout
from convoy_batch.rollout import Outcome, RenderId


def failed(
    error: ConvoyError,
    *,
    rollout: Rollout | None = None,
    render: RenderId | None = None,
    applied: bool = False,
) -> Outcome:
    """The outcome of a reconcile that ``error`` stopped: its reason and one-line message,
    the rollout decided before it (kept, SPEC 10), the render it concerned and whether
    objects of it may be live. Every path from an error to an outcome goes through here."""
    return Outcome(rollout, applied, error.reason, str(error), render)


def not_stored(error: ConvoyError, decided: Outcome, ref: str, *, acted: bool = True) -> Outcome:
    """The outcome of a reconcile whose render ``ref`` the render store could not hold
    (``error``, a StateFailed): ``decided`` without anything that names ``ref``, so the
    status names no render the store lacks. A rollout of ``ref`` gives way to the prior
    one (SPEC 10: no outcome rollout keeps it), an attempt of ``ref`` to none.
    ``acted``: ``decided`` was carried out (else nothing of it is applied)."""
    rollout = decided.rollout
    if rollout is not None and rollout.render_ref == ref:
        rollout = None
    render = decided.render if decided.render is not None and decided.render.ref != ref else None
    applied = acted and decided.applied and render is not None
    return failed(error, rollout=rollout, render=render, applied=applied)
