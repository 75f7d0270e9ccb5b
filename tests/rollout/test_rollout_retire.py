"""The retirement decision (``rollout/retire.py``): pending while anything is unreadable,
adoption, the mass-deletion guard and what lets it through, and each policy."""

from convoy_batch.rollout.retire import (
    Allowed,
    Fate,
    Gone,
    Retirement,
    allowed_by_trailers,
    retire,
)

PROD = {f"app{i}": "prod" for i in range(10)} | {"tools": "dev", "docs": "dev"}


def fates(found: list[Retirement]) -> dict[str, Fate]:
    return {r.name: r.fate for r in found}


def test_one_gone_release_is_deleted_or_orphaned_by_its_policy() -> None:
    found = retire(
        [Gone("app1", "prod", delete=True), Gone("tools", "dev", delete=False)],
        unreadable=None,
        last_releases=PROD,
    )
    assert fates(found) == {"app1": Fate.DELETE, "tools": Fate.ORPHAN}


def test_nothing_is_retired_while_a_file_is_unreadable_and_the_file_is_named() -> None:
    problem = "releases/api.yaml: spec.cluster: field required"
    found = retire([Gone("app1", "prod", delete=True)], unreadable=problem, last_releases=PROD)
    assert found == [Retirement("app1", Fate.PENDING, f"deletion waits: {problem}")]


def test_more_than_half_of_a_clusters_releases_is_blocked_with_the_counts() -> None:
    gone = [Gone(f"app{i}", "prod", delete=True) for i in range(6)]
    found = retire(gone, unreadable=None, last_releases=PROD)
    assert set(fates(found).values()) == {Fate.BLOCKED}
    assert found[0].message == "mass deletion: 6 of 10 Releases of prod"


def test_half_of_a_cluster_goes_ahead() -> None:
    gone = [Gone(f"app{i}", "prod", delete=True) for i in range(5)]
    assert set(fates(retire(gone, unreadable=None, last_releases=PROD)).values()) == {Fate.DELETE}


def test_one_release_alone_is_never_blocked_even_the_last_one() -> None:
    found = retire([Gone("only", "c", delete=True)], unreadable=None, last_releases={"only": "c"})
    assert fates(found) == {"only": Fate.DELETE}


def test_every_release_of_the_repository_is_blocked() -> None:
    last = {"a": "one", "b": "two"}
    gone = [Gone("a", "one", delete=True), Gone("b", "two", delete=False)]
    found = retire(gone, unreadable=None, last_releases=last)
    assert fates(found) == {"a": Fate.BLOCKED, "b": Fate.BLOCKED}
    assert found[0].message == "mass deletion: 2 of 2 Releases of the repository"


def test_the_trailer_lets_named_releases_or_all_through() -> None:
    gone = [Gone(f"app{i}", "prod", delete=True) for i in range(6)]
    named = retire(
        gone, unreadable=None, last_releases=PROD, allowed=allowed_by_trailers(["app0, app1"])
    )
    assert [r.name for r in named if r.fate == Fate.DELETE] == ["app0", "app1"]
    every = retire(gone, unreadable=None, last_releases=PROD, allowed=allowed_by_trailers(["all"]))
    assert set(fates(every).values()) == {Fate.DELETE}
    flag = retire(gone, unreadable=None, last_releases=PROD, allowed=Allowed(every=True))
    assert set(fates(flag).values()) == {Fate.DELETE}


def test_an_adoption_is_no_deletion_and_is_not_counted() -> None:
    gone = [Gone(f"app{i}", "prod", delete=True, adopted_by=f"new{i}") for i in range(6)]
    gone.append(Gone("app9", "prod", delete=True))
    found = retire(gone, unreadable=None, last_releases=PROD)
    assert fates(found)["app0"] == Fate.ADOPTED
    assert found[0].message == "adopted by new0"
    assert fates(found)["app9"] == Fate.DELETE


def test_the_counts_are_over_the_last_heads_releases_not_the_new_ones() -> None:
    # 6 of prod's 10 removed while 6 new ones are added: still 6 of 10.
    gone = [Gone(f"app{i}", "prod", delete=True) for i in range(6)]
    found = retire(gone, unreadable=None, last_releases=PROD)
    assert found[0].fate == Fate.BLOCKED


def test_a_gone_release_the_last_head_did_not_know_is_counted_too() -> None:
    found = retire(
        [Gone("x", "c", delete=True), Gone("y", "c", delete=True)],
        unreadable=None,
        last_releases={"z": "c"},
    )
    assert found[0].message == "mass deletion: 2 of 3 Releases of c"
