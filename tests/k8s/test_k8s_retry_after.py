"""A 429 with a short ``Retry-After`` within the tick (issue 48): a Kubernetes 1.34 server
answers the first LIST of a custom resource type whose CRD was just created with ``429
storage is (re)initializing`` and ``Retry-After: 1``, then 200. The fault proxy of
``faultproxy.py`` plays that server in front of the real one.

The Release-level tests run a tick (the one 1-second wait of the retry is what they test);
the client-level ones count the waits instead of sleeping them.
"""

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from convoy_batch.deployers.kubeapi import (
    APPLY_PATCH,
    MERGE_PATCH,
    RETRY_BUDGET,
    RETRY_TRIES,
    KubeApi,
    Unreachable,
)
from convoy_batch.deployers.kubeconfig import load_configuration
from convoy_batch.models import KubernetesTarget
from tests.k8s.faultproxy import Fault, FaultProxy, lists, proxy_kubeconfig, throttled_once
from tests.k8s.k8s_scenario import NAMESPACE, KubeScenario, kube_cluster
from tests.k8s.test_k8s_crd_order import crd, server_conditions
from tests.k8s.testenv import KubeEnv, eventually
from tests.support.scenario import Result, release_yaml

UNAVAILABLE = "ClusterUnavailable"


def through_proxy(s: KubeScenario, proxy: FaultProxy) -> None:
    """The Cluster ``staging`` reaches the server through the proxy."""
    kubeconfig = proxy_kubeconfig(s.kube.kubeconfig, proxy, s.operator / "kubeconfig-proxy")
    s.commit({"clusters/staging.yaml": kube_cluster(kubeconfig)}, "staging through the proxy")


def custom_release(s: KubeScenario, name: str, group: str, plural: str, kind: str) -> str:
    """A CRD made (and Established) on the server, and Release ``name`` holding one custom
    resource of it: the Release's tick lists that type first. The LIST's path."""
    crd_obj = crd(group, plural, plural[:-1], kind)
    client.ApiextensionsV1Api(s.kube.api).create_custom_resource_definition(crd_obj)
    crd_name = f"{plural}.{group}"
    eventually(lambda: server_conditions(s, crd_name).get("Established") == "True", crd_name)
    custom = {"apiVersion": f"{group}/v1", "kind": kind, "metadata": {"name": "one"}}
    s.commit(
        {
            f"apps/{name}/namespace.yaml": NAMESPACE,
            f"apps/{name}/custom.json": json.dumps({**custom, "spec": {"size": 3}}),
            f"releases/{name}.yaml": release_yaml(name),
        }
    )
    return f"/apis/{group}/v1/{plural}"


def summary_lines(result: Result, name: str) -> list[str]:
    return [line for line in result.err.splitlines() if line.startswith(f"{name}: ")]


def test_a_list_answered_429_once_with_retry_after_is_sent_again_and_syncs_in_that_tick(
    kscenario: KubeScenario, proxy: FaultProxy
) -> None:
    s = kscenario
    through_proxy(s, proxy)
    path = custom_release(s, "retryonce", "once.convoy.test", "sprockets", "Sprocket")
    proxy.set(throttled_once(lists("sprockets")))
    result = s.reconcile("retryonce", minutes=0)
    assert result.code == 0, result.err
    assert s.status("retryonce")["lastAttempted"]["reason"] == "Synced"
    listed = [r for r in proxy.seen if r.split("?", 1)[0] == f"GET {path}"]
    assert len(listed) == 2 and listed[0] == listed[1] == proxy.hits[0], proxy.seen


def test_a_list_answered_429_every_time_is_cluster_unavailable_after_three_tries(
    kscenario: KubeScenario, proxy: FaultProxy
) -> None:
    """The other Release of the Cluster, which never lists that type, goes on."""
    s = kscenario
    through_proxy(s, proxy)
    path = custom_release(s, "retryever", "ever.convoy.test", "cogs", "Cog")
    s.app("retryother")
    proxy.set(Fault("status", lists("cogs"), status=429, retry_after="1"))
    result = s.reconcile("retryever", "retryother", minutes=0)
    assert result.code == 1, result.err
    assert [h.split("?", 1)[0] for h in proxy.hits] == [f"GET {path}"] * RETRY_TRIES
    attempt = s.status("retryever")["lastAttempted"]
    assert attempt["reason"] == UNAVAILABLE, attempt
    assert (
        f"GET {path}: HTTP 429: the fault proxy answers 429 (3 tries, 2s waited"
        in (attempt["message"])
    )
    assert summary_lines(result, "retryever") == [f"retryever: {UNAVAILABLE}: {attempt['message']}"]
    assert s.status("retryother")["lastAttempted"]["reason"] == "Synced"
    assert summary_lines(result, "retryother") == []


LONG = " (Retry-After: 30s, more than the 10s this Cluster may still wait in this tick)"


