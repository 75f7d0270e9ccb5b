"""A tenant who can commit Release, Cluster and app files, and holds none of the
operator's files, never gets the operator's credentials or keys (README "Charts from
repositories", "SOPS secrets", "Verification by metrics").

Each hostile case plants a secret (the operator's password or token, a unique random
string; for SOPS another team's Secret), keeps two healthy Releases beside the hostile
one, runs a tick through the CLI and checks: the hostile Release gets one line on stderr
and in its status, the healthy ones are Synced, the tenant's server got no credential,
and the secret is nowhere: stdout, stderr, statuses, git history, the state directory,
the directory cluster (but the one object that is the Secret's own). Real parts
throughout: git repositories, helm with loopback chart repositories, sops and age, and
loopback servers that record every request they get.
"""

import base64
import json
import secrets
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from convoy_batch.state.operator_files import allowed_credential, release_matches, url_matches
from convoy_batch.timefmt import format_time
from tests.renderers.test_sops import age_key, encrypt, secret_yaml
from tests.support.chart_servers import HttpChartRepo, OciRegistry
from tests.support.metrics_servers import Recorder
from tests.support.renderer_tools import Tools, real_helm
from tests.support.scenario import CONFIGMAP, DEPLOYMENT, FAILURE_POLICY, T0, Result, Scenario
from tests.support.tenant import nowhere, refused, synced

USER = "reader"
MINUTE = timedelta(minutes=1)


def planted(what: str) -> str:
    """A secret no test writes twice: where it is found, it leaked."""
    return f"{what}-{secrets.token_hex(12)}"


# --- the URL and Release matchers -----------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "prefix", "matches"),
    [
        ("https://charts.example.com/index.yaml", "https://charts.example.com", True),
        ("https://charts.example.com/index.yaml", "https://charts.example.com/", True),
        ("https://charts.example.com/team-a/web.tgz", "https://charts.example.com/team-a", True),
        ("https://charts.example.com/team-a", "https://charts.example.com/team-a/", True),
        ("https://charts.example.com/team-a-evil/x", "https://charts.example.com/team-a", False),
        ("https://charts.example.com/team-b/x", "https://charts.example.com/team-a/", False),
        ("HTTPS://Charts.Example.COM/team-a/x", "https://charts.example.com/team-a", True),
        ("https://charts.example.com/Team-A/x", "https://charts.example.com/team-a", False),
        ("https://charts.example.com:443/x", "https://charts.example.com/", True),
        ("http://charts.example.com:80/x", "http://charts.example.com/", True),
        ("https://charts.example.com/x", "https://charts.example.com:443/", True),
        ("https://charts.example.com:8443/x", "https://charts.example.com/", False),
        ("oci://registry.example.com:443/charts/web", "oci://registry.example.com/charts", True),
        ("http://charts.example.com/x", "https://charts.example.com/", False),
        ("oci://charts.example.com/x", "https://charts.example.com/", False),
        ("https://charts.example.com.evil.net/x", "https://charts.example.com/", False),
        ("https://evil.net/charts.example.com/x", "https://charts.example.com/", False),
        ("https://user:pw@charts.example.com/x", "https://charts.example.com/", False),
        ("https://charts.example.com@evil.net/x", "https://charts.example.com/", False),
        ("https://charts.example.com/x", "https://user@charts.example.com/", False),
        ("https://charts.example.com/team-a/../b/x", "https://charts.example.com/team-a", False),
        ("https://charts.example.com/team-a/%2e%2e/b", "https://charts.example.com/team-a", False),
        ("https://charts.example.com/team-a%2f..%2fb", "https://charts.example.com/team-a", False),
        ("https://charts.example.com/team-a\\..\\b", "https://charts.example.com/team-a", False),
        ("https://charts.example.com/x\r\nHost: evil", "https://charts.example.com/", False),
        ("https://charts.example.com/x", "https://charts.example.com/?token=1", False),
        ("https://charts.example.com/x?q=1", "https://charts.example.com/", True),
        ("ftp://charts.example.com/x", "ftp://charts.example.com/", False),
        ("charts.example.com/x", "charts.example.com/", False),
        ("https:///x", "https:///", False),
        ("https://charts.example.com:99999/x", "https://charts.example.com/", False),
        ("http://[::1]:8080/metrics", "http://[::1]:8080", True),
    ],
    ids=[
        "host-prefix", "host-prefix-slash", "path-prefix", "the-prefix-itself",
        "not-at-a-segment-boundary", "another-path", "scheme-and-host-case",
        "path-case-counts", "default-https-port-in-url", "default-http-port-in-url",
        "default-port-in-prefix", "another-port", "oci-default-port", "another-scheme",
        "oci-is-not-https", "a-longer-host", "the-host-in-the-path", "userinfo-in-url",
        "a-host-before-an-at", "userinfo-in-prefix", "dot-dot-segment",
        "encoded-dot-dot-segment", "encoded-slash", "backslashes", "control-characters",
        "prefix-with-a-query", "url-with-a-query", "unknown-scheme", "no-scheme", "no-host",
        "bad-port", "ipv6",
    ],
)  # fmt: skip
def test_a_url_matches_a_prefix_only_on_its_scheme_host_port_and_path_segments(
    url: str, prefix: str, matches: bool
) -> None:
    assert url_matches(url, prefix) is matches


