"""A kubeconfig's credential as the Kubernetes client hands it over, against the real API
server: a ``tokenFile`` ending in a newline (the client keeps it) is sent without it and
the Release syncs; a credential no HTTP header can carry (another control character, a
character outside Latin-1) is the Release's ``ClusterUnavailable`` in one line, before
any request. In every case the token is nowhere a person or the repository sees (the
CLI's output, the status, the repository's history, the state directory), and the tick
goes on: no traceback, its other Releases synced. The CLI runs as its own process."""

from pathlib import Path

import pytest
import yaml

from tests.k8s.k8s_scenario import KubeScenario, kube_cluster, only_error_line
from tests.support.scenario import Result, release_yaml

NOW = "2026-11-29T12:00:00Z"


def token_file_kubeconfig(s: KubeScenario, token_text: str) -> Path:
    """The session's kubeconfig, its user's token read from a file of the operator's."""
    token_file = s.operator / "token"
    token_file.write_text(token_text)
    config = yaml.safe_load(s.kube.kubeconfig.read_text())
    for user in config["users"]:
        user["user"] = {"tokenFile": str(token_file)}
    path = s.operator / "kubeconfig-token-file"
    path.write_text(yaml.safe_dump(config))
    return path


def the_token(s: KubeScenario) -> str:
    return (s.kube.folder / "token").read_text().strip()


def holders_of(s: KubeScenario, result: Result, secret: str) -> list[str]:
    """Where ``secret`` is: the CLI's output, the repository's files and history, the
    state directory."""
    found = [
        name for name, text in (("stdout", result.out), ("stderr", result.err)) if secret in text
    ]
    for folder in (s.root, s.state):
        found += [
            str(p) for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()
        ]
    if secret in s.repo.git.log("-p", "--all"):
        found.append("git log -p --all")
    return found


def test_a_token_file_ending_in_a_newline_is_sent_without_it_and_the_release_syncs(
    kscenario: KubeScenario,
) -> None:
    s = kscenario
    token = the_token(s)
    kubeconfig = token_file_kubeconfig(s, token + "\n")
    assert token not in kubeconfig.read_text()
    s.commit({"clusters/staging.yaml": kube_cluster(kubeconfig)})
    s.app("tokennl")

    result = s.cli_process("reconcile", "tokennl", "--now", NOW)

    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    assert s.status("tokennl")["lastAttempted"]["reason"] == "Synced"
    assert s.configmap("tokennl", "tokennl-config").data == {"env": "staging"}
    assert holders_of(s, result, token) == []


REFUSED = {
    # id: (Release, where in the token the character goes, the character, the line's end)
    "control-character": (
        "tokenctl",
        "\x01",
        "the kubeconfig's credential (the authorization header) holds a control character, "
        "which no HTTP header can carry (its value is not shown)",
    ),
    "newline-inside": (
        "tokeninner",
        "\n",
        "the kubeconfig's credential (the authorization header) holds a control character, "
        "which no HTTP header can carry (its value is not shown)",
    ),
    "beyond-latin-1": ("tokeneuro", "\u20ac", "the request failed: UnicodeEncodeError"),
}


@pytest.mark.parametrize(("name", "character", "ending"), REFUSED.values(), ids=REFUSED.keys())
def test_a_credential_no_header_can_carry_is_cluster_unavailable_in_one_line_without_it(
    kscenario: KubeScenario, name: str, character: str, ending: str
) -> None:
    s = kscenario
    s.app("fine")  # on the session's own kubeconfig, in the same tick
    token = the_token(s)
    half = len(token) // 2
    broken = token[:half] + character + token[half:]
    kubeconfig = token_file_kubeconfig(s, broken + "\n")
    other = kube_cluster(kubeconfig).replace("name: staging", "name: broken")
    s.commit({"clusters/broken.yaml": other})
    s.app(name, release=release_yaml(name).replace("cluster: staging", "cluster: broken"))

    result = s.cli_process("reconcile", "fine", name, "--now", NOW)

    line = only_error_line(result, name)
    assert line.startswith(f"{name}: ClusterUnavailable: clusters/broken.yaml: ")
    assert line.endswith(ending), line
    attempt = s.status(name)["lastAttempted"]
    assert (attempt["reason"], attempt["applied"]) == ("ClusterUnavailable", False)
    assert s.configmap(name, f"{name}-config") is None  # the server's view: nothing applied
    assert s.status("fine")["lastAttempted"]["reason"] == "Synced"
    for secret in (token[:half], token[half:]):  # no part of it either
        assert holders_of(s, result, secret) == []
