"""Public charts and manifests as their authors publish them (``../shared/realworld``
beside the project, read-only): where to find them (skipped without them, failed under
``CI=true``), the Releases that render them, and their files copied unmodified into a
scenario's GitOps repository. Reads the content; writes only into that repository."""

import io
import os
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from convoy_batch.cli import main
from tests.k8s.testenv import KubeEnv, eventually
from tests.support.fakes import job_status_complete
from tests.support.renderer_tools import Tools, kustomize_kubectl, real_helm
from tests.support.scenario import PROJECT, Result, Scenario

REALWORLD = PROJECT.parent / "shared" / "realworld"
PROGRESS_DEADLINE = 10  # minutes: the Releases' failurePolicy.progressDeadline


@dataclass(frozen=True)
class App:
    """One Release of public content: ``source`` is a folder (or a file) under the
    content, copied to ``apps/<name>/``; ``path`` is the Release's source path inside that
    copy; ``render`` its ``spec.source.render`` as YAML flow ("" for Plain)."""

    name: str
    source: str
    render: str = ""
    path: str = ""
    values: str = ""  # inline Helm values, YAML flow, where the 1.20 test server needs them

    def source_path(self) -> str:
        return f"apps/{self.name}" + (f"/{self.path}" if self.path else "")


PODINFO = "stefanprodan-podinfo"
ARGO = "argoproj-argocd-example-apps"
KUSTOMIZE = "kubernetes-sigs-kustomize/examples"

PODINFO_KUSTOMIZE = App("podinfo-kustomize", f"{PODINFO}/kustomize", "{type: Kustomize}")
PODINFO_CHART = App(
    "podinfo-chart", f"{PODINFO}/charts/podinfo", "{type: Helm, releaseName: podinfo}"
)
KUBE_STATE_METRICS = App(
    "kube-state-metrics",
    "prometheus-community-helm-charts/charts/kube-state-metrics",
    "{type: Helm, releaseName: kube-state-metrics}",
)
INGRESS_NGINX = App(
    "ingress-nginx",
    "kubernetes-ingress-nginx/charts/ingress-nginx",
    "{type: Helm, releaseName: ingress-nginx}",
)
ONLINE_BOUTIQUE = App(
    "online-boutique", "GoogleCloudPlatform-microservices-demo/release/kubernetes-manifests.yaml"
)
SAMPLE_CONTROLLER = App("sample-controller", "kubernetes-sample-controller/artifacts/examples")
LDAP_STAGING = App("ldap-staging", f"{KUSTOMIZE}/ldap", "{type: Kustomize}", "overlays/staging")
LDAP_PRODUCTION = App(
    "ldap-production", f"{KUSTOMIZE}/ldap", "{type: Kustomize}", "overlays/production"
)
HELLO_WORLD = App("hello-world", f"{KUSTOMIZE}/helloWorld", "{type: Kustomize}")
GUESTBOOK = App("guestbook", f"{ARGO}/guestbook")
HELM_GUESTBOOK = App("helm-guestbook", f"{ARGO}/helm-guestbook", "{type: Helm, releaseName: gb}")
KUSTOMIZE_GUESTBOOK = App("kustomize-guestbook", f"{ARGO}/kustomize-guestbook", "{type: Kustomize}")
JSONNET_GUESTBOOK = App(
    "jsonnet-guestbook", f"{ARGO}/jsonnet-guestbook", "{type: Jsonnet, file: guestbook-ui.jsonnet}"
)

APPS = (
    PODINFO_KUSTOMIZE,
    PODINFO_CHART,
    KUBE_STATE_METRICS,
    INGRESS_NGINX,
    ONLINE_BOUTIQUE,
    SAMPLE_CONTROLLER,
    GUESTBOOK,
    HELM_GUESTBOOK,
    KUSTOMIZE_GUESTBOOK,
    JSONNET_GUESTBOOK,
    HELLO_WORLD,
    LDAP_STAGING,
    LDAP_PRODUCTION,
)
"""Every app that rolls out (on the directory cluster)."""

REFUSED_BY_A_SERVER = {
    LDAP_PRODUCTION: "spec.template.spec.volumes[0].gcePersistentDisk.readOnly: "
    "Invalid value: false: must be true for replicated pods > 1",
}
"""Apps whose objects a real API server refuses as published, and what the dry run's
refusal says: ldap's production overlay asks for 6 replicas over one read-write GCE disk.
The directory cluster validates nothing, so they roll out there."""

SERVER_APPS = tuple(app for app in APPS if app not in REFUSED_BY_A_SERVER)
"""Every app that rolls out on a real API server."""


