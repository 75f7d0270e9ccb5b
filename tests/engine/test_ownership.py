"""One Release per object (README Decisions): the first Release in repository order that
renders or holds an object owns it; a later one is refused, and no prune deletes what
another Release still claims. Directory cluster, real repository, the CLI in-process."""

from pathlib import Path

from tests.support.scenario import Scenario


def shared(owner: str, value: str) -> str:
    """A ConfigMap both Releases may render, in a namespace of its own."""
    return (
        "apiVersion: v1\nkind: ConfigMap\n"
        "metadata: {name: settings, namespace: shared}\n"
        f"data: {{value: {value}, from: {owner}}}\n"
    )


def live_settings(s: Scenario) -> dict[str, object]:
    live = s.live("shared", "configmap", "settings")
    return {"data": live["data"], "release": live["metadata"]["labels"]["convoy.dev/release"]}


def settings_file(s: Scenario) -> Path:
    return s.object_path("shared", "configmap", "settings")


def test_the_release_later_in_repository_order_is_refused_and_the_object_never_flips(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app("alpha", extra={"shared.yaml": shared("alpha", "one")})
    s.app("beta", extra={"shared.yaml": shared("beta", "two")})
    s.app("gamma")  # an unrelated Release carries on
    first = s.reconcile(minutes=0)
    assert first.code == 1
    assert s.status("alpha")["lastAttempted"]["reason"] == "Synced"
    assert s.status("gamma")["lastAttempted"]["reason"] == "Synced"
    refused = s.status("beta")["lastAttempted"]
    assert refused["reason"] == "OwnershipConflict"
    assert refused["applied"] is False
    assert "ConfigMap shared/settings belongs to Release alpha" in refused["message"]
    assert "\n" not in refused["message"]
    assert "beta: OwnershipConflict: ConfigMap shared/settings belongs to Release alpha" in (
        first.err
    )
    assert live_settings(s) == {"data": {"value": "one", "from": "alpha"}, "release": "alpha"}
    # Nothing of beta went live: its own Deployment neither (refused before the dry run).
    assert not s.object_path("beta", "deployment.apps", "beta").exists()
    planned = s.cli("plan", "beta")  # plan decides with the same code, and sees it too
    assert "OwnershipConflict: ConfigMap shared/settings belongs to Release alpha" in planned.out
    written = settings_file(s).stat().st_mtime_ns
    for minute in (1, 2, 3):
        assert s.reconcile("--all", minutes=minute).code == 1
        assert live_settings(s)["release"] == "alpha"
        assert settings_file(s).stat().st_mtime_ns == written  # never rewritten
        assert s.status("beta")["lastAttempted"]["reason"] == "OwnershipConflict"


def test_an_earlier_release_takes_over_an_object_a_later_one_held_and_the_later_keeps_off(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app("beta", extra={"shared.yaml": shared("beta", "two")})
    assert s.reconcile(minutes=0).code == 0
    assert live_settings(s)["release"] == "beta"
    # alpha (first in repository order) starts rendering the same object.
    s.app("alpha", extra={"shared.yaml": shared("alpha", "one")})
    assert s.reconcile(minutes=1).code == 1
    assert s.status("alpha")["lastAttempted"]["reason"] == "Synced"
    assert s.status("beta")["lastAttempted"]["reason"] == "OwnershipConflict"
    assert live_settings(s) == {"data": {"value": "one", "from": "alpha"}, "release": "alpha"}
    assert s.reconcile("--all", minutes=2).code == 1
    assert live_settings(s)["release"] == "alpha"

    # beta lets go of it: its prune spares the object alpha owns, and beta syncs again.
    s.commit({"apps/beta/shared.yaml": None}, "beta drops the shared ConfigMap")
    assert s.reconcile(minutes=3).code == 0
    assert s.status("beta")["lastAttempted"]["reason"] == "Synced"
    assert live_settings(s) == {"data": {"value": "one", "from": "alpha"}, "release": "alpha"}
    inventory = (s.state / "inventory" / "beta.json").read_text()
    assert '"settings"' not in inventory  # no longer beta's to prune
    # alpha still owns and prunes it as its own.
    s.commit({"apps/alpha/shared.yaml": None}, "alpha drops the shared ConfigMap")
    assert s.reconcile(minutes=4).code == 0
    assert not settings_file(s).exists()


def test_an_object_moved_to_a_later_release_in_one_commit_is_handed_over_in_one_tick(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app("alpha", extra={"shared.yaml": shared("alpha", "one")})
    s.app("beta")
    assert s.reconcile(minutes=0).code == 0
    s.commit(
        {"apps/alpha/shared.yaml": None, "apps/beta/shared.yaml": shared("beta", "two")},
        "move the shared ConfigMap from alpha to beta",
    )
    assert s.reconcile(minutes=1).code == 0
    assert s.status("alpha")["lastAttempted"]["reason"] == "Synced"
    assert s.status("beta")["lastAttempted"]["reason"] == "Synced"
    assert live_settings(s) == {"data": {"value": "two", "from": "beta"}, "release": "beta"}
