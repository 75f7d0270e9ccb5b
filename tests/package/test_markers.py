"""The markers of what a test needs are set by folders and fixtures, never forgotten: a
test that starts a server without its marker fails (tests/support/needs.py); under
make test's workers a module that shares a fixture stays on one (tests/support/workers.py)."""

import os
import re

import pytest

from tests.support import needs
from tests.support.scenario import PROJECT

pytest_plugins = ["pytester"]

CONFTEST = """
from pathlib import Path

import tests.conftest
from tests.conftest import pytest_collection_modifyitems, pytest_configure
from tests.conftest import pytest_runtest_protocol

tests.conftest.TESTS = Path(__file__).parent  # this folder is laid out as tests/
"""

TESTS = """
import pytest
from tests.support.needs import needs, require

@pytest.fixture
@needs("registry")
def registry():
    require("registry")
    return "started"

def test_through_the_fixture(registry):
    assert registry == "started"

def test_by_hand():
    require("registry")

def test_of_nothing():
    pass
"""


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    """A test folder laid out as ``tests/`` (its conftest's hooks are this suite's)."""
    pytester.makeconftest(CONFTEST)
    (pytester.path / "k8s").mkdir()
    (pytester.path / "k8s" / "test_server.py").write_text("def test_in_k8s():\n    pass\n")
    pytester.makepyfile(test_inner=TESTS)
    return pytester


def test_a_fixture_or_a_folder_sets_the_marker_and_make_check_leaves_the_test_out(
    inner: pytest.Pytester,
) -> None:
    fast = inner.runpytest_inprocess("-m", "not (k8s or registry)", "-p", "no:cacheprovider")
    fast.assert_outcomes(passed=1, failed=1, deselected=2)  # by hand: no marker, fails
    assert "test_by_hand starts what 'registry' stands for without the marker" in fast.stdout.str()
    chosen = inner.runpytest_inprocess("-m", "k8s or registry", "-p", "no:cacheprovider")
    chosen.assert_outcomes(passed=2, deselected=2)


SHARED = """
import os
from pathlib import Path

import pytest

@pytest.fixture(scope="module")
def world():
    with (Path(__file__).parent / "setups.log").open("a") as log:
        log.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")

@pytest.mark.parametrize("n", range(6))
def test_in_the_world(world, n):
    pass
"""


@pytest.mark.slow
def test_a_module_that_shares_a_fixture_runs_on_one_worker_and_makes_it_once(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    inner.makepyfile(test_shared=SHARED)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(PROJECT), os.environ.get("PYTHONPATH", "")])
    )
    done = inner.runpytest_subprocess("-n", "3", "--dist", "loadgroup", "-p", "no:cacheprovider")
    done.assert_outcomes(passed=9, failed=1)  # test_by_hand, as above
    assert len((inner.path / "setups.log").read_text().split()) == 1


def documented_expressions() -> list[str]:
    """The ``-m`` expressions of docs/developer/contributing.md's table, in its order."""
    text = (PROJECT / "docs" / "developer" / "contributing.md").read_text()
    table = text.split("| `-m` | Runs |\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", table, re.MULTILINE)


def test_each_marker_expression_the_docs_show_names_markers_and_the_last_is_make_checks() -> None:
    expressions = documented_expressions()
    assert len(expressions) == 4, expressions
    makefile = (PROJECT / "Makefile").read_text()
    assert f"FAST := {expressions[-1]}\n" in makefile
    for expression in expressions:
        words = set(re.findall(r"[a-z0-9]+", expression)) - {"not", "and", "or"}
        assert words and words <= needs.MARKERS.keys(), expression
