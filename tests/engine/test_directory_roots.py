"""Where a directory cluster may write, and what of it is cached: a Cluster's absolute
``spec.directory.path`` only under a root the operator allows (``<state>/directories.yaml``
or ``$CONVOY_DIRECTORIES``), a relative one never out of the state directory, and no
Secret data in the directory cluster's parse cache. Through the CLI, on real files."""

from pathlib import Path

import pytest

from tests.support.scenario import Scenario, cluster_yaml, release_yaml


def directory_cluster(path: str) -> str:
    return cluster_yaml("prod", vars="{env: prod}", directory=f"{{path: '{path}'}}")


def on_prod(s: Scenario, path: str) -> None:
    s.app("web")
    s.app("api", release=release_yaml("api").replace("cluster: staging", "cluster: prod"))
    s.commit({"clusters/prod.yaml": directory_cluster(path)}, "prod")


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        pytest.param("ABSOLUTE", "is outside the state directory and no root of", id="absolute"),
        pytest.param("../elsewhere", "leaves the state directory", id="relative-out"),
    ],
)
def test_a_directory_cluster_outside_the_state_directory_is_refused_naming_its_file(
    scenario: Scenario, tmp_path: Path, path: str, problem: str
) -> None:
    s = scenario
    outside = tmp_path / "outside"
    on_prod(s, str(outside) if path == "ABSOLUTE" else path)
    result = s.reconcile(minutes=0)
    assert result.code == 1
    line = next(ln for ln in result.err.splitlines() if ln.startswith("api: "))
    assert line.startswith("api: ClusterNotFound: clusters/prod.yaml: spec.directory.path: ")
    assert problem in line
    assert s.status("api")["lastAttempted"]["reason"] == "ClusterNotFound"
    assert not outside.exists() and not (tmp_path / "elsewhere").exists()
    assert s.status("web")["lastAttempted"]["reason"] == "Synced"


@pytest.mark.parametrize("named_by", ["state-directory", "environment"])
def test_an_absolute_directory_cluster_under_an_allowed_root_is_used(
    scenario: Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, named_by: str
) -> None:
    s = scenario
    allowed = tmp_path / "clusters-root"
    roots = f"roots: ['{allowed}']\n"
    if named_by == "environment":
        file = tmp_path / "operator" / "roots.yaml"
        monkeypatch.setenv("CONVOY_DIRECTORIES", str(file))
    else:
        file = s.state / "directories.yaml"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(roots)
    on_prod(s, str(allowed / "prod"))
    result = s.reconcile(minutes=0)
    assert result.code == 0, result.err
    assert (allowed / "prod" / "api" / "configmap" / "api-config.yaml").exists()


SECRET = """\
apiVersion: v1
kind: Secret
metadata: {name: web-credentials}
stringData: {password: hunter2-sesame}
data: {token: c2VzYW1lLXRva2Vu}
"""


def test_no_secret_data_lands_in_the_directory_clusters_parse_cache(scenario: Scenario) -> None:
    s = scenario
    s.app("web", extra={"secret.yaml": SECRET})
    assert s.reconcile(minutes=0).code == 0
    assert s.reconcile("--all", minutes=1).code == 0  # reads every object: the cache fills
    assert s.live("web", "secret", "web-credentials")["data"]["token"] == "c2VzYW1lLXRva2Vu"
    caches = list((s.state / "cache").glob("*.json"))
    assert any("web-config" in c.read_text() for c in caches)  # the cache holds objects...
    for cache in caches:
        text = cache.read_text()
        assert "hunter2-sesame" not in text and "c2VzYW1lLXRva2Vu" not in text, cache.name
