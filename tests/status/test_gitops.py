"""GitOpsRepo: Releases and Clusters read from HEAD, one broken file never stops another."""

from pathlib import Path

import pytest

from convoy_batch.errors import UsageError
from convoy_batch.repo.gitops import GitOpsRepo
from tests.support.gitfixtures import commit_files, commit_symlink, make_repo, write_files


def release_yaml(name: str, extra: str = "") -> str:
    return f"""\
apiVersion: convoy.dev/v1alpha1
kind: Release
metadata: {{name: {name}}}
spec:
  cluster: staging
  source: {{path: apps/{name}}}
{extra}"""


CLUSTER = """\
apiVersion: convoy.dev/v1alpha1
kind: Cluster
metadata: {name: staging}
spec: {wave: 1, vars: {env: staging}}
"""


def test_valid_release_and_cluster_are_read_from_head(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path, {"releases/web.yaml": release_yaml("web"), "clusters/staging.yaml": CLUSTER}
    )
    snap = GitOpsRepo(tmp_path).snapshot()
    entry = snap.releases["web"]
    assert entry.error is None and entry.release is not None
    assert entry.release.spec.source.path == "apps/web"
    assert entry.path == "releases/web.yaml"
    assert entry.blob == repo.head.commit.tree["releases/web.yaml"].hexsha
    assert snap.clusters["staging"].spec.wave == 1
    assert snap.cluster_errors == {}
    assert snap.commit == repo.head.commit.hexsha
    assert snap.branch == "main"


BROKEN = [
    pytest.param("key: [unclosed\n", "web", "invalid YAML", id="broken-yaml"),
    pytest.param(
        release_yaml("web", "  foo: 1\n"), "web", "spec.foo: unknown field", id="unknown-field"
    ),
    pytest.param(
        release_yaml("web").replace("kind: Release", "kind: Cluster"), "web", "kind:",
        id="wrong-kind",
    ),
    pytest.param(
        release_yaml("web").replace("v1alpha1", "v2"), "web", "apiVersion:", id="wrong-api-version"
    ),
    pytest.param(
        release_yaml("other"), "other", "does not match the file name 'web'", id="name-mismatch"
    ),
    pytest.param(release_yaml("web") + "---\n" + CLUSTER, "web", "2 documents", id="two-documents"),
    pytest.param("- a\n- b\n", "web", "not a mapping", id="not-a-mapping"),
    pytest.param("", "web", "empty file", id="empty-file"),
    pytest.param(
        release_yaml("web").replace("{name: web}", "{name: Web_1}"), "web", "metadata.name:",
        id="invalid-name-falls-back-to-the-file-stem",
    ),
    pytest.param(
        release_yaml("web").replace("  cluster: staging\n", ""), "web",
        "spec.cluster: required field missing", id="missing-field",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("text", "name", "message"), BROKEN)
def test_a_broken_release_file_is_an_entry_with_a_one_line_error_naming_file_and_field(
    tmp_path: Path, text: str, name: str, message: str
) -> None:
    make_repo(tmp_path, {"releases/web.yaml": text, "releases/api.yaml": release_yaml("api")})
    snap = GitOpsRepo(tmp_path).snapshot()
    entry = snap.releases[name]
    assert entry.release is None
    assert entry.error is not None
    assert entry.error.startswith("releases/web.yaml: ")
    assert message in entry.error
    assert "\n" not in entry.error
    assert snap.releases["api"].release is not None  # the other file is unaffected


def test_uncommitted_and_modified_files_are_ignored(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {"releases/web.yaml": release_yaml("web")})
    write_files(
        repo,
        {
            "releases/web.yaml": release_yaml("web", "  namespace: changed\n"),
            "releases/new.yaml": release_yaml("new"),
        },
    )
    snap = GitOpsRepo(tmp_path).snapshot()
    assert set(snap.releases) == {"web"}
    release = snap.releases["web"].release
    assert release is not None and release.spec.namespace == "default"


def test_a_new_commit_changes_the_blob_of_the_changed_file_only(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path,
        {"releases/web.yaml": release_yaml("web"), "releases/api.yaml": release_yaml("api")},
    )
    before = GitOpsRepo(tmp_path).snapshot()
    commit_files(repo, {"releases/web.yaml": release_yaml("web", "  namespace: web\n")})
    after = GitOpsRepo(tmp_path).snapshot()
    assert after.releases["web"].blob != before.releases["web"].blob
    assert after.releases["api"].blob == before.releases["api"].blob


def test_only_yaml_files_directly_in_the_folders_are_read(tmp_path: Path) -> None:
    make_repo(
        tmp_path,
        {
            "releases/web.yml": release_yaml("web"),
            "releases/README.md": "# notes\n",
            "releases/nested/api.yaml": release_yaml("api"),
            "clusters/staging.yaml": CLUSTER,
        },
    )
    snap = GitOpsRepo(tmp_path).snapshot()
    assert set(snap.releases) == {"web"}


def test_a_repository_without_releases_or_clusters_gives_an_empty_snapshot(tmp_path: Path) -> None:
    make_repo(tmp_path, {"README.md": "hello\n"})
    snap = GitOpsRepo(tmp_path).snapshot()
    assert (snap.releases, snap.clusters, snap.cluster_errors) == ({}, {}, {})


def test_a_broken_cluster_file_is_a_cluster_error_and_the_others_load(tmp_path: Path) -> None:
    make_repo(
        tmp_path,
        {
            "clusters/staging.yaml": CLUSTER,
            "clusters/prod.yaml": CLUSTER.replace("staging", "prod").replace(
                "wave: 1", "wave: 1, directory: {path: x}, kubernetes: {}"
            ),
            "clusters/bad.yaml": "{{{",
        },
    )
    snap = GitOpsRepo(tmp_path).snapshot()
    assert set(snap.clusters) == {"staging"}
    assert set(snap.cluster_errors) == {"prod", "bad"}
    assert snap.cluster_errors["prod"].startswith("clusters/prod.yaml: spec: ")
    assert snap.cluster_errors["bad"].startswith("clusters/bad.yaml: ")


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(release_yaml("web"), id="both-valid"),
        pytest.param("{{{", id="a-broken-one-named-by-its-stem"),
    ],
)
def test_two_files_claiming_one_name_are_one_error_naming_both(tmp_path: Path, other: str) -> None:
    make_repo(tmp_path, {"releases/web.yaml": release_yaml("web"), "releases/web.yml": other})
    snap = GitOpsRepo(tmp_path).snapshot()
    assert set(snap.releases) == {"web"}
    entry = snap.releases["web"]
    assert (entry.path, entry.release) == ("releases/web.yaml", None)
    assert entry.error == (
        "releases/web.yaml, releases/web.yml: metadata.name: 'web' is claimed by 2 files; "
        "one file per Release"
    )


