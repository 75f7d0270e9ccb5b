"""``diff`` through the CLI: what the Releases at a revision would change against what
is applied now (the inventory's renders, the cluster with ``--live``, or the render at
HEAD for a fresh state directory), and that it writes nothing."""

import base64
import hashlib
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from convoy_batch.timefmt import format_time
from tests.support.scenario import DEPLOYMENT, PROJECT, T0, Scenario

EXTRA = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: web-extra}
data: {added: "yes"}
"""

SECRET = """\
apiVersion: v1
kind: Secret
metadata: {name: web-secret}
stringData: {password: PASSWORD}
data: {token: TOKEN}
"""


def rolled_out(s: Scenario, **extra: str) -> None:
    """web at image 1.0, applied and healthy."""
    s.app(extra=extra)
    assert s.reconcile("web").code == 0
    s.deployment_ready()
    assert s.reconcile("web", minutes=1).code == 0


def on_branch(s: Scenario, branch: str, files: dict[str, str | None]) -> str:
    """Commit ``files`` on a new branch from HEAD, then check ``main`` out again."""
    s.repo.git.checkout("-b", branch)
    sha = s.commit(files, f"{branch}: change")
    s.repo.git.checkout("main")
    return sha


def everything(s: Scenario) -> dict[str, object]:
    """The state directory's files, git's refs, HEAD, index and work tree."""
    files = {
        str(p.relative_to(s.state)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(s.state.rglob("*"))
        if p.is_file()
    }
    worktree = s.repo.git.status("--porcelain", "--ignored")  # git status refreshes the index
    return {
        "worktree": worktree,
        "state": files,
        "refs": s.repo.git.for_each_ref(),
        "head": (s.root / ".git" / "HEAD").read_text() + s.head(),
        "index": hashlib.sha256((s.root / ".git" / "index").read_bytes()).hexdigest(),
    }


@pytest.fixture
def s(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Scenario:
    return Scenario(tmp_path, capsys)


def test_a_branch_that_changes_an_image_adds_and_removes_an_object(s: Scenario) -> None:
    rolled_out(s)
    on_branch(
        s,
        "pr",
        {
            "apps/web/deployment.yaml": DEPLOYMENT.replace("IMAGE", "2.0"),
            "apps/web/extra.yaml": EXTRA,
            "apps/web/configmap.yaml": None,
        },
    )
    before = everything(s)
    result = s.cli("diff", "web", "--revision", "pr")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert "web: 1 added, 1 changed, 1 removed against the applied render" in lines
    assert "  + ConfigMap web/web-extra" in lines
    assert "  ~ Deployment.apps web/web" in lines
    assert "  - ConfigMap web/web-config (pruned)" in lines
    assert "    -      - image: example/web:1.0" in lines
    assert "    +      - image: example/web:2.0" in lines
    plan = "  plan: ApplySource Succeeded -> Progressing (NewRender)"
    assert [line for line in lines if line.startswith(plan)], lines
    assert not [line for line in lines if line.startswith("warning:")]
    assert everything(s) == before


def test_exit_code_is_zero_without_a_change_and_one_with_one(s: Scenario) -> None:
    rolled_out(s)
    on_branch(s, "docs", {"notes.txt": "no manifest changes\n"})
    on_branch(s, "pr", {"apps/web/extra.yaml": EXTRA})
    same = s.cli("diff", "--all", "--revision", "docs", "--exit-code")
    assert (same.code, same.out.splitlines()[1]) == (
        0,
        "web: no change against the applied render",
    )
    assert s.cli("diff", "--revision", "pr").code == 0
    assert s.cli("diff", "--revision", "pr", "--exit-code").code == 1
    in_process = s.cli_process("diff", "--revision", "pr", "--exit-code")
    assert in_process.code == 1, in_process.err
    assert "  + ConfigMap web/web-extra" in in_process.out.splitlines()


def at(minutes: float) -> str:
    return format_time(T0 + timedelta(minutes=minutes))


def test_a_planned_re_apply_that_changes_nothing_exits_zero(s: Scenario) -> None:
    s.app()
    assert s.reconcile("web").code == 0
    result = s.cli("diff", "--all", "--revision", "main", "--exit-code", "--now", at(1))
    assert result.code == 0, result.out
    lines = result.out.splitlines()
    assert lines[1] == "web: no change against the applied render"
    plan = lines[2]
    assert plan.startswith("  plan: ApplySource Progressing -> Progressing (NewRender)"), plan
    assert plan.endswith("outcome Synced: 2 objects applied"), plan


def test_a_rollout_state_the_plan_changes_exits_one_without_an_object_change(
    s: Scenario,
) -> None:
    s.app()
    assert s.reconcile("web").code == 0
    s.deployment_ready()
    result = s.cli("diff", "--exit-code", "--now", at(1))
    assert result.code == 1, result.out
    lines = result.out.splitlines()
    assert lines[1] == "web: no change against the applied render"
    assert lines[2].startswith("  plan: ApplySource Progressing -> Succeeded (Healthy)"), lines


def test_a_rolled_back_release_held_at_its_last_healthy_render_shows_no_change(
    s: Scenario,
) -> None:
    """The render at the revision failed and was rolled back: a tick re-applies the last
    healthy render, so that is what is compared (no change, exit 0), and the line says
    the Release is held."""
    rolled_out(s)
    healthy = s.status()["lastHealthy"]["renderRef"]
    s.app(image="2.0")
    assert s.reconcile("web", minutes=2).code == 0
    s.deployment_failed()
    s.reconcile("web", minutes=20)  # past the progress deadline: rolled back
    assert s.status()["rollout"]["state"] == "RolledBack"

    result = s.cli("diff", "--exit-code", "--now", at(30))
    live = s.cli("diff", "--live", "--exit-code", "--now", at(30))
    row = json.loads(s.cli("diff", "--output", "json", "--now", at(30)).out)

    assert result.code == 0, result.out
    held = healthy.removeprefix("sha256:")[:12]
    line = f"web: no change against the applied render (held at the last healthy render {held})"
    assert result.out.splitlines()[1] == line
    assert "ApplyLastHealthy RolledBack -> RolledBack" in result.out.splitlines()[2]
    assert live.code == 0, live.out
    assert row["releases"][0]["held"] == healthy
    assert row["releases"][0]["changes"] == []


SKIPPED = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-skipped
  annotations: {argocd.argoproj.io/hook: Skip}
data: {n: "N"}
"""


