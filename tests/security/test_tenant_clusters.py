"""Whoever commits to the GitOps repository names a Cluster's target, never places one:
a named kubeconfig is one the operator placed (in the state directory, exactly a file of
``$KUBECONFIG`` or ``~/.kube/config``, or under a root of ``<state>/kubeconfigs.yaml``),
and never a file of the repository, of what convoy-batch writes or of a directory
cluster's folder; a directory cluster's folder is one of its own, directly inside
``<state>/clusters/`` or under an operator's root, never the state directory's other
folders nor another Cluster's.

Each hostile case runs a tick through the CLI on a real repository, beside two healthy
Releases, with a secret of the operator's planted outside the repository: the hostile
Release is ``ClusterNotFound`` in one line (stderr and status), the others are Synced,
no command of the repository's ran, the tenant's server got no request and the secret
is nowhere (output, the repository's files and history, the state directory)."""

import ast
import json
import os
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import convoy_batch
from convoy_batch.deployers.targets import TEMPORARY_PREFIXES, WRITTEN
from convoy_batch.ticks.location import default_state_dir
from tests.support.loopback import Exchange, Loopback
from tests.support.scenario import Result, Scenario, cluster_yaml, release_yaml
from tests.support.tenant import nowhere, refused, synced

NOW = "2026-11-29T12:00:00Z"
EXEC_API = "client.authentication.k8s.io/v1beta1"
HEALTHY = ("web", "api")
"""The two Releases beside each hostile one."""


# --- the tenant's server: records what reaches it -------------------------------------


class TenantServer:
    """A loopback HTTP server of the tenant's choosing: it records every request (its
    line and headers) and answers 503."""

    def __init__(self) -> None:
        self._server = Loopback(self._handle)
        self.url = self._server.url

    @staticmethod
    def _handle(exchange: Exchange) -> None:
        status = {"kind": "Status", "message": "the tenant's server"}
        exchange.json(status, 503)

    @property
    def requests(self) -> list[str]:
        """Each request's line and headers."""
        return [f"{r.line}\n{r.headers}" for r in self._server.requests]

    def close(self) -> None:
        self._server.close()


@pytest.fixture
def tenant_server() -> Iterator[TenantServer]:
    server = TenantServer()
    try:
        yield server
    finally:
        server.close()


# --- the operator's secret and the tenant's files -----------------------------------


@dataclass
class Tenant:
    s: Scenario
    secret: str
    """What only the operator holds (a token), in :attr:`secret_file`."""
    secret_file: Path
    marker: Path
    """Made by any command of the repository's that runs."""
    server: TenantServer


@pytest.fixture
def tenant(scenario: Scenario, tmp_path: Path, tenant_server: TenantServer) -> Tenant:
    secret = f"operator-secret-{secrets.token_hex(16)}"
    secret_file = tmp_path / "operator-secret"
    secret_file.write_text(secret)
    return Tenant(scenario, secret, secret_file, tmp_path / "tenant-command-ran", tenant_server)


def kubeconfig(server: str, user: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }


def exec_plugin(t: Tenant) -> dict[str, Any]:
    """A user whose credential plugin is a command of the tenant's: it marks that it ran
    and sends the operator's secret to the tenant's server as its token."""
    credential = {"apiVersion": EXEC_API, "kind": "ExecCredential", "status": {"token": "%s"}}
    script = f"touch '{t.marker}'; printf '{json.dumps(credential)}' \"$(cat '{t.secret_file}')\""
    return {"exec": {"apiVersion": EXEC_API, "command": "/bin/sh", "args": ["-c", script]}}


def token_file(t: Tenant) -> dict[str, Any]:
    """A user whose token is the operator's secret file, sent to the tenant's server."""
    return {"tokenFile": str(t.secret_file)}


def kube_cluster(name: str, path: str) -> str:
    return (
        f"apiVersion: convoy.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\n"
        f"spec:\n  vars: {{env: {name}}}\n  kubernetes: {{kubeconfig: '{path}'}}\n"
    )


def directory_cluster(name: str, path: str) -> str:
    return cluster_yaml(name, vars=f"{{env: {name}}}", directory=f"{{path: '{path}'}}")


def on(cluster: str, name: str = "evil") -> str:
    return release_yaml(name).replace("cluster: staging", f"cluster: {cluster}")


