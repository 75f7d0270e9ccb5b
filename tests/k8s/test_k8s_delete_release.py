"""Deleting a Release on a real API server, through the CLI: a commit removes
``releases/<name>.yaml`` and the next tick retires it (deletes its objects, keeps them, or
hands them to the Release that renders them now), then removes ``status/<name>.yaml`` in
one commit. Each test has its own Release names, hence its own namespaces; assertions
read the server's objects, the repository and the requests sent."""

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from convoy_batch.deployers import kubeapi
from tests.k8s.k8s_scenario import KubeScenario, kube_cluster
from tests.k8s.testenv import eventually
from tests.support.scenario import FAILURE_POLICY, release_yaml

CONVOY_KEEP = 'convoy.dev/prune: "false"'
ARGO_KEEP = "argocd.argoproj.io/sync-options: Prune=false"
FLUX_KEEP = "kustomize.toolkit.fluxcd.io/prune: disabled"
KEPT = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${release}-kept\n  annotations: {ANN}\n"
CREATE_NAMESPACE = "  syncPolicy: {createNamespace: true}\n"
ORPHAN = FAILURE_POLICY + "  deletionPolicy: Orphan\n"
# Names that do not depend on ${release}: a renamed Release renders the same objects.
FIXED = {
    "deployment.yaml": """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: ren-app}
spec:
  replicas: 1
  selector: {matchLabels: {app: ren-app}}
  template:
    metadata: {labels: {app: ren-app}}
    spec:
      containers: [{name: app, image: "example/app:1.0"}]
""",
    "configmap.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ren-settings}\ndata: {a: b}\n"
    ),
}

Live = dict[str, tuple[str, str] | None]
"""``Kind/name`` -> (uid, resourceVersion) of the live object; None: gone or being deleted."""


def meta(read: Any, *args: str) -> tuple[str, str] | None:
    try:
        found = read(*args).metadata
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return None if found.deletion_timestamp else (found.uid, found.resource_version)


def live(s: KubeScenario, ns: str, deployment: str, *configmaps: str) -> Live:
    """A Release's objects as the server holds them: its Namespace, Deployment, ConfigMaps."""
    core, apps = s.kube.core, s.kube.apps
    found: Live = {
        f"Namespace/{ns}": meta(core.read_namespace, ns),
        f"Deployment/{deployment}": meta(apps.read_namespaced_deployment, deployment, ns),
    }
    for name in configmaps:
        found[f"ConfigMap/{name}"] = meta(core.read_namespaced_config_map, name, ns)
    return found


def objects(s: KubeScenario, name: str, *kept: str) -> Live:
    """The objects of the standard app ``name`` (and its ConfigMaps ``kept``)."""
    return live(s, name, name, f"{name}-config", *kept)


def uids(found: Live) -> dict[str, str | None]:
    return {key: value and value[0] for key, value in found.items()}


def inventory(s: KubeScenario, name: str) -> list[str]:
    """``Kind/name`` of each entry of a Release's inventory (none when it has none)."""
    path = s.state / "inventory" / f"{name}.json"
    entries = json.loads(path.read_text())["entries"] if path.exists() else []
    return sorted(f"{e['key']['kind']}/{e['key']['name']}" for e in entries)


def succeeded(s: KubeScenario, name: str, *, deployment: str = "", **app: Any) -> Live:
    """``name`` rolled out and healthy (Succeeded); its live objects."""
    s.app(name, **app)
    result = s.reconcile(name, minutes=0)
    assert result.code == 0, result.err
    s.kube.deployment_ready(name, deployment or name)
    assert s.reconcile(name, minutes=1).code == 0
    assert s.status(name)["rollout"]["state"] == "Succeeded"
    configmaps = [e.removeprefix("ConfigMap/") for e in inventory(s, name) if "ConfigMap/" in e]
    found = live(s, name, deployment or name, *configmaps)
    assert all(found.values()), found
    return found


def remove(s: KubeScenario, name: str, **files: str) -> str:
    """The commit that removes ``releases/<name>.yaml`` (and writes ``files``)."""
    return s.commit({f"releases/{name}.yaml": None, **files}, f"retire {name}")


