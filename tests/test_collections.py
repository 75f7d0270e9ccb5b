"""A tick runs with fewer cycle collections and gives the host its thresholds back."""

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from convoy_batch.engine.tick import make_deployer
from convoy_batch.ticks.runner import GC_THRESHOLD, run_tick
from tests.scenario import T0, Scenario


@pytest.fixture
def host_threshold() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(1000, 11, 12)  # the host's own choice, not the default
    yield gc.get_threshold()
    gc.set_threshold(*before)


def test_a_tick_raises_the_thresholds_while_it_runs_and_restores_the_hosts(
    scenario: Scenario, host_threshold: tuple[int, int, int]
) -> None:
    scenario.app("web")
    seen: list[tuple[int, int, int]] = []

    def factory(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_threshold())
        return make_deployer(*args, **kwargs)

    report = run_tick(scenario.root, scenario.state, T0, deployer_factory=factory)
    assert [h.outcome.reason for h in report.handled] == ["Synced"]
    assert seen and set(seen) == {GC_THRESHOLD}
    assert gc.get_threshold() == host_threshold
