"""Helm charts from repositories through the CLI, against real servers on loopback: an
HTTP chart repository (http.server, every request logged) and an OCI registry (the
distribution registry), with the official helm. A chart rolls out, upgrades by a version
bump in git, rolls back with its repository stopped; a quiet tick asks the repository
nothing; a range picks the newest match and is asked again only after the interval; an
unreachable repository is SourceFailed; basic auth comes from the operator's file."""

import hashlib
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.renderers.test_helm import deployment_template
from tests.renderers.test_renderers import last_attempt
from tests.support.chart_servers import HttpChartRepo, OciRegistry
from tests.support.renderer_tools import Tools, real_helm
from tests.support.scenario import FAILURE_POLICY, Scenario, release_yaml

DEPLOYMENT = deployment_template("example/web:{{ .Chart.Version }}")


def chart(version: str) -> dict[str, str]:
    return {
        "Chart.yaml": f"apiVersion: v2\nname: web\nversion: {version}\n",
        "values.yaml": "replicas: 1\n",
        "templates/deployment.yaml": DEPLOYMENT,
    }


def release(repository: str, version: str, extra: str = "", spec: str = FAILURE_POLICY) -> str:
    plain = ", plainHTTP: true" if repository.startswith("oci://") else ""
    render = f"{{type: Helm, repository: '{repository}', chart: web, version: '{version}'"
    return release_yaml("web", source=f"{{render: {render}{plain}{extra}}}}}", spec_extra=spec)


@pytest.fixture
def http_repo(tmp_path: Path, helm_tools: Tools) -> Iterator[HttpChartRepo]:
    repo = HttpChartRepo(real_helm(), tmp_path / "charts")
    repo.start()
    yield repo
    repo.stop()


@pytest.fixture
def registry(registries: Callable[..., OciRegistry]) -> OciRegistry:
    return registries("registry")


def digest(archive: Path) -> str:
    return hashlib.sha256(archive.read_bytes()).hexdigest()


def stored(s: Scenario, version: str) -> str:
    """The digest convoy-batch keeps for ``web`` at ``version`` (the archive it fetched)."""
    found = [p for p in (s.state / "charts").glob("sha256-*.tgz") if version in _chart_of(p)]
    assert len(found) == 1, found
    return found[0].name.removeprefix("sha256-").removesuffix(".tgz")


def _chart_of(archive: Path) -> str:
    with tarfile.open(archive) as tar:
        member = tar.extractfile("web/Chart.yaml")
        assert member is not None
        return member.read().decode()


def rolls_out_upgrades_and_rolls_back(
    s: Scenario, url: str, stop: Callable[[], None], tools: Tools, published: dict[str, str]
) -> None:
    s.commit({"releases/web.yaml": release(url, "0.1.0")})
    result = s.reconcile("web", minutes=0)
    assert result.code == 0, result.err
    assert s.deployment_image() == "example/web:0.1.0"
    first = f"0.1.0@sha256:{published['0.1.0']}"
    assert s.status()["lastAttempted"]["revision"] == first
    s.deployment_ready()
    assert s.reconcile("web", minutes=1).code == 0
    assert s.status()["rollout"]["state"] == "Succeeded"

    calls = len(tools.call_log())
    assert s.reconcile("web", minutes=2).code == 0  # quiet: nothing changed
    assert len(tools.call_log()) == calls  # no helm process at all

    s.commit({"releases/web.yaml": release(url, "0.2.0")}, "web 0.2.0")
    assert s.reconcile("web", minutes=3).code == 0
    assert s.deployment_image() == "example/web:0.2.0"
    second = f"0.2.0@sha256:{published['0.2.0']}"
    assert s.status()["lastAttempted"]["revision"] == second

    stop()  # the rollback needs nothing of the repository
    s.deployment_failed()
    result = s.reconcile("web", minutes=4)
    assert s.status()["rollout"]["state"] == "RolledBack", result.err
    assert s.deployment_image() == "example/web:0.1.0"
    history = s.cli("history", "web").out
    assert f"0.2.0@sha256:{published['0.2.0'][:12]}" in history
    assert f"0.1.0@sha256:{published['0.1.0'][:12]}" in history


def test_a_chart_from_an_http_repository_rolls_out_upgrades_and_rolls_back_offline(
    scenario: Scenario, http_repo: HttpChartRepo, helm_tools: Tools
) -> None:
    published = {v: digest(http_repo.publish(chart(v))) for v in ("0.1.0", "0.2.0")}
    rolls_out_upgrades_and_rolls_back(
        scenario, http_repo.url, http_repo.stop, helm_tools, published
    )
    assert stored(scenario, "0.2.0") == published["0.2.0"]


