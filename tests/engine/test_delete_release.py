"""Deleting a Release (docs/guides/deleting.md), on the directory cluster, through
the CLI: a removed file retires its Release on purpose (Delete, Orphan, adoption), never
by accident (an unreadable file, a rename, a mass deletion without a trailer)."""

import json
import subprocess
from pathlib import Path

import pytest

from convoy_batch.reasons import Reason
from tests.support.scenario import FAILURE_POLICY, Scenario, release_yaml

PRUNE_FALSE_CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: ${release}-kept
  annotations: {convoy.dev/prune: "false"}
data: {kept: "yes"}
"""


def settled(s: Scenario, *names: str) -> None:
    """Each Release rolled out and Succeeded (its Deployment made ready)."""
    for name in names:
        s.app(name)
    s.reconcile()
    for name in names:
        s.deployment_ready(name)
    s.reconcile(minutes=1)


def files_of(s: Scenario, name: str) -> dict[Path, bytes]:
    """The object files of the Release's namespace on the directory cluster."""
    root = s.state / "clusters" / "staging" / name
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*.yaml"))}


def test_a_removed_release_is_deleted_in_one_commit_and_nothing_is_left(s: Scenario) -> None:
    settled(s, "web", "api", "db")
    removing = s.commit({"releases/web.yaml": None}, "retire web")

    result = s.reconcile(minutes=2)

    assert result.code == 0, result
    assert "web: Succeeded -> Deleted (2 objects deleted, 0 kept)" in result.out
    assert files_of(s, "web") == {}
    assert files_of(s, "api") != {}  # the others stay
    assert not s.has_status("web")
    head = s.repo.head.commit
    assert head.summary == "web: Succeeded -> Deleted (2 objects deleted, 0 kept)"
    assert f"releases/web.yaml removed in {removing}" in str(head.message)
    assert list(head.stats.files) == ["status/web.yaml"]
    # git log -- status/web.yaml is the whole life, Deleted last.
    assert s.status_log("web")[0].endswith("-> Deleted (2 objects deleted, 0 kept)")
    assert s.status_log("web")[-1].startswith("web: none -> Progressing")
    assert not (s.state / "inventory" / "web.json").exists()
    assert not (s.state / "retiring" / "web.json").exists()
    assert s.repo.git.status("--porcelain", "status/") == ""

    quiet = s.reconcile(minutes=3)
    assert quiet.code == 0
    assert s.repo.head.commit == head
    assert "web" not in quiet.out


def test_a_sharded_tick_retires_once_before_its_shards(s: Scenario) -> None:
    settled(s, "web", "api", "db")
    s.commit({"releases/web.yaml": None}, "retire web")

    result = s.reconcile(minutes=2, extra=("--jobs", "2", "--all"))

    assert result.code == 0, result
    assert result.out.splitlines()[0] == "web: Succeeded -> Deleted (2 objects deleted, 0 kept)"
    assert files_of(s, "web") == {} and not s.has_status("web")
    assert len([c for c in s.status_log("web") if "-> Deleted" in c]) == 1


def test_history_and_status_of_a_removed_release(s: Scenario) -> None:
    settled(s, "web", "api", "db")
    s.commit({"releases/web.yaml": None}, "retire web")
    plan = s.cli("plan", "web", "--now", "2026-11-29T12:02:00Z")
    status = s.cli("status", "web")
    s.reconcile(minutes=2)

    history = s.cli("history", "web")

    assert plan.code == 0, plan
    assert plan.out.strip() == (
        "web: removed from releases/: Delete: web: Succeeded -> Deleted (2 objects deleted, 0 kept)"
    )
    assert status.code == 0 and status.out.startswith("web ")
    assert history.code == 0
    last = history.out.strip().splitlines()[-1].split()
    assert last[1:5] == ["Succeeded", "->", "Deleted", "Deleted"]
    assert s.cli("status", "web").code == 2  # retired: no longer a Release


def test_orphan_leaves_every_object_byte_for_byte(s: Scenario) -> None:
    orphan = FAILURE_POLICY + "  deletionPolicy: Orphan\n"
    s.app("web", spec_extra=orphan)
    s.app("api")
    s.reconcile()
    s.deployment_ready("web")
    s.reconcile(minutes=1)
    before = files_of(s, "web")
    s.commit({"releases/web.yaml": None}, "retire web, keep its objects")

    result = s.reconcile(minutes=2)

    assert result.code == 0, result
    assert files_of(s, "web") == before
    head = s.repo.head.commit
    assert head.summary == "web: Succeeded -> Orphaned (2 objects kept)"
    assert "- Deployment.apps web/web" in str(head.message)
    assert not s.has_status("web")
    assert not (s.state / "inventory" / "web.json").exists()