@pytest.mark.parametrize(
    ("release_file", "patterns", "matches"),
    [
        ("releases/shop.yaml", ["releases/shop.yaml"], True),
        ("releases/team-a-web.yaml", ["releases/team-a-*.yaml"], True),
        ("releases/team-b-web.yaml", ["releases/team-a-*.yaml"], False),
        ("releases/shop.yml", ["releases/shop.yaml"], False),
        ("releases/Shop.yaml", ["releases/shop.yaml"], False),
        ("releases/shop.yaml", ["releases/blog.yaml", "releases/s*.yaml"], True),
        ("releases/shop.yaml", [], False),
        (None, ["*"], False),
    ],
    ids=[
        "exact", "glob", "another-team", "another-suffix", "case-counts", "any-pattern",
        "no-pattern", "no-file",
    ],
)  # fmt: skip
def test_a_release_file_matches_the_glob_patterns_of_a_key_or_credential(
    release_file: str | None, patterns: list[str], matches: bool
) -> None:
    assert release_matches(release_file, patterns) is matches


@pytest.mark.parametrize(
    "prefix",
    ["https://user:s3cret-pw@charts.example.com/", "https:///charts", "https://h/?token=s3cret-pw"],
    ids=["a-password", "no-host", "a-query"],
)
def test_a_url_prefix_that_is_no_prefix_is_refused_when_the_file_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    monkeypatch.delenv("CONVOY_CREDENTIALS", raising=False)
    (tmp_path / "credentials.yaml").write_text(
        f"credentials:\n  c: {{bearerToken: {{file: t}}, urls: ['{prefix}'], releases: ['*']}}\n"
    )
    with pytest.raises(ValueError) as caught:
        allowed_credential(tmp_path, "c", "provider.web.credentials", "releases/a.yaml", prefix)
    assert str(caught.value) == (
        "provider.web.credentials 'c': <state>/credentials.yaml: credentials.c.urls.0: not a "
        "URL prefix (an http://, https:// or oci:// URL with a host, without a user name, "
        "password, query or fragment)"
    )


# --- the operator's files and what to look for ----------------------------------------------