def test_a_chart_from_an_oci_registry_rolls_out_upgrades_and_rolls_back_offline(
    scenario: Scenario, registry: OciRegistry, helm_tools: Tools
) -> None:
    published = {v: registry.push(chart(v)) for v in ("0.1.0", "0.2.0")}
    rolls_out_upgrades_and_rolls_back(scenario, registry.url, registry.stop, helm_tools, published)


def test_a_pinned_chart_asks_its_repository_nothing_once_fetched(
    scenario: Scenario, http_repo: HttpChartRepo, helm_tools: Tools
) -> None:
    s = scenario
    http_repo.publish(chart("0.1.0"))
    s.commit({"releases/web.yaml": release(http_repo.url, "0.1.0")})
    assert s.reconcile("web", minutes=0).code == 0
    assert http_repo.requests  # the index and the archive
    s.deployment_ready()
    assert s.reconcile("web", minutes=1).code == 0
    http_repo.requests.clear()
    calls = len(helm_tools.call_log())
    # Past the interval the Release is reconciled again: an exact version is not asked.
    assert s.reconcile("web", minutes=30).code == 0
    assert http_repo.requests == []
    assert len(helm_tools.call_log()) == calls
    assert s.status()["rollout"]["state"] == "Succeeded"


def test_a_range_picks_the_newest_match_and_is_asked_again_only_after_the_interval(
    scenario: Scenario, http_repo: HttpChartRepo
) -> None:
    s = scenario
    for version in ("0.1.0", "0.1.2", "0.2.0"):
        http_repo.publish(chart(version))
    s.commit({"releases/web.yaml": release(http_repo.url, "~0.1", spec="  interval: 10m\n")})
    assert s.reconcile("web", minutes=0).code == 0
    assert s.deployment_image() == "example/web:0.1.2"
    assert s.status()["lastAttempted"]["revision"].startswith("0.1.2@sha256:")
    s.deployment_ready()
    http_repo.publish(chart("0.1.5"))
    http_repo.requests.clear()
    assert s.reconcile("web", minutes=9, extra=("--force",)).code == 0
    assert http_repo.requests == []  # resolved 9 minutes ago: still 0.1.2
    assert s.deployment_image() == "example/web:0.1.2"
    assert s.reconcile("web", minutes=10).code == 0
    assert "/index.yaml" in http_repo.requests
    assert s.deployment_image() == "example/web:0.1.5"
    assert s.status()["lastAttempted"]["revision"].startswith("0.1.5@sha256:")


def test_an_unreachable_repository_is_source_failed_and_the_last_render_stays(
    scenario: Scenario, http_repo: HttpChartRepo
) -> None:
    s = scenario
    for version in ("0.1.0", "0.2.0"):
        http_repo.publish(chart(version))
    s.commit({"releases/web.yaml": release(http_repo.url, "0.1.0")})
    assert s.reconcile("web", minutes=0).code == 0
    s.deployment_ready()
    assert s.reconcile("web", minutes=1).code == 0
    http_repo.stop()
    s.commit({"releases/web.yaml": release(http_repo.url, "0.2.0")}, "web 0.2.0")
    result = s.reconcile("web", minutes=2)
    assert result.code == 1
    reason, message = last_attempt(s, "web")
    assert reason == "SourceFailed"
    assert message.startswith(f"chart 'web' from {http_repo.url}: helm "), message
    assert "connection refused" in message
    assert "\n" not in message and "Traceback" not in result.err
    assert s.deployment_image() == "example/web:0.1.0"
    assert s.status()["rollout"]["state"] == "Succeeded"
    # A failed repository is asked again once the interval (5m) has passed, not before.
    http_repo.start()
    http_repo.requests.clear()
    assert s.reconcile("web", minutes=6, extra=("--force",)).code == 1
    assert http_repo.requests == []
    assert last_attempt(s, "web") == (reason, message)
    assert s.reconcile("web", minutes=7).code == 0
    assert "/index.yaml" in http_repo.requests
    assert s.deployment_image() == "example/web:0.2.0"


PASSWORD = "pa55-w0rd-not-to-leak"