def hostile_tick(t: Tenant, files: dict[str, str], cluster: str = "tenant") -> Result:
    """The two healthy Releases, the tenant's files and a Release ``evil`` on ``cluster``,
    then one tick of every Release through the CLI."""
    s = t.s
    s.app("web")
    s.app("api")
    s.commit(files, "the tenant's files")
    s.app("evil", release=on(cluster))
    return s.cli_process("reconcile", "--all", "--now", NOW)


def not_started(t: Tenant, result: Result, file: str) -> None:
    """The tick did not start: its HEAD holds ``file`` in the state directory (one line,
    exit code 2), and nothing the tenant named was read or run."""
    assert result.code == 2, result.err
    assert result.err.splitlines() == [
        f"convoy-batch: the GitOps repository's HEAD holds files of the state directory "
        f"({file}): a commit never holds the operator's files or convoy-batch's state; "
        "remove them from git (git rm -r --cached) and check the state directory, then "
        "tick again"
    ]
    assert_harmless(t, result)


def refusal(t: Tenant, result: Result, name: str = "evil") -> str:
    """The Release's one line (stderr, and its status), the rest of the tick healthy."""
    message = refused(t.s, result, name, "ClusterNotFound", healthy=HEALTHY, logged=True)
    return f"{name}: ClusterNotFound: {message}"


def assert_harmless(t: Tenant, result: Result) -> None:
    """No command of the repository's ran, the tenant's server got no request, and the
    operator's secret is nowhere."""
    assert not t.marker.exists(), "a command of the repository's ran"
    assert t.server.requests == []
    requests = {f"request {i} to the tenant": r for i, r in enumerate(t.server.requests)}
    nowhere(t.s, t.secret, [result], texts=requests)


def kubeconfig_line(written: str, problem: str) -> str:
    field = "clusters/tenant.yaml: spec.kubernetes.kubeconfig"
    return f"evil: ClusterNotFound: {field}: {written!r} {problem}"


def objects_of_evil(folder: Path) -> list[Path]:
    """The files a deployer wrote for Release evil's ConfigMap under ``folder``."""
    return list(folder.rglob("evil-config.yaml"))


# --- kubeconfigs of the repository's --------------------------------------------------

COMMITTED = {
    # id: (how the Cluster names the committed file, the user of the kubeconfig)
    "exec-plugin-named-through-the-state-directory": ("../repo/kube/evil.yaml", exec_plugin),
    "exec-plugin-named-absolutely": ("REPO/kube/evil.yaml", exec_plugin),
    "token-file-sent-to-the-tenants-server": ("../repo/kube/evil.yaml", token_file),
}


@pytest.mark.parametrize(("named", "user"), COMMITTED.values(), ids=COMMITTED.keys())
def test_a_kubeconfig_committed_in_the_repository_is_refused_whatever_the_roots(
    tenant: Tenant, tmp_path: Path, named: str, user: Any
) -> None:
    t, s = tenant, tenant.s
    s.allow_kubeconfigs(tmp_path)  # a root holding the repository changes nothing
    written = named.replace("REPO", str(s.root))
    text = yaml.safe_dump(kubeconfig(t.server.url, user(t)))
    result = hostile_tick(
        t, {"kube/evil.yaml": text, "clusters/tenant.yaml": kube_cluster("tenant", written)}
    )
    line = refusal(t, result)
    assert line.startswith(
        kubeconfig_line(written, "lies in the GitOps repository's working tree; ")
    )
    assert "<state>/kubeconfigs.yaml" in line and str(s.state) not in line
    assert_harmless(t, result)


def test_a_kubeconfig_written_by_a_directory_cluster_is_refused(
    tenant: Tenant, tmp_path: Path
) -> None:
    t, s = tenant, tenant.s
    s.allow_kubeconfigs(tmp_path)
    config = {**kubeconfig(t.server.url, exec_plugin(t)), "metadata": {"name": "kc"}}
    s.app("writer", extra={"kubeconfig.yaml": yaml.safe_dump(config)})
    assert s.reconcile("writer").code == 0
    written = "clusters/staging/writer/config/kc.yaml"  # where the object landed
    assert "exec" in (s.state / written).read_text()

    result = hostile_tick(t, {"clusters/tenant.yaml": kube_cluster("tenant", written)})

    line = refusal(t, result)
    assert line.startswith(
        kubeconfig_line(written, "lies in <state>/clusters, which convoy-batch writes; ")
    )
    assert_harmless(t, result)


