"""A tick runs with the cycle collector off and gives the host its collector back; it loads
only the libraries it uses."""

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from convoy_batch.deployers.factory import make_deployer
from convoy_batch.ticks.runner import run_tick
from tests.support.scenario import T0, Scenario


@pytest.fixture
def host_collector() -> Iterator[None]:
    enabled, threshold = gc.isenabled(), gc.get_threshold()
    gc.set_threshold(1000, 11, 12)  # the host's own choice, not the default
    yield
    gc.set_threshold(*threshold)
    if enabled:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.parametrize("host_enabled", [True, False], ids=["host-on", "host-off"])
def test_a_tick_turns_the_collector_off_while_it_runs_and_gives_the_host_its_own(
    scenario: Scenario, host_collector: None, host_enabled: bool
) -> None:
    if host_enabled:
        gc.enable()
    else:
        gc.disable()
    scenario.app("web")
    seen: list[bool] = []

    def factory(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return make_deployer(*args, **kwargs)

    report = run_tick(scenario.root, scenario.state, T0, deployer_factory=factory)
    assert [h.outcome.reason for h in report.handled] == ["Synced"]
    assert seen and set(seen) == {False}
    assert gc.isenabled() is host_enabled
    assert gc.get_threshold() == (1000, 11, 12)


def test_a_failing_tick_gives_the_host_its_collector_back(
    scenario: Scenario, host_collector: None
) -> None:
    gc.enable()
    scenario.app("web")

    def factory(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt  # what no tick code catches

    with pytest.raises(KeyboardInterrupt):
        run_tick(scenario.root, scenario.state, T0, deployer_factory=factory)
    assert gc.isenabled()


def test_a_tick_of_directory_clusters_loads_neither_the_kubernetes_client_nor_dagster(
    scenario: Scenario,
) -> None:
    """Each tick of the CLI is a process: a library it loads for nothing is paid by every
    tick (the Kubernetes client: a third of a second)."""
    s = scenario
    s.app("web")
    code, loaded = s.reconcile_in_a_process(0, "web", modules=("kubernetes", "dagster", "git"))
    assert code == 0
    assert loaded == {"git"}  # the repository's reader: the check sees a loaded module