@contextmanager
def requests() -> Iterator[dict[str, int]]:
    """The requests sent to any API server inside the block, by method (filled on exit)."""
    sent: dict[str, int] = {}
    before = dict(kubeapi.COUNTS)
    yield sent
    sent.update(
        {k: v - before.get(k, 0) for k, v in kubeapi.COUNTS.items() if v != before.get(k, 0)}
    )


def retirement(s: KubeScenario, name: str, removed: str) -> str:
    """The subject of the commit that removed ``status/<name>.yaml``: it removes that file
    alone and its body names the commit that removed the Release's file."""
    assert not s.has_status(name)
    commit = last_change(s, name)
    message = str(commit.message)
    assert [d.a_path for d in commit.diff(commit.parents[0])] == [f"status/{name}.yaml"]
    assert f"releases/{name}.yaml removed in {removed}." in message
    return message.splitlines()[0]


def last_change(s: KubeScenario, name: str) -> Any:
    """The last commit that changed ``status/<name>.yaml``."""
    return next(s.repo.iter_commits(paths=f"status/{name}.yaml", max_count=1))


def quiet(s: KubeScenario, minutes: float) -> None:
    """A later tick: exit 0, no commit, no write to the server (reads at most)."""
    head = s.head()
    with requests() as sent:
        result = s.reconcile(minutes=minutes)
    assert result.code == 0, result.err
    assert s.head() == head
    assert set(sent) <= {"GET"}, sent


def deleted(s: KubeScenario, name: str, minute: int) -> int:
    """The ticks from ``minute`` that retire ``name`` by deleting, and the minute after the
    last. What a delete leaves going (a Namespace of the render terminating on the namespace
    controller's clock; on a busy server, a Deployment whose foreground delete waits on the
    garbage collector) makes a tick report the Release skipped (exit 0, nothing committed,
    only the Release's own objects left), and a later tick completes it: at most 6."""
    before = set(inventory(s, name))
    for tick in range(minute, minute + 6):
        result = s.reconcile(minutes=tick)
        assert result.code == 0, result.err
        if not s.has_status(name):
            return tick + 1
        left = inventory(s, name)
        assert left and set(left) <= before, left
        skipped = f"{name}: skipped ({len(left)} objects still being deleted)"
        assert skipped in result.out.splitlines(), result.out
        if left == [f"Namespace/{name}"]:
            assert meta(s.kube.core.read_namespace, name) is None  # terminating, or gone
            eventually(lambda: not namespace_exists(s, name), f"namespace {name} to go")
    raise AssertionError(f"{name} still has a status after 6 ticks")


def namespace_exists(s: KubeScenario, name: str) -> bool:
    return any(ns.metadata.name == name for ns in s.kube.core.list_namespace().items)


def test_a_removed_release_is_deleted_from_the_server(kscenario: KubeScenario) -> None:
    s = kscenario
    before = succeeded(s, "del")
    held = inventory(s, "del")
    assert held == sorted(before)  # the render's Namespace is an object of the inventory

    removed = remove(s, "del")
    deleted(s, "del", 2)
    subject = retirement(s, "del", removed)
    assert subject == f"del: Succeeded -> Deleted ({len(held)} objects deleted, 0 kept)"
    assert objects(s, "del") == dict.fromkeys(before)
    assert not namespace_exists(s, "del")
    assert inventory(s, "del") == []
    quiet(s, 10)