def realworld() -> Path:
    """The content's folder; skips without it, or fails under CI (where it must be)."""
    if not (REALWORLD / "SOURCES.md").is_file():
        reason = f"public content missing: {REALWORLD} (a read-only copy beside the project)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return REALWORLD


def realworld_tools(bin_dir: Path, mp: pytest.MonkeyPatch) -> Tools:
    """The real helm on PATH (in ``bin_dir``) and kubectl with kustomize v5 as
    ``$CONVOY_KUBECTL``; skips without the public content (:func:`realworld`)."""
    realworld()
    kubectl, helm = kustomize_kubectl(), real_helm()
    tools = Tools(bin_dir, mp)
    (tools.bin / "helm").symlink_to(helm)
    mp.setenv("CONVOY_KUBECTL", kubectl)
    return tools


def source_files(app: App) -> dict[str, str]:
    """The app's files as ``apps/<name>/...`` paths of the GitOps repository and their
    text, byte for byte (a file source keeps its own name)."""
    source = realworld() / app.source
    if source.is_file():
        return {f"apps/{app.name}/{source.name}": source.read_text()}
    return {
        f"apps/{app.name}/{path.relative_to(source).as_posix()}": path.read_text()
        for path in sorted(source.rglob("*"))
        if path.is_file()
    }


def release_yaml(app: App, values: str = "", cluster: str = "staging") -> str:
    """The app's Release: its own namespace (created by convoy-batch), automatic rollback
    after the progress deadline; ``values`` (YAML flow) overrides the app's own."""
    render = app.render
    values = values or app.values
    if values:
        render = render[:-1] + f", values: {values}}}"
    source = f"{{path: {app.source_path()}" + (f", render: {render}}}" if render else "}")
    return (
        "apiVersion: convoy.dev/v1alpha1\nkind: Release\n"
        f"metadata: {{name: {app.name}}}\n"
        f"spec:\n  cluster: {cluster}\n  namespace: {app.name}\n  source: {source}\n"
        "  syncPolicy: {createNamespace: true}\n"
        f"  failurePolicy: {{rollback: Auto, progressDeadline: {PROGRESS_DEADLINE}m}}\n"
    )


def commit_apps(
    s: Scenario, apps: Iterable[App], overrides: Mapping[str, str] | None = None
) -> str:
    """One commit of every app's files and Release (``overrides``: Helm values by name)."""
    files: dict[str, str | None] = {}
    for app in apps:
        files.update(source_files(app))
        files[f"releases/{app.name}.yaml"] = release_yaml(app, (overrides or {}).get(app.name, ""))
    return s.commit(files, "public apps, unmodified")


def commit_values(s: Scenario, app: App, values: str) -> str:
    """A commit of the app's Release with other inline Helm values."""
    return s.commit({f"releases/{app.name}.yaml": release_yaml(app, values)}, f"{app.name} values")


def states(s: Scenario, apps: Iterable[App]) -> dict[str, str]:
    """Each app's rollout state as committed (``none`` without a status)."""
    return {
        app.name: (s.status(app.name).get("rollout") or {}).get("state", "none")
        if s.has_status(app.name)
        else "none"
        for app in apps
    }


RANDOM_CHART = {
    "Chart.yaml": "apiVersion: v2\nname: dice\nversion: 0.1.0\n",
    "templates/configmap.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-token\n"
        "data:\n  token: {{ randAlphaNum 12 | quote }}\n"
    ),
}
"""A chart of our own whose one object is random on every render."""


def random_chart_release(s: Scenario) -> App:
    """Commits the random chart as the Release ``dice``."""
    app = App("dice", "", "{type: Helm, releaseName: dice}")
    files: dict[str, str | None] = {f"apps/dice/{k}": v for k, v in RANDOM_CHART.items()}
    files["releases/dice.yaml"] = release_yaml(app)
    s.commit(files, "a chart that rolls dice")
    return app


# --- playing the controllers (the tests have no kubelet and no cloud) ---------------

LOAD_BALANCER = {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}
"""A Service of type LoadBalancer as a cloud controller reports it (a documentation
address): without it the Service stays InProgress, as kstatus reads it."""

INGRESS_NGINX_PATCH_JOB = "ingress-nginx-admission-patch"
ADMISSION_RBAC = (
    ("serviceaccount", "ingress-nginx-admission"),
    ("role.rbac.authorization.k8s.io", "ingress-nginx-admission"),
    ("rolebinding.rbac.authorization.k8s.io", "ingress-nginx-admission"),
    ("clusterrole.rbac.authorization.k8s.io", "ingress-nginx-admission"),
    ("clusterrolebinding.rbac.authorization.k8s.io", "ingress-nginx-admission"),
)
"""ingress-nginx's admission-webhook RBAC (kind folder, name): hooks of
``pre-install,pre-upgrade,post-install,post-upgrade`` with ``hook-succeeded``, which the
PreSync ``admission-create`` and the PostSync ``admission-patch`` Jobs both run as."""

