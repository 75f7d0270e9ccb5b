"""convoy-batch: a batch GitOps reconciler with progressive, self-healing rollouts."""

__version__ = "0.1.0"
