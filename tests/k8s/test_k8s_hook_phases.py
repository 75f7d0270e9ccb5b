"""Hooks of several phases against a real kube-apiserver with its controller-manager
(issue 23): a hook that names PreSync and PostSync is applied in each and deleted by its
policy only once its PostSync phase is over, so the PostSync Job that needs it finds it.
ingress-nginx's chart, unmodified, is the real case, in the public content's suite
(``tests/k8s/test_k8s_realworld.py``).

The audit log tells what the server received and when; the tests play the kubelet."""

import json
from collections.abc import Iterator
from typing import Any

from kubernetes.client.exceptions import ApiException

from tests.k8s.k8s_scenario import KubeScenario
from tests.k8s.testenv import eventually
from tests.scenario import FAILURE_POLICY

WAVED = "  syncPolicy: {waves: {healthStrategy: Healthy, timeout: 5m}}\n"


def audit(s: KubeScenario, name: str) -> Iterator[tuple[str, str, str]]:
    """(time, verb, resource) of every write to objects called ``name`` (any namespace,
    cluster-scoped ones too), dry runs and subresources aside, in the order received."""
    for line in (s.kube.folder / "audit.log").read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef", {})
        if (
            ref.get("name") == name
            and event["verb"] in ("create", "patch", "update", "delete")
            and not ref.get("subresource")
            and "dryRun" not in event["requestURI"]
            and not event.get("userAgent", "").startswith("kube-controller-manager")
        ):
            yield event["requestReceivedTimestamp"], event["verb"], ref["resource"]


def writes(s: KubeScenario, name: str, resource: str) -> list[tuple[str, str]]:
    return [(when, verb) for when, verb, res in audit(s, name) if res == resource]


def read_or_none(read: Any, *args: str) -> Any | None:
    try:
        return read(*args)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


# --- Argo CD PreSync,PostSync ----------------------------------------------------------

SETTINGS = """\
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  annotations:
    argocd.argoproj.io/hook: PreSync,PostSync
    argocd.argoproj.io/hook-delete-policy: HookSucceeded
data: {a: b}
"""


def job(name: str, phase: str) -> str:
    return f"""\
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  annotations:
    argocd.argoproj.io/hook: {phase}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: {name}
        image: example/{name}:1.0
        resources: {{requests: {{cpu: 10m, memory: 16Mi}}}}
"""


def test_an_argo_hook_of_presync_and_postsync_lives_until_its_postsync_phase_is_over(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    extra = {"settings.yaml": SETTINGS, "pre.yaml": job("pre", "PreSync")}
    extra["post.yaml"] = job("post", "PostSync")
    s.app("phased", extra=extra, spec_extra=WAVED + FAILURE_POLICY)  # PostSync waits
    assert s.reconcile("phased", minutes=0).code == 0
    assert s.configmap("phased", "settings") is not None
    s.kube.job_succeeded("phased", "pre")
    result = s.reconcile("phased", minutes=1)
    assert result.code == 0, result.err
    assert s.configmap("phased", "settings") is not None  # its PostSync is still to come
    s.kube.core.delete_namespaced_config_map("settings", "phased")  # someone deletes it

    s.ready("phased")
    result = s.reconcile("phased", minutes=2)
    assert result.code == 0, result.err
    assert s.status("phased")["lastAttempted"]["reason"] == "Synced"
    assert s.configmap("phased", "settings") is not None  # created again for PostSync
    assert s.kube.batch.read_namespaced_job("post", "phased") is not None
    assert s.reconcile("phased", minutes=3).code == 0  # the PostSync Job runs
    assert s.configmap("phased", "settings") is not None
    assert [verb for _, verb in writes(s, "settings", "configmaps")] == ["patch", "delete", "patch"]

    s.kube.job_succeeded("phased", "post")
    assert s.reconcile("phased", minutes=4).code == 0
    eventually(lambda: s.configmap("phased", "settings") is None, "the hook deleted")
    assert s.reconcile("phased", minutes=5).code == 0
    assert s.status("phased")["rollout"]["state"] == "Succeeded"
    assert s.configmap("phased", "settings") is None  # not created again for this render
