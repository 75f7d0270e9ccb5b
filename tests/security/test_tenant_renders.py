"""Whoever can commit to the GitOps repository must not own the machine: what a render
may read, and how much it may take. Each hostile Release is committed beside two healthy
ones and a tick runs through the CLI, with the real kustomize (kubectl v1.35) and helm;
a secret planted outside the repository (a kustomization, a values file, a chart, a
private remote in the state directory's source cache) must appear nowhere afterwards:
not on stdout or stderr, not in a status, not in the repository's history, not in any
file of the state directory (the render store and the directory cluster among them).
"""

import hashlib
import json
import secrets
import urllib.parse
from pathlib import Path

import pytest

from convoy_batch.errors import RenderFailed
from convoy_batch.models import Cluster, Release
from convoy_batch.renderers import kustomize
from convoy_batch.renderers.job import Job
from convoy_batch.repo.gitops import GitOpsRepo
from convoy_batch.repo.source import SourceResolver
from tests.renderers.test_renderers import last_attempt, release
from tests.support.gitfixtures import commit_symlink, make_repo
from tests.support.renderer_tools import Tools, kustomize_kubectl, real_helm
from tests.support.scenario import Result, Scenario
from tests.support.tenant import nowhere, refused, synced

HEALTHY = ("good", "plain")
"""The two Releases beside each hostile one: one of the same renderer, one Plain."""


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tools:
    monkeypatch.delenv("CONVOY_KUBECTL", raising=False)
    monkeypatch.delenv("CONVOY_RENDERERS", raising=False)
    return Tools(tmp_path / "bin", monkeypatch)


@pytest.fixture
def kubectl(tools: Tools, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVOY_KUBECTL", kustomize_kubectl())


@pytest.fixture
def helm(tools: Tools) -> None:
    tools.recorded("helm", real_helm())


@pytest.fixture
def secret() -> str:
    return f"planted-{secrets.token_hex(12)}"


def configmap(name: str, value: str = "ok") -> str:
    return (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{value: {value}}}\n"
    )


def plant_kustomization(folder: Path, secret: str) -> Path:
    """A kustomization whose ConfigMap holds ``secret``, outside the repository."""
    folder.mkdir(parents=True)
    (folder / "kustomization.yaml").write_text("resources: [secret.yaml]\n")
    (folder / "secret.yaml").write_text(configmap("stolen", secret))
    (folder / "secret.txt").write_text(secret)
    return folder


def climb(target: Path) -> str:
    """A relative path from wherever the export is to ``target``: enough ``..`` to reach
    the root, then the rest (the export's own folder is unknown to a tenant)."""
    return "../" * 16 + str(target).lstrip("/")


# --- What every hostile tick must show ------------------------------------------------------


def hostile_refused(s: Scenario, result: Result, reason: str, fragment: str) -> str:
    """The hostile Release failed with ``reason`` (:func:`tests.support.tenant.refused`), its
    message naming ``fragment``; the healthy Releases are Synced. Returns the message."""
    message = refused(s, result, "hostile", reason, healthy=HEALTHY)
    assert fragment in message, message
    return message


# --- Kustomize: the kustomizations a build loads stay in the repository ---------------------

BASE = {
    "apps/base/kustomization.yaml": "resources: [config.yaml]\n",
    "apps/base/config.yaml": configmap("base"),
}


def kustomize_beside(s: Scenario, hostile: dict[str, str]) -> Result:
    """Commit ``hostile`` files under ``apps/hostile`` (a Kustomize Release), a healthy
    overlay of ``apps/base`` and a Plain app, and run a tick."""
    files: dict[str, str | None] = dict(BASE)
    files["apps/good/kustomization.yaml"] = "resources: [../base]\nnamePrefix: good-\n"
    files |= {f"apps/hostile/{name}": text for name, text in hostile.items()}
    for name in ("good", "hostile"):
        files[f"releases/{name}.yaml"] = release(name, f"apps/{name}", "{type: Kustomize}")
    s.commit(files, "a hostile kustomization")
    s.app("plain")
    return s.reconcile(minutes=0)