def test_a_kubeconfig_written_by_an_absolute_directory_cluster_is_refused(
    tenant: Tenant, tmp_path: Path
) -> None:
    t, s = tenant, tenant.s
    root = tmp_path / "clusters-root"
    s.allow_directories(root)
    s.allow_kubeconfigs(root)  # the operator lets kubeconfigs be there too: still refused
    config = {**kubeconfig(t.server.url, token_file(t)), "metadata": {"name": "kc"}}
    s.commit({"clusters/drop.yaml": directory_cluster("drop", str(root / "drop"))})
    s.app("writer", extra={"kubeconfig.yaml": yaml.safe_dump(config)}, release=on("drop", "writer"))
    assert s.reconcile("writer").code == 0
    written = str(root / "drop" / "writer" / "config" / "kc.yaml")
    assert "tokenFile" in Path(written).read_text()

    result = hostile_tick(t, {"clusters/tenant.yaml": kube_cluster("tenant", written)})

    line = refusal(t, result)
    assert line.startswith(
        kubeconfig_line(written, "lies in the folder of directory Cluster 'drop'; ")
    )
    assert_harmless(t, result)


@pytest.mark.parametrize("name", WRITTEN)
def test_no_kubeconfig_is_read_from_what_convoy_batch_writes_in_the_state_directory(
    tenant: Tenant, tmp_path: Path, name: str
) -> None:
    t, s = tenant, tenant.s
    s.allow_kubeconfigs(tmp_path)
    written = f"{name}/evil.yaml" if "." not in name else name
    result = hostile_tick(t, {"clusters/tenant.yaml": kube_cluster("tenant", written)})
    line = refusal(t, result)
    assert line.startswith(
        kubeconfig_line(written, f"lies in <state>/{name}, which convoy-batch writes; ")
    )
    assert_harmless(t, result)


def test_no_kubeconfig_is_read_from_a_temporary_folder_of_convoy_batch(
    tenant: Tenant, tmp_path: Path
) -> None:
    t, s = tenant, tenant.s
    s.allow_kubeconfigs(Path(tempfile.gettempdir()))
    folder = Path(tempfile.mkdtemp(prefix="convoy-exports-"))
    try:
        written = str(folder / "0" / "kube" / "evil.yaml")  # as a source's export would be
        result = hostile_tick(t, {"clusters/tenant.yaml": kube_cluster("tenant", written)})
    finally:
        folder.rmdir()
    line = refusal(t, result)
    assert line.startswith(kubeconfig_line(written, "lies in a temporary folder of convoy-batch; "))
    assert_harmless(t, result)


def test_every_temporary_folder_of_convoy_batch_is_one_no_kubeconfig_is_read_from() -> None:
    package = Path(convoy_batch.__file__).parent
    made = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "prefix":
                value = node.value
                if isinstance(value, ast.Constant) and str(value.value).startswith("convoy-"):
                    made.add(value.value)
    assert made == set(TEMPORARY_PREFIXES)


@pytest.mark.parametrize(
    "named", ["../elsewhere/kc", "TMP/elsewhere/kc"], ids=["relatively", "absolutely"]
)
def test_a_kubeconfig_outside_the_state_directory_and_every_root_is_refused(
    tenant: Tenant, tmp_path: Path, named: str
) -> None:
    t = tenant
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "kc").write_text(yaml.safe_dump(kubeconfig(t.server.url, token_file(t))))
    written = named.replace("TMP", str(tmp_path))
    result = hostile_tick(t, {"clusters/tenant.yaml": kube_cluster("tenant", written)})
    line = refusal(t, result)
    problem = "is outside the state directory and no root of <state>/kubeconfigs.yaml allows it"
    assert line.startswith(kubeconfig_line(written, problem)), line
    assert_harmless(t, result)


def test_a_kubeconfigs_file_the_repository_committed_into_the_state_directory_stops_the_tick(
    tenant: Tenant, tmp_path: Path
) -> None:
    t, s = tenant, tenant.s
    s.state = default_state_dir(s.root)  # inside the working tree, as by default
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "kc").write_text(yaml.safe_dump(kubeconfig(t.server.url, token_file(t))))
    s.repo.git.add("-f", s.allow_kubeconfigs(tmp_path))  # committed past .git/info/exclude
    result = hostile_tick(
        t, {"clusters/tenant.yaml": kube_cluster("tenant", str(elsewhere / "kc"))}
    )
    not_started(t, result, ".convoy/kubeconfigs.yaml")


