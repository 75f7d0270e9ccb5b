"""Public-style manifests, unmodified, on the directory cluster: a first rollout through
an Argo CD PreSync hook, a rollback, a prune and a quiet tick that writes nothing."""

from pathlib import Path

from tests.support.fakes import job_status_complete
from tests.support.scenario import Scenario
from tests.support.wild import GUESTBOOK, change, shop


def commit_app(s: Scenario, name: str, files: dict[str, str], drop: tuple[str, ...] = ()) -> None:
    s.commit(change(name, files, drop), name)


def cluster_files(s: Scenario) -> dict[Path, int]:
    root = s.state / "clusters" / "staging"
    return {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def check_quiet_tick(s: Scenario, minutes: float) -> None:
    """A tick of every Release at ``minutes`` makes neither a commit nor writes a file in
    the cluster."""
    head, files = s.head(), cluster_files(s)
    assert s.reconcile("--all", minutes=minutes).code == 0
    assert (s.head(), cluster_files(s)) == (head, files)


def test_the_guestbook_as_written_rolls_out_and_then_ticks_quietly(scenario: Scenario) -> None:
    s = scenario
    commit_app(s, "guestbook", GUESTBOOK)
    assert s.reconcile(minutes=0).code == 0
    assert s.status("guestbook")["lastAttempted"]["reason"] == "Synced"
    s.deployment_ready("guestbook-ui", namespace="guestbook")
    assert s.reconcile(minutes=1).code == 0
    assert s.status("guestbook")["rollout"]["state"] == "Succeeded"
    check_quiet_tick(s, 2)


def test_the_shop_rolls_out_through_its_hook_rolls_back_prunes_and_ticks_quietly(
    scenario: Scenario,
) -> None:
    s = scenario
    commit_app(s, "shop", shop())
    # First rollout: the PreSync hook Job goes first, the waves wait for it.
    assert s.reconcile(minutes=0).code == 0
    assert s.status("shop")["lastAttempted"]["reason"] == "WaitingForWaveHealth"
    assert s.object_path("shop", "job.batch", "db-migrate").exists()
    assert not s.object_path("shop", "deployment.apps", "frontend").exists()
    s.set_status("shop", "job.batch", "db-migrate", job_status_complete())
    assert s.reconcile(minutes=1).code == 0
    assert s.status("shop")["lastAttempted"]["reason"] == "Synced"
    for kind_dir, name in [
        ("serviceaccount", "shop"),
        ("deployment.apps", "frontend"),
        ("service", "cart"),
        ("secret", "shop-payments"),
        ("ingress.networking.k8s.io", "shop"),
        ("configmap", "promotions"),
    ]:
        assert s.object_path("shop", kind_dir, name).exists(), (kind_dir, name)
    s.deployment_ready("frontend", namespace="shop")
    s.deployment_ready("cart", namespace="shop")
    assert s.reconcile(minutes=2).code == 0
    assert s.status("shop")["rollout"]["state"] == "Succeeded"

    # A new frontend image that never becomes ready is rolled back after the deadline.
    commit_app(s, "shop", shop("example/shop-frontend:v2"))
    assert s.reconcile(minutes=3).code == 0  # the hook again, for the new render
    s.set_status("shop", "job.batch", "db-migrate", job_status_complete())
    assert s.reconcile(minutes=4).code == 0
    image = s.live("shop", "deployment.apps", "frontend")["spec"]["template"]["spec"]
    assert image["containers"][0]["image"] == "example/shop-frontend:v2"
    assert s.reconcile(minutes=16).code == 0
    assert s.status("shop")["rollout"]["state"] == "RolledBack"
    image = s.live("shop", "deployment.apps", "frontend")["spec"]["template"]["spec"]
    assert image["containers"][0]["image"] == "example/shop-frontend:v1"

    # A fixed commit without the promotions ConfigMap: rolled out, and the ConfigMap pruned.
    commit_app(s, "shop", shop("example/shop-frontend:v3", promo=False), drop=("promotions.yaml",))
    assert s.reconcile(minutes=17).code == 0
    s.set_status("shop", "job.batch", "db-migrate", job_status_complete())
    assert s.reconcile(minutes=18).code == 0
    assert not s.object_path("shop", "configmap", "promotions").exists()
    s.deployment_ready("frontend", namespace="shop")
    assert s.reconcile(minutes=19).code == 0
    assert s.status("shop")["rollout"]["state"] == "Succeeded"

    check_quiet_tick(s, 20)
