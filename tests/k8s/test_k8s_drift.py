"""Drift rules on a real API server: replicas another field manager set (``kubectl
scale``, a server-side apply under another ``--field-manager``) are kept by quiet ticks
that write nothing and by a new render; the trap (an ignored field nobody else owns, which
server-side apply would remove once convoy-batch stopped sending it) keeps its value; and
Report mode tells a ``kubectl edit`` once, leaves it, and clears it in one commit when
reverted by hand."""

import os
import subprocess

from tests.k8s.k8s_scenario import KubeScenario
from tests.k8s.test_k8s_scenarios import server_writes
from tests.support.renderer_tools import debian_kubectl
from tests.support.scenario import FAILURE_POLICY

IGNORE_REPLICAS = FAILURE_POLICY + (
    "  drift:\n    ignore:\n    - paths: [/spec/replicas]\n      target: {kind: Deployment}\n"
)
REPORT = FAILURE_POLICY + "  drift: {mode: Report}\n"


def kubectl(s: KubeScenario, *args: str, editor: str | None = None, stdin: str = "") -> str:
    """Debian's kubectl against the test server, as a person runs it."""
    env = {**os.environ, "KUBECONFIG": str(s.kube.kubeconfig)}
    if editor is not None:
        env["KUBE_EDITOR"] = editor
    done = subprocess.run(
        [debian_kubectl(), *args], env=env, input=stdin, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def settled(s: KubeScenario, name: str, spec_extra: str) -> None:
    s.app(name, spec_extra=spec_extra)
    assert s.reconcile(name, minutes=0).code == 0
    s.ready(name)
    assert s.reconcile(name, minutes=1).code == 0
    assert s.status(name)["rollout"]["state"] == "Succeeded"


def replicas(s: KubeScenario, name: str) -> int:
    return int(s.deployment(name).spec.replicas)


def test_replicas_another_manager_set_are_kept_and_quiet_ticks_write_nothing(
    kscenario: KubeScenario,
) -> None:
    s, name = kscenario, "drscale"
    settled(s, name, IGNORE_REPLICAS)
    kubectl(s, "scale", "deployment", name, "-n", name, "--replicas=5")
    s.ready(name)
    before = server_writes(s, name)

    for minute in (2, 3):
        assert s.reconcile(name, minutes=minute).code == 0

    assert server_writes(s, name) == before  # the audit log: no write
    assert replicas(s, name) == 5
    s.app(name, image="2.0", spec_extra=IGNORE_REPLICAS)
    assert s.reconcile(name, minutes=4).code == 0
    assert s.deployment_image(name) == "example/drscale:2.0"
    assert replicas(s, name) == 5  # the other manager's

    # Another applier takes the replicas over (once, with force: the scale subresource
    # of this server version leaves their ownership with convoy-batch). convoy-batch
    # never takes them back: a new render keeps them and the applier's next apply meets
    # no conflict.
    scaled = f"apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\nspec:\n"
    apply = ["apply", "--server-side", "--field-manager=autoscaler", "--validate=false"]
    apply += ["-n", name, "-f", "-"]  # a partial manifest: the fields it manages
    kubectl(s, *apply, "--force-conflicts", stdin=scaled + "  replicas: 7\n")
    s.app(name, image="3.0", spec_extra=IGNORE_REPLICAS)
    assert s.reconcile(name, minutes=5).code == 0
    assert (s.deployment_image(name), replicas(s, name)) == ("example/drscale:3.0", 7)
    kubectl(s, *apply, stdin=scaled + "  replicas: 8\n")  # no conflict: still theirs alone
    assert replicas(s, name) == 8


def test_an_ignored_field_nobody_else_owns_keeps_its_value(kscenario: KubeScenario) -> None:
    s, name = kscenario, "drtrap"
    settled(s, name, IGNORE_REPLICAS)

    for minute in (2, 3, 4):
        assert s.reconcile(name, minutes=minute).code == 0
        assert replicas(s, name) == 2
    s.app(name, image="2.0", spec_extra=IGNORE_REPLICAS)
    assert s.reconcile(name, minutes=5).code == 0

    assert s.deployment_image(name) == "example/drtrap:2.0"
    assert replicas(s, name) == 2  # not removed by the apply that stopped sending it
    s.ready(name)
    assert s.reconcile(name, minutes=6).code == 0
    assert replicas(s, name) == 2


def test_report_mode_tells_a_kubectl_edit_once_and_clears_when_reverted(
    kscenario: KubeScenario,
) -> None:
    s, name = kscenario, "drreport"
    settled(s, name, REPORT)
    commits = len(s.status_log())
    edit = ["edit", "configmap", f"{name}-config", "-n", name]
    kubectl(s, *edit, editor="sed -i s/env:\\ staging/env:\\ by-hand/")

    assert s.reconcile(name, minutes=2).code == 0
    before = server_writes(s, name)
    assert s.reconcile(name, minutes=3).code == 0

    assert server_writes(s, name) == before
    assert s.configmap(name, f"{name}-config").data == {"env": "by-hand"}  # not corrected
    assert s.status(name)["drift"]["objects"] == [
        {"kind": "ConfigMap", "namespace": name, "name": f"{name}-config", "paths": ["/data/env"]}
    ]
    assert s.status_log()[: len(s.status_log()) - commits] == [f"{name}: Drifted"]

    kubectl(s, *edit, editor="sed -i s/env:\\ by-hand/env:\\ staging/")
    assert s.reconcile(name, minutes=4).code == 0
    assert s.reconcile(name, minutes=5).code == 0
    assert "drift" not in s.status(name)
    assert s.status_log()[:2] == [f"{name}: DriftResolved", f"{name}: Drifted"]
    assert len(s.status_log()) == commits + 2
