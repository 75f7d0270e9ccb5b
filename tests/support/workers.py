"""How ``make test`` spreads the suite over its workers (pytest-xdist, ``--dist
loadgroup``), set at collection by ``tests/conftest.py``:

- the tests of a module that share a fixture of module, package or class scope (a rollout
  of every public chart, a started webserver) are one group: one worker runs them all,
  the fixture made once;
- every other test goes alone to whichever worker is free;
- the longest go first: the groups of the markers in :data:`FIRST` (each runs minutes on
  its worker), then single tests by :data:`FIRST`; a two-minute crash test started last
  would run alone at the end while the other workers wait.

Each worker starts its own servers (the session fixtures), so tests on two workers never
share one.
"""

import pytest

from tests.support.needs import fixture_definitions

SHARED_SCOPES = {"module", "package", "class"}

FIRST = ("k8s", "dagster", "slow", "crash")
"""The markers whose tests lead the order, in this order (their tests take seconds to
minutes each; the rest, well under a second most). The Kubernetes groups (a rollout of
every public chart: about three minutes on one worker) and the Dagster runs are the
longest now that a crash point takes a tenth of a second per tick; the crash modules,
a minute or less each, fill in after them."""


def group_of(item: pytest.Item) -> str | None:
    """The module of ``item`` when it shares a fixture wider than a test, else None."""
    for definitions in fixture_definitions(item):
        if definitions and definitions[-1].scope in SHARED_SCOPES:
            return item.nodeid.split("::")[0]
    return None


def rank(item: pytest.Item, grouped: bool) -> tuple[bool, int]:
    """Where ``item`` goes in the order: a group of a marker in :data:`FIRST` before any
    single test, then the index of its first marker in :data:`FIRST`."""
    found = [FIRST.index(m.name) for m in item.iter_markers() if m.name in FIRST]
    first = min(found, default=len(FIRST))
    return not (grouped and first < len(FIRST)), first


def schedule(items: list[pytest.Item]) -> None:
    """Groups ``items`` (an ``xdist_group`` marker) and puts the longest first, in place;
    within a rank the collection's order is kept."""
    ranks = {}
    for item in items:
        group = group_of(item)
        if group is not None and item.config.pluginmanager.has_plugin("xdist"):
            item.add_marker(pytest.mark.xdist_group(group))
        ranks[item.nodeid] = rank(item, group is not None)
    items.sort(key=lambda item: ranks[item.nodeid])