def test_basic_auth_comes_from_the_operators_credentials_file_and_leaks_nowhere(
    scenario: Scenario, tmp_path: Path, helm_tools: Tools, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = scenario
    repo = HttpChartRepo(real_helm(), tmp_path / "private", login=("reader", PASSWORD))
    repo.start()
    try:
        repo.publish(chart("0.1.0"))
        secrets = tmp_path / "operator"
        secrets.mkdir()
        (secrets / "user").write_text("reader\n")
        (secrets / "password").write_text("wrong\n")
        (secrets / "creds.yaml").write_text(
            "credentials:\n  charts:\n    basicAuth: {usernameFile: user, passwordFile: password}\n"
            f"    urls: ['{repo.url}/']\n    releases: [releases/web.yaml]\n"
        )
        monkeypatch.setenv("CONVOY_CREDENTIALS", str(secrets / "creds.yaml"))
        s.commit({"releases/web.yaml": release(repo.url, "0.1.0", ", credentials: charts")})
        assert s.reconcile("web", minutes=0).code == 1
        reason, message = last_attempt(s, "web")
        assert reason == "SourceFailed" and "401" in message, message
        (secrets / "password").write_text(PASSWORD + "\n")
        result = s.reconcile("web", minutes=5)  # asked again after the interval
        assert result.code == 0, result.err
        assert s.deployment_image() == "example/web:0.1.0"
    finally:
        repo.stop()
    assert PASSWORD not in result.out + result.err
    assert PASSWORD not in "\n".join(helm_tools.call_log())  # never on a command line
    for path in s.state.rglob("*"):
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), path
    history = s.repo.git.log("--all", "-p")
    assert PASSWORD not in history


@pytest.mark.parametrize(
    ("render", "field"),
    [
        ("{type: Helm, repository: 'https://charts.example', version: 1.0.0}", "chart"),
        ("{type: Helm, repository: 'https://charts.example', chart: web}", "version"),
        ("{type: Helm, chart: web, version: 1.0.0}", "chart"),
        ("{type: Helm, repository: 'ftp://charts.example', chart: web, version: 1.0.0}",
         "repository"),
    ],
    ids=["no-chart", "no-version", "no-repository", "not-a-repository-url"],
)  # fmt: skip
def test_a_chart_from_a_repository_needs_repository_chart_and_version(
    scenario: Scenario, render: str, field: str
) -> None:
    s = scenario
    text = (
        "apiVersion: convoy.dev/v1alpha1\nkind: Release\nmetadata: {name: web}\n"
        f"spec:\n  cluster: staging\n  namespace: web\n  source:\n    render: {render}\n"
    )
    s.commit({"releases/web.yaml": text})
    s.app("plain")
    assert s.reconcile(minutes=0).code == 1
    reason, message = last_attempt(s, "web")
    assert reason == "InvalidRelease"
    assert f"{field}:" in message, message
    assert last_attempt(s, "plain")[0] == "Synced"


def test_a_damaged_archive_in_the_state_directory_is_fetched_again_before_a_render(
    scenario: Scenario, http_repo: HttpChartRepo
) -> None:
    s = scenario
    published = digest(http_repo.publish(chart("0.1.0")))
    s.commit({"releases/web.yaml": release(http_repo.url, "0.1.0")})
    assert s.reconcile("web", minutes=0).code == 0
    kept = s.state / "charts" / f"sha256-{published}.tgz"
    kept.write_bytes(b"not the chart")
    http_repo.requests.clear()
    s.commit({"releases/web.yaml": release(http_repo.url, "0.1.0", ", values: {replicas: 3}")})
    result = s.reconcile("web", minutes=1)
    assert result.code == 0, result.err
    assert s.live("web", "deployment.apps", "web")["spec"]["replicas"] == 3
    assert digest(kept) == published
    assert "/web-0.1.0.tgz" in http_repo.requests


