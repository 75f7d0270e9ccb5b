"""One vocabulary: the error reasons of the outcome are exactly the reasons of the typed
errors, and the README lists every one of them."""

import re
from pathlib import Path

from convoy_batch import errors
from convoy_batch.rollout import ERROR_REASONS


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_the_error_reasons_are_the_reasons_of_the_typed_errors() -> None:
    assert {cls.reason for cls in _subclasses(errors.ConvoyError)} == ERROR_REASONS


def test_the_readme_lists_every_error_reason() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    listed = readme.split("- Outcome reasons:", 1)[1].split("\n- ", 1)[0]
    assert set(re.findall(r"`(\w+)`", listed)) >= ERROR_REASONS