def test_a_kubeconfig_committed_into_a_state_directory_inside_the_working_tree_stops_the_tick(
    tenant: Tenant,
) -> None:
    t, s = tenant, tenant.s
    s.state = default_state_dir(s.root)
    text = yaml.safe_dump(kubeconfig(t.server.url, exec_plugin(t)))
    s.state.mkdir()
    (s.state / "evil.yaml").write_text(text)
    s.repo.git.add("-f", s.state / "evil.yaml")
    result = hostile_tick(t, {"clusters/tenant.yaml": kube_cluster("tenant", "evil.yaml")})
    not_started(t, result, ".convoy/evil.yaml")


VIEWS = {
    "diff-live": ("diff", "evil", "--live"),
    "diff-all": ("diff", "--all"),
    "plan": ("plan", "evil", "--now", NOW),
}


@pytest.mark.parametrize("command", VIEWS.values(), ids=VIEWS.keys())
def test_the_views_refuse_a_kubeconfig_of_the_repositorys_too(
    tenant: Tenant, tmp_path: Path, command: tuple[str, ...]
) -> None:
    t, s = tenant, tenant.s
    s.allow_kubeconfigs(tmp_path)
    text = yaml.safe_dump(kubeconfig(t.server.url, exec_plugin(t)))
    s.app("web")
    written = "../repo/kube/evil.yaml"
    s.commit({"kube/evil.yaml": text, "clusters/tenant.yaml": kube_cluster("tenant", written)})
    s.app("evil", release=on("tenant"))

    result = s.cli_process(*command)

    assert result.code != 0, result.out
    assert "Traceback" not in result.err
    expected = kubeconfig_line(written, "lies in the GitOps repository's working tree; ")
    assert expected in result.out + result.err
    assert_harmless(t, result)


# --- kubeconfigs the operator placed --------------------------------------------------


def operator_kubeconfig(t: Tenant, path: Path, token: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubeconfig(t.server.url, {"token": token})))


PLACED = {
    # id: (where the operator placed it, how the Cluster names it)
    "under-a-root": ("TMP/operator/prod.kubeconfig", "TMP/operator/prod.kubeconfig"),
    "under-a-root-of-CONVOY_KUBECONFIGS": (
        "TMP/operator/prod.kubeconfig",
        "TMP/operator/prod.kubeconfig",
    ),
    "relative-in-the-state-directory": ("STATE/kube/prod.kubeconfig", "kube/prod.kubeconfig"),
    "in-a-state-directory-in-the-working-tree": (
        "STATE/kube/prod.kubeconfig",
        "kube/prod.kubeconfig",
    ),
    "listed-in-KUBECONFIG": ("TMP/home/kubeconfig", "TMP/home/kubeconfig"),
    "the-home-kube-config": ("TMP/home/.kube/config", "~/.kube/config"),
}


@pytest.mark.parametrize(("placed", "named"), PLACED.values(), ids=PLACED.keys())
def test_a_kubeconfig_the_operator_placed_is_used(
    tenant: Tenant,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    placed: str,
    named: str,
) -> None:
    """The tenant's server stands in for the operator's cluster: it gets the operator's
    token, so the kubeconfig was loaded (its 503 makes the Release ClusterUnavailable)."""
    t, s = tenant, tenant.s
    case = request.node.callspec.id
    token = f"operator-token-{secrets.token_hex(8)}"
    if case == "in-a-state-directory-in-the-working-tree":
        s.state = default_state_dir(s.root)  # untracked there: the operator's
    path = Path(placed.replace("TMP", str(tmp_path)).replace("STATE", str(s.state)))
    operator_kubeconfig(t, path, token)
    if case == "under-a-root":
        s.allow_kubeconfigs(path.parent)
    if case == "under-a-root-of-CONVOY_KUBECONFIGS":
        roots = tmp_path / "etc" / "roots.yaml"
        roots.parent.mkdir()
        roots.write_text(f"roots: ['{path.parent}']\n")
        monkeypatch.setenv("CONVOY_KUBECONFIGS", str(roots))
    if case == "listed-in-KUBECONFIG":
        monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'none'}{os.pathsep}{path}")
    if case == "the-home-kube-config":
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
    written = named.replace("TMP", str(tmp_path))
    result = hostile_tick(t, {"clusters/tenant.yaml": kube_cluster("tenant", written)})
    assert result.code == 1, result.err
    assert s.status("evil")["lastAttempted"]["reason"] == "ClusterUnavailable", result.err
    assert any(f"Bearer {token}" in sent for sent in t.server.requests)
    synced(s, *HEALTHY)