class Operator:
    """The operator's credentials, in a folder of their own outside the state directory
    (``$CONVOY_CREDENTIALS``): the state directory must not hold a secret at all."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.folder = folder
        folder.mkdir()
        self.file = folder / "credentials.yaml"
        self.entries: dict[str, str] = {}
        monkeypatch.setenv("CONVOY_CREDENTIALS", str(self.file))
        monkeypatch.delenv("CONVOY_KEYS", raising=False)

    def basic(self, name: str, password: str, urls: Iterable[str], releases: Iterable[str]) -> None:
        (self.folder / f"{name}-user").write_text(USER + "\n")
        (self.folder / f"{name}-password").write_text(password + "\n")
        auth = f"basicAuth: {{usernameFile: {name}-user, passwordFile: {name}-password}}"
        self._add(name, auth, urls, releases)

    def bearer(self, name: str, token: str, urls: Iterable[str], releases: Iterable[str]) -> None:
        (self.folder / f"{name}-token").write_text(token + "\n")
        self._add(name, f"bearerToken: {{file: {name}-token}}", urls, releases)

    def _add(self, name: str, auth: str, urls: Iterable[str], releases: Iterable[str]) -> None:
        self.entries[name] = (
            f"  {name}:\n    {auth}\n    urls: {json.dumps(list(urls))}\n"
            f"    releases: {json.dumps(list(releases))}\n"
        )
        self.file.write_text("credentials:\n" + "".join(self.entries.values()))


@pytest.fixture
def operator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Operator:
    return Operator(tmp_path / "operator", monkeypatch)


def forms(secret: str) -> list[str]:
    """The secret as it may be written: as is, base64 (a Secret's ``data``), and in a
    basic ``Authorization`` header."""
    encode = base64.b64encode
    return [secret, encode(secret.encode()).decode(), encode(f"{USER}:{secret}".encode()).decode()]


# --- chart repositories -----------------------------------------------------------------------

CHART_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: "{{ .Release.Name }}"}
spec:
  replicas: 1
  selector: {matchLabels: {app: "{{ .Release.Name }}"}}
  template:
    metadata: {labels: {app: "{{ .Release.Name }}"}}
    spec:
      containers: [{name: app, image: "example/web:{{ .Chart.Version }}"}]
"""


def chart(name: str = "web", version: str = "0.1.0") -> dict[str, str]:
    return {
        "Chart.yaml": f"apiVersion: v2\nname: {name}\nversion: {version}\n",
        "templates/deployment.yaml": CHART_DEPLOYMENT,
    }


def chart_release(name: str, repository: str, extra: str = "") -> str:
    """A Release of the chart ``web`` 0.1.0 from ``repository``."""
    return (
        f"apiVersion: convoy.dev/v1alpha1\nkind: Release\nmetadata: {{name: {name}}}\n"
        f"spec:\n  cluster: staging\n  namespace: {name}\n  source:\n"
        f"    render: {{type: Helm, repository: '{repository}', chart: web, "
        f"version: 0.1.0{extra}}}\n" + FAILURE_POLICY
    )


class Charts:
    """The operator's chart repository (basic auth, its password planted), the tenant's
    (no login, recording every request's headers), and the healthy Releases: ``web``,
    the operator's chart with the credential, and ``blog``, a plain one."""

    def __init__(self, s: Scenario, operator: Operator, tmp: Path, credential_for: str) -> None:
        self.s = s
        self.password = planted("chart-password")
        self.ours = HttpChartRepo(real_helm(), tmp / "ours", login=(USER, self.password))
        self.theirs = HttpChartRepo(real_helm(), tmp / "theirs")
        for repo in (self.ours, self.theirs):
            repo.publish(chart())
            repo.start()
        operator.basic("charts", self.password, [self.ours.url + "/"], [credential_for])
        s.app("blog")
        s.commit({"releases/web.yaml": chart_release("web", self.ours.url, CREDENTIALS)})

    def close(self) -> None:
        self.ours.stop()
        self.theirs.stop()

    def tenant_saw_no_credential(self) -> None:
        assert all("Authorization" not in headers for _, headers in self.theirs.headers)
        assert all(f not in repr(self.theirs.headers) for f in forms(self.password))


CREDENTIALS = ", credentials: charts"


@pytest.fixture
def charts(
    scenario: Scenario, operator: Operator, tmp_path: Path, helm_tools: Tools
) -> Iterator[Charts]:
    found = Charts(scenario, operator, tmp_path, "releases/*.yaml")
    yield found
    found.close()


def test_a_release_cannot_send_the_chart_password_to_a_repository_of_its_own(
    charts: Charts, operator: Operator, helm_tools: Tools
) -> None:
    s = charts.s
    s.commit({"releases/evil.yaml": chart_release("evil", charts.theirs.url, CREDENTIALS)})

    result = s.reconcile(minutes=0)

    message = refused(s, result, "evil", "SourceFailed")
    assert message == (
        f"chart 'web' from {charts.theirs.url}: spec.source.render.credentials 'charts': not "
        f"sent to {charts.theirs.url}: no prefix of its urls in {operator.file} holds that URL"
    )
    assert charts.theirs.requests == []  # nothing at all: refused before helm ran
    synced(s, "web", "blog")
    assert s.deployment_image("web") == "example/web:0.1.0"
    charts.tenant_saw_no_credential()
    helm = {"helm's command lines": "\n".join(helm_tools.call_log())}
    nowhere(s, forms(charts.password), [result], texts=helm)


def test_a_chart_in_git_cannot_send_the_password_to_a_dependency_repository_of_its_own(
    charts: Charts, operator: Operator
) -> None:
    s = charts.s
    s.commit(
        {
            "apps/evil/Chart.yaml": (
                "apiVersion: v2\nname: evil\nversion: 1.0.0\ndependencies:\n"
                f"- {{name: web, version: 0.1.0, repository: '{charts.theirs.url}'}}\n"
            ),
            "apps/evil/templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\n"
            "metadata: {name: evil}\ndata: {a: b}\n",
            "releases/evil.yaml": (
                "apiVersion: convoy.dev/v1alpha1\nkind: Release\nmetadata: {name: evil}\n"
                "spec:\n  cluster: staging\n  namespace: evil\n  source:\n    path: apps/evil\n"
                "    render: {type: Helm, credentials: charts}\n"
            ),
        }
    )

    result = s.reconcile(minutes=0)

    message = refused(s, result, "evil", "SourceFailed")
    assert message == (
        f"chart 'web' from {charts.theirs.url}: spec.source.render.credentials (for a "
        f"dependency in Chart.yaml) 'charts': not sent to {charts.theirs.url}: no prefix of "
        f"its urls in {operator.file} holds that URL"
    )
    assert charts.theirs.requests == []
    synced(s, "web", "blog")
    charts.tenant_saw_no_credential()
    nowhere(s, forms(charts.password), [result])


def test_a_release_cannot_send_the_registry_password_to_a_registry_of_its_own(
    scenario: Scenario,
    operator: Operator,
    helm_tools: Tools,
    registries: Callable[..., OciRegistry],
) -> None:
    s = scenario
    password = planted("registry-password")
    theirs = Recorder()  # where the tenant's registry would be: it records any request
    ours = registries("registry", (USER, password))
    try:
        ours.push(chart())
        operator.basic("registry", password, [ours.url], ["releases/*.yaml"])
        extra = ", plainHTTP: true, credentials: registry"
        their_url = theirs.url.replace("http://", "oci://") + "/charts"
        s.app("blog")
        s.commit(
            {
                "releases/web.yaml": chart_release("web", ours.url, extra),
                "releases/evil.yaml": chart_release("evil", their_url, extra),
            }
        )

        result = s.reconcile(minutes=0)
    finally:
        ours.stop()
        theirs.close()

    message = refused(s, result, "evil", "SourceFailed")
    assert message == (
        f"chart 'web' from {their_url}: spec.source.render.credentials 'registry': not sent "
        f"to {their_url}: no prefix of its urls in {operator.file} holds that URL"
    )
    assert theirs.requests == []
    synced(s, "web", "blog")
    assert s.deployment_image("web") == "example/web:0.1.0"
    helm = {"helm's command lines": "\n".join(helm_tools.call_log())}
    nowhere(s, forms(password), [result], texts=helm)


@pytest.fixture
def charts_of_web(
    scenario: Scenario, operator: Operator, tmp_path: Path, helm_tools: Tools
) -> Iterator[Charts]:
    """The credential bound to ``releases/web.yaml`` alone."""
    found = Charts(scenario, operator, tmp_path, "releases/web.yaml")
    yield found
    found.close()


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (CREDENTIALS, "spec.source.render.credentials 'charts': not for releases/evil.yaml: "
         "no pattern of its releases in {file} names that file; nothing was sent"),
        ("", "helm repo add failed (exit 1): "),
    ],
    ids=["naming-the-credential", "naming-none"],
)  # fmt: skip
def test_a_release_the_credential_does_not_name_gets_neither_it_nor_the_chart_it_fetched(
    charts_of_web: Charts, operator: Operator, extra: str, expected: str
) -> None:
    """The chart the credential fetched for ``web`` is in the state directory's cache
    under the same repository, chart and version: ``evil`` gets it by neither road."""
    charts = charts_of_web
    s = charts.s
    first = s.reconcile(minutes=0)
    synced(s, "web", "blog")
    charts.ours.headers.clear()
    s.commit({"releases/evil.yaml": chart_release("evil", charts.ours.url, extra)})

    result = s.reconcile(minutes=1)

    message = refused(s, result, "evil", "SourceFailed")
    prefix = f"chart 'web' from {charts.ours.url}: "
    assert message.startswith(prefix + expected.format(file=operator.file)), message
    # Nothing with the credential went out for evil; without it, the repository refused.
    assert all("Authorization" not in headers for _, headers in charts.ours.headers)
    assert not (s.state / "clusters" / "staging" / "evil").exists()
    synced(s, "web", "blog")
    nowhere(s, forms(charts.password), [first, result])