def test_two_cluster_files_claiming_one_name_are_one_cluster_error(tmp_path: Path) -> None:
    make_repo(tmp_path, {"clusters/staging.yaml": CLUSTER, "clusters/staging.yml": CLUSTER})
    snap = GitOpsRepo(tmp_path).snapshot()
    assert snap.clusters == {}
    assert "clusters/staging.yaml, clusters/staging.yml" in snap.cluster_errors["staging"]


def test_a_symlinked_release_file_is_reported_not_followed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {"apps/web.yaml": release_yaml("web")})
    commit_symlink(repo, "releases/web.yaml", "../apps/web.yaml")
    entry = GitOpsRepo(tmp_path).snapshot().releases["web"]
    assert entry.error == "releases/web.yaml: a symlink, not a file"


def test_an_unquoted_force_sync_time_is_kept_as_text(tmp_path: Path) -> None:
    text = release_yaml("web").replace(
        "{name: web}", "{name: web, annotations: {convoy.dev/force-sync: 2026-11-29T12:00:00Z}}"
    )
    make_repo(tmp_path, {"releases/web.yaml": text})
    release = GitOpsRepo(tmp_path).snapshot().releases["web"].release
    assert release is not None
    assert release.metadata.annotations == {"convoy.dev/force-sync": "2026-11-29T12:00:00Z"}


def test_a_detached_head_has_no_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {"releases/web.yaml": release_yaml("web")})
    repo.git.checkout("--detach", "--quiet")
    snap = GitOpsRepo(tmp_path).snapshot()
    assert snap.branch is None
    assert set(snap.releases) == {"web"}


@pytest.mark.parametrize("kind", ["missing", "not-a-repo", "no-commit"])
def test_an_unreadable_repository_is_a_usage_error(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "repo"
    if kind == "not-a-repo":
        path.mkdir()
    elif kind == "no-commit":
        make_repo(path)
    with pytest.raises(UsageError, match="repo"):
        GitOpsRepo(path)
