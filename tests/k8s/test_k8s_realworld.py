"""Issue 23's acceptance on a real API server: public charts and manifests, copied
unmodified from ``../shared/realworld`` into one GitOps repository (one Release each, one
tick reconciling them all), roll out; quiet ticks then send only GETs (the audit log, dry
runs counted); ingress-nginx's webhook RBAC hooks live through its PostSync Job;
podinfo's chart renders once for one commit; a bad image rolls back; prune deletes.

The tests run in file order on one module-wide rollout (a rollout of every app costs
about a minute on two cores); each starts from the state the one before left."""

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from convoy_batch.deployers import kubeapi
from tests.k8s.k8s_scenario import KubeScenario, cpu_load
from tests.k8s.testenv import KubeEnv, read_or_none
from tests.support.realworld import (
    ADMISSION_RBAC,
    INGRESS_NGINX,
    INGRESS_NGINX_PATCH_JOB,
    KUBE_STATE_METRICS,
    LOADGENERATOR_SCRIPT,
    ONLINE_BOUTIQUE,
    PODINFO_CHART,
    REFUSED_BY_A_SERVER,
    SAMPLE_CONTROLLER,
    SERVER_APPS,
    Rollouts,
    captured_cli,
    check_a_podinfo_image_that_never_becomes_ready_rolls_back,
    check_one_render_for_one_commit,
    commit_apps,
    commit_values,
    convoy_writes,
    play_kube,
    realworld,
    realworld_tools,
    states,
)
from tests.support.scenario import Result


class ModuleScenario(KubeScenario):
    """A KubeScenario that outlives one test (its CLI's output caught by ``captured_cli``)."""

    def cli(self, *args: str) -> Result:
        return captured_cli(self.root, self.state, *args)


class World(Rollouts):
    """The module's repository and server, and what was seen while it rolled out: the
    admission RBAC objects that existed after each tick that left the PostSync Job of
    ingress-nginx running, and when the test played its pod to success (audit time)."""

    def __init__(self, s: ModuleScenario, kube: KubeEnv) -> None:
        super().__init__(s, SERVER_APPS)
        self.s: ModuleScenario = s
        self.kube = kube
        self.patch_job_done_at = ""

    def play(self, name: str) -> None:
        play_kube(self.kube, name)

    def watch_ingress_nginx_hooks(self) -> None:
        """Notes the admission RBAC while the PostSync Job runs (it runs until the
        tests play its pod, right after)."""
        read = self.kube.batch.read_namespaced_job
        job = read_or_none(read, INGRESS_NGINX_PATCH_JOB, INGRESS_NGINX.name)
        if job is None or any(c.type == "Complete" for c in job.status.conditions or []):
            return
        self.rbac_while_patch_runs.append(live_admission_rbac(self.kube))
        self.patch_job_done_at = audit_now()


def audit_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def live_admission_rbac(kube: KubeEnv) -> set[str]:
    """The admission RBAC objects of ingress-nginx the server has now."""
    rbac = client.RbacAuthorizationV1Api(kube.api)
    ns = INGRESS_NGINX.name
    reads: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
        "serviceaccount": (kube.core.read_namespaced_service_account, (ns,)),
        "role.rbac.authorization.k8s.io": (rbac.read_namespaced_role, (ns,)),
        "rolebinding.rbac.authorization.k8s.io": (rbac.read_namespaced_role_binding, (ns,)),
        "clusterrole.rbac.authorization.k8s.io": (rbac.read_cluster_role, ()),
        "clusterrolebinding.rbac.authorization.k8s.io": (rbac.read_cluster_role_binding, ()),
    }
    return {
        kind
        for kind, name in ADMISSION_RBAC
        if read_or_none(reads[kind][0], name, *reads[kind][1]) is not None
    }


