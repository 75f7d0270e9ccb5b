"""The project's throwaway control plane for tests: ``scripts/k8s-testenv`` started once per
session on free loopback ports, and a small client for what the tests play (the kubelet).

Outside CI a missing build or a server that does not start skips the Kubernetes tests
with the reason; under ``CI=true`` it fails them, so a broken environment is never green.
"""

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.support.needs import require
from tests.support.testenv_script import NotStarted, start_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "k8s-testenv"
START_TIMEOUT = 240
WAIT = 30.0  # seconds the tests wait for the real controllers to act


def unavailable(reason: str) -> None:
    """Fail under CI, skip elsewhere."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"Kubernetes test environment unavailable: {reason}", pytrace=False)
    pytest.skip(f"Kubernetes test environment unavailable: {reason}")


def read_or_none(read: Callable[..., Any], *args: str) -> Any | None:
    """A live read (``read(*args)``); None when the server has no such object."""
    try:
        return read(*args)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def eventually(check: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    """Poll a real server until ``check`` returns something truthy (the controllers run
    on their own clock, so this waits on them, never on a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@dataclass
class KubeEnv:
    """A started control plane: its folder, kubeconfig and a typed client."""

    folder: Path
    kubeconfig: Path
    env: dict[str, str]
    owners: dict[str, str] = field(default_factory=dict)
    """Each namespace a test's Release took on this shared server, and the test: a
    second test's Release of the same name would find the first one's objects there."""

    def __post_init__(self) -> None:
        self.api = config.new_client_from_config(config_file=str(self.kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    def writes(self) -> list[dict[str, Any]]:
        """Every write the server received, as its audit log records it (one event per
        request, on its receipt: the policy of ``scripts/k8s-testenv``), the
        controller-manager's own aside (status, tokens, its CA ConfigMap); complete lines
        only (the controller-manager's writes go on being logged meanwhile)."""
        events = []
        for line in (self.folder / "audit.log").read_text().split("\n")[:-1]:
            event = json.loads(line)
            if not event.get("userAgent", "").startswith("kube-controller-manager"):
                events.append(event)
        return events

    def limited_kubeconfig(self) -> Path:
        """A kubeconfig of the same server for a user without any role (RBAC refuses
        every request but discovery)."""
        admin, limited = ((self.folder / f).read_text().strip() for f in ("token", "token-limited"))
        path = self.folder / "kubeconfig-limited"
        path.write_text(self.kubeconfig.read_text().replace(admin, limited))
        return path

    def script(self, command: str) -> None:
        done = subprocess.run(
            [str(SCRIPT), command, str(self.folder)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT,
            check=False,
        )
        assert done.returncode == 0, done.stderr

    # --- playing the kubelet ---------------------------------------------------------

    def pods(self, namespace: str, selector: str) -> list[Any]:
        return list(self.core.list_namespaced_pod(namespace, label_selector=selector).items)

    def run_pods(self, namespace: str, selector: str, phase: str = "Running") -> int:
        """Every pod of the selector gets ``phase``, Ready when Running; returns how many."""
        pods = self.pods(namespace, selector)
        ready = "True" if phase == "Running" else "False"
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conditions = [
            {"type": t, "status": ready, "lastTransitionTime": now}
            for t in ("Ready", "ContainersReady")
        ]
        for pod in pods:
            body = {"status": {"phase": phase, "conditions": conditions}}
            try:
                self.core.patch_namespaced_pod_status(pod.metadata.name, namespace, body)
            except ApiException as exc:
                if exc.status != 404:  # a pod of an old ReplicaSet its controller removed
                    raise
        return len(pods)

    def deployment_ready(self, namespace: str, name: str) -> None:
        """Play the kubelet until the Deployment's controller reports it Available."""

        def available() -> bool:
            self.run_pods(namespace, f"app={name}")
            dep = self.apps.read_namespaced_deployment(name, namespace)
            spec_replicas = dep.spec.replicas or 0
            status = dep.status
            return bool(
                status.observed_generation == dep.metadata.generation
                and (status.updated_replicas or 0) == spec_replicas
                and (status.available_replicas or 0) == spec_replicas
                and not status.unavailable_replicas
            )

        eventually(available, f"Deployment {namespace}/{name} available")

    def job_succeeded(self, namespace: str, name: str) -> None:
        def complete() -> bool:
            self.run_pods(namespace, f"job-name={name}", phase="Succeeded")
            job = self.batch.read_namespaced_job(name, namespace)
            conditions = job.status.conditions or []
            return any(c.type == "Complete" and c.status == "True" for c in conditions)

        eventually(complete, f"Job {namespace}/{name} complete")


def start(folder: Path) -> KubeEnv:
    require("k8s")
    env = dict(os.environ)
    env["CONVOY_K8S_PORT"] = "auto"  # free ports, picked by the script
    try:
        start_script(SCRIPT, folder, env, START_TIMEOUT, lambda: stop_folder(folder, env))
    except NotStarted as exc:
        unavailable(str(exc))
    return KubeEnv(folder, folder / "kubeconfig", env)


def stop_folder(folder: Path, env: dict[str, str]) -> None:
    subprocess.run([str(SCRIPT), "stop", str(folder)], env=env, check=False)


def stop(kube: KubeEnv) -> None:
    stop_folder(kube.folder, kube.env)