LOADGENERATOR_SCRIPT = "${FRONTEND_ADDR}"
"""A shell variable in Online Boutique's loadgenerator init container, not one of ours."""


def _pod_ready(pod: Any) -> bool:
    conditions = pod.status.conditions or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    return bool(pod.status.phase == "Running" and ready)


def _run_new_pods(kube: KubeEnv, namespace: str) -> None:
    """The kubelet: each pod of a ReplicaSet that is not running yet runs and is Ready
    from now (once: patching it again would restart its ``minReadySeconds``)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [
        {"type": t, "status": "True", "lastTransitionTime": now}
        for t in ("Ready", "ContainersReady")
    ]
    for pod in kube.core.list_namespaced_pod(namespace).items:
        owners = pod.metadata.owner_references or []
        if any(o.kind == "ReplicaSet" for o in owners) and not _pod_ready(pod):
            body = {"status": {"phase": "Running", "conditions": conditions}}
            kube.core.patch_namespaced_pod_status(pod.metadata.name, namespace, body)


def _available(kube: KubeEnv, namespace: str, name: str) -> bool:
    _run_new_pods(kube, namespace)
    dep = kube.apps.read_namespaced_deployment(name, namespace)
    want, status = dep.spec.replicas or 0, dep.status
    return bool(
        status.observed_generation == dep.metadata.generation
        and (status.updated_replicas or 0) == want
        and (status.available_replicas or 0) == want
        and not status.unavailable_replicas
    )


def play_kube(kube: KubeEnv, namespace: str) -> None:
    """Play the kubelet and the cloud in one namespace: each Job's pods succeed, each
    LoadBalancer Service gets an address, and each Deployment's pods run until its
    controller counts it available."""
    for job in kube.batch.list_namespaced_job(namespace).items:
        if not any(c.type == "Complete" for c in job.status.conditions or []):
            kube.job_succeeded(namespace, job.metadata.name)
    for svc in kube.core.list_namespaced_service(namespace).items:
        balancer = svc.status.load_balancer
        if svc.spec.type == "LoadBalancer" and not (balancer and balancer.ingress):
            body = {"status": LOAD_BALANCER}
            kube.core.patch_namespaced_service_status(svc.metadata.name, namespace, body)
    for dep in kube.apps.list_namespaced_deployment(namespace).items:
        name = dep.metadata.name
        eventually(partial(_available, kube, namespace, name), f"{namespace}/{name} available")


@dataclass(frozen=True)
class Write:
    """One write request convoy-batch sent, as the API server's audit log records it."""

    time: str  # requestReceivedTimestamp (RFC 3339, UTC, microseconds: sorts as text)
    verb: str
    resource: str
    namespace: str
    name: str
    dry_run: bool
    apply: bool = False
    """A server-side apply (the other patch convoy-batch sends removes its hook finalizer)."""

    def __str__(self) -> str:
        dry = " (dry run)" if self.dry_run else ""
        return f"{self.verb} {self.resource} {self.namespace}/{self.name}{dry}"


def convoy_writes(kube: KubeEnv) -> list[Write]:
    """Every write convoy-batch sent the server (its user agent), dry runs included, in
    the order received (:meth:`KubeEnv.writes`)."""
    return [
        Write(
            event["requestReceivedTimestamp"],
            event["verb"],
            event.get("objectRef", {}).get("resource", ""),
            event.get("objectRef", {}).get("namespace", ""),
            event.get("objectRef", {}).get("name", ""),
            "dryRun" in event["requestURI"],
            "force=true" in event["requestURI"],
        )
        for event in kube.writes()
        if event.get("userAgent") == "convoy-batch"
    ]


# --- the directory cluster ------------------------------------------------------------


def _kind_files(s: Scenario, namespace: str, kind_dir: str) -> list[Path]:
    return sorted((s.state / "clusters" / "staging" / namespace / kind_dir).glob("*.yaml"))


