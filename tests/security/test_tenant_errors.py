"""What a person reading a status, a commit or stderr learns of the operator's machine: a
message names a file of the state directory as ``<state>/...``, never where the state
directory is; an error no edge turned into its own is one line with neither a traceback
nor its message (which may quote a secret); a commit that places files in the state
directory (the default one lives in the working tree) stops the tick before any is
read. Through the CLI, on real files."""

import re
import sys
from pathlib import Path

import pytest

import convoy_batch.cli
from convoy_batch.cli import main
from tests.support.scenario import Scenario, release_yaml


def test_a_status_names_a_file_of_the_state_directory_relative_to_it(scenario: Scenario) -> None:
    s = scenario
    s.app("web")
    assert s.reconcile().code == 0
    inventory = s.state / "inventory" / "web.json"
    inventory.unlink()
    inventory.mkdir()
    s.app("web", image="2.0")
    result = s.reconcile(minutes=10)
    assert result.code == 1
    message = s.status("web")["lastAttempted"]["message"]
    assert message == "<state>/inventory/web.json: a folder where a file belongs"
    log = s.repo.git.log("-p", "--all")
    for where in (result.out, result.err, log):
        assert str(s.state.parent) not in where
    assert "web: StateFailed: <state>/inventory/web.json: " in result.err


def test_an_unexpected_error_is_one_line_without_its_message_or_a_traceback(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = scenario
    s.app("web")
    secret = "Bearer s3cret-operator-token"

    def crash(*_args: object, **_kwargs: object) -> None:
        raise ValueError(f"Invalid header value b'{secret}\\n'")

    monkeypatch.setattr(convoy_batch.cli, "run_tick", crash)  # our own seam: a bug in a tick
    monkeypatch.setattr(sys, "tracebacklimit", 0, raising=False)  # as Dagster's runs leave it
    result = s.reconcile()
    assert result.code == 1
    assert result.out == ""
    (line,) = result.err.splitlines()
    assert re.fullmatch(
        r"convoy-batch: internal error: ValueError at convoy_batch/cli\.py:\d+ "
        r"\(in crash of test_tenant_errors\.py\); its message is withheld, since it may "
        r"quote a secret: please report it",
        line,
    ), line
    assert secret not in result.err and "Traceback" not in result.err


def test_a_commit_that_places_files_in_the_state_directory_stops_the_tick_in_one_line(
    scenario: Scenario, tmp_path: Path
) -> None:
    s = scenario
    s.app("web")
    marker = tmp_path / "tenant-ran"
    renderers = f"renderers:\n  own: {{command: [sh, -c, 'touch {marker}']}}\n"
    s.commit({".convoy/renderers.yaml": renderers}, "a renderer of the tenant's own")
    s.commit(
        {
            "releases/web.yaml": release_yaml(
                "web", spec_extra="  source: {path: apps/web, render: {type: Command, name: own}}\n"
            )
        }
    )
    state = s.root / ".convoy"  # the default state directory, in the working tree
    s.capsys.readouterr()
    code = main(
        ["--repo", str(s.root), "--state", str(state), "reconcile", "--now", "2026-11-29T12:00:00Z"]
    )
    err = s.capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [
        "convoy-batch: the GitOps repository's HEAD holds files of the state directory "
        "(.convoy/renderers.yaml): a commit never holds the operator's files or "
        "convoy-batch's state; remove them from git (git rm -r --cached) and check the "
        "state directory, then tick again"
    ]
    assert not marker.exists() and not s.has_status("web")