def test_without_prune_the_default_policy_is_orphan(s: Scenario) -> None:
    no_prune = FAILURE_POLICY + "  syncPolicy: {prune: false}\n"
    s.app("web", spec_extra=no_prune)
    s.app("api")
    s.reconcile()
    s.commit({"releases/web.yaml": None}, "retire web")

    result = s.reconcile(minutes=2)

    assert "web: Progressing -> Orphaned (2 objects kept)" in result.out
    assert len(files_of(s, "web")) == 2


KEEPING = {
    "convoy": '{convoy.dev/prune: "false"}',
    "argo-prune": "{argocd.argoproj.io/sync-options: Prune=false}",
    "argo-delete": '{argocd.argoproj.io/sync-options: "Delete=false,ServerSideApply=true"}',
    "flux": "{kustomize.toolkit.fluxcd.io/prune: disabled}",
}


@pytest.mark.parametrize("annotations", list(KEEPING.values()), ids=list(KEEPING))
def test_an_object_kept_by_its_annotation_stays(s: Scenario, annotations: str) -> None:
    kept = PRUNE_FALSE_CONFIGMAP.replace('{convoy.dev/prune: "false"}', annotations)
    s.app("web", extra={"kept.yaml": kept})
    s.app("api")
    s.reconcile()
    s.commit({"releases/web.yaml": None}, "retire web")

    result = s.reconcile(minutes=2)

    assert "web: Progressing -> Deleted (2 objects deleted, 1 kept)" in result.out
    assert list(files_of(s, "web")) == [Path("configmap/web-kept.yaml")]
    assert "- ConfigMap web/web-kept" in str(s.repo.head.commit.message)


def test_delete_false_is_still_pruned_when_it_leaves_the_render(s: Scenario) -> None:
    kept = PRUNE_FALSE_CONFIGMAP.replace(
        '{convoy.dev/prune: "false"}', "{argocd.argoproj.io/sync-options: Delete=false}"
    )
    s.app("web", extra={"kept.yaml": kept})
    s.reconcile()
    s.commit({"apps/web/kept.yaml": None}, "drop it from the render")

    s.reconcile(minutes=1)

    assert Path("configmap/web-kept.yaml") not in files_of(s, "web")


def test_an_invalid_release_file_holds_every_deletion(s: Scenario) -> None:
    settled(s, "web", "api", "db")
    s.commit({"releases/web.yaml": None, "releases/api.yaml": "kind: [broken"}, "oops")

    held = s.reconcile(minutes=2)

    assert held.code == 1
    assert "web: DeletionPending: deletion waits: releases/api.yaml" in held.err
    assert s.has_status("web") and files_of(s, "web") != {}
    assert s.status("web")["lastAttempted"]["reason"] == "DeletionPending"
    assert s.reconcile(minutes=3).code == 1 and s.has_status("web")

    s.app("api")  # the file is readable again
    done = s.reconcile(minutes=4)

    assert "web: Succeeded -> Deleted (2 objects deleted, 0 kept)" in done.out
    assert files_of(s, "web") == {}


def test_a_failed_repository_read_deletes_nothing(s: Scenario) -> None:
    settled(s, "web", "api", "db")
    s.commit({"releases/web.yaml": None}, "retire web")
    tree = (s.repo.head.commit.tree / "releases").hexsha
    loose = s.root / ".git" / "objects" / tree[:2] / tree[2:]
    saved = loose.read_bytes()
    loose.unlink()  # the releases/ folder of HEAD can no longer be read

    failed = s.reconcile(minutes=2)

    assert failed.code == 2
    [line] = failed.err.splitlines()
    assert "cannot be read" in line and tree in line
    assert s.has_status("web") and len(files_of(s, "web")) == 2

    loose.write_bytes(saved)
    done = s.reconcile(minutes=3)

    assert "web: Succeeded -> Deleted (2 objects deleted, 0 kept)" in done.out


def test_a_pending_deletion_commits_once(s: Scenario) -> None:
    settled(s, "web", "api", "db")
    s.commit({"releases/web.yaml": None, "releases/api.yaml": "kind: [broken"}, "oops")
    s.reconcile(minutes=2)
    head = s.head()

    s.reconcile(minutes=3)

    assert s.head() == head  # the same wait is not committed again


