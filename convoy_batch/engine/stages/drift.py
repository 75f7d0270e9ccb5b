"""Drift (README, "Drift rules"): what a sync of a render that is already applied finds of
its objects that another manager changed since, and which of them it leaves alone
(Report mode). I/O through the deployer it is given and the run's tick records.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from convoy_batch.deployers.base import Deployer
from convoy_batch.engine.run import ReleaseRun
from convoy_batch.manifests.drift import Rules
from convoy_batch.models import (
    Cluster,
    DriftedObject,
    DriftMode,
    ObjectKey,
    Release,
    ReleaseInventory,
)
from convoy_batch.renderers.pipeline import Render
from convoy_batch.rollout.status import DriftSeen
from convoy_batch.rollout.step import Step


def rules_of(clusters: Mapping[str, Cluster], release: Release) -> Rules:
    """The Release's drift rules with its Cluster's defaults (``clusters``: by name)."""
    cluster = clusters.get(release.spec.cluster)
    return Rules(release.spec.drift, cluster.spec.drift if cluster is not None else None)


@dataclass(frozen=True)
class DriftCheck:
    """What a sync does about drift: what it records, and what it does not apply."""

    seen: DriftSeen | None
    """None: no object of the render is applied with it yet (nothing to compare)."""
    leave: tuple[ObjectKey, ...] = ()
    """The drifted objects a Report-mode sync leaves as they are."""

    def step(self, step: Step) -> Step:
        """``step`` leaving out what a Report-mode sync leaves as it is."""
        return step.model_copy(update={"leave": self.leave}) if self.leave else step


def check_drift(
    run: ReleaseRun, deployer: Deployer, render: Render, inventory: ReleaseInventory
) -> DriftCheck:
    """The objects of ``render`` already applied with it (by the inventory) that drifted:
    the paths where each differs from what applying it would leave. Hooks never drift (a
    hook runs once per render); an object deleted by hand is not drift (it is created
    again, in either mode: a missing object would read as unhealthy)."""
    applied = {e.key.identity() for e in inventory.entries if e.applied_render_ref == render.ref}
    objects = [o for o in render.objects if o.hook is None and o.key.identity() in applied]
    if not objects:
        return DriftCheck(None)
    rules = run.rules
    found = deployer.drift([o.manifest for o in objects], rules)
    drifted = tuple(
        DriftedObject(kind=kind, namespace=namespace or None, name=name, paths=paths)
        for (_group, kind, namespace, name), paths in sorted(found.items())
    )
    report = rules.mode == DriftMode.REPORT
    ongoing = run.stores.ticks.load(run.name).drifted
    seen = DriftSeen(drifted, report=report, ongoing=ongoing)
    leave = tuple(o.key for o in objects if o.key.identity() in found) if report else ()
    return DriftCheck(seen, leave)
