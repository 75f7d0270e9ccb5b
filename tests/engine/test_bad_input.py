"""Bad input stays inside its Release: each malformed Release file sits beside a healthy
Release; the bad one gets an error status in one line (exit 1, no traceback, control
characters shown escaped) and the healthy one reconciles as usual."""

import json
import logging

import pytest

from tests.support.scenario import FAILURE_POLICY, Scenario, release_yaml

# About 300 bytes that expand to 9**9 (387 million) strings.
ALIAS_BOMB = "".join(
    f"{k}: &{k} [{', '.join([f'*{p}' if p else 'x'] * 9)}]\n"
    for p, k in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)

BAD = {
    "alias-bomb-in-the-release-file": (
        release_yaml("bad", spec_extra="  vars:\n    bomb: {x: 1}\n").replace(
            "kind: Release\n", "kind: Release\nx-bomb:\n  " + ALIAS_BOMB.replace("\n", "\n  ")
        ),
        "InvalidRelease",
        "aliases expand it past",
    ),
    "interval-overflows": (
        release_yaml("bad", spec_extra="  interval: 99999999999999999999h\n"),
        "InvalidRelease",
        "spec.interval",
    ),
    "interval-longer-than-go": (
        release_yaml("bad", spec_extra="  interval: 2562048h\n"),
        "InvalidRelease",
        "spec.interval",
    ),
    "deadline-overflows": (
        release_yaml("bad", spec_extra="  failurePolicy: {progressDeadline: 1e400h}\n"),
        "InvalidRelease",
        "spec.failurePolicy.progressDeadline",
    ),
    "pin-of-zeros": (
        release_yaml("bad", spec_extra=f'  pin: "{"0" * 40}"\n'),
        "SourceFailed",
        "0000000000",
    ),
    "pin-unknown": (
        release_yaml("bad", spec_extra="  pin: no-such-tag\n"),
        "SourceFailed",
        "no-such-tag",
    ),
    "nul-byte": (
        release_yaml("bad").replace("cluster: staging", "cluster: stag\0ing"),
        "InvalidRelease",
        "releases/bad.yaml",
    ),
}


@pytest.mark.parametrize("case", BAD.values(), ids=BAD.keys())
def test_a_bad_release_errors_alone_in_one_line(
    scenario: Scenario, case: tuple[str, str, str]
) -> None:
    text, reason, named = case
    s = scenario
    s.app("web")
    s.app("bad", release=text, spec_extra=FAILURE_POLICY)
    result = s.reconcile(minutes=0)
    assert result.code == 1, result.err
    assert "Traceback" not in result.err
    # The error's line at the end; every other line (the log's) names the Release too.
    lines = result.err.splitlines()
    assert all("bad" in ln for ln in lines), result.err
    summary = [ln for ln in lines if ln.startswith("bad: ")]
    assert len(summary) == 1, result.err
    assert summary[0].startswith(f"bad: {reason}: ") and named in summary[0], summary[0]
    assert all(c.isprintable() for c in result.err.replace("\n", "")), result.err
    assert s.status("bad")["lastAttempted"]["reason"] == reason
    assert s.status("web")["rollout"]["state"] == "Progressing"


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(("releases/bad.yml", release_yaml("bad")), id="bad.yaml-and-bad.yml"),
        pytest.param(("releases/bad.yml", "{{{\n"), id="a-broken-bad.yml"),
    ],
)
def test_two_files_naming_one_release_are_one_invalid_release_naming_both(
    scenario: Scenario, second: tuple[str, str]
) -> None:
    s = scenario
    s.app("web")
    s.app("bad", spec_extra=FAILURE_POLICY)
    s.commit(dict([second]), "a second file for bad")
    result = s.reconcile(minutes=0)
    assert result.code == 1, result.err
    assert "Traceback" not in result.err
    named = "releases/bad.yaml, releases/bad.yml: metadata.name: 'bad' is claimed by 2 files"
    assert [ln for ln in result.err.splitlines() if ln.startswith("bad")] == [
        f"bad: InvalidRelease: {named}; one file per Release"
    ]
    assert s.status("bad")["lastAttempted"]["reason"] == "InvalidRelease"
    assert not s.object_path("bad", "configmap", "bad-config").exists()
    assert s.status("web")["rollout"]["state"] == "Progressing"
    s.commit({second[0]: None}, "one file again")
    assert s.reconcile(minutes=1).code == 0
    assert s.status("bad")["lastAttempted"]["reason"] == "Synced"
    assert s.object_path("bad", "configmap", "bad-config").exists()