@pytest.mark.parametrize(
    ("name", "annotation", "own_namespace"),
    [
        ("keep", CONVOY_KEEP, False),
        ("keep-argo", ARGO_KEEP, False),
        ("keep-flux", FLUX_KEEP, False),
        ("keep-ns", CONVOY_KEEP, True),  # the kept object's namespace is in the render
    ],
    ids=["convoy", "argo-cd", "flux", "namespace-in-render"],
)
def test_an_object_marked_not_to_prune_is_kept(
    kscenario: KubeScenario, name: str, annotation: str, own_namespace: bool
) -> None:
    s = kscenario
    spec = FAILURE_POLICY + ("" if own_namespace else CREATE_NAMESPACE)
    kept = {"kept.yaml": KEPT.replace("ANN", annotation)}
    before = succeeded(s, name, own_namespace=own_namespace, extra=kept, spec_extra=spec)
    held = inventory(s, name)

    removed = remove(s, name)
    deleted(s, name, 2)
    subject = retirement(s, name, removed)
    # The render's own Namespace holds the kept object: it is kept too (deleting it would
    # delete what it holds); createNamespace's is in no inventory and stays (not empty).
    kept_count = 2 if own_namespace else 1
    deleted_count = len(held) - kept_count
    assert subject == (
        f"{name}: Succeeded -> Deleted ({deleted_count} objects deleted, {kept_count} kept)"
    )
    assert f"- ConfigMap {name}/{name}-kept" in last_change(s, name).message
    after = objects(s, name, f"{name}-kept")
    assert after[f"ConfigMap/{name}-kept"] == before[f"ConfigMap/{name}-kept"]
    assert after[f"Namespace/{name}"] == before[f"Namespace/{name}"]
    assert after[f"Deployment/{name}"] is after[f"ConfigMap/{name}-config"] is None
    quiet(s, 10)


def test_an_orphaned_release_leaves_every_object_as_it_is(kscenario: KubeScenario) -> None:
    s = kscenario
    before = succeeded(s, "orph", spec_extra=ORPHAN)

    removed = remove(s, "orph")
    with requests() as sent:
        assert s.reconcile(minutes=2).code == 0
    assert "DELETE" not in sent, sent
    subject = retirement(s, "orph", removed)
    assert subject == f"orph: Succeeded -> Orphaned ({len(before)} objects kept)"
    assert objects(s, "orph") == before
    quiet(s, 3)
    assert objects(s, "orph") == before
    assert inventory(s, "orph") == []


def test_a_renamed_release_adopts_the_objects(kscenario: KubeScenario) -> None:
    s = kscenario
    before = succeeded(s, "ren-old", deployment="ren-app", extra=FIXED)

    # ren-new: the same source and namespace under a new name, in the commit of the removal.
    renamed = release_yaml("ren-new").replace("namespace: ren-new", "namespace: ren-old")
    renamed = renamed.replace("apps/ren-new", "apps/ren-old")
    removed = remove(s, "ren-old", **{"releases/ren-new.yaml": renamed})
    with requests() as sent:
        result = s.reconcile(minutes=2)
    assert result.code == 0, result.err
    assert "DELETE" not in sent, sent
    assert retirement(s, "ren-old", removed) == "ren-old: Succeeded -> Deleted (adopted by ren-new)"
    assert s.status("ren-new")["lastAttempted"]["reason"] == "Synced"
    after = live(s, "ren-old", "ren-app", "ren-settings")
    assert uids(after) == uids(before)
    labels = s.kube.apps.read_namespaced_deployment("ren-app", "ren-old").metadata.labels
    assert labels["convoy.dev/release"] == "ren-new"
    assert inventory(s, "ren-new") == sorted(before)
    assert inventory(s, "ren-old") == []