def test_a_new_render_that_opens_a_rollout_exits_one_without_an_object_change(
    s: Scenario,
) -> None:
    """Only an ignored object changes, its name (its content alone is no part of the
    renderRef): no object of the render does, but its renderRef does, so a tick would open
    a rollout of the new render over the Progressing one."""
    s.app(extra={"skipped.yaml": SKIPPED})
    assert s.reconcile("web").code == 0
    renamed = SKIPPED.replace("web-skipped", "web-skipped-too")
    on_branch(s, "pr", {"apps/web/skipped.yaml": renamed})
    same = s.cli("diff", "--revision", "main", "--exit-code", "--now", at(1))
    assert same.code == 0, same.out
    result = s.cli("diff", "--revision", "pr", "--exit-code", "--now", at(1))
    assert result.code == 1, result.out
    lines = result.out.splitlines()
    assert lines[1] == "web: no change against the applied render"
    assert lines[2].startswith("  plan: ApplySource Progressing -> Progressing (NewRender)")
    row = json.loads(s.cli("diff", "--revision", "pr", "--output", "json", "--now", at(1)).out)
    plan = row["releases"][0]["plan"]
    assert plan["fromRender"] == s.status()["rollout"]["renderRef"] != plan["toRender"]


def test_a_branch_that_deletes_every_object_of_a_release_is_flagged(s: Scenario) -> None:
    rolled_out(s)
    on_branch(
        s,
        "pr",
        {
            "apps/web/deployment.yaml": None,
            "apps/web/configmap.yaml": None,
            "apps/web/x.yaml": EXTRA,
        },
    )
    result = s.cli("diff", "--revision", "pr", "--exit-code")
    assert result.code == 1, result.err
    warnings = [line for line in result.out.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: web: would delete every object of the Release (2 objects)",
        "warning: cluster staging: would delete 2 of its 2 objects (over half)",
    ]


def test_half_of_a_cluster_is_not_flagged_more_than_half_is(s: Scenario) -> None:
    rolled_out(s)
    s.app("api")
    assert s.reconcile("api").code == 0
    gone = {"apps/web/deployment.yaml": None, "apps/web/configmap.yaml": None}
    on_branch(s, "half", {**gone, "apps/web/x.yaml": EXTRA})
    on_branch(s, "more", {**gone, "apps/web/x.yaml": EXTRA, "apps/api/configmap.yaml": None})
    half = [w for w in s.cli("diff", "--revision", "half").out.splitlines() if "cluster" in w]
    more = [w for w in s.cli("diff", "--revision", "more").out.splitlines() if "cluster" in w]
    assert half == []
    assert more == ["warning: cluster staging: would delete 3 of its 4 objects (over half)"]


