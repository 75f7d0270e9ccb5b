"""The markers of what a test needs are set by folders and fixtures, never forgotten: a
test that starts a server without its marker fails (tests/support/needs.py)."""

import pytest

pytest_plugins = ["pytester"]

CONFTEST = """
from tests.conftest import pytest_collection_modifyitems, pytest_configure
from tests.conftest import pytest_runtest_protocol
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
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tests.conftest.TESTS", inner.path)
    fast = inner.runpytest_inprocess("-m", "not (k8s or registry)", "-p", "no:cacheprovider")
    fast.assert_outcomes(passed=1, failed=1, deselected=2)  # by hand: no marker, fails
    assert "test_by_hand starts what 'registry' stands for without the marker" in fast.stdout.str()
    chosen = inner.runpytest_inprocess("-m", "k8s or registry", "-p", "no:cacheprovider")
    chosen.assert_outcomes(passed=2, deselected=2)