CLIMBS = [
    pytest.param("resources: [{far}]\n", "resources[0]", id="resources-climbing"),
    pytest.param("resources: [{abs}]\n", "resources[0]", id="resources-absolute"),
    pytest.param("bases: [{far}]\n", "bases[0]", id="bases"),
    pytest.param(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources: [../base]\ncomponents: [{abs}]\n",
        "components[0]",
        id="components",
    ),
    pytest.param(
        "configMapGenerator: [{{name: c, files: [stolen={far}/secret.txt]}}]\n",
        "configMapGenerator[0].files[0]",
        id="generator-file",
    ),
    pytest.param("resources: [../base]\npatches: [{{path: {abs}/secret.yaml}}]\n",
                 "patches[0].path", id="patch-file"),
]  # fmt: skip


@pytest.mark.parametrize(("kustomization", "field"), CLIMBS)
def test_a_kustomization_that_climbs_out_of_the_repository_is_refused_and_reads_nothing(
    scenario: Scenario, kubectl: None, tmp_path: Path, secret: str, kustomization: str, field: str
) -> None:
    outside = plant_kustomization(tmp_path / "outside", secret)
    text = kustomization.format(far=climb(outside), abs=outside)
    result = kustomize_beside(scenario, {"kustomization.yaml": text})
    message = hostile_refused(scenario, result, "RenderFailed", "leaves the repository")
    assert message.startswith(f"Kustomize: apps/hostile/kustomization.yaml: {field} '")
    nowhere(scenario, secret, [result])
    assert scenario.object_path("good", "configmap", "good-base").exists()


def test_a_base_inside_the_repository_that_climbs_out_is_refused_naming_its_own_file(
    scenario: Scenario, kubectl: None, tmp_path: Path, secret: str
) -> None:
    outside = plant_kustomization(tmp_path / "outside", secret)
    scenario.commit({"apps/middle/kustomization.yaml": f"resources: [{climb(outside)}]\n"})
    result = kustomize_beside(scenario, {"kustomization.yaml": "resources: [../middle]\n"})
    message = hostile_refused(scenario, result, "RenderFailed", "leaves the repository")
    assert message.startswith("Kustomize: apps/middle/kustomization.yaml: resources[0] '../")
    nowhere(scenario, secret, [result])


def job_in(root: Path, state: Path, path: str = "apps/web") -> Job:
    """A Kustomize job over the folder ``root`` (an export, as a test writes it)."""
    cluster = Cluster.model_validate(
        {"apiVersion": "convoy.dev/v1alpha1", "kind": "Cluster", "metadata": {"name": "c"}}
    )
    spec = {"cluster": "c", "source": {"path": path, "render": {"type": "Kustomize"}}}
    release = Release.model_validate(
        {"apiVersion": "convoy.dev/v1alpha1", "kind": "Release", "metadata": {"name": "web"},
         "spec": spec}
    )  # fmt: skip
    return Job(release, cluster, {}, "rev", root, path, root / "home", state)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def nested(spec: str, entry: str) -> object:
    """The smallest kustomization data holding ``entry`` where the row ``spec`` of
    :data:`kustomize.LOADED` reads it."""
    value: object = entry
    for part in reversed(spec.split(".")):
        key = part.removesuffix("[]")
        value = {key: [value] if part.endswith("[]") else value}
    return value


@pytest.mark.parametrize("spec", kustomize.LOADED)
def test_every_field_kustomize_loads_from_is_kept_inside_the_repository(
    tmp_path: Path, spec: str
) -> None:
    root = tmp_path / "export"
    data = nested(spec, "../../../outside")
    write(root, {"apps/web/kustomization.yaml": json.dumps(data)})
    field = spec.replace("[]", "[0]")
    with pytest.raises(RenderFailed) as raised:
        kustomize.check_confined(job_in(root, tmp_path / "state"), "apps/web")
    assert str(raised.value) == (
        f"Kustomize: apps/web/kustomization.yaml: {field} '../../../outside': leaves the repository"
    )


ALLOWED = [
    "https://github.com/kubernetes-sigs/kustomize//examples/multibases?ref=v1.0.6",
    "git@github.com:org/repo.git//deploy?ref=v1",
    "ssh://git@example.com/org/repo//deploy",
    "git::https://example.com/org/repo//deploy",
    "github.com/org/repo//deploy?ref=v1",
    "deployment.yaml",
    "../base",
    "apiVersion: builtin\nkind: PrefixSuffixTransformer\nmetadata: {name: p}\nprefix: x-\n",
]


