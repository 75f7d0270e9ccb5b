"""Kubeconfigs whose user is an exec credential plugin (as cloud providers' kubeconfigs
are), against the real API server: a plugin that fails is ``ClusterUnavailable`` in one
line naming the kubeconfig, and a plugin that prints an ExecCredential is used. The CLI
runs as its own process, so every line a person would see is checked."""

import json
from pathlib import Path

import pytest
import yaml

from tests.k8s.k8s_scenario import KubeScenario, kube_cluster, only_error_line
from tests.k8s.testenv import KubeEnv

EXEC_API = "client.authentication.k8s.io/v1beta1"


def exec_kubeconfig(kube: KubeEnv, folder: Path, command: str) -> Path:
    """The session's kubeconfig with its user's token replaced by an exec plugin."""
    config = yaml.safe_load(kube.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"exec": {"apiVersion": EXEC_API, "command": command}}
    path = folder / "kubeconfig-exec"
    path.write_text(yaml.safe_dump(config))
    return path


def plugin(folder: Path, script: str) -> str:
    path = folder / "credential-plugin"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o700)
    return str(path)


NO_CREDENTIAL = json.dumps({"apiVersion": EXEC_API, "kind": "ExecCredential", "status": {}})
FAILING = {
    # id: (Release, the plugin's script (None: no such command), a part of the message)
    "exits-1": ("execfail", "echo 'no credentials today' >&2\nexit 1\n", "process returned 1"),
    "missing": ("execgone", None, "no-such-plugin"),
    "no-credential": ("execempty", f"echo '{NO_CREDENTIAL}'\n", "missing token"),
}


@pytest.mark.parametrize("how", FAILING.values(), ids=FAILING.keys())
def test_a_failing_exec_plugin_is_cluster_unavailable_in_one_line_naming_the_kubeconfig(
    kscenario: KubeScenario, how: tuple[str, str | None, str]
) -> None:
    s = kscenario
    name, script, named = how
    command = plugin(s.operator, script) if script else str(s.operator / "no-such-plugin")
    kubeconfig = exec_kubeconfig(s.kube, s.operator, command)
    s.commit({"clusters/staging.yaml": kube_cluster(kubeconfig)})
    s.app(name)

    result = s.cli_process("reconcile", name, "--now", "2026-11-29T12:00:00Z")

    line = only_error_line(result, name)
    prefix = f"{name}: ClusterUnavailable: clusters/staging.yaml: cannot load kubeconfig "
    assert line.startswith(prefix + str(kubeconfig)), line
    assert named in line, line
    attempt = s.status(name)["lastAttempted"]
    assert (attempt["reason"], attempt["applied"]) == ("ClusterUnavailable", False)
    assert s.configmap(name, f"{name}-config") is None  # the server's view: nothing applied


def test_an_exec_plugin_that_prints_a_credential_is_used(kscenario: KubeScenario) -> None:
    s = kscenario
    token = (s.kube.folder / "token").read_text().strip()
    credential = {"apiVersion": EXEC_API, "kind": "ExecCredential", "status": {"token": token}}
    command = plugin(s.operator, f"cat <<'EOF'\n{json.dumps(credential)}\nEOF\n")
    kubeconfig = exec_kubeconfig(s.kube, s.operator, command)
    assert token not in kubeconfig.read_text()
    s.commit({"clusters/staging.yaml": kube_cluster(kubeconfig)})
    s.app("execok")

    result = s.cli_process("reconcile", "execok", "--now", "2026-11-29T12:00:00Z")

    assert result.code == 0, result.err
    assert s.status("execok")["lastAttempted"]["reason"] == "Synced"
    assert s.configmap("execok", "execok-config").data == {"env": "staging"}
    assert s.deployment_image("execok") == "example/execok:1.0"