def test_a_redirect_to_another_host_gets_no_credential_from_helm(
    charts: Charts, tmp_path: Path
) -> None:
    """The operator's repository answers the index and the chart with a redirect to a
    server of another host name (127.0.0.2): helm follows it without the login."""
    s = charts.s
    elsewhere = HttpChartRepo(real_helm(), charts.ours.folder, host="127.0.0.2")
    elsewhere.start()
    try:
        for path in ("/index.yaml", "/web-0.1.0.tgz"):
            charts.ours.redirects[path] = f"{elsewhere.url}{path}"

        result = s.reconcile(minutes=0)

        assert result.code == 0, result.err
        assert sorted(p for p, _ in elsewhere.headers) == ["/index.yaml", "/web-0.1.0.tgz"]
        assert all("Authorization" not in headers for _, headers in elsewhere.headers)
        assert all(f not in repr(elsewhere.headers) for f in forms(charts.password))
        synced(s, "web", "blog")
        nowhere(s, forms(charts.password), [result])
    finally:
        elsewhere.stop()


# --- verification by metrics -------------------------------------------------------------------


def verification(provider: str, extra: str = "") -> str:
    return (
        FAILURE_POLICY + "  verification:\n    analyses:\n    - name: success-rate\n"
        f"      provider: {provider}\n"
        "      successCondition: result >= 0.95\n      interval: 1m\n      count: 1\n" + extra
    )