def test_remotes_and_paths_inside_the_repository_are_left_to_kustomize(tmp_path: Path) -> None:
    root = tmp_path / "export"
    write(root, {
        "apps/web/kustomization.yaml": json.dumps({"resources": ALLOWED[:-1],
                                                   "transformers": ALLOWED[-1:]}),
        "apps/web/deployment.yaml": configmap("web"),
        "apps/base/kustomization.yaml": "resources: [../web]\n",  # a cycle: walked once
    })  # fmt: skip
    kustomize.check_confined(job_in(root, tmp_path / "state"), "apps/web")


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("file:///srv/repo", "a file: URL is never read"),
        ("FILE:///srv/repo", "a file: URL is never read"),
        ("git::file:///srv/repo", "a file: URL is never read"),
        ("git::../../../srv/repo", "a git:: of a local path is never read"),
        ("/etc", "leaves the repository"),
        ("link/..", "leaves the repository"),
        ("link", "leaves the repository"),
    ],
)
def test_local_urls_and_links_out_are_refused_by_the_walk(
    tmp_path: Path, entry: str, expected: str
) -> None:
    root = tmp_path / "export"
    write(root, {"apps/web/kustomization.yaml": json.dumps({"resources": [entry]})})
    (tmp_path / "elsewhere" / "deep").mkdir(parents=True)
    (root / "apps/web/link").symlink_to(tmp_path / "elsewhere" / "deep")
    with pytest.raises(RenderFailed, match=rf"resources\[0\] '.*': {expected}"):
        kustomize.check_confined(job_in(root, tmp_path / "state"), "apps/web")


def test_an_entry_naming_the_state_directory_is_shown_as_state(tmp_path: Path) -> None:
    root, state = tmp_path / "export", tmp_path / "state"
    write(root, {"apps/web/kustomization.yaml": f"resources: ['file://{state}/sources/x']\n"})
    with pytest.raises(RenderFailed) as raised:
        kustomize.check_confined(job_in(root, state), "apps/web")
    assert "'file://<state>/sources/x'" in str(raised.value)
    assert str(state) not in str(raised.value)


def test_the_walk_is_bounded_in_depth_and_count(tmp_path: Path) -> None:
    root = tmp_path / "export"
    chain = {f"k/{i}/kustomization.yaml": f"resources: [../{i + 1}]\n" for i in range(70)}
    write(root, chain)
    with pytest.raises(RenderFailed, match=r"^Kustomize \(k/0\): kustomizations nest more than 64"):
        kustomize.check_confined(job_in(root, tmp_path / "state", "k/0"), "k/0")
    wide = {f"w/{i}/kustomization.yaml": "resources: []\n" for i in range(1001)}
    wide["w/kustomization.yaml"] = json.dumps({"resources": [str(i) for i in range(1001)]})
    write(root, wide)
    with pytest.raises(RenderFailed, match=r"more than 1,000 kustomizations are reachable"):
        kustomize.check_confined(job_in(root, tmp_path / "state", "w"), "w")


def test_a_kustomization_the_walk_cannot_read_is_refused_in_one_line(tmp_path: Path) -> None:
    root = tmp_path / "export"
    write(root, {"apps/web/kustomization.yaml": "resources: [a\n  - b: ]: x\n"})
    with pytest.raises(RenderFailed, match=r"^Kustomize: apps/web/kustomization\.yaml: "):
        kustomize.check_confined(job_in(root, tmp_path / "state"), "apps/web")


def private_remote(s: Scenario, tmp_path: Path, secret: str) -> Path:
    """A private remote, fetched by the healthy Release ``good`` (its ``apps/good``)
    into the state directory's source cache; its ``secret/`` folder, a kustomization
    holding ``secret``, is no Release's. Returns the cached clone."""
    upstream = tmp_path / "private"
    files = {
        "apps/good/config.yaml": configmap("good-private"),
        "secret/Kustomization": "resources: [secret.yaml]\n",  # a name Plain does not read
        "secret/secret.yaml": configmap("stolen", secret),
    }
    make_repo(upstream, files, branch="master")  # the cache's own HEAD: readable as it is
    url = str(upstream)
    s.commit({"releases/good.yaml": release("good", "apps/good", "{type: Plain}", url=url)})
    s.app("plain")
    result = s.reconcile(minutes=0)
    assert result.code == 0, result.err
    return s.state / "sources" / hashlib.sha256(url.encode()).hexdigest()[:16]