def test_basic_auth_to_an_oci_registry_comes_from_the_credentials_file(
    scenario: Scenario,
    tmp_path: Path,
    helm_tools: Tools,
    registries: Callable[..., OciRegistry],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = scenario
    found = registries("reg", ("reader", PASSWORD))
    try:
        found.push(chart("0.1.0"))
        secrets = tmp_path / "state"
        secrets.mkdir(exist_ok=True)
        (secrets / "user").write_text("reader\n")
        (secrets / "password").write_text(PASSWORD + "\n")
        (secrets / "credentials.yaml").write_text(  # the state directory's own file
            "credentials:\n  oci:\n    basicAuth: {usernameFile: user, passwordFile: password}\n"
            f"    urls: ['{found.url}']\n    releases: ['releases/*.yaml']\n"
        )
        s.commit({"releases/web.yaml": release(found.url, "~0.1", ", credentials: oci")})
        result = s.reconcile("web", minutes=0)
        assert result.code == 0, result.err
        assert s.deployment_image() == "example/web:0.1.0"
    finally:
        found.stop()
    assert PASSWORD not in result.out + result.err
    assert PASSWORD not in "\n".join(helm_tools.call_log())
    assert PASSWORD not in s.repo.git.log("--all", "-p")


def test_values_files_are_read_from_source_path_and_a_change_there_renders_again(
    scenario: Scenario, http_repo: HttpChartRepo
) -> None:
    s = scenario
    http_repo.publish(chart("0.1.0"))
    text = release(http_repo.url, "0.1.0", ", valuesFiles: [values-staging.yaml]")
    text = text.replace("  source: {render:", "  source: {path: apps/web, render:")
    s.commit({"releases/web.yaml": text, "apps/web/values-staging.yaml": "replicas: 2\n"})
    assert s.reconcile("web", minutes=0).code == 0
    assert s.live("web", "deployment.apps", "web")["spec"]["replicas"] == 2
    s.deployment_ready()
    assert s.reconcile("web", minutes=1).code == 0
    http_repo.requests.clear()
    s.commit({"apps/web/values-staging.yaml": "replicas: 4\n"}, "four")
    assert s.reconcile(minutes=2).code == 0  # due: its values changed in git
    assert s.live("web", "deployment.apps", "web")["spec"]["replicas"] == 4
    assert s.status()["lastAttempted"]["revision"].startswith("0.1.0@sha256:")
    assert http_repo.requests == []


UMBRELLA_CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: umbrella}
data: {web: "{{ .Values.web.replicas }}"}
"""


def umbrella(repository: str, version: str, repository_field: str = "") -> dict[str, str]:
    """A chart in git whose ``Chart.yaml`` depends on ``web`` from ``repository``."""
    return {
        "apps/umbrella/Chart.yaml": (
            "apiVersion: v2\nname: umbrella\nversion: 1.0.0\ndependencies:\n"
            f"- {{name: web, version: '{version}', repository: '{repository}'}}\n"
        ),
        "apps/umbrella/values.yaml": "web: {replicas: 3}\n",
        "apps/umbrella/templates/configmap.yaml": UMBRELLA_CONFIGMAP,
        "releases/web.yaml": (
            "apiVersion: convoy.dev/v1alpha1\nkind: Release\nmetadata: {name: web}\n"
            "spec:\n  cluster: staging\n  namespace: web\n  source:\n"
            f"    path: apps/umbrella\n    render: {{type: Helm{repository_field}}}\n"
            + FAILURE_POLICY
        ),
    }


def test_a_chart_in_git_gets_its_dependencies_from_the_repository_cache(
    scenario: Scenario, http_repo: HttpChartRepo, helm_tools: Tools
) -> None:
    s = scenario
    archives = {v: http_repo.publish(chart(v)) for v in ("0.1.0", "0.1.3")}
    s.commit(umbrella(http_repo.url, "~0.1.0"))

    result = s.reconcile("web", minutes=0)

    assert result.code == 0, result.err
    assert s.deployment_image() == "example/web:0.1.3"  # the newest match of the range
    assert s.live("web", "deployment.apps", "web")["spec"]["replicas"] == 3  # its values
    assert s.live("web", "configmap", "umbrella")["data"] == {"web": "3"}
    assert stored(s, "0.1.3") == digest(archives["0.1.3"])
    # A quiet tick within the interval asks the repository nothing and starts no helm.
    asked, calls = len(http_repo.requests), len(helm_tools.call_log())
    assert s.reconcile("web", minutes=2).code == 0
    assert (len(http_repo.requests), len(helm_tools.call_log())) == (asked, calls)
    # A newer match after the interval is a new render of the chart in git.
    http_repo.publish(chart("0.1.5"))
    assert s.reconcile("web", minutes=6).code == 0
    assert s.deployment_image() == "example/web:0.1.5"
    assert s.status()["rollout"]["reason"] == "NewRender"


def test_a_dependency_that_cannot_be_fetched_is_source_failed_in_one_line(
    scenario: Scenario, http_repo: HttpChartRepo, helm_tools: Tools
) -> None:
    s = scenario
    http_repo.publish(chart("0.1.0"))
    s.commit(umbrella(http_repo.url, "0.9.0"))

    result = s.reconcile("web", minutes=0)

    assert result.code == 1
    reason, message = last_attempt(s, "web")
    assert reason == "SourceFailed"
    assert message.startswith(f"chart 'web' from {http_repo.url}: ")
    assert "\n" not in message
