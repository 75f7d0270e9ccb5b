"""The ``job`` provider: a Job of the source applied once per render, its end the
measurement (Complete: successful; Failed: failed; running: none yet).

The Job is ``<its name>-<the renderRef's first 8 digits>`` in the Release's namespace
(unless its manifest names one), labelled with the Release, so each render gets its own
(a Job's template cannot change). It is not an object of the render: never pruned nor
observed, and the cluster's own TTL (``ttlSecondsAfterFinished``) removes it. Does I/O
through the deployer of its context."""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from convoy_batch.deployers.base import Deployer
from convoy_batch.errors import ConvoyError
from convoy_batch.manifests.text import parse_file, substitute
from convoy_batch.metrics.base import Context, MetricError
from convoy_batch.models import LABEL_RELEASE, Analysis, JobMetric, Release, key_of
from convoy_batch.rollout.analysis import Judged, Measurement


def job_of(
    metric: JobMetric, text: str | None, variables: Mapping[str, str], release: Release, ref: str
) -> dict[str, Any]:
    """The Job to apply for the render ``ref`` (MetricError, one line naming the file)."""
    where = f"provider.job.manifest {metric.manifest!r}"
    if text is None:
        raise MetricError(f"{where}: not found in the source")
    try:
        docs = parse_file(metric.manifest, substitute(text, variables, metric.manifest))
    except ConvoyError as exc:
        raise MetricError(f"{where}: {exc}") from None
    if len(docs) != 1 or not isinstance(docs[0].value, dict):
        raise MetricError(f"{where}: one Job is needed")
    job: dict[str, Any] = dict(docs[0].value)
    if job.get("apiVersion") != "batch/v1" or job.get("kind") != "Job":
        raise MetricError(f"{where}: a batch/v1 Job is needed")
    meta = dict(job.get("metadata") or {})
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise MetricError(f"{where}: metadata.name is needed")
    meta["name"] = f"{name[:53]}-{ref.removeprefix('sha256:')[:8]}"
    meta.setdefault("namespace", release.spec.namespace)
    meta["labels"] = {**(meta.get("labels") or {}), LABEL_RELEASE: release.name}
    job["metadata"] = meta
    return job


def measure_job(deployer: Deployer, job: Mapping[str, Any], now: datetime) -> Measurement | None:
    """The Job's end as a measurement; None while it runs, or when it was not there and
    is applied now (an apply is idempotent: a tick killed before it recorded anything
    applies the same Job). A deployer's error is an Error measurement."""
    name = key_of(job).name
    try:
        live = deployer.get(key_of(job))
        if live is None:
            deployer.apply([dict(job)])
            return None
    except ConvoyError as exc:
        return Measurement(now, Judged.ERROR, None, f"Job {name}: {exc}")
    status = live.get("status") or {}
    for condition in status.get("conditions") or ():
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return Measurement(now, Judged.SUCCESSFUL, "Complete", "")
        if condition.get("type") == "Failed":
            why = condition.get("message") or condition.get("reason") or "failed"
            return Measurement(now, Judged.FAILED, "Failed", f"Job {name}: {why}")
    return None


class JobProvider:
    def measure(
        self, metric: JobMetric, analysis: Analysis, now: datetime, context: Context
    ) -> Measurement | None:
        """A look at the render's Job (applied when it is not there): its end; None while
        it runs. A Job that cannot be made, or a Cluster that cannot be had, is an Error
        measurement."""
        try:
            text = context.source_file(metric.manifest)
            job = job_of(metric, text, context.variables, context.release, context.ref)
            deployer = context.deployer()
        except (MetricError, ConvoyError) as exc:
            return Measurement(now, Judged.ERROR, None, str(exc))
        return measure_job(deployer, job, now)


JOB = JobProvider()
