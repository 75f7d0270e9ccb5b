"""Dagster's CLI, ``dg`` (dagster-dg-cli), on this project as ``[tool.dg]`` in pyproject.toml
names it: it finds the definitions, and ``make force``'s ``dg launch`` forces a sync of a
small repository's Release, each without a warning of Dagster's (a superseded,
deprecated, preview or beta API; ``make run``'s and the README's commands are checked the
same way by tests/cli/test_readme_commands.py).

Each command runs from the project's folder, as ``make force`` does, in the environment
``make`` gives it (``VIRTUAL_ENV`` the project's virtualenv, as ``source
.venv/bin/activate`` sets it).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from convoy_batch.assets import PARTITIONS
from tests.support.dagster_dev import dagster_warnings, status_commits
from tests.support.gitfixtures import make_repo
from tests.support.scenario import CLUSTER, DEPLOYMENT, PROJECT, release_yaml

DG = Path(sys.executable).parent / "dg"
MANUAL = "  syncPolicy: {mode: Manual}\n"
FORCE = "$(BIN)/dg launch --assets release --partition $(RELEASE)"
"""``make force``'s command, as the Makefile writes it."""


def dg_env(**more: str) -> dict[str, str]:
    """The user's environment without the project's variables, with ``VIRTUAL_ENV`` set as
    ``make force`` sets it, and ``more``."""
    own = ("CONVOY_", "DAGSTER_", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(own)}
    env.update(VIRTUAL_ENV=str(PROJECT / ".venv"), PYTHONPATH=str(PROJECT), **more)
    return env


def run_dg(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [str(DG), *args], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=180
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"dg {' '.join(args)} exited {done.returncode}:\n{output}"
    warned = dagster_warnings(output)
    assert not warned, f"dg {' '.join(args)} printed Dagster's warnings:\n" + "\n".join(warned)
    return output


def test_dg_lists_the_projects_definitions(tmp_path: Path) -> None:
    output = run_dg("list", "defs", "--json", env=dg_env(CONVOY_REPO=str(tmp_path)))
    listed = json.loads(output[output.index("{") :])
    assert [a["asset_key"] for a in listed["assets"]] == ["release"]
    assert {j["name"] for j in listed["jobs"]} >= {"convoy_tick", "convoy_sharded_tick"}
    assert {s["name"] for s in listed["sensors"]} == {"convoy_releases", "convoy_wakeups"}


def test_make_forces_a_sync_with_dg_launch_which_syncs_a_manual_release(tmp_path: Path) -> None:
    assert f"\t{FORCE}\n" in (PROJECT / "Makefile").read_text()
    root, state, home = tmp_path / "repo", tmp_path / "state", tmp_path / "dagster"
    make_repo(
        root,
        {
            "clusters/staging.yaml": CLUSTER,
            "apps/reports/deployment.yaml": DEPLOYMENT.replace("IMAGE", "1.0"),
            "releases/reports.yaml": release_yaml("reports", spec_extra=MANUAL),
        },
    )
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions(PARTITIONS, ["reports"])
    env = dg_env(CONVOY_REPO=str(root), CONVOY_STATE=str(state), DAGSTER_HOME=str(home))

    run_dg("launch", "--assets", "release", "--partition", "reports", env=env)

    assert "convoy-batch: reports: Synced" in (status_commits(root) or []), status_commits(root)