# --- directory clusters ---------------------------------------------------------------

NOT_IN_CLUSTERS = [
    "renders",
    "inventory",
    "cache",
    "locks",
    "intents",
    ".",
    "",
    "clusters",
    "clusters/staging/web",
    "clusters/../renders",
    "ticks.json",
]


@pytest.mark.parametrize("written", NOT_IN_CLUSTERS)
def test_a_directory_cluster_may_not_write_over_the_state_directory(
    tenant: Tenant, written: str
) -> None:
    t, s = tenant, tenant.s
    result = hostile_tick(t, {"clusters/tenant.yaml": directory_cluster("tenant", written)})
    line = refusal(t, result)
    where = f"evil: ClusterNotFound: clusters/tenant.yaml: spec.directory.path: {written!r} "
    assert line.startswith(where + "is not a folder directly inside <state>/clusters/ "), line
    assert str(s.state) not in line
    assert not objects_of_evil(s.state)  # none of its objects was written
    assert_harmless(t, result)


@pytest.mark.parametrize(
    ("written", "problem"),
    [
        pytest.param("STATE/renders", "lies in the state directory", id="in-the-state-directory"),
        pytest.param("TMP", "holds the state directory", id="holding-the-state-directory"),
    ],
)
def test_an_absolute_directory_cluster_may_not_write_over_the_state_directory_whatever_the_roots(
    tenant: Tenant, tmp_path: Path, written: str, problem: str
) -> None:
    t, s = tenant, tenant.s
    s.allow_directories(tmp_path)
    path = written.replace("STATE", str(s.state)).replace("TMP", str(tmp_path))
    result = hostile_tick(t, {"clusters/tenant.yaml": directory_cluster("tenant", path)})
    line = refusal(t, result)
    named = path.replace(str(s.state), "<state>")  # messages never say where the state is
    assert line.startswith(
        f"evil: ClusterNotFound: clusters/tenant.yaml: spec.directory.path: {named!r} {problem}"
    )
    assert not objects_of_evil(tmp_path)
    assert_harmless(t, result)


def test_a_directories_file_the_repository_committed_into_the_state_directory_stops_the_tick(
    tenant: Tenant, tmp_path: Path
) -> None:
    t, s = tenant, tenant.s
    s.state = default_state_dir(s.root)  # inside the working tree, as by default
    s.state.mkdir()
    s.allow_directories(tmp_path)
    s.repo.git.add("-f", s.state / "directories.yaml")  # committed past .git/info/exclude
    path = str(tmp_path / "anywhere")
    result = hostile_tick(t, {"clusters/tenant.yaml": directory_cluster("tenant", path)})
    not_started(t, result, ".convoy/directories.yaml")
    assert not (tmp_path / "anywhere").exists()


def test_a_new_cluster_may_not_take_another_clusters_folder(tenant: Tenant) -> None:
    t, s = tenant, tenant.s
    result = hostile_tick(
        t, {"clusters/tenant.yaml": directory_cluster("tenant", "clusters/staging")}
    )
    line = refusal(t, result)
    assert line.startswith(
        "evil: ClusterNotFound: clusters/tenant.yaml: spec.directory.path: 'clusters/staging' "
        "is also the folder of Cluster 'staging': Clusters that share a folder are refused"
    ), line
    assert not objects_of_evil(s.state)
    assert_harmless(t, result)


