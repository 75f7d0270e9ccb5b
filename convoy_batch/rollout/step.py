"""A decided change of a cluster (:class:`Step`): what a sync or a rollback carries out,
and what a write-ahead record holds. Pure data."""

from convoy_batch.models import Model, ObjectKey, Phase


class Step(Model):
    """A decided change of a cluster: apply a render, then (maybe) prune."""

    render_ref: str
    revision: str | None = None
    phases: tuple[Phase, ...] | None = None
    """The phases of the render applied, in order; None: every object but the hooks,
    in one pass (``apply_last_healthy``, SPEC 8)."""
    prune: bool = False
    """Whether the prune step runs after the apply (its deletes follow the sync policy)."""
    prune_enabled: bool = True
    """``spec.syncPolicy.prune`` when the step was decided."""
    leave: tuple[ObjectKey, ...] = ()
    """Objects of the render not sent: drift a Report-mode sync leaves as it is."""