def test_a_renamed_file_with_the_same_name_is_no_deletion(s: Scenario) -> None:
    settled(s, "web", "api")
    text = (s.root / "releases/web.yaml").read_text()
    s.commit({"releases/web.yaml": None, "releases/web.yml": text}, "rename the file")
    head = s.head()

    result = s.reconcile(minutes=2)

    assert result.code == 0
    assert s.has_status("web") and files_of(s, "web") != {}
    assert s.head() == head


def test_the_guard_holds_a_mass_deletion_until_a_trailer_allows_it(s: Scenario) -> None:
    settled(s, "web", "api", "db")
    s.commit({"releases/web.yaml": None, "releases/api.yaml": None}, "remove two of three")

    held = s.reconcile(minutes=2)

    assert held.code == 0, held
    for name in ("web", "api"):
        assert s.has_status(name) and files_of(s, name) != {}
        attempt = s.status(name)["lastAttempted"]
        assert attempt["reason"] == "DeletionBlocked"
        assert attempt["message"].startswith("mass deletion: 2 of 3 Releases of staging")
    assert s.reconcile(minutes=3).code == 0 and s.has_status("web")

    s.commit({"notes.txt": "x"}, "allow one\n\nConvoy-Allow-Delete: web\n")
    one = s.reconcile(minutes=4)

    assert "web: Succeeded -> Deleted" in one.out
    assert files_of(s, "web") == {} and files_of(s, "api") != {}
    assert s.status("api")["lastAttempted"]["reason"] == "DeletionBlocked"

    s.commit({"notes.txt": "y"}, "allow all\n\nConvoy-Allow-Delete: all\n")
    s.reconcile(minutes=5)

    assert files_of(s, "api") == {} and not s.has_status("api")


def test_allow_deletions_lets_the_guard_through(s: Scenario) -> None:
    settled(s, "web", "api")
    s.commit({"releases/web.yaml": None, "releases/api.yaml": None}, "remove every Release")
    held = s.reconcile(minutes=2)
    assert held.code == 0 and s.has_status("web") and s.has_status("api")
    assert s.status("web")["lastAttempted"]["message"].startswith(
        "mass deletion: 2 of 2 Releases of the repository"
    )

    result = s.reconcile(minutes=3, extra=("--allow-deletions",))

    assert result.code == 0
    assert not s.has_status("web") and not s.has_status("api")


def test_a_rename_adopts_the_objects(s: Scenario) -> None:
    # Objects named without ${release}: the new Release renders the very same ones.
    fixed = {
        "apps/shop/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: "
        "{name: shop}\nspec: {selector: {matchLabels: {app: shop}}, template: {metadata: "
        "{labels: {app: shop}}, spec: {containers: [{name: a, image: shop:1}]}}}\n",
    }
    old = release_yaml("web", spec_extra=FAILURE_POLICY)
    old = old.replace("namespace: web", "namespace: shop").replace("apps/web", "apps/shop")
    s.commit({**fixed, "releases/web.yaml": old}, "web")
    s.app("api")
    s.reconcile()
    live = s.object_path("shop", "deployment.apps", "shop")
    new = old.replace("name: web", "name: shop")
    s.commit({"releases/web.yaml": None, "releases/shop.yaml": new}, "rename")

    result = s.reconcile(minutes=2)

    assert result.code == 0, result
    assert "web: Progressing -> Deleted (adopted by shop)" in result.out
    assert s.status("shop")["rollout"]["state"] == "Progressing"
    assert live.exists()
    assert (
        s.live("shop", "deployment.apps", "shop")["metadata"]["labels"]["convoy.dev/release"]
        == "shop"
    )
    assert not s.has_status("web")
    inventory = (s.state / "inventory" / "shop.json").read_text()
    assert "Deployment" in inventory


def test_a_missing_cluster_waits_and_orphan_ends_it(s: Scenario) -> None:
    settled(s, "web", "api", "db")
    s.commit({"releases/web.yaml": None, "clusters/staging.yaml": None}, "decommission")

    pending = s.reconcile(minutes=2)

    assert pending.code == 1
    assert "web: DeletionPending: clusters/staging.yaml: no such Cluster" in pending.err
    assert s.has_status("web")

    orphaned = s.reconcile("web", minutes=3, extra=("--orphan",))

    assert orphaned.code == 0, orphaned
    assert s.repo.head.commit.summary == "web: Succeeded -> Orphaned (2 objects kept)"
    assert len(files_of(s, "web")) == 2


def test_orphan_takes_removed_releases_only(s: Scenario) -> None:
    settled(s, "web")

    result = s.reconcile("web", extra=("--orphan",))

    assert result.code == 2
    assert result.err.strip() == (
        "convoy-batch: --orphan takes removed Releases only; in releases/: web"
    )


