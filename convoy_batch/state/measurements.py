"""``<state>/measurements/<release>.json``: the measurements of the render a Release
verifies (README "Verification"). Does file I/O.

A measurement is written (atomically, durably) before any decision is made from it, so
a killed tick never measures twice for one interval, and a measurement is never lost
once it counted. One record per Release, for one render: a new render starts a new one.
"""

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import Field

from convoy_batch.models import Model, Time
from convoy_batch.rollout.analysis import Judged, Measurement
from convoy_batch.state.intents import Record, RecordStore

ERRORS_KEPT = 20
"""Errors kept per analysis (the oldest dropped first); judged measurements are all kept:
an analysis concludes after ``count + failureLimit + inconclusiveLimit + 1`` at most."""


class Kept(Model):
    at: Time
    judged: Judged
    value: str | None = None
    message: str = ""


class Measurements(Record):
    format: Literal[1] = 1
    render_ref: str
    started_at: Time
    """When every object of the render was first seen Current: ``initialDelay`` runs
    from here."""
    analyses: dict[str, tuple[Kept, ...]] = Field(default_factory=dict)
    polled: dict[str, Time] = Field(default_factory=dict)
    """When a ``job`` analysis last found its Job still running (no measurement): the
    next look is an interval later."""

    def of(self, analysis: str) -> tuple[Measurement, ...]:
        return tuple(
            Measurement(k.at, k.judged, k.value, k.message) for k in self.analyses.get(analysis, ())
        )

    def all(self) -> dict[str, tuple[Measurement, ...]]:
        return {name: self.of(name) for name in self.analyses}

    def adding(self, analysis: str, m: Measurement) -> "Measurements":
        kept = [
            *self.analyses.get(analysis, ()),
            Kept(at=m.at, judged=m.judged, value=m.value, message=m.message),
        ]
        while sum(1 for k in kept if k.judged == Judged.ERROR) > ERRORS_KEPT:
            kept.remove(next(k for k in kept if k.judged == Judged.ERROR))
        return self.model_copy(update={"analyses": {**self.analyses, analysis: tuple(kept)}})


def polling(record: Measurements, analysis: str, at: datetime) -> Measurements:
    return record.model_copy(update={"polled": {**record.polled, analysis: at}})


def begun(release: str, render_ref: str, now: datetime) -> Measurements:
    return Measurements(release=release, render_ref=render_ref, started_at=now)


class MeasurementStore(RecordStore[Measurements]):
    """``<state>/measurements/<release>.json``: one record per Release; one that cannot
    be read is reported and dropped (the verification begins again)."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir, "measurements", Measurements)
