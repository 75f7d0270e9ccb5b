"""What the repository's history says of a removed Release: its last committed version
(the file in the parent of the commit that removed it) and the deletion trailers."""

from pathlib import Path

import pytest

from convoy_batch.engine.stages.render import render_key
from convoy_batch.repo.gitops import GitOpsRepo
from convoy_batch.rollout.retire import ALLOW_DELETE_TRAILER
from tests.status.test_gitops import CLUSTER, release_yaml
from tests.support.gitfixtures import commit_files, make_repo, remove_files


def test_the_last_version_is_the_file_before_the_commit_that_removed_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {"releases/web.yaml": release_yaml("web")})
    commit_files(repo, {"releases/web.yaml": release_yaml("web", "  interval: 1m\n")})
    removed = remove_files(repo, ["releases/web.yaml"], "retire web")
    commit_files(repo, {"README": "later\n"})
    last = GitOpsRepo(tmp_path).last_version("web")
    assert last is not None
    assert (last.removed_in, last.path, last.error) == (removed, "releases/web.yaml", None)
    assert last.release is not None and last.release.spec.interval.total_seconds() == 60


def test_a_release_never_removed_has_no_last_version(tmp_path: Path) -> None:
    make_repo(tmp_path, {"releases/web.yaml": release_yaml("web")})
    assert GitOpsRepo(tmp_path).last_version("web") is None
    assert GitOpsRepo(tmp_path).last_version("api") is None


def test_a_removed_yml_file_and_a_broken_last_version(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {"releases/web.yml": "kind: [\n"})
    remove_files(repo, ["releases/web.yml"])
    last = GitOpsRepo(tmp_path).last_version("web")
    assert last is not None and last.release is None
    assert last.error is not None and last.error.startswith("releases/web.yml")


def test_the_newest_removal_counts_when_a_release_came_back_and_went_again(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path, {"releases/web.yaml": release_yaml("web")})
    remove_files(repo, ["releases/web.yaml"])
    commit_files(repo, {"releases/web.yaml": release_yaml("web", "  interval: 2m\n")})
    second = remove_files(repo, ["releases/web.yaml"])
    last = GitOpsRepo(tmp_path).last_version("web")
    assert last is not None and last.removed_in == second
    assert last.release is not None and last.release.spec.interval.total_seconds() == 120


def test_trailers_are_read_by_git_from_the_commits_since_the_last_tick(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {"README": "x\n"})
    since = repo.head.commit.hexsha
    commit_files(repo, {"a": "1\n"}, "retire\n\nConvoy-Allow-Delete: web, api\n")
    commit_files(repo, {"b": "2\n"}, "no trailer here\n\nConvoy-Allow-Delete is prose\n")
    commit_files(repo, {"c": "3\n"}, "more\n\nSigned-off-by: A <a@b>\nConvoy-Allow-Delete: all\n")
    gitops = GitOpsRepo(tmp_path)
    assert sorted(gitops.trailers(ALLOW_DELETE_TRAILER, since)) == ["all", "web, api"]
    assert gitops.trailers(ALLOW_DELETE_TRAILER, None) == ["all"]
    assert gitops.trailers(ALLOW_DELETE_TRAILER, repo.head.commit.hexsha) == []


def test_the_deletion_policy_defaults_to_delete_with_prune_else_orphan(tmp_path: Path) -> None:
    texts = {
        "prune": ("", True),
        "noprune": ("  syncPolicy: {prune: false}\n", False),
        "orphan": ("  deletionPolicy: Orphan\n", False),
        "delete": ("  syncPolicy: {prune: false}\n  deletionPolicy: Delete\n", True),
    }
    make_repo(tmp_path, {f"releases/{n}.yaml": release_yaml(n, t) for n, (t, _) in texts.items()})
    releases = GitOpsRepo(tmp_path).snapshot().releases
    for name, (_, deletes) in texts.items():
        release = releases[name].release
        assert release is not None, releases[name].error
        assert release.spec.deletes is deletes, name
    unset = releases["prune"].release
    assert unset is not None and "deletionPolicy" not in unset.spec.model_dump(by_alias=True)


def test_an_unknown_deletion_policy_is_an_error_naming_the_field(tmp_path: Path) -> None:
    make_repo(tmp_path, {"releases/web.yaml": release_yaml("web", "  deletionPolicy: Keep\n")})
    entry = GitOpsRepo(tmp_path).snapshot().releases["web"]
    assert entry.error is not None and "spec.deletionPolicy" in entry.error


# Fields that change no render: each of them, set, leaves the render key as it was.
NOT_RENDERED = {
    "deletion-policy": "  deletionPolicy: Orphan\n",
    "sync-windows": "  syncWindows: [{kind: deny, schedule: '0 1 * * *', duration: 1h}]\n",
    "depends-on": "  dependsOn: [web]\n",
    "drift": "  drift: {mode: Report, ignore: [{paths: [/spec/replicas]}]}\n",
}


@pytest.mark.parametrize("extra", list(NOT_RENDERED.values()), ids=list(NOT_RENDERED))
def test_fields_that_change_no_render_are_not_part_of_its_inputs(
    tmp_path: Path, extra: str
) -> None:
    make_repo(
        tmp_path,
        {
            "releases/web.yaml": release_yaml("web"),
            "releases/kept.yaml": release_yaml("kept", extra),
            "clusters/staging.yaml": CLUSTER,
        },
    )
    snapshot = GitOpsRepo(tmp_path).snapshot()
    web, kept = (snapshot.releases[n].release for n in ("web", "kept"))
    assert web is not None and kept is not None
    renamed = kept.model_copy(update={"metadata": web.metadata})
    renamed = renamed.model_copy(
        update={"spec": renamed.spec.model_copy(update={"source": web.spec.source})}
    )
    cluster = snapshot.clusters["staging"]
    assert render_key(["files"], renamed, cluster) == render_key(["files"], web, cluster)