def web_provider(url: str) -> str:
    return f"{{web: {{url: '{url}', jsonPath: '$.data.ratio', timeout: 2s, credentials: metrics}}}}"


def prometheus_provider(url: str) -> str:
    return f"{{prometheus: {{address: '{url}', query: 'up', timeout: 2s, credentials: metrics}}}}"


class Metrics:
    """The operator's metrics endpoint (its token planted), the tenant's, and the healthy
    Releases: ``web``, verified by the operator's endpoint with the token, and ``blog``."""

    def __init__(self, s: Scenario, operator: Operator) -> None:
        self.s = s
        self.token = planted("metrics-token")
        self.ours, self.theirs = Recorder(), Recorder()
        operator.bearer("metrics", self.token, [self.ours.url + "/"], ["releases/*.yaml"])
        s.app("blog")
        s.app("web", spec_extra=verification(web_provider(f"{self.ours.url}/ratio")))

    def close(self) -> None:
        self.ours.close()
        self.theirs.close()

    def measure(self, *hostile: str) -> list[Result]:
        """A tick that applies, the Deployments made ready, and a tick that measures (a
        process of its own: every line it logs is on its stderr)."""
        results = [self.s.reconcile(minutes=0)]
        for name in ("web", "blog", *hostile):
            self.s.deployment_ready(name)
        results.append(self.s.cli_process("reconcile", "--now", format_time(T0 + MINUTE)))
        return results


@pytest.fixture
def metrics(scenario: Scenario, operator: Operator) -> Iterator[Metrics]:
    found = Metrics(scenario, operator)
    yield found
    found.close()


@pytest.mark.parametrize(
    ("provider", "field", "path"),
    [
        (web_provider, "provider.web.credentials", "/ratio"),
        (prometheus_provider, "provider.prometheus.credentials", "/api/v1/query"),
    ],
    ids=["web", "prometheus"],
)
def test_a_release_cannot_send_the_metrics_token_to_an_endpoint_of_its_own(
    metrics: Metrics, operator: Operator, provider: Callable[[str], str], field: str, path: str
) -> None:
    s = metrics.s
    url = metrics.theirs.url + ("/ratio" if path == "/ratio" else "")
    s.app("evil", spec_extra=verification(provider(url)))

    results = metrics.measure("evil")

    error = (
        f"{field} 'metrics': not sent to {metrics.theirs.url}{path}: no prefix of its urls in "
        f"{operator.file} holds that URL"
    )
    status = s.status("evil")
    assert status["lastAttempted"]["reason"] == "WaitingForVerification"
    assert status["lastAttempted"]["message"] == (
        f"waiting for verification: success-rate: Running, measurements fail: {error}"
    )
    lines = [line for line in results[1].err.splitlines() if "evil:" in line]
    assert lines == [f"WARNING evil: verification success-rate: {error}"], results[1].err
    assert metrics.theirs.requests == []
    assert [r.headers.get("Authorization") for r in metrics.ours.requests] == [
        f"Bearer {metrics.token}"
    ]  # web's measurement, with the token
    assert s.status("web")["rollout"]["state"] == "Succeeded"
    synced(s, "web", "blog")
    nowhere(s, forms(metrics.token), results)


def test_a_redirect_of_a_metrics_endpoint_is_not_followed(metrics: Metrics) -> None:
    s = metrics.s
    metrics.ours.redirect = metrics.theirs.url + "/ratio"

    results = metrics.measure()

    assert metrics.theirs.requests == []
    message = s.status("web")["lastAttempted"]["message"]
    assert message.endswith(f"GET {metrics.ours.url}/ratio: HTTP 302"), message
    assert s.status("web")["rollout"]["state"] == "Progressing"
    nowhere(s, forms(metrics.token), results)