@pytest.mark.parametrize(
    "entry",
    [
        "file://{cache}//secret",
        "FILE://{cache}//secret",
        "git::file://{cache}//secret?ref=master",
        "file://localhost{cache}//secret",
    ],
)
def test_a_kustomize_file_url_is_refused_even_to_a_remote_in_the_source_cache(
    scenario: Scenario, kubectl: None, tmp_path: Path, secret: str, entry: str
) -> None:
    cache = private_remote(scenario, tmp_path, secret)
    written = entry.format(cache=cache)
    scenario.commit({
        "apps/hostile/kustomization.yaml": f"resources: ['{written}']\n",
        "releases/hostile.yaml": release("hostile", "apps/hostile", "{type: Kustomize}"),
    })  # fmt: skip
    result = scenario.reconcile(minutes=1)
    message = hostile_refused(scenario, result, "RenderFailed", "a file: URL is never read")
    assert "resources[0]" in message and "<state>/sources/" in message
    nowhere(scenario, secret, [result])


# --- source.url: the state directory is no source ------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "{cache}",
        "file://{cache}",
        "file://localhost{cache}",
        "file://{quoted}",
        "../state/sources/{digest}",
        "{cache}/../{digest}/.",
    ],
)
def test_a_source_url_into_the_state_directory_is_refused_before_any_fetch(
    scenario: Scenario, tmp_path: Path, secret: str, url: str
) -> None:
    cache = private_remote(scenario, tmp_path, secret)
    quoted = urllib.parse.quote(str(cache))
    written = url.format(cache=cache, digest=cache.name, quoted=quoted.replace("/", "%2F", 2))
    before = sorted((scenario.state / "sources").iterdir())
    hostile = release("hostile", "secret", "{type: Plain}", url=written)
    scenario.commit({"releases/hostile.yaml": hostile})
    result = scenario.reconcile(minutes=1)
    message = hostile_refused(scenario, result, "SourceFailed", "spec.source.url")
    assert message == (
        f"spec.source.url '<state>/sources/{cache.name}': a repository inside the state "
        "directory is never a source"
    )
    assert sorted((scenario.state / "sources").iterdir()) == before  # nothing fetched
    nowhere(scenario, secret, [result])


# --- Helm: values files, dependencies and .Files stay in the repository ----------------------

CHART_YAML = "apiVersion: v2\nname: {name}\nversion: 0.1.0\n"
TEMPLATE = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-config}
data:
  value: {{ .Values.value | default "ok" | quote }}
  file: {{ .Files.Get "files/data.txt" | quote }}
