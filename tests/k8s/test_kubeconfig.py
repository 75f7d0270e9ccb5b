"""Which kubeconfig a Kubernetes Cluster uses, and how a bad one is reported (no server)."""

from pathlib import Path

import pytest

from convoy_batch.deployers.kubeapi import client_timeout
from convoy_batch.deployers.kubeconfig import kubeconfig_path, load_configuration
from convoy_batch.errors import ClusterUnavailable
from convoy_batch.models import KubernetesTarget


@pytest.mark.parametrize(
    ("configured", "env", "expected"),
    [
        pytest.param("/etc/kc", "/env/kc", "/etc/kc", id="the-cluster-file-wins"),
        pytest.param("kc/one", None, "BASE/kc/one", id="relative-to-the-state-directory"),
        pytest.param(None, "/env/a:/env/b", "/env/a:/env/b", id="then-KUBECONFIG"),
        pytest.param(None, None, "HOME/.kube/config", id="then-the-home-default"),
    ],
)
def test_the_kubeconfig_comes_from_the_cluster_then_the_environment_then_home(
    configured: str | None,
    env: str | None,
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    if env is None:
        monkeypatch.delenv("KUBECONFIG", raising=False)
    else:
        monkeypatch.setenv("KUBECONFIG", env)
    target = KubernetesTarget(kubeconfig=configured)
    found = kubeconfig_path(target, tmp_path / "base")
    wanted = expected.replace("BASE", str(tmp_path / "base")).replace(
        "HOME", str(tmp_path / "home")
    )
    assert found == wanted


def test_a_missing_kubeconfig_is_cluster_unavailable_naming_the_file(tmp_path: Path) -> None:
    target = KubernetesTarget(kubeconfig=str(tmp_path / "nope"))
    with pytest.raises(
        ClusterUnavailable, match=r"clusters/prod.yaml: cannot load kubeconfig .*nope"
    ):
        load_configuration(target, tmp_path, "clusters/prod.yaml")


def test_an_unknown_context_is_cluster_unavailable_without_the_token(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: s3cr3t-t0ken}}]\n"
        "contexts: [{name: ctx, context: {cluster: c, user: u}}]\ncurrent-context: ctx\n"
    )
    target = KubernetesTarget(kubeconfig=str(kubeconfig), context="other")
    with pytest.raises(ClusterUnavailable) as caught:
        load_configuration(target, tmp_path, "clusters/prod.yaml")
    assert "other" in str(caught.value)
    assert "s3cr3t" not in str(caught.value)


def test_the_client_time_out_is_60s_unless_the_environment_sets_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CONVOY_K8S_TIMEOUT", raising=False)
    assert client_timeout("clusters/prod.yaml") == 60.0
    monkeypatch.setenv("CONVOY_K8S_TIMEOUT", "2.5")
    assert client_timeout("clusters/prod.yaml") == 2.5


@pytest.mark.parametrize("value", ["soon", "0", "-1", "inf", "nan"])
def test_a_client_time_out_that_is_no_positive_number_is_cluster_unavailable(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVOY_K8S_TIMEOUT", value)
    with pytest.raises(ClusterUnavailable) as caught:
        client_timeout("clusters/prod.yaml")
    expected = f"clusters/prod.yaml: $CONVOY_K8S_TIMEOUT='{value}' is not a number of seconds"
    assert str(caught.value) == expected