def closed_port_kubeconfig(s: KubeScenario) -> Path:
    """A copy of the kubeconfig whose server is a loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = yaml.safe_load(s.kube.kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path = s.operator / "kubeconfig-closed"
    path.write_text(yaml.safe_dump(config))
    return path


def test_an_unreachable_cluster_keeps_the_release_until_it_is_orphaned(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    before = succeeded(s, "away")
    cluster = kube_cluster(closed_port_kubeconfig(s))
    removed = remove(s, "away", **{"clusters/staging.yaml": cluster})
    result = s.reconcile(minutes=2)
    assert result.code == 1
    assert result.err.count("\n") == 1 and result.err.startswith("away: DeletionPending: "), (
        result.err
    )
    assert "clusters/staging.yaml" in result.err  # what cannot be reached
    assert s.status("away")["lastAttempted"]["reason"] == "DeletionPending"

    with requests() as sent:
        result = s.reconcile("away", minutes=3, extra=("--orphan",))
    assert result.code == 0, result.err
    assert sent == {}
    subject = retirement(s, "away", removed)
    assert subject == f"away: Succeeded -> Orphaned ({len(before)} objects kept)"
    assert objects(s, "away") == before
    quiet(s, 4)


def test_the_namespace_create_namespace_made_goes_once_nothing_else_is_in_it(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    made = FAILURE_POLICY + CREATE_NAMESPACE
    succeeded(s, "ns-used", own_namespace=False, spec_extra=made)
    succeeded(s, "ns-free", own_namespace=False, spec_extra=made)
    other = {"metadata": {"name": "someone-else"}, "data": {"a": "b"}}
    s.kube.core.create_namespaced_config_map("ns-used", other)

    minute = 2
    for name in ("ns-used", "ns-free"):
        removed = remove(s, name)
        minute = deleted(s, name, minute)
        assert retirement(s, name, removed).endswith("(2 objects deleted, 0 kept)")

    # Someone else's ConfigMap is in ns-used: kept. Only what the cluster made by itself
    # (its default ServiceAccount, the CA ConfigMap) is in ns-free: it goes.
    assert meta(s.kube.core.read_namespace, "ns-used") is not None
    eventually(lambda: not namespace_exists(s, "ns-free"), "namespace ns-free to go")


def test_a_forbidden_deletion_waits_and_deletes_nothing(kscenario: KubeScenario) -> None:
    s = kscenario
    before = succeeded(s, "nope")
    # The user "limited" has no role on this server: every request is refused (403).
    cluster = kube_cluster(s.kube.limited_kubeconfig())
    remove(s, "nope", **{"clusters/staging.yaml": cluster})

    with requests() as sent:
        result = s.reconcile(minutes=2)

    assert result.code == 1
    [line] = result.err.splitlines()
    assert line.startswith("nope: DeletionPending: clusters/staging.yaml: "), line
    assert 'User "limited" cannot' in line, line
    assert "DELETE" not in sent or objects(s, "nope") == before
    assert objects(s, "nope") == before
    assert s.status("nope")["lastAttempted"]["reason"] == "DeletionPending"


def test_an_invalid_file_and_the_guard_hold_deletions_on_the_server(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    first = succeeded(s, "hold-a")
    second = succeeded(s, "hold-b")
    s.app("hold-c")
    assert s.reconcile("hold-c", minutes=1).code == 0
    removed = s.commit(
        {"releases/hold-a.yaml": None, "releases/hold-b.yaml": None, "releases/hold-c.yaml": "["},
        "remove two, break one",
    )

    with requests() as sent:
        invalid = s.reconcile(minutes=2)
    assert invalid.code == 1
    assert "hold-a: DeletionPending: deletion waits: releases/hold-c.yaml" in invalid.err
    assert "DELETE" not in sent, sent

    s.app("hold-c")  # readable again: now the guard holds two of three
    with requests() as sent:
        guarded = s.reconcile(minutes=3)
    assert guarded.code == 0, guarded.err
    assert "DELETE" not in sent, sent
    # Counted at the commit the last tick read, where hold-c could not be read (on no
    # Cluster): two of the two Releases of staging.
    for name in ("hold-a", "hold-b"):
        attempt = s.status(name)["lastAttempted"]
        assert attempt["reason"] == "DeletionBlocked"
        assert attempt["message"].startswith("mass deletion: 2 of 2 Releases of staging;")
    assert objects(s, "hold-a") == first and objects(s, "hold-b") == second

    s.commit({"notes.txt": "x"}, "retire them\n\nConvoy-Allow-Delete: hold-a, hold-b\n")
    minute = deleted(s, "hold-a", 4)
    if s.has_status("hold-b"):
        deleted(s, "hold-b", minute)
    for name in ("hold-a", "hold-b"):
        retirement(s, name, removed)
        assert objects(s, name) == dict.fromkeys(first if name == "hold-a" else second)
