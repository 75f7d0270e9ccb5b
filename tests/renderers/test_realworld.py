"""Issue 23's acceptance on the directory cluster: the public charts and manifests of
``../shared/realworld``, copied unmodified into one GitOps repository, roll out with the
tests playing the controllers (statuses written into the object files); quiet ticks then
touch no object file and make no commit; ingress-nginx's webhook RBAC hooks live through
its PostSync Job; podinfo's chart renders once for one commit; a bad image rolls back;
prune deletes (kustomize's own examples among the apps, built by kustomize v5). Then
what is not rolled out: a chart random on every render.

The first tests run in file order on one module-wide rollout; each starts from the state
the one before left."""

from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from tests.support.realworld import (
    ADMISSION_RBAC,
    APPS,
    INGRESS_NGINX,
    INGRESS_NGINX_PATCH_JOB,
    KUBE_STATE_METRICS,
    LOADGENERATOR_SCRIPT,
    ONLINE_BOUTIQUE,
    PODINFO_CHART,
    SAMPLE_CONTROLLER,
    Rollouts,
    captured_cli,
    check_a_podinfo_image_that_never_becomes_ready_rolls_back,
    check_one_render_for_one_commit,
    commit_apps,
    commit_values,
    object_files,
    play_directory,
    random_chart_release,
    realworld,
    realworld_tools,
    states,
)
from tests.support.renderer_tools import Tools
from tests.support.scenario import Result, Scenario

pytestmark = pytest.mark.slow  # every public chart rendered and rolled out

CRDS = "customresourcedefinition.apiextensions.k8s.io"


class ModuleScenario(Scenario):
    """A Scenario that outlives one test (its CLI's output caught by ``captured_cli``)."""

    def cli(self, *args: str) -> Result:
        return captured_cli(self.root, self.state, *args)


def admission_rbac_files(s: Scenario) -> set[str]:
    """The kinds of ingress-nginx's admission RBAC objects the directory cluster has."""
    found = set()
    for kind, name in ADMISSION_RBAC:
        cluster_wide = kind.startswith("cluster")
        namespace = "_cluster" if cluster_wide else INGRESS_NGINX.name
        if s.object_path(namespace, kind, name).exists():
            found.add(kind)
    return found


class World(Rollouts):
    """The module's repository and directory cluster, and what was seen meanwhile."""

    def play(self, name: str) -> None:
        play_directory(self.s, name)

    def watch_ingress_nginx_hooks(self) -> None:
        """Notes the admission RBAC while the PostSync Job runs (until the tests play it
        complete, right after)."""
        path = self.s.object_path(INGRESS_NGINX.name, "job.batch", INGRESS_NGINX_PATCH_JOB)
        if path.exists() and "Complete" not in path.read_text():
            self.rbac_while_patch_runs.append(admission_rbac_files(self.s))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    realworld()
    folder = tmp_path_factory.mktemp("realworld")
    with pytest.MonkeyPatch.context() as mp:
        realworld_tools(folder / "bin", mp)
        s = ModuleScenario(folder, cast(pytest.CaptureFixture[str], None))
        commit_apps(s, APPS)
        world = World(s)
        world.settle()
        yield world


def test_every_public_app_rolls_out_on_the_directory_cluster(world: World) -> None:
    s = world.s
    assert states(s, APPS) == {app.name: "Succeeded" for app in APPS}
    foo = s.live(SAMPLE_CONTROLLER.name, "foo.samplecontroller.k8s.io", "example-foo")
    assert foo["spec"]["deploymentName"] == "example-foo"
    assert s.object_path("_cluster", CRDS, "foos.samplecontroller.k8s.io").exists()
    loadgen = s.live(ONLINE_BOUTIQUE.name, "deployment.apps", "loadgenerator")
    assert LOADGENERATOR_SCRIPT in " ".join(
        loadgen["spec"]["template"]["spec"]["initContainers"][0]["command"]
    )


def test_ingress_nginx_webhook_rbac_hooks_live_through_its_post_sync_job_on_the_directory_cluster(
    world: World,
) -> None:
    assert world.rbac_while_patch_runs, "the PostSync Job was never seen running"
    every = {kind for kind, _ in ADMISSION_RBAC}
    assert all(found == every for found in world.rbac_while_patch_runs), world.rbac_while_patch_runs
    assert admission_rbac_files(world.s) == set()  # hook-succeeded, once the Job is done


def test_quiet_ticks_touch_no_object_file_and_make_no_commit(world: World) -> None:
    s = world.s
    for _ in range(2):
        head, files = s.head(), object_files(s)
        assert world.tick().code == 0
        assert object_files(s) == files
        assert s.head() == head


def test_a_component_disabled_through_values_is_pruned_from_the_directory_cluster(
    world: World,
) -> None:
    s, name = world.s, "kube-state-metrics"
    role = s.object_path("_cluster", "clusterrole.rbac.authorization.k8s.io", name)
    binding = s.object_path("_cluster", "clusterrolebinding.rbac.authorization.k8s.io", name)
    assert role.exists() and binding.exists()
    podinfo = s.status_log(PODINFO_CHART.name)
    commit_values(s, KUBE_STATE_METRICS, "{rbac: {create: false}}")
    assert world.settle() == {app.name: "Succeeded" for app in APPS}
    assert not role.exists() and not binding.exists()
    assert s.status_log(PODINFO_CHART.name) == podinfo


def test_podinfos_chart_makes_one_render_for_one_commit_on_the_directory_cluster(
    world: World,
) -> None:
    s, name = world.s, PODINFO_CHART.name
    ref = s.status(name)["rollout"]["renderRef"]
    assert [h["renderRef"] for h in s.status(name)["history"]] == [ref]
    check_one_render_for_one_commit(world, name, ref)


def test_a_podinfo_image_that_never_becomes_ready_rolls_back_on_the_directory_cluster(
    world: World,
) -> None:
    check_a_podinfo_image_that_never_becomes_ready_rolls_back(
        world, lambda namespace: image(world.s, namespace)
    )


def image(s: Scenario, namespace: str) -> str:
    dep = s.live(namespace, "deployment.apps", "podinfo")
    return str(dep["spec"]["template"]["spec"]["containers"][0]["image"])


# --- what does not roll out ------------------------------------------------------------


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tools:
    return realworld_tools(tmp_path / "bin", monkeypatch)


def test_a_chart_random_on_every_render_is_reported_in_one_line_instead_of_rolling_out_again(
    scenario: Scenario, tools: Tools
) -> None:
    s = scenario
    random_chart_release(s)
    s.reconcile("--all", minutes=0)
    lines: list[str] = []
    for minute in (1, 2):  # each commit elsewhere renders it again
        s.commit({"NOTES.md": f"change {minute}\n"}, f"notes {minute}")
        result = s.reconcile("--all", minutes=minute)
        lines += (result.out + result.err).splitlines()
    assert sum("NewRender" in c for c in s.status_log("dice")) <= 1, s.status_log("dice")
    named = [line for line in lines if "configmap" in line.lower() and "dice-token" in line]
    assert named, lines
    message = s.status("dice")["lastAttempted"]["message"]
    assert "dice-token" in message and "\n" not in message