def test_secret_values_are_masked_in_data_and_string_data(s: Scenario) -> None:
    token = base64.b64encode(b"first-token").decode()
    secret = SECRET.replace("PASSWORD", "hunter2").replace("TOKEN", token)
    rolled_out(s, **{"secret.yaml": secret})
    new_token = base64.b64encode(b"second-token").decode()
    changed = SECRET.replace("PASSWORD", "s3cret-2").replace("TOKEN", new_token)
    on_branch(s, "pr", {"apps/web/secret.yaml": changed})
    for args in (("--revision", "pr"), ("--revision", "pr", "--output", "markdown")):
        out = s.cli("diff", *args).out
        for value in ("hunter2", "s3cret-2", token, new_token, "first-token", "second-token"):
            assert value not in out
    lines = s.cli("diff", "--revision", "pr").out.splitlines()
    assert "  ~ Secret web/web-secret" in lines
    assert "    -  password: '***'" in lines
    assert "    +  password: '*** (changed)'" in lines
    assert "    -  token: '***'" in lines
    assert "    +  token: '*** (changed)'" in lines


def test_markdown_is_a_table_and_a_collapsible_section_per_changed_release(s: Scenario) -> None:
    rolled_out(s)
    s.app("api")
    assert s.reconcile("api").code == 0
    on_branch(s, "pr", {"apps/web/extra.yaml": EXTRA})
    now = format_time(T0 + timedelta(minutes=2))
    lines = s.cli("diff", "--revision", "pr", "--output", "markdown", "--now", now).out.splitlines()
    assert lines[2:6] == [
        "| Release | Cluster | Added | Changed | Removed | Plan |",
        "|---|---|---:|---:|---:|---|",
        "| api | staging | 0 | 0 | 0 | ApplySource Progressing -> Progressing (row 8) |",
        "| web | staging | 1 | 0 | 0 | ApplySource Succeeded -> Progressing (row 2) |",
    ]
    details = [line for line in lines if line.startswith("<details>")]
    assert details == [
        "<details><summary>web: 1 added, 0 changed, 0 removed against the applied render</summary>"
    ]
    assert "+ ConfigMap web/web-extra" in lines


def test_live_shows_a_manual_edit_of_a_live_object(s: Scenario) -> None:
    rolled_out(s)
    path = s.object_path("web", "deployment.apps", "web")
    path.write_text(path.read_text().replace("example/web:1.0", "example/web:edited"))
    assert s.cli("diff", "--exit-code").code == 0
    before = everything(s)
    live = s.cli("diff", "--live", "--exit-code")
    assert live.code == 1, live.err
    lines = live.out.splitlines()
    assert "web: 0 added, 1 changed, 0 removed against the live cluster" in lines
    assert "    -      - image: example/web:edited" in lines
    assert "    +      - image: example/web:1.0" in lines
    assert everything(s) == before