"""


def chart(name: str, chart_yaml: str = "", extra: dict[str, str] | None = None) -> dict[str, str]:
    files = {
        "Chart.yaml": CHART_YAML.format(name=name) + chart_yaml,
        "templates/config.yaml": TEMPLATE,
    }
    return {f"apps/{name}/{k}": v for k, v in (files | (extra or {})).items()}


def helm_beside(s: Scenario, hostile: dict[str, str], render: str = "{type: Helm}") -> Result:
    files: dict[str, str | None] = {**chart("good"), **hostile}
    files["releases/good.yaml"] = release("good", "apps/good", "{type: Helm}")
    files["releases/hostile.yaml"] = release("hostile", "apps/hostile", render)
    s.commit(files, "a hostile chart")
    s.app("plain")
    return s.reconcile(minutes=0)


def test_a_values_file_outside_the_repository_is_refused(
    scenario: Scenario, helm: None, tmp_path: Path, secret: str
) -> None:
    values = tmp_path / "outside" / "values.yaml"
    values.parent.mkdir()
    values.write_text(f"value: {secret}\n")
    for written in (climb(values), str(values)):
        render = f"{{type: Helm, valuesFiles: ['{written}']}}"
        result = helm_beside(scenario, chart("hostile"), render)
        message = hostile_refused(scenario, result, "RenderFailed", "leaves the repository")
        assert message == f"render.valuesFiles {written!r}: leaves the repository"
        nowhere(scenario, secret, [result])


def test_a_file_dependency_outside_the_repository_is_refused(
    scenario: Scenario, helm: None, tmp_path: Path, secret: str
) -> None:
    evil = tmp_path / "outside" / "evil"
    (evil / "templates").mkdir(parents=True)
    (evil / "Chart.yaml").write_text(CHART_YAML.format(name="evil"))
    (evil / "templates" / "secret.yaml").write_text(configmap("stolen", secret))
    for repository in (f"file://{climb(evil)}", f"file://{evil}"):
        dependency = f"dependencies: [{{name: evil, version: 0.1.0, repository: '{repository}'}}]\n"
        result = helm_beside(scenario, chart("hostile", dependency))
        message = hostile_refused(scenario, result, "RenderFailed", "leaves the repository")
        assert message == (
            f"Helm: apps/hostile/Chart.yaml: dependencies[0].repository {repository!r}: "
            "leaves the repository"
        )
        nowhere(scenario, secret, [result])


def test_a_file_dependency_inside_the_repository_is_left_to_helm(
    scenario: Scenario, helm: None
) -> None:
    dependency = "dependencies: [{name: good, version: 0.1.0, repository: 'file://../good'}]\n"
    result = helm_beside(scenario, chart("hostile", dependency))
    _, message = last_attempt(scenario, "hostile")
    assert "missing in charts/ directory: good" in message, message  # helm's own refusal
    synced(scenario, *HEALTHY)
    assert result.code == 1


@pytest.mark.parametrize("link", ["absolute", "relative"])
def test_a_charts_symlink_out_of_the_repository_is_refused_and_reads_nothing(
    scenario: Scenario, helm: None, tmp_path: Path, secret: str, link: str
) -> None:
    planted = tmp_path / "outside" / "data.txt"
    planted.parent.mkdir()
    planted.write_text(secret)
    target = str(planted) if link == "absolute" else climb(planted)
    commit_symlink(scenario.repo, "apps/hostile/files/data.txt", target)
    result = helm_beside(scenario, chart("hostile"))
    message = hostile_refused(scenario, result, "SourceFailed", "leaves the repository")
    assert message.startswith("apps/hostile/files/data.txt: symlink to "), message
    link_of_theirs = scenario.root / "apps/hostile/files/data.txt"  # leads to it, as committed
    nowhere(scenario, secret, [result], allowed=[link_of_theirs])


def test_an_export_holds_no_symlink_and_nothing_a_link_leads_to_outside(
    scenario: Scenario, tmp_path: Path, secret: str
) -> None:
    """What a chart's ``.Files`` (or any renderer) could read through a link: links
    outside ``source.path`` are in the export too, written as the file they lead to
    inside the repository, or left out."""
    planted = tmp_path / "outside" / "data.txt"
    planted.parent.mkdir()
    planted.write_text(secret)
    scenario.commit({"apps/web/config.yaml": configmap("web"), "lib/real.txt": "inside\n"})
    links = {
        "lib/absolute.txt": str(planted),
        "lib/relative.txt": climb(planted),
        "lib/parent": "..",
        "lib/folder": "../apps",
        "lib/inside.txt": "real.txt",
    }
    for link, target in links.items():
        commit_symlink(scenario.repo, link, target)
    resolver = SourceResolver(GitOpsRepo(scenario.root), scenario.state)
    export = tmp_path / "export"
    export.mkdir()
    resolver.export(Release.model_validate(release_data()), export)
    exported = {p.relative_to(export).as_posix() for p in export.rglob("*")}
    assert not [p for p in export.rglob("*") if p.is_symlink()]
    assert exported >= {"lib/real.txt", "lib/inside.txt", "apps/web/config.yaml"}
    assert not exported & {"lib/absolute.txt", "lib/relative.txt", "lib/parent", "lib/folder"}
    assert (export / "lib/inside.txt").read_text() == "inside\n"
    assert not [p for p in export.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def release_data() -> dict[str, object]:
    return {
        "apiVersion": "convoy.dev/v1alpha1", "kind": "Release", "metadata": {"name": "web"},
        "spec": {"cluster": "staging", "source": {"path": "apps/web", "render": {"type": "Helm"}}},
    }  # fmt: skip


# --- Bounded renders: the operator's memory and time limits --------------------------------

HUGE_TEMPLATE = """\
{{- $s := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" }}
{{- range until 34 }}{{ $s = printf "%s%s" $s $s }}{{ end }}
apiVersion: v1
kind: ConfigMap
metadata: {name: huge}
data: {length: {{ len $s | quote }}}
"""
ENDLESS_TEMPLATE = """\
{{- range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}
apiVersion: v1
kind: ConfigMap
metadata: {name: endless}
"""
HUGE_JSONNET = """\
local double(s, n) = if n == 0 then s else double(s + s, n - 1);
{apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'huge'},
 data: {length: std.toString(std.length(double('0123456789abcdef0123456789abcdef', 34)))}}
"""
GOOD_JSONNET = "{apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'good'}}\n"


def operator_limits(s: Scenario, limits: str) -> None:
    s.state.mkdir(parents=True, exist_ok=True)
    (s.state / "renderers.yaml").write_text(f"limits: {limits}\n")


def test_a_chart_that_builds_a_huge_string_fails_at_the_operators_memory_limit(
    scenario: Scenario, helm: None
) -> None:
    operator_limits(scenario, "{memory: 200Mi}")
    result = helm_beside(scenario, chart("hostile", extra={"templates/huge.yaml": HUGE_TEMPLATE}))
    message = hostile_refused(scenario, result, "RenderFailed", "over its memory limit")
    assert message == (
        "Helm (helm template apps/hostile): over its memory limit of 200 MiB "
        "(renderers.yaml limits.memory)"
    )


def test_a_jsonnet_program_that_builds_a_huge_string_fails_at_the_operators_memory_limit(
    scenario: Scenario, tools: Tools
) -> None:
    operator_limits(scenario, "{memory: 200Mi}")
    scenario.commit({
        "apps/good/main.jsonnet": GOOD_JSONNET,
        "apps/hostile/main.jsonnet": HUGE_JSONNET,
        "releases/good.yaml": release("good", "apps/good", "{type: Jsonnet}"),
        "releases/hostile.yaml": release("hostile", "apps/hostile", "{type: Jsonnet}"),
    })  # fmt: skip
    scenario.app("plain")
    result = scenario.reconcile(minutes=0)
    message = hostile_refused(scenario, result, "RenderFailed", "over its memory limit")
    assert message == "Jsonnet: over its memory limit of 200 MiB (renderers.yaml limits.memory)"


@pytest.mark.slow
def test_a_chart_that_never_ends_times_out_at_the_operators_limit(
    scenario: Scenario, helm: None
) -> None:
    operator_limits(scenario, "{timeout: 2s}")
    extra = {"templates/endless.yaml": ENDLESS_TEMPLATE}
    result = helm_beside(scenario, chart("hostile", extra=extra))
    message = hostile_refused(scenario, result, "RenderFailed", "timed out")
    assert message == (
        "Helm (helm template apps/hostile): timed out after 2 s (renderers.yaml limits.timeout)"
    )


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ("{memory: lots}", "limits.memory: not a memory size: 'lots'"),
        ("{memory: 0}", "limits.memory: not a memory size"),
        ("{timeout: 0s}", "limits.timeout"),
        ("{cpu: 2}", "limits.cpu"),
    ],
)
def test_limits_the_operator_got_wrong_fail_every_renderer_in_one_line(
    scenario: Scenario, helm: None, limits: str, expected: str
) -> None:
    operator_limits(scenario, limits)
    result = helm_beside(scenario, chart("hostile"))
    assert result.code == 1
    for name in ("good", "hostile"):
        reason, message = last_attempt(scenario, name)
        assert reason == "RenderFailed"
        assert message.startswith("Renderers: <state>/renderers.yaml: "), message
        assert expected in message and "\n" not in message
        assert str(scenario.state) not in message
    synced(scenario, "plain")
