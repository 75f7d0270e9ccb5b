"""The size limits (README, "Limits"). A render: at most 10,000 objects and 32 MiB of
canonical JSON; each manifest file at most 8 Mi characters, also once variables are
substituted. Over a limit is RenderFailed in one line naming the Release and the limit,
and the other Releases of the tick reconcile. A YAML document (manifest, Release,
Cluster, status): at most 32 Mi characters once its aliases are expanded."""

import json

import pytest

from convoy_batch.errors import RenderFailed
from convoy_batch.manifests.yamlload import MAX_EXPANDED, MAX_TEXT, LimitExceeded, documents
from convoy_batch.renderers import pipeline as render_module
from convoy_batch.renderers.pipeline import MAX_BYTES, MAX_OBJECTS
from tests.rollout.test_render import run
from tests.support.scenario import Scenario, release_yaml

MIB = 1024 * 1024


def configmaps(count: int) -> str:
    return "".join(
        f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\n" for i in range(count)
    )


def json_configmap(name: str, size: int) -> str:
    """A ConfigMap whose one value is ``size`` characters long."""
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    return json.dumps({**obj, "data": {"v": "x" * size}})


def test_the_limits_are_the_documented_numbers() -> None:
    assert (MAX_OBJECTS, MAX_BYTES, MAX_TEXT, MAX_EXPANDED) == (10_000, 32 * MIB, 8 * MIB, 32 * MIB)


def one_mib_used(times: int) -> str:
    """A document of one MiB of text, used ``times`` times through an alias."""
    aliases = ", ".join(f"k{i}: *big" for i in range(times))
    return f"x: &big {'y' * MIB}\ndata: {{{aliases}}}\n"


def test_a_document_whose_aliases_expand_it_past_32_mi_characters_is_refused() -> None:
    (doc,) = documents(one_mib_used(30), "f.yaml")
    assert doc.size == 31 * MIB + sum(len(f"k{i}") for i in range(30)) + len("x") + len("data")
    with pytest.raises(LimitExceeded, match=r"^f\.yaml: its aliases expand it past"):
        documents(one_mib_used(32), "f.yaml")


@pytest.mark.slow
def test_a_render_of_the_most_objects_renders_and_one_more_is_refused() -> None:
    assert len(run({"app/a.yaml": configmaps(MAX_OBJECTS)}).objects) == MAX_OBJECTS
    with pytest.raises(RenderFailed) as failed:
        run({"app/a.yaml": configmaps(MAX_OBJECTS), "app/b.yaml": configmaps(1)})
    assert str(failed.value) == (
        "Release web: the render holds more than 10,000 objects, the most one render may hold"
    )


def test_a_render_of_exactly_the_most_bytes_renders_and_one_byte_more_is_refused() -> None:
    sizes = [7 * MIB] * 4  # four files of 7 Mi characters, and a fifth fills up
    files = {f"app/{i}.json": json_configmap(f"c{i}", n) for i, n in enumerate([*sizes, 0])}
    rest = MAX_BYTES - len(run(files).canonical)
    files["app/4.json"] = json_configmap("c4", rest)
    assert len(run(files).canonical) == MAX_BYTES
    files["app/4.json"] = json_configmap("c4", rest + 1)
    with pytest.raises(RenderFailed) as failed:
        run(files)
    assert str(failed.value) == (
        "Release web: the render is over 33,554,432 bytes (32 MiB) of JSON, "
        "the most one render may be"
    )


def test_aliases_that_expand_a_render_past_its_bytes_are_refused_before_its_json_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*_: object) -> bytes:
        raise AssertionError("the canonical JSON was made")

    monkeypatch.setattr(render_module, "canonical_json", refuse)
    # Each document: one MiB used 20 times (21 Mi characters, under the 32 Mi a document
    # may expand to); the two together are over the render's 32 MiB.
    text = "---\n".join(
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\n" + one_mib_used(20)
        for name in ("a", "b")
    )
    with pytest.raises(RenderFailed, match=r"^Release web: the render is over 33,554,432 bytes"):
        run({"app/a.yaml": text})


def test_a_file_that_variables_would_grow_past_the_file_limit_is_refused() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n"
    text += "".join(f"  k{i}: ${{big}}\n" for i in range(9))
    with pytest.raises(RenderFailed) as failed:
        run({"app/a.yaml": text}, vars={"big": "z" * MIB})
    assert str(failed.value) == (
        f"app/a.yaml: over {MAX_TEXT} characters once variables are substituted; "
        f"at most {MAX_TEXT} are read"
    )


def test_a_json_manifest_file_over_the_file_limit_is_refused() -> None:
    with pytest.raises(RenderFailed, match=rf"^app/a\.json: \d+ characters; at most {MAX_TEXT}"):
        run({"app/a.json": json_configmap("c", MAX_TEXT)})


# --- Through the command line, beside a healthy Release -------------------------------------


def reconcile_beside_a_healthy_release(s: Scenario, extra: dict[str, str]) -> str:
    """The error line of Release ``bad``; ``web`` beside it has reconciled."""
    s.app("web")
    s.app("bad", extra=extra)
    result = s.reconcile(minutes=0)
    assert result.code == 1, result.err
    assert "Traceback" not in result.err
    summary = [ln for ln in result.err.splitlines() if ln.startswith("bad: ")]
    assert len(summary) == 1, result.err
    assert s.status("bad")["lastAttempted"]["reason"] == "RenderFailed"
    assert s.status("web")["lastAttempted"]["reason"] != "RenderFailed"
    assert s.status("web")["rollout"]["state"] == "Progressing"
    assert s.live("web", "deployment.apps", "web")["metadata"]["name"] == "web"
    return summary[0]


def test_a_render_of_too_many_objects_fails_its_release_alone(scenario: Scenario) -> None:
    line = reconcile_beside_a_healthy_release(scenario, {"many.yaml": configmaps(MAX_OBJECTS)})
    assert line == (
        "bad: RenderFailed: Release bad: the render holds more than 10,000 objects, "
        "the most one render may hold"
    )


def test_a_render_of_too_many_bytes_fails_its_release_alone(scenario: Scenario) -> None:
    files = {f"big{i}.json": json_configmap(f"big{i}", 7 * MIB) for i in range(5)}
    line = reconcile_beside_a_healthy_release(scenario, files)
    assert line == (
        "bad: RenderFailed: Release bad: the render is over 33,554,432 bytes (32 MiB) of JSON, "
        "the most one render may be"
    )


def test_a_release_file_whose_aliases_expand_too_far_fails_its_release_alone(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app("web")
    bomb = "x-bomb:\n  " + one_mib_used(40).replace("\n", "\n  ")
    s.app("bad", release=release_yaml("bad").replace("kind: Release\n", f"kind: Release\n{bomb}"))
    result = s.reconcile(minutes=0)
    assert result.code == 1, result.err
    summary = [ln for ln in result.err.splitlines() if ln.startswith("bad: ")]
    assert len(summary) == 1, result.err
    assert summary[0].startswith("bad: InvalidRelease: releases/bad.yaml: its aliases expand it")
    assert s.status("web")["rollout"]["state"] == "Progressing"