def play_directory(s: Scenario, namespace: str) -> None:
    """Play the controllers in one namespace of the directory cluster, writing only the
    statuses that change: Deployments available, Jobs complete, LoadBalancer Services
    given an address, CustomResourceDefinitions established."""
    for path in _kind_files(s, namespace, "deployment.apps"):
        obj = yaml.safe_load(path.read_text())
        status = obj.get("status") or {}
        if status.get("observedGeneration") != obj["metadata"].get("generation", 1):
            s.deployment_ready(path.stem, namespace)
    for path in _kind_files(s, namespace, "job.batch"):
        if not (yaml.safe_load(path.read_text()).get("status") or {}).get("conditions"):
            s.set_status(namespace, "job.batch", path.stem, job_status_complete())
    for path in _kind_files(s, namespace, "service"):
        obj = yaml.safe_load(path.read_text())
        if obj["spec"].get("type") == "LoadBalancer" and "status" not in obj:
            s.set_status(namespace, "service", path.stem, LOAD_BALANCER)
    crds = "customresourcedefinition.apiextensions.k8s.io"
    for path in _kind_files(s, "_cluster", crds):
        if "status" not in yaml.safe_load(path.read_text()):
            s.set_status("_cluster", crds, path.stem, CRD_ESTABLISHED)


CRD_ESTABLISHED = {
    "conditions": [
        {"type": "NamesAccepted", "status": "True"},
        {"type": "Established", "status": "True"},
    ]
}


def object_files(s: Scenario) -> dict[Path, int]:
    """Every object file of the directory cluster and its modification time."""
    root = s.state / "clusters" / "staging"
    return {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


SETTLE_TICKS = 8  # a rollout of every app takes 4 ticks: PreSync, waves, PostSync, verdict
BAD_TAG = "0.0.0-never-ready"


def captured_cli(root: Path, state: Path, *args: str) -> Result:
    """The CLI run in this process with its output caught here (a module-scoped scenario
    outlives pytest's per-test ``capsys``)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--repo", str(root), "--state", str(state), *args])
    return Result(code, out.getvalue(), err.getvalue())


class Rollouts:
    """Every app of a module's repository rolled out tick by tick, the controllers played
    between ticks, and the admission RBAC of ingress-nginx noted while its PostSync Job
    runs. A target says how it plays its controllers and reads that RBAC."""

    def __init__(self, s: Scenario, apps: tuple[App, ...] = APPS) -> None:
        self.s = s
        self.apps = apps
        self.minute = 0
        self.rbac_while_patch_runs: list[set[str]] = []

    def tick(self) -> Result:
        result = self.s.reconcile("--all", minutes=self.minute)
        self.minute += 1
        return result

    def settle(self, *, skip: tuple[str, ...] = ()) -> dict[str, str]:
        """Ticks and plays the controllers (not in ``skip``) until every app Succeeded."""
        for _ in range(SETTLE_TICKS):
            result = self.tick()
            assert result.code == 0, result.out + result.err
            self.watch_ingress_nginx_hooks()
            found = states(self.s, self.apps)
            if all(state == "Succeeded" for state in found.values()):
                return found
            for app in self.apps:
                if app.name not in skip:
                    self.play(app.name)
        return states(self.s, self.apps)

    def play(self, name: str) -> None:
        raise NotImplementedError

    def watch_ingress_nginx_hooks(self) -> None:
        raise NotImplementedError


def check_one_render_for_one_commit(world: Rollouts, name: str, ref: str) -> None:
    """A commit of an unrelated file renders the Release again: the same render
    (``ref``), no status commit."""
    s = world.s
    before = s.status_log(name)
    s.commit({"NOTES.md": "Public apps, as published.\n"}, "notes")
    assert world.tick().code == 0
    assert s.status_log(name) == before
    assert s.status(name)["rollout"]["renderRef"] == ref


def check_a_podinfo_image_that_never_becomes_ready_rolls_back(
    world: Rollouts, image: Callable[[str], str]
) -> None:
    """podinfo's chart given an image that never becomes ready: Progressing, then rolled
    back to the healthy render past the progress deadline, podinfo's kustomize copy left
    alone. ``image`` reads the live Deployment's image in a namespace."""
    s, name = world.s, PODINFO_CHART.name
    assert world.settle()[name] == "Succeeded"  # whatever the tests before left
    healthy = s.status(name)["rollout"]["renderRef"]
    kustomize = s.status_log(PODINFO_KUSTOMIZE.name)
    commit_values(s, PODINFO_CHART, f"{{image: {{tag: {BAD_TAG}}}}}")
    start = world.minute
    assert world.tick().code == 0
    assert s.status(name)["rollout"]["state"] == "Progressing"
    assert image(name).endswith(f":{BAD_TAG}")
    world.minute = start + PROGRESS_DEADLINE + 1
    assert world.tick().code == 0
    assert s.status(name)["rollout"]["state"] == "RolledBack"
    assert s.status(name)["lastHealthy"]["renderRef"] == healthy
    assert image(name).endswith(":6.2.3")
    assert s.status_log(PODINFO_KUSTOMIZE.name) == kustomize