@pytest.mark.parametrize(
    ("name", "retry_after", "note"),
    [
        ("retrylong", "30", LONG),
        ("retrynone", None, ""),
        ("retrydate", "Fri, 31 Dec 2100 23:59:59 GMT", ""),  # a date: only a clock reads it
    ],
    ids=["retry-after-30", "no-retry-after", "retry-after-a-date"],
)
def test_a_429_with_a_long_or_no_retry_after_is_cluster_unavailable_at_once(
    name: str, retry_after: str | None, note: str, kscenario: KubeScenario, proxy: FaultProxy
) -> None:
    s = kscenario
    through_proxy(s, proxy)
    path = custom_release(s, name, f"{name}.convoy.test", "levers", "Lever")
    proxy.set(Fault("status", lists("levers"), status=429, retry_after=retry_after))
    result = s.reconcile(name, minutes=0)
    assert result.code == 1, result.err
    assert len(proxy.hits) == 1, proxy.hits
    attempt = s.status(name)["lastAttempted"]
    assert attempt["reason"] == UNAVAILABLE, attempt
    said = f"GET {path}: HTTP 429: the fault proxy answers 429{note}"
    assert attempt["message"].endswith(said), attempt
    assert summary_lines(result, name) == [f"{name}: {UNAVAILABLE}: {attempt['message']}"]


# --- the client: which requests, how many tries, the shared budget ----------------------


def proxied_api(kube: KubeEnv, proxy: FaultProxy, folder: Path, **kwargs: Any) -> KubeApi:
    kubeconfig = proxy_kubeconfig(kube.kubeconfig, proxy, folder / "kubeconfig-proxy")
    target = KubernetesTarget(kubeconfig=str(kubeconfig))
    where = "clusters/staging.yaml"
    return KubeApi(load_configuration(target, folder, where), where, **kwargs)


NEW_NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "retry-made"}}
Request = tuple[str, str, dict[str, str], Any, str | None, bool]
REQUESTS: dict[str, Request] = {
    # id: (method, path, query, body, content type, sent again after a 429 or not)
    "get": ("GET", "/api/v1/namespaces/default", {}, None, None, True),
    "list": ("GET", "/api/v1/configmaps", {"limit": "1"}, None, None, True),
    "apply": ("PATCH", "/api/v1/namespaces/retry-made", {"fieldManager": "t"}, NEW_NAMESPACE,
              APPLY_PATCH, True),
    "dry-run-apply": ("PATCH", "/api/v1/namespaces/retry-made",
                      {"fieldManager": "t", "dryRun": "All"}, NEW_NAMESPACE, APPLY_PATCH, True),
    "merge-patch": ("PATCH", "/api/v1/namespaces/default", {}, {"metadata": {}}, MERGE_PATCH,
                    True),
    "delete": ("DELETE", "/api/v1/namespaces/retry-made", {}, None, None, True),
    "dry-run-create": ("POST", "/api/v1/namespaces", {"dryRun": "All"}, NEW_NAMESPACE,
                       "application/json", True),
    "create": ("POST", "/api/v1/namespaces", {}, NEW_NAMESPACE, "application/json", False),
    "json-patch": ("PATCH", "/api/v1/namespaces/default", {}, [],
                   "application/json-patch+json", False),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REQUESTS), ids=list(REQUESTS))
def test_only_a_request_that_may_be_sent_twice_is_sent_again_after_a_429(
    case: str, kube: KubeEnv, proxy: FaultProxy, tmp_path: Path
) -> None:
    method, path, query, body, content_type, again = REQUESTS[case]
    waits: list[float] = []
    api = proxied_api(kube, proxy, tmp_path, sleep=waits.append)
    proxy.set(Fault("status", status=429, retry_after="1"))
    with pytest.raises(Unreachable) as caught:
        api.request(method, path, query, body, content_type)
    assert len(proxy.hits) == (RETRY_TRIES if again else 1), proxy.hits
    assert waits == ([1.0] * (RETRY_TRIES - 1) if again else []), waits
    said = "(3 tries, 2s waited" if again else f"(not sent again: a {method} that may"
    assert said in str(caught.value), caught.value


def test_the_waits_of_a_cluster_are_bounded_by_one_budget_shared_by_its_threads(
    kube: KubeEnv, proxy: FaultProxy, tmp_path: Path
) -> None:
    """Four requests at once, each answered 429 with Retry-After: 4: only two waits fit in
    the budget, whichever threads take them; every other answer is reported at once."""
    waits: list[float] = []
    api = proxied_api(kube, proxy, tmp_path, sleep=waits.append)
    proxy.set(Fault("status", status=429, retry_after="4"))
    failed: list[str] = []

    def read(name: str) -> None:
        try:
            api.request("GET", f"/api/v1/namespaces/{name}")
        except Unreachable as exc:
            failed.append(str(exc))

    threads = [threading.Thread(target=read, args=(f"n{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert waits == [4.0, 4.0] and sum(waits) <= RETRY_BUDGET, waits
    assert len(proxy.hits) == 4 + len(waits), proxy.hits
    assert len(failed) == 4, failed
    assert sum("may still wait in this tick" in f for f in failed) >= 2, failed


def test_a_retry_is_not_sent_once_another_request_went_unanswered(
    kube: KubeEnv, proxy: FaultProxy, tmp_path: Path
) -> None:
    """While a request waits out its Retry-After, another one gets no answer within the
    time-out: the Cluster is not asked again in that tick, the retry included."""

    def meanwhile(_seconds: float) -> None:
        proxy.set(Fault("hold"))
        with pytest.raises(Unreachable, match=r"no answer within 0\.5s"):
            api.request("GET", "/version")
        proxy.set(None)

    api = proxied_api(kube, proxy, tmp_path, timeout=0.5, sleep=meanwhile)
    proxy.set(throttled_once())
    with pytest.raises(Unreachable) as caught:
        api.request("GET", "/api/v1/namespaces/default")
    assert "not sent: GET /version got no answer within 0.5s in this tick" in str(caught.value)
    assert proxy.seen == [], proxy.seen  # since the hold ended: the retry was never sent