def test_a_status_nobody_ever_released_waits_for_orphan(s: Scenario) -> None:
    settled(s, "web")
    s.commit({"status/ghost.yaml": "rollout: null\n"}, "a status by hand")

    pending = s.reconcile(minutes=2)

    assert pending.code == 1
    assert "ghost: DeletionPending: deletion waits: no commit that removed" in pending.err
    assert s.reconcile("ghost", minutes=3, extra=("--orphan",)).code == 0
    assert not s.has_status("ghost")


CREATE = "  syncPolicy: {createNamespace: true}\n"


@pytest.mark.parametrize(
    ("spec", "extra", "kept"),
    [
        (CREATE, {}, False),  # made by convoy-batch, empty once deleted: deleted
        (CREATE + "  deletionPolicy: Orphan\n", {}, True),  # Orphan deletes nothing
        (CREATE, {"kept.yaml": PRUNE_FALSE_CONFIGMAP}, True),  # something is still in it
    ],
    ids=["deleted", "orphan", "not-empty"],
)
def test_the_namespace_create_namespace_made(
    s: Scenario, spec: str, extra: dict[str, str], kept: bool
) -> None:
    s.app("web", extra=extra, spec_extra=spec + FAILURE_POLICY)
    s.app("api")
    s.reconcile()
    namespace = s.object_path("_cluster", "namespace", "web")
    assert namespace.exists()
    s.commit({"releases/web.yaml": None}, "retire web")

    result = s.reconcile(minutes=2)

    assert result.code == 0, result
    assert not s.has_status("web")
    assert namespace.exists() == kept


def test_a_namespace_convoy_did_not_make_is_kept(s: Scenario) -> None:
    s.app("web", spec_extra=CREATE + FAILURE_POLICY)
    s.app("api")
    namespace = s.object_path("_cluster", "namespace", "web")
    namespace.parent.mkdir(parents=True)
    namespace.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: web}\n")
    s.reconcile()
    s.commit({"releases/web.yaml": None}, "retire web")

    s.reconcile(minutes=2)

    assert not s.has_status("web") and namespace.exists()


def test_the_guide_s_trailer_command_lets_the_guard_through(s: Scenario) -> None:
    guide = Path(__file__).resolve().parents[2] / "docs" / "guides" / "deleting.md"
    text = guide.read_text()
    command = next(
        line.strip()
        for line in text.splitlines()
        if line.strip().startswith("git commit") and "Convoy-Allow-Delete" in line
    )
    settled(s, "web", "api", "db")
    s.commit({"releases/web.yaml": None, "releases/api.yaml": None}, "remove two of three")
    s.reconcile(minutes=2)
    assert s.status("web")["lastAttempted"]["reason"] == "DeletionBlocked"

    subprocess.run(command, shell=True, cwd=s.root, check=True, capture_output=True)
    s.reconcile(minutes=3)

    assert not s.has_status("web") and not s.has_status("api")
    assert files_of(s, "web") == {} and files_of(s, "api") == {}


@pytest.fixture
def s(scenario: Scenario) -> Scenario:
    return scenario


# --- plan speaks the reasons' vocabulary (the status's, the notification's) ---------

PLAN_NOW = "2026-11-29T12:02:00Z"


def test_a_retirement_the_guard_blocks_is_planned_as_deletion_blocked(s: Scenario) -> None:
    settled(s, "web", "api")
    s.commit({"releases/web.yaml": None, "releases/api.yaml": None}, "remove every Release")

    plan = s.cli("plan", "web", "--now", PLAN_NOW)
    rows = s.cli("plan", "web", "--now", PLAN_NOW, "--output", "json")

    assert plan.code == 0, plan
    assert plan.out.strip().startswith(
        "web: removed from releases/: DeletionBlocked: mass deletion: 2 of 2 Releases"
    ), plan.out
    row = json.loads(rows.out)[0]
    assert (row["reason"], row["fate"]) == (Reason.DELETION_BLOCKED, "Blocked")
    s.reconcile(minutes=2)  # the tick's status gives the same reason
    assert s.status("web")["lastAttempted"]["reason"] == row["reason"]


def test_a_retirement_that_goes_is_planned_by_its_fate(s: Scenario) -> None:
    settled(s, "web", "api", "db")
    s.commit({"releases/web.yaml": None}, "retire web")

    rows = s.cli("plan", "web", "--now", PLAN_NOW, "--output", "json")

    row = json.loads(rows.out)[0]
    assert (row["fate"], row["reason"]) == ("Delete", None)