@pytest.fixture(scope="module")
def world(kube: KubeEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    realworld()
    folder = tmp_path_factory.mktemp("realworld")
    with pytest.MonkeyPatch.context() as mp:
        realworld_tools(folder / "bin", mp)
        s = ModuleScenario(kube, folder, cast(pytest.CaptureFixture[str], None), __name__)
        commit_apps(s, SERVER_APPS)
        world = World(s, kube)
        try:
            with cpu_load():  # the rollout on a loaded machine (issue 47)
                world.settle()
            yield world
        finally:
            # Its webhook (failurePolicy Fail, no pod behind it) would refuse every
            # Ingress that later tests of the session create.
            admission = client.AdmissionregistrationV1Api(kube.api)
            try:
                admission.delete_validating_webhook_configuration("ingress-nginx-admission")
            except ApiException as exc:
                if exc.status != 404:
                    raise


def test_every_public_app_rolls_out_on_a_real_server(world: World) -> None:
    s = world.s
    assert states(s, SERVER_APPS) == {app.name: "Succeeded" for app in SERVER_APPS}
    foo = client.CustomObjectsApi(s.kube.api).get_namespaced_custom_object(
        "samplecontroller.k8s.io", "v1alpha1", SAMPLE_CONTROLLER.name, "foos", "example-foo"
    )
    assert foo["spec"]["deploymentName"] == "example-foo"
    # The CRD was created before its custom resource (never refused as an unknown kind).
    created = [w for w in convoy_writes(s.kube) if w.verb in ("create", "patch") and not w.dry_run]
    first = {w.resource: i for i, w in reversed(list(enumerate(created)))}
    assert first["customresourcedefinitions"] < first["foos"]
    # A shell variable of a public manifest is applied as written (fix 1).
    loadgen = s.kube.apps.read_namespaced_deployment("loadgenerator", ONLINE_BOUTIQUE.name)
    script = " ".join(loadgen.spec.template.spec.init_containers[0].command)
    assert LOADGENERATOR_SCRIPT in script


def test_ingress_nginx_webhook_rbac_hooks_live_through_its_post_sync_job(world: World) -> None:
    # Live reads after each tick that left the PostSync admission-patch Job running.
    assert world.rbac_while_patch_runs, "the PostSync Job was never seen running"
    every = {kind for kind, _ in ADMISSION_RBAC}
    assert all(found == every for found in world.rbac_while_patch_runs), world.rbac_while_patch_runs
    # The audit log: they are deleted (hook-succeeded), and only once the Job was done.
    names = {name for _, name in ADMISSION_RBAC}
    kinds = {"serviceaccounts", "roles", "rolebindings", "clusterroles", "clusterrolebindings"}
    deletes = [
        w
        for w in convoy_writes(world.kube)
        if w.verb == "delete" and w.resource in kinds and w.name in names and not w.dry_run
    ]
    assert {w.resource for w in deletes} == kinds, deletes
    patches = [
        (w.resource, w.name)
        for w in convoy_writes(world.kube)
        if w.apply and w.resource in kinds and w.name in names and not w.dry_run
    ]
    assert sorted(patches) == sorted(set(patches)), patches  # each sent once, kept through
    assert all(w.time > world.patch_job_done_at for w in deletes), (
        world.patch_job_done_at,
        deletes,
    )
    assert live_admission_rbac(world.kube) == set()


@pytest.mark.parametrize("after", ["nothing", "a-commit-outside-every-source"])
def test_quiet_ticks_of_every_public_app_send_only_gets(world: World, after: str) -> None:
    s = world.s
    if after != "nothing":  # a fresh render of each chart, the same as the stored one
        s.commit({"NOTES.md": f"notes {len(s.status_log())}\n"}, "notes")
    for _ in range(2):
        head, writes, counts = s.head(), convoy_writes(s.kube), dict(kubeapi.COUNTS)
        assert world.tick().code == 0
        sent_writes = convoy_writes(s.kube)[len(writes) :]
        assert sent_writes == [], "; ".join(map(str, sent_writes))  # dry runs counted
        sent = {k: v - counts.get(k, 0) for k, v in kubeapi.COUNTS.items() if v != counts.get(k)}
        assert set(sent) == {"GET"}, sent
        assert s.head() == head


def test_a_component_disabled_through_values_is_pruned(world: World) -> None:
    s, rbac = world.s, client.RbacAuthorizationV1Api(world.kube.api)
    name = "kube-state-metrics"
    assert rbac.read_cluster_role(name).metadata.name == name
    podinfo = s.status_log(PODINFO_CHART.name)
    commit_values(s, KUBE_STATE_METRICS, "{rbac: {create: false}}")
    assert world.settle() == {app.name: "Succeeded" for app in SERVER_APPS}
    for read in (rbac.read_cluster_role, rbac.read_cluster_role_binding):
        with pytest.raises(ApiException) as gone:
            read(name)
        assert gone.value.status == 404
    # Another Release's change re-renders podinfo's chart, but changes nothing of it.
    assert s.status_log(PODINFO_CHART.name) == podinfo


def test_podinfos_chart_makes_one_render_for_one_commit(world: World) -> None:
    s, name = world.s, PODINFO_CHART.name
    # Its first render was made before sample-controller's CRD was served, the later
    # ones after (helm is told the served API versions), then kube-state-metrics
    # changed: still one render, one rollout.
    ref = s.status(name)["rollout"]["renderRef"]
    assert [h["renderRef"] for h in s.status(name)["history"]] == [ref]
    assert sum("NewRender" in c for c in s.status_log(name)) == 1, s.status_log(name)
    check_one_render_for_one_commit(world, name, ref)


def test_a_podinfo_image_that_never_becomes_ready_rolls_back(world: World) -> None:
    check_a_podinfo_image_that_never_becomes_ready_rolls_back(
        world, lambda namespace: image(world.kube, namespace)
    )


def image(kube: KubeEnv, namespace: str) -> str:
    dep = kube.apps.read_namespaced_deployment("podinfo", namespace)
    return str(dep.spec.template.spec.containers[0].image)


def test_an_app_the_server_refuses_as_published_is_one_dry_run_line(world: World) -> None:
    # Last: the world's ticks fail from here on.
    s = world.s
    before = states(s, SERVER_APPS)
    commit_apps(s, tuple(REFUSED_BY_A_SERVER))
    result = world.tick()
    assert result.code == 1
    for app, refusal in REFUSED_BY_A_SERVER.items():
        attempted = s.status(app.name)["lastAttempted"]
        assert attempted["reason"] == "DryRunFailed"
        assert refusal in attempted["message"], attempted["message"]
        assert "\n" not in attempted["message"]
    assert states(s, SERVER_APPS) == before  # the others go on