# --- SOPS -------------------------------------------------------------------------------------


def sops_release(name: str, key: str) -> str:
    return (
        f"apiVersion: convoy.dev/v1alpha1\nkind: Release\nmetadata: {{name: {name}}}\n"
        f"spec:\n  cluster: staging\n  namespace: {name}\n  source:\n    path: apps/{name}\n"
        f"    decryption: {{provider: sops, key: {key}}}\n" + FAILURE_POLICY
    )


class Teams:
    """Two teams' keys, each bound to its team's Release files; team A's Release
    ``team-a-shop`` with its encrypted Secret (the plaintext planted), and ``blog``."""

    def __init__(self, s: Scenario, tmp: Path) -> None:
        self.s, self.tmp = s, tmp
        self.recipients = {team: age_key(s.state, f"{team}.agekey") for team in ("a", "b")}
        (s.state / "keys.yaml").write_text(
            "keys:\n"
            "  team-a: {age: {file: a.agekey}, releases: ['releases/team-a-*.yaml']}\n"
            "  team-b: {age: {file: b.agekey}, releases: ['releases/team-b-*.yaml']}\n"
        )
        self.password = planted("team-a-password")
        self.secret = encrypt(secret_yaml(self.password), self.recipients["a"], tmp)
        s.app("blog")
        self.app("team-a-shop", "team-a", self.secret)

    def app(self, name: str, key: str, secret: str) -> None:
        self.s.commit(
            {
                f"apps/{name}/deployment.yaml": DEPLOYMENT.replace("IMAGE", "1.0"),
                f"apps/{name}/configmap.yaml": CONFIGMAP,
                f"apps/{name}/secret.enc.yaml": secret,
                f"releases/{name}.yaml": sops_release(name, key),
            }
        )

    def their_own_secret(self) -> Path:
        """The one file that may hold the plaintext: team A's Secret in its namespace."""
        path = self.s.object_path("team-a-shop", "secret", "db")
        assert self.s.live("team-a-shop", "secret", "db")["stringData"] == {
            "password": self.password
        }
        return path