def test_a_broken_file_whose_stem_is_no_release_name_errors_in_one_line(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app("web")
    s.commit({"releases/Not_A_Name.yaml": "{{{\n"}, "a broken file")
    result = s.reconcile(minutes=0)
    assert result.code == 1, result.err
    assert "Traceback" not in result.err
    assert "Not_A_Name: InvalidRelease: releases/Not_A_Name.yaml: " in result.err
    assert s.status("web")["lastAttempted"]["reason"] == "Synced"


KUBECONFIGS = {
    "not-yaml": "apiVersion: v1\nclusters: [\n",
    "not-a-mapping": "- just\n- a list\n",
    "no-clusters": "apiVersion: v1\nkind: Config\ncurrent-context: ctx\n",
    "bad-certificate-data": (
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1',"
        " certificate-authority-data: '%%%not base64'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: ctx, context: {cluster: c, user: u}}]\ncurrent-context: ctx\n"
    ),
    "exec-plugin-missing": (
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1,"
        " command: /nonexistent/convoy-credential-helper}}}]\n"
        "contexts: [{name: ctx, context: {cluster: c, user: u}}]\ncurrent-context: ctx\n"
    ),
}


@pytest.mark.parametrize("text", KUBECONFIGS.values(), ids=KUBECONFIGS.keys())
def test_an_unloadable_kubeconfig_is_cluster_unavailable_in_one_line(
    scenario: Scenario, text: str
) -> None:
    s = scenario
    kubeconfig = s.state / "prod.kubeconfig"  # named relative to the state directory
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    kubeconfig.write_text(text)
    s.commit(
        {
            "clusters/prod.yaml": "apiVersion: convoy.dev/v1alpha1\nkind: Cluster\n"
            "metadata: {name: prod}\n"
            "spec: {vars: {env: prod}, kubernetes: {kubeconfig: prod.kubeconfig}}\n"
        }
    )
    s.app("web")
    s.app("bad", release=release_yaml("bad").replace("cluster: staging", "cluster: prod"))
    result = s.reconcile(minutes=0)
    assert result.code == 1, result.err
    assert "Traceback" not in result.err
    summary = [ln for ln in result.err.splitlines() if ln.startswith("bad: ")]
    assert len(summary) == 1, result.err
    assert summary[0].startswith("bad: ClusterUnavailable: clusters/prod.yaml: ")
    # Loading fails on the file, naming it (an exec plugin runs while it loads) as a file
    # of the state directory, never where the state directory is.
    assert "cannot load kubeconfig <state>/prod.kubeconfig: " in summary[0]
    assert str(s.state) not in result.err
    assert s.status("bad")["lastAttempted"]["reason"] == "ClusterUnavailable"
    assert s.status("web")["rollout"]["state"] == "Progressing"


def test_an_alias_bomb_in_a_manifest_is_a_render_error_of_its_release_alone(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app("web")
    s.app("bad", extra={"bomb.yaml": "apiVersion: v1\nkind: ConfigMap\n" + ALIAS_BOMB})
    result = s.reconcile(minutes=0)
    assert result.code == 1, result.err
    summary = [ln for ln in result.err.splitlines() if ln.startswith("bad: ")]
    assert len(summary) == 1, result.err
    assert summary[0].startswith("bad: RenderFailed: apps/bad/bomb.yaml: its aliases expand")
    assert s.status("web")["rollout"]["state"] == "Progressing"


def test_an_inventory_entry_that_escapes_the_cluster_folder_is_dropped_with_a_warning(
    scenario: Scenario, caplog: pytest.LogCaptureFixture
) -> None:
    s = scenario
    s.app("web")
    assert s.reconcile(minutes=0).code == 0
    path = s.state / "inventory" / "web.json"
    inventory = json.loads(path.read_text())
    escaping = {
        "key": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "web", "name": "../../x"},
        "wave": 0,
        "appliedRenderRef": inventory["entries"][0]["appliedRenderRef"],
        "prune": True,
        "health": None,
    }
    inventory["entries"].append(escaping)
    path.write_text(json.dumps(inventory))
    with caplog.at_level(logging.WARNING, logger="convoy_batch"):
        result = s.reconcile("web", minutes=1)
    assert result.code == 0, result.err
    warning = [r.getMessage() for r in caplog.records if "entry dropped" in r.getMessage()]
    assert len(warning) == 1 and "'../../x'" in warning[0], warning
    assert s.status("web")["lastAttempted"]["reason"] == "Synced"
    assert "../../x" not in path.read_text()