def test_clusters_sharing_a_folder_apart_from_their_own_are_each_refused(tenant: Tenant) -> None:
    t, s = tenant, tenant.s
    s.commit({"clusters/other.yaml": directory_cluster("other", "clusters/shared")})
    s.app("sneak", release=on("other", "sneak"))
    result = hostile_tick(
        t, {"clusters/tenant.yaml": directory_cluster("tenant", "./clusters/shared")}
    )
    assert result.code == 1
    summary = sorted(
        ln
        for ln in result.err.splitlines()
        if "ClusterNotFound" in ln and not ln.startswith("ERROR")
    )
    assert summary == [
        "evil: ClusterNotFound: clusters/tenant.yaml: spec.directory.path: './clusters/shared' "
        "is also the folder of Cluster 'other': Clusters that share a folder are refused, but "
        "one in its own default clusters/<its name>",
        "sneak: ClusterNotFound: clusters/other.yaml: spec.directory.path: 'clusters/shared' "
        "is also the folder of Cluster 'tenant': Clusters that share a folder are refused, but "
        "one in its own default clusters/<its name>",
    ]
    assert not (s.state / "clusters" / "shared").exists()
    synced(s, *HEALTHY)
    assert_harmless(t, result)


def test_a_cluster_nested_in_another_clusters_folder_refuses_both(
    tenant: Tenant, tmp_path: Path
) -> None:
    t, s = tenant, tenant.s
    root = tmp_path / "clusters-root"
    s.allow_directories(root)
    s.commit({"clusters/outer.yaml": directory_cluster("outer", str(root / "outer"))})
    s.app("wide", release=on("outer", "wide"))
    inner = str(root / "outer" / "wide")  # the namespace folder of Release wide
    result = hostile_tick(t, {"clusters/tenant.yaml": directory_cluster("tenant", inner)})
    lines = sorted(ln for ln in result.err.splitlines() if not ln.startswith("ERROR"))
    assert lines == [
        f"evil: ClusterNotFound: clusters/tenant.yaml: spec.directory.path: {inner!r} lies in "
        "the folder of Cluster 'outer': Clusters that share a folder are refused, but one in "
        "its own default clusters/<its name>",
        f"wide: ClusterNotFound: clusters/outer.yaml: spec.directory.path: {str(root / 'outer')!r}"
        " holds the folder of Cluster 'tenant': Clusters that share a folder are refused, but "
        "one in its own default clusters/<its name>",
    ]
    assert not root.exists()
    assert_harmless(t, result)


def test_a_cluster_in_its_own_default_folder_keeps_it_when_another_claims_it(
    tenant: Tenant,
) -> None:
    t, s = tenant, tenant.s
    s.commit({"clusters/staging.yaml": directory_cluster("staging", "clusters/staging")})
    result = hostile_tick(
        t, {"clusters/tenant.yaml": directory_cluster("tenant", "clusters/staging")}
    )
    refusal(t, result)  # web and api, on staging, synced
    assert s.live("web", "configmap", "web-config")["data"] == {"env": "staging"}


# --- the rules hold everywhere ----------------------------------------------------------

OPERATOR_FILES = {"kubeconfigs.yaml", "directories.yaml"}


def test_a_tick_writes_nothing_in_the_state_directory_but_what_the_rules_list(
    scenario: Scenario,
) -> None:
    s = scenario
    s.allow_kubeconfigs(s.root.parent)
    s.app("web")
    s.app("api")
    assert s.reconcile(minutes=0).code == 0
    s.commit({"releases/api.yaml": None}, "api goes")
    assert s.reconcile("--all", minutes=1).code == 0
    written = {p.name for p in s.state.iterdir()} - OPERATOR_FILES
    assert written <= set(WRITTEN), written - set(WRITTEN)


BUILDERS = {
    "make_deployer",
    "from_cluster",
    "DirectoryDeployer",
    "SimulatedDeployer",
    "KubernetesDeployer",
    "KubeApi",
    "load_configuration",
    "deployer_factory",
}
BUILT_IN = {
    "engine/tick.py": {"deployer_factory"},
    "deployers/factory.py": {"DirectoryDeployer", "SimulatedDeployer", "from_cluster"},
    "deployers/kubernetes.py": {"KubeApi", "load_configuration", "KubernetesDeployer"},
}


def test_no_module_makes_a_deployer_but_the_tick_which_checks_its_target_first() -> None:
    package = Path(convoy_batch.__file__).parent
    found: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                called = node.func
                name = (
                    called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
                )
                if name in BUILDERS:
                    found.setdefault(path.relative_to(package).as_posix(), set()).add(name)
    assert found == BUILT_IN