@pytest.fixture
def teams(scenario: Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Teams:
    monkeypatch.delenv("CONVOY_KEYS", raising=False)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return Teams(scenario, scratch)


def test_a_team_cannot_decrypt_another_teams_secret_into_its_own_namespace(
    teams: Teams,
) -> None:
    s = teams.s
    teams.app("team-b-evil", "team-a", teams.secret)  # a copy, and team A's key named

    result = s.reconcile(minutes=0)

    message = refused(s, result, "team-b-evil", "RenderFailed")
    assert message == (
        "spec.source.decryption.key: 'team-a': not for releases/team-b-evil.yaml: no pattern "
        "of its releases in <state>/keys.yaml names that file; nothing was decrypted"
    )
    assert not (s.state / "clusters" / "staging" / "team-b-evil").exists()
    synced(s, "team-a-shop", "blog")
    nowhere(s, forms(teams.password), [result], allowed=[teams.their_own_secret()])


def test_a_releaseset_member_is_bound_by_its_sets_file(teams: Teams) -> None:
    s = teams.s
    for team in ("a", "b"):
        s.commit(
            {
                f"releases/team-{team}-set.yaml": (
                    "apiVersion: convoy.dev/v1alpha1\nkind: ReleaseSet\n"
                    f"metadata: {{name: team-{team}-set}}\nspec:\n"
                    "  generators: [{list: {elements: [{cluster: staging}]}}]\n"
                    f"  template:\n    namespace: team-{team}-set\n"
                    "    source: {path: apps/team-a-shop, decryption: {provider: sops, "
                    "key: team-a}}\n"
                )
            }
        )

    result = s.reconcile(minutes=0)

    message = refused(s, result, "team-b-set-staging", "RenderFailed")
    assert "'team-a': not for releases/team-b-set.yaml: " in message
    assert s.live("team-a-set", "secret", "db")["stringData"] == {"password": teams.password}
    synced(s, "team-a-shop", "team-a-set-staging", "blog")
    allowed = [teams.their_own_secret(), s.object_path("team-a-set", "secret", "db")]
    nowhere(s, forms(teams.password), [result], allowed=allowed)


def with_vault(encrypted_json: str, vault: str, shape: str) -> str:
    """A sops document (JSON) whose metadata also names a Vault at ``vault``: beside its
    age recipient at the top (``top-level``, as sops writes one without key groups), in
    its one key group (``key-group``), or instead of age (``vault-only``)."""
    doc = json.loads(encrypted_json)
    metadata = doc["sops"]
    entry = {
        "vault_address": vault, "engine_path": "transit", "key_name": "ops",
        "created_at": "2026-11-29T12:00:00Z", "enc": "vault:v1:c2VjcmV0",
    }  # fmt: skip
    age = metadata.pop("age")
    if shape == "top-level":
        doc["sops"] = {"hc_vault": [entry], "age": age, **metadata}
    elif shape == "key-group":
        doc["sops"] = {"key_groups": [{"hc_vault": [entry], "age": age}], **metadata}
    else:
        doc["sops"] = {"hc_vault": [entry], **metadata}
    return json.dumps(doc)


@pytest.fixture
def vault() -> Iterator[Recorder]:
    found = Recorder()
    found.status = 500
    yield found
    found.close()


def test_a_document_that_names_only_a_vault_of_its_own_gets_no_connection_to_it(
    teams: Teams, vault: Recorder
) -> None:
    """sops would ask that Vault for the data key (it does, given the document as it
    is): it is given the age recipients only, finds none, and asks nobody."""
    s = teams.s
    plain = secret_yaml(planted("team-b-password"))
    encrypted = encrypt(plain, teams.recipients["b"], teams.tmp, output_type="json")
    document = with_vault(encrypted, vault.url, "vault-only")
    teams.app("team-b-evil", "team-b", document)

    result = s.reconcile(minutes=0)

    message = refused(s, result, "team-b-evil", "RenderFailed")
    assert message == (
        "apps/team-b-evil/secret.enc.yaml: no age recipient in its sops metadata: only age "
        "keys decrypt, and no other key service it names (Vault, a KMS, PGP) is asked"
    )
    assert vault.requests == []
    synced(s, "team-a-shop", "blog")
    nowhere(s, forms(teams.password), [result], allowed=[teams.their_own_secret()])


@pytest.mark.parametrize("shape", ["top-level", "key-group"])
def test_a_document_that_also_names_a_vault_decrypts_with_age_and_never_asks_it(
    teams: Teams, vault: Recorder, shape: str
) -> None:
    s = teams.s
    password = planted("team-b-password")
    encrypted = encrypt(secret_yaml(password), teams.recipients["b"], teams.tmp, output_type="json")
    teams.app("team-b-shop", "team-b", with_vault(encrypted, vault.url, shape))

    result = s.reconcile(minutes=0)

    assert result.code == 0, result.err
    assert s.live("team-b-shop", "secret", "db")["stringData"] == {"password": password}
    assert vault.requests == []
    synced(s, "team-a-shop", "team-b-shop", "blog")


# --- operator files that bind nothing, and secrets that would break a header -----------------


def test_a_credential_without_urls_or_releases_is_sent_nowhere_and_says_how_to_bind_it(
    scenario: Scenario, operator: Operator, metrics_free_endpoint: Recorder
) -> None:
    s = scenario
    token = planted("unbound-token")
    (operator.folder / "t").write_text(token)
    url = metrics_free_endpoint.url
    operator.file.write_text(
        "credentials:\n"
        f"  nourls: {{bearerToken: {{file: t}}, releases: ['releases/*.yaml']}}\n"
        f"  noreleases: {{bearerToken: {{file: t}}, urls: ['{url}']}}\n"
    )
    for name in ("nourls", "noreleases"):
        spec = verification(web_provider(f"{url}/ratio").replace("metrics", name))
        s.app(name, spec_extra=spec)
    s.app("blog")

    results = [s.reconcile(minutes=0)]
    for name in ("nourls", "noreleases", "blog"):
        s.deployment_ready(name)
    results.append(s.reconcile(minutes=1))

    said = {n: s.status(n)["lastAttempted"]["message"] for n in ("nourls", "noreleases")}
    assert said["nourls"].endswith(
        f"provider.web.credentials 'nourls': sent nowhere: {operator.file} gives it no urls; "
        "bind it to the URLs it is for with urls: [PREFIX, ...] (e.g. "
        "https://charts.example.com/)"
    ), said
    assert said["noreleases"].endswith(
        f"provider.web.credentials 'noreleases': used by no Release: {operator.file} gives it "
        "no releases; bind it to the Release files that may use it with releases: "
        "[PATTERN, ...] (e.g. releases/shop.yaml, releases/team-a-*.yaml)"
    ), said
    assert metrics_free_endpoint.requests == []
    synced(s, "blog")
    nowhere(s, forms(token), results)


@pytest.fixture
def metrics_free_endpoint() -> Iterator[Recorder]:
    found = Recorder()
    yield found
    found.close()


def test_a_key_without_releases_decrypts_for_none_and_says_how_to_bind_it(
    teams: Teams,
) -> None:
    s = teams.s
    (s.state / "keys.yaml").write_text("keys:\n  team-a: {age: {file: a.agekey}}\n")

    result = s.reconcile(minutes=0)

    message = refused(s, result, "team-a-shop", "RenderFailed")
    assert message == (
        "spec.source.decryption.key: 'team-a': used by no Release: <state>/keys.yaml gives it "
        "no releases; bind it to the Release files that may decrypt with it with releases: "
        "[PATTERN, ...] (e.g. releases/shop.yaml, releases/team-a-*.yaml)"
    )
    assert not (s.state / "clusters" / "staging" / "team-a-shop").exists()
    synced(s, "blog")
    nowhere(s, forms(teams.password), [result])


@pytest.mark.parametrize(
    ("written", "field"),
    [
        ("{secret}\r\nX-Injected: 1\n", "passwordFile"),
        ("{secret}\nX-Injected: 1\n", "passwordFile"),
        ("{secret}\x00\n", "passwordFile"),
        ("reader\r\nX-Injected: 1\n", "usernameFile"),
    ],
    ids=["crlf-in-a-password", "lf-in-a-password", "nul-in-a-password", "crlf-in-a-username"],
)
def test_a_chart_credential_with_a_control_character_is_refused_and_never_sent(
    charts: Charts, operator: Operator, written: str, field: str
) -> None:
    s = charts.s
    name = "charts-password" if field == "passwordFile" else "charts-user"
    (operator.folder / name).write_text(written.format(secret=charts.password))

    result = s.reconcile(minutes=0)

    message = refused(s, result, "web", "SourceFailed")
    assert message == (
        f"chart 'web' from {charts.ours.url}: spec.source.render.credentials 'charts': "
        f"{operator.file}: credentials.charts.basicAuth.{field}: {operator.folder / name}: "
        "holds a control character (CR, LF, NUL, ...), refused"
    )
    assert charts.ours.requests == []
    assert "X-Injected" not in result.err
    synced(s, "blog")
    nowhere(s, forms(charts.password), [result])


def test_a_metrics_token_with_a_control_character_is_refused_and_never_sent(
    metrics: Metrics, operator: Operator
) -> None:
    s = metrics.s
    (operator.folder / "metrics-token").write_text(f"{metrics.token}\r\nX-Injected: 1\n")

    results = metrics.measure()

    message = s.status("web")["lastAttempted"]["message"]
    assert message.endswith(
        f"provider.web.credentials 'metrics': {operator.file}: "
        f"credentials.metrics.bearerToken.file: {operator.folder / 'metrics-token'}: holds a "
        "control character (CR, LF, NUL, ...), refused"
    ), message
    assert metrics.ours.requests == []
    synced(s, "blog")
    nowhere(s, forms(metrics.token), results)


def test_a_credential_of_the_state_directory_is_named_relative_to_it(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator's files in the state directory itself: a message names them
    ``<state>/...``, never where the state directory is."""
    s = scenario
    monkeypatch.delenv("CONVOY_CREDENTIALS", raising=False)
    endpoint = Recorder()
    try:
        s.state.mkdir()
        (s.state / "metrics-token").write_text("t0ken\x00\n")
        (s.state / "credentials.yaml").write_text(
            "credentials: {metrics: {bearerToken: {file: metrics-token}, "
            f"urls: ['{endpoint.url}'], releases: [releases/web.yaml]}}}}\n"
        )
        s.app("web", spec_extra=verification(web_provider(f"{endpoint.url}/ratio")))
        s.reconcile(minutes=0)
        s.deployment_ready("web")
        result = s.cli_process("reconcile", "--now", format_time(T0 + MINUTE))
    finally:
        endpoint.close()

    error = (
        "provider.web.credentials 'metrics': <state>/credentials.yaml: "
        "credentials.metrics.bearerToken.file: <state>/metrics-token: holds a control "
        "character (CR, LF, NUL, ...), refused"
    )
    assert s.status("web")["lastAttempted"]["message"].endswith(error)
    assert result.err.splitlines() == [f"WARNING web: verification success-rate: {error}"]
    assert endpoint.requests == []
    assert str(s.state) not in s.repo.git.log("-p", "--all")
