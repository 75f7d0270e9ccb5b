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