MIGRATE = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations:
    argocd.argoproj.io/hook: PreSync
    argocd.argoproj.io/hook-delete-policy: HookSucceeded
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: example/migrate:1.0}]
"""


def test_live_leaves_out_a_hook_its_delete_policy_deleted_for_the_render(s: Scenario) -> None:
    s.app(extra={"migrate.yaml": MIGRATE})
    assert s.reconcile("web").code == 0
    job = s.object_path("web", "job.batch", "migrate")
    complete = {"conditions": [{"type": "Complete", "status": "True"}]}
    s.set_status("web", "job.batch", "migrate", complete)
    finished = job.read_text()
    assert s.reconcile("web", minutes=1).code == 0
    assert not job.exists()
    live = s.cli("diff", "--live", "--exit-code", "--now", at(2))
    assert live.code == 0, live.out
    assert "web: no change against the live cluster" in live.out.splitlines()
    job.write_text(finished)  # a delete not confirmed: the next tick sends it again
    again = s.cli("diff", "--live", "--now", at(2)).out.splitlines()
    assert "  - Job.batch web/migrate (pruned)" in again
    job.unlink()
    on_branch(s, "pr", {"apps/web/deployment.yaml": DEPLOYMENT.replace("IMAGE", "2.0")})
    new = s.cli("diff", "--live", "--revision", "pr", "--now", at(2)).out.splitlines()
    assert "  + Job.batch web/migrate" in new  # a new render creates it again


def test_a_render_error_at_the_revision_is_one_line_and_exit_two(s: Scenario) -> None:
    rolled_out(s)
    s.app("api")
    on_branch(s, "pr", {"apps/web/bad.yaml": "kind: [\n", "apps/api/extra.yaml": EXTRA})
    result = s.cli("diff", "--revision", "pr")
    assert result.code == 2
    errors = result.err.splitlines()
    assert len(errors) == 1 and errors[0].startswith("convoy-batch: web: RenderFailed: "), errors
    assert "api: 1 added, 0 changed, 0 removed against the render at HEAD" in result.out


def test_a_fresh_state_directory_compares_with_the_render_at_head(s: Scenario) -> None:
    s.app()
    on_branch(s, "pr", {"apps/web/deployment.yaml": DEPLOYMENT.replace("IMAGE", "2.0")})
    lines = s.cli("diff", "--revision", "pr").out.splitlines()
    assert (
        "web: 0 added, 1 changed, 0 removed against the render at HEAD "
        "(never applied from this state directory)" in lines
    )
    assert "  ~ Deployment.apps web/web" in lines


def test_an_unknown_revision_or_release_is_a_usage_error(s: Scenario) -> None:
    s.app()
    assert s.cli("diff", "--revision", "nope").code == 2
    assert s.cli("diff", "--revision", "--all").code == 2
    assert s.cli("diff", "nope").code == 2


def test_a_release_removed_at_the_revision_shows_its_deletion(s: Scenario) -> None:
    rolled_out(s)
    on_branch(s, "pr", {"releases/web.yaml": None})
    head = s.head()

    result = s.cli("diff", "--revision", "pr", "--exit-code")

    assert result.code == 1, result.err
    lines = result.out.splitlines()
    assert lines[1] == (
        "web: removed at the revision: Delete: web: Succeeded -> Deleted "
        "(2 objects deleted, 0 kept)"
    )
    assert lines[2:4] == [
        "  - ConfigMap web/web-config (deleted)",
        "  - Deployment.apps web/web (deleted)",
    ]
    assert s.head() == head and s.has_status("web")  # nothing retired


def test_diff_shows_the_guard_holding_a_mass_deletion(s: Scenario) -> None:
    s.app("web")
    s.app("api")
    s.reconcile()
    on_branch(s, "pr", {"releases/web.yaml": None, "releases/api.yaml": None})

    text = s.cli("diff", "--revision", "pr").out.splitlines()
    markdown = s.cli("diff", "--revision", "pr", "--output", "markdown").out

    blocked = [line for line in text if line.startswith("web: removed at the revision")]
    assert blocked[0].startswith(
        "web: removed at the revision: DeletionBlocked: mass deletion: 2 of 2 Releases of the "
        "repository"
    )
    assert "  - Deployment.apps web/web (deleted)" in text
    assert "| web | staging | 0 | 0 | 2 | DeletionBlocked: mass deletion: 2 of 2" in markdown


GUIDE = PROJECT / "docs" / "guides" / "diff.md"


def documented_ci_step() -> str:
    """The ``run:`` block of the guide's pull-request job, as written."""
    section = GUIDE.read_text().split("# Previewing a change (`diff`)", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    run = block.split("run: |\n", 1)[1]
    return "".join(line.strip() + "\n" for line in run.splitlines())


def test_the_documented_ci_step_runs_as_written(s: Scenario, tmp_path: Path) -> None:
    """A CI checkout of the base branch (a clone with ``origin``), the pull request's
    merge ref on the origin, and the guide's step run by a shell."""
    s.app()
    s.repo.git.checkout("-b", "pr")
    s.commit({"apps/web/extra.yaml": EXTRA}, "pr")
    s.repo.git.checkout("main")
    s.repo.git.update_ref("refs/pull/7/merge", "pr")
    checkout = tmp_path / "ci"
    subprocess.run(["git", "clone", "--quiet", str(s.root), str(checkout)], check=True)
    summary = tmp_path / "summary.md"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(PROJECT),
        "PR_REF": "refs/pull/7/merge",
        "RUNNER_TEMP": str(tmp_path / "runner"),
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    step = documented_ci_step()
    assert "convoy-batch --repo . --state" in step
    done = subprocess.run(
        ["bash", "-e", "-c", step], cwd=checkout, env=env, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = summary.read_text().splitlines()
    assert lines[0].startswith("### convoy-batch diff at ")
    assert "| web | staging | 1 | 0 | 0 |" in lines[4]
    assert "+ ConfigMap web/web-extra" in lines


def test_json_output_holds_each_release_its_changes_and_plan(s: Scenario) -> None:
    rolled_out(s)
    on_branch(s, "pr", {"apps/web/extra.yaml": EXTRA})
    for args in (("diff", "--revision", "pr", "--output", "json"),
                 ("--output", "json", "diff", "--revision", "pr")):  # fmt: skip
        data = json.loads(s.cli(*args).out)
        (web,) = data["releases"]
        assert (web["name"], web["against"], web["error"]) == ("web", "applied", None)
        assert web["changes"] == [
            {"object": "ConfigMap web/web-extra", "change": "added", "diff": []}
        ]
        assert web["plan"]["action"] == "ApplySource"
        assert data["warnings"] == []
