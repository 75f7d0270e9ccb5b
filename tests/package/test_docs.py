"""The front door and the documentation site: README.md stays short, every page under docs/
is in mkdocs.yml's nav (and every nav entry is a page), no page is over its length, and
the README's links name files that exist. Links between the pages and their anchors are
the strict build's (``mkdocs build --strict`` in make lint)."""

import re
from typing import Any

import yaml

from tests.support.scenario import PROJECT

DOCS = PROJECT / "docs"
README_LINES = 150
PAGE_LINES = 400
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def nav_pages(entry: Any) -> list[str]:
    """The pages the nav names, in its order (a title maps to a page or to a section)."""
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, list):
        return [page for item in entry for page in nav_pages(item)]
    if isinstance(entry, dict):
        return [page for value in entry.values() for page in nav_pages(value)]
    raise AssertionError(f"mkdocs.yml: a nav entry that is no page: {entry!r}")


def config() -> dict[str, Any]:
    loaded = yaml.safe_load((PROJECT / "mkdocs.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def pages() -> list[str]:
    return sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md"))


def test_the_readme_is_at_most_150_lines() -> None:
    lines = (PROJECT / "README.md").read_text().splitlines()
    assert len(lines) <= README_LINES, len(lines)


def test_the_site_is_strict_with_its_pages_under_docs() -> None:
    site = config()
    assert site["strict"] is True
    assert site["docs_dir"] == "docs"
    assert site["theme"] == "material" or site["theme"]["name"] == "material"


def test_every_page_is_in_the_nav_once_and_every_nav_entry_is_a_page() -> None:
    named = nav_pages(config()["nav"])
    assert len(named) == len(set(named)), sorted(p for p in named if named.count(p) > 1)
    assert sorted(named) == pages(), set(named) ^ set(pages())


def test_no_page_is_over_400_lines() -> None:
    lengths = {page: len((DOCS / page).read_text().splitlines()) for page in pages()}
    assert lengths
    over = {page: n for page, n in lengths.items() if n > PAGE_LINES}
    assert not over, over


def test_the_readme_links_name_files_of_the_project() -> None:
    text = (PROJECT / "README.md").read_text()
    targets = [m[1] for m in LINK.finditer(text) if "://" not in m[1]]
    assert any(t.startswith("docs/") for t in targets), targets
    missing = [t for t in targets if not (PROJECT / t).is_file()]
    assert not missing, missing
