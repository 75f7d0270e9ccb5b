"""Argo CD and Flux annotations read by the public render function: every mapping of
the table of docs/guides/annotations.md, convoy's own annotation winning, and every
unknown value refused."""

import re
from pathlib import Path
from typing import Any

import pytest

from convoy_batch.errors import RenderFailed
from convoy_batch.manifests import annotations
from convoy_batch.models import HealthState
from convoy_batch.renderers.pipeline import Render, RenderedObject, load_render
from tests.rollout.test_render import run

HOOK = annotations.ARGO_HOOK
POLICY = annotations.ARGO_HOOK_DELETE_POLICY
WAVE = annotations.ARGO_SYNC_WAVE
OPTIONS = annotations.ARGO_SYNC_OPTIONS
COMPARE = "argocd.argoproj.io/compare-options"
PRUNE = annotations.FLUX_PRUNE
SSA = annotations.FLUX_SSA
RECONCILE = annotations.FLUX_RECONCILE
HELM = annotations.HELM_HOOK
HELM_POLICY = annotations.HELM_HOOK_DELETE_POLICY
HELM_WEIGHT = annotations.HELM_HOOK_WEIGHT


def job(name: str, notes: dict[str, str], kind: str = "Job") -> str:
    lines = "".join(f"    {k}: {v!r}\n" for k, v in notes.items())
    meta = f"  annotations:\n{lines}" if notes else ""
    api_version = "batch/v1" if kind == "Job" else "v1"
    return f"apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {name}\n{meta}"


def render_one(notes: dict[str, str]) -> Render:
    return run({"app/a.yaml": job("x", notes)})


def the_object(notes: dict[str, str]) -> RenderedObject:
    (obj,) = render_one(notes).objects
    return obj


def meaning_of(obj: RenderedObject) -> dict[str, Any]:
    return {
        "wave": obj.wave,
        "hooks": obj.hooks,
        "prune": obj.prune,
        "create_only": obj.create_only,
        "delete_when": obj.delete_when,
    }


PLAIN = {"wave": 0, "hooks": (), "prune": True, "create_only": False, "delete_when": frozenset()}
SUCCEEDED = frozenset({HealthState.CURRENT})
FAILED = frozenset({HealthState.FAILED})

# (annotations, what convoy-batch makes of them): one row per line of the docs' table
MAPPINGS = [
    pytest.param({HOOK: "PreSync"}, {"hooks": ("PreSync",)}, id="argo-hook-presync"),
    pytest.param({HOOK: "Sync"}, {"hooks": ("Sync",)}, id="argo-hook-sync"),
    pytest.param({HOOK: "PostSync"}, {"hooks": ("PostSync",)}, id="argo-hook-postsync"),
    pytest.param({HOOK: "SyncFail"}, {"hooks": ("SyncFail",)}, id="argo-hook-syncfail"),
    pytest.param({HOOK: " PreSync "}, {"hooks": ("PreSync",)}, id="argo-hook-spaces"),
    pytest.param(
        {HOOK: "PostSync, PreSync"}, {"hooks": ("PreSync", "PostSync")}, id="argo-hook-phases"
    ),
    pytest.param(
        {HOOK: "PostSync,Sync,PreSync,Sync"},
        {"hooks": ("PreSync", "Sync", "PostSync")},
        id="argo-hook-phases-in-sync-order",
    ),
    pytest.param(
        {HOOK: "PreSync", POLICY: "BeforeHookCreation"}, {"hooks": ("PreSync",)}, id="policy-before"
    ),
    pytest.param(
        {HOOK: "PreSync", POLICY: "HookSucceeded"},
        {"hooks": ("PreSync",), "delete_when": SUCCEEDED},
        id="policy-succeeded",
    ),
    pytest.param(
        {HOOK: "PostSync", POLICY: "HookFailed"},
        {"hooks": ("PostSync",), "delete_when": FAILED},
        id="policy-failed",
    ),
    pytest.param(
        {HOOK: "Sync", POLICY: "HookSucceeded, HookFailed,BeforeHookCreation"},
        {"hooks": ("Sync",), "delete_when": SUCCEEDED | FAILED},
        id="policy-list",
    ),
    pytest.param({POLICY: "HookSucceeded"}, {}, id="policy-without-hook-ignored"),
    pytest.param({WAVE: "3"}, {"wave": 3}, id="argo-wave"),
    pytest.param({WAVE: "-2"}, {"wave": -2}, id="argo-wave-negative"),
    pytest.param({OPTIONS: "Prune=false"}, {"prune": False}, id="argo-prune-false"),
    pytest.param({OPTIONS: "Prune=true"}, {}, id="argo-prune-true"),
    pytest.param(
        {OPTIONS: "ServerSideApply=true, Prune=false"}, {"prune": False}, id="argo-options-list"
    ),
    *(
        pytest.param({OPTIONS: f"{option}=true"}, {}, id=f"argo-option-{option}-ignored")
        for option in sorted(annotations.ARGO_IGNORED_OPTIONS)
    ),
    pytest.param({COMPARE: "IgnoreExtraneous"}, {}, id="argo-compare-options-ignored"),
    pytest.param({PRUNE: "disabled"}, {"prune": False}, id="flux-prune-disabled"),
    pytest.param({PRUNE: "Disabled"}, {"prune": False}, id="flux-prune-any-case"),
    pytest.param({PRUNE: "enabled"}, {}, id="flux-prune-enabled"),
    pytest.param({SSA: "IfNotPresent"}, {"create_only": True}, id="flux-ssa-ifnotpresent"),
    pytest.param({SSA: "ifnotpresent"}, {"create_only": True}, id="flux-ssa-any-case"),
    pytest.param({SSA: "Override"}, {}, id="flux-ssa-override"),
    pytest.param({SSA: "Merge"}, {}, id="flux-ssa-merge"),
    pytest.param({RECONCILE: "enabled"}, {}, id="flux-reconcile-enabled"),
    # convoy's own annotation wins, and the peer's is then not read at all
    pytest.param({"convoy.dev/sync-wave": "2", WAVE: "5"}, {"wave": 2}, id="convoy-wave-wins"),
    pytest.param(
        {"convoy.dev/sync-wave": "2", WAVE: "soon"}, {"wave": 2}, id="convoy-wave-peer-unread"
    ),
    pytest.param(
        {"convoy.dev/hook": "PreSync", HOOK: "PostSync"}, {"hooks": ("PreSync",)}, id="convoy-hook"
    ),
    pytest.param(
        {"convoy.dev/hook": "PostSync", HOOK: "Skip"},
        {"hooks": ("PostSync",)},
        id="convoy-over-skip",
    ),
    pytest.param({"convoy.dev/prune": "true", PRUNE: "disabled"}, {}, id="convoy-prune-wins"),
    pytest.param(
        {"convoy.dev/prune": "true", OPTIONS: "Prune=false"}, {}, id="convoy-prune-over-argo"
    ),
    pytest.param({OPTIONS: "Prune=true", PRUNE: "disabled"}, {"prune": False}, id="peers-either"),
    pytest.param({HELM: "pre-install"}, {"hooks": ("PreSync",)}, id="helm-pre-install"),
    pytest.param({HELM: "pre-upgrade"}, {"hooks": ("PreSync",)}, id="helm-pre-upgrade"),
    pytest.param({HELM: "post-install"}, {"hooks": ("PostSync",)}, id="helm-post-install"),
    pytest.param({HELM: "post-upgrade"}, {"hooks": ("PostSync",)}, id="helm-post-upgrade"),
    pytest.param(
        {HELM: "pre-install,pre-upgrade", HELM_WEIGHT: "-5"},
        {"hooks": ("PreSync",), "wave": -5},
        id="helm-list-and-weight",
    ),
    pytest.param(
        {HELM: "post-delete, post-install"}, {"hooks": ("PostSync",)}, id="helm-dropped-and-sync"
    ),
    pytest.param(
        {HELM: "pre-install,pre-upgrade,post-install,post-upgrade"},
        {"hooks": ("PreSync", "PostSync")},
        id="helm-pre-and-post",
    ),
    pytest.param(
        {HELM: "post-upgrade,test,pre-install", HELM_POLICY: "hook-succeeded"},
        {"hooks": ("PreSync", "PostSync"), "delete_when": SUCCEEDED},
        id="helm-phases-in-sync-order",
    ),
    pytest.param(
        {HELM: "pre-install", HELM_POLICY: "before-hook-creation,hook-succeeded,hook-failed"},
        {"hooks": ("PreSync",), "delete_when": SUCCEEDED | FAILED},
        id="helm-policies",
    ),
    pytest.param({HOOK: "PostSync", HELM: "pre-install"}, {"hooks": ("PostSync",)}, id="argo-wins"),
]


@pytest.mark.parametrize(("notes", "meant"), MAPPINGS)
def test_a_peer_annotation_means_what_the_table_says(
    notes: dict[str, str], meant: dict[str, Any]
) -> None:
    obj = the_object(notes)
    assert meaning_of(obj) == PLAIN | meant
    assert obj.hook == (obj.hooks[0] if obj.hooks else None)  # it sorts by its first


IGNORED_ROWS = [
    {HOOK: "Skip"},
    {HOOK: "Skip, Skip"},
    {SSA: "Ignore"},
    {SSA: "ignore"},
    {RECONCILE: "disabled"},
]
DROPPED_ROWS = [{HELM: hook} for hook, phase in annotations.HELM_HOOKS.items() if phase is None]
IGNORING_ROWS = IGNORED_ROWS + DROPPED_ROWS


def test_every_value_the_code_knows_has_a_row() -> None:
    rows = [param.values[0] for param in MAPPINGS] + IGNORING_ROWS
    pairs = [(name, value) for row in rows for name, value in row.items()]
    tested = {(name, item.strip()) for name, value in pairs for item in value.split(",")}
    known = {(HOOK, h) for h in (*annotations.ARGO_HOOKS, annotations.SKIP)}
    known |= {(POLICY, p) for p in annotations.DELETE_POLICIES}
    known |= {(SSA, v) for v in annotations.FLUX_SSA_VALUES}
    known |= {(OPTIONS, f"{o}=true") for o in annotations.ARGO_IGNORED_OPTIONS}
    known |= {(OPTIONS, "Prune=false"), (PRUNE, "disabled"), (RECONCILE, "disabled")}
    known |= {(HELM, h) for h in annotations.HELM_HOOKS}
    known |= {(HELM_POLICY, p) for p in annotations.HELM_DELETE_POLICIES}
    assert known <= tested, sorted(known - tested)


@pytest.mark.parametrize("notes", IGNORED_ROWS, ids=lambda n: "-".join(n.values()))
def test_skipped_and_ignored_objects_are_never_applied(notes: dict[str, str]) -> None:
    result = run({"app/a.yaml": job("kept", {}) + "---\n" + job("left", notes)})
    assert [o.key.name for o in result.objects] == ["kept"]
    assert [key.name for key in result.ignored] == ["left"]
    again = load_render(result.canonical, "web", result.revision)
    assert [key.name for key in again.ignored] == ["left"]


@pytest.mark.parametrize("notes", IGNORED_ROWS, ids=lambda n: "-".join(n.values()))
def test_an_ignored_object_enters_the_render_ref_by_its_identity_alone(
    notes: dict[str, str],
) -> None:
    one = run({"app/a.yaml": job("kept", {}) + "---\n" + job("left", notes)})
    other = job("left", notes) + "spec: {backoffLimit: 9}\n"
    two = run({"app/a.yaml": job("kept", {}) + "---\n" + other})
    assert two.ref == one.ref
    renamed = run({"app/a.yaml": job("kept", {}) + "---\n" + job("right", notes)})
    assert renamed.ref != one.ref  # which objects are spared is part of the render


@pytest.mark.parametrize("notes", DROPPED_ROWS, ids=lambda n: "-".join(n.values()))
def test_helm_hooks_no_sync_runs_are_left_out_of_the_render_and_its_ref(
    notes: dict[str, str],
) -> None:
    alone = run({"app/a.yaml": job("kept", {})})
    result = run({"app/a.yaml": job("kept", {}) + "---\n" + job("test-x7k2q", notes)})
    assert [o.key.name for o in result.objects] == ["kept"]
    assert result.ignored == ()
    assert (result.ref, result.canonical) == (alone.ref, alone.canonical)


def test_argo_hook_phases_order_presync_sync_waves_postsync_and_leave_syncfail_out() -> None:
    files = {
        "app/a.yaml": job("late", {WAVE: "1"}, "ConfigMap")
        + "---\n"
        + job("plain", {}, "ConfigMap")
        + "---\n"
        + job("pre", {HOOK: "PreSync"})
        + "---\n"
        + job("during", {HOOK: "Sync"})
        + "---\n"
        + job("post", {HOOK: "PostSync"})
        + "---\n"
        + job("failing", {HOOK: "SyncFail"})
    }
    result = run(files)
    assert result.phases() == ("PreSync", "Sync", 0, 1, "PostSync")
    order = ["pre", "during", "plain", "late", "post", "failing"]
    assert [o.key.name for o in result.objects] == order
    assert [o.key.name for o in result.by_phase("SyncFail")] == ["failing"]


def test_a_hook_of_several_phases_is_one_object_in_each_of_its_phases() -> None:
    files = {
        "app/a.yaml": job("post", {HOOK: "PostSync"})
        + "---\n"
        + job("account", {HELM: "pre-install,post-install"}, "ServiceAccount")
        + "---\n"
        + job("pre", {HELM: "pre-install"})
        + "---\n"
        + job("plain", {}, "ConfigMap")
    }
    result = run(files)
    assert result.phases() == ("PreSync", 0, "PostSync")
    assert [o.key.name for o in result.objects] == ["account", "pre", "plain", "post"]
    assert [o.key.name for o in result.by_phase("PreSync")] == ["account", "pre"]
    # In its later phase it takes its place by kind order among that phase's own hooks.
    assert [o.key.name for o in result.by_phase("PostSync")] == ["account", "post"]
    (account,) = (o for o in result.objects if o.key.name == "account")
    assert (account.hook, account.phase, account.phases) == ("PreSync", "PreSync", account.hooks)
    assert account.hooks == ("PreSync", "PostSync")


def test_a_later_phase_orders_a_hook_of_several_phases_by_its_wave_and_kind() -> None:
    files = {
        "app/a.yaml": job("early", {HOOK: "PostSync", WAVE: "-1"})
        + "---\n"
        + job("both", {HOOK: "PreSync,PostSync"})
        + "---\n"
        + job("late", {HOOK: "PostSync", WAVE: "1"})
    }
    result = run(files)
    assert [o.key.name for o in result.by_phase("PostSync")] == ["early", "both", "late"]
    assert [o.key.name for o in result.objects] == ["both", "early", "late"]


UNKNOWN = [
    pytest.param({HOOK: "Presync"}, HOOK, "'Presync' is not one of PreSync", id="hook-case"),
    pytest.param({HOOK: "PreDelete"}, HOOK, "'PreDelete' is not one of", id="hook-unknown"),
    *(
        pytest.param(
            {HOOK: value},
            HOOK,
            f"{value.replace(' ', '')!r} is not a list of sync phases (Skip and SyncFail stand",
            id=f"hook-{value}",
        )
        for value in ("Skip,PreSync", "SyncFail,PreSync", "PostSync, SyncFail", "Skip,SyncFail")
    ),
    pytest.param({HOOK: "PreSync,Bogus"}, HOOK, "'Bogus' is not one of", id="hook-list-unknown"),
    pytest.param({HOOK: " , "}, HOOK, "' , ' is not one of", id="hook-empty"),
    pytest.param({POLICY: "Never"}, POLICY, "'Never' is not a list of", id="policy-unknown"),
    pytest.param(
        {HOOK: "Sync", POLICY: "HookSucceeded,hookfailed"},
        POLICY,
        "'hookfailed' is not a list of",
        id="policy-case",
    ),
    pytest.param({WAVE: "soon"}, WAVE, "'soon' is not an integer", id="wave-text"),
    pytest.param({WAVE: "1.5"}, WAVE, "'1.5' is not an integer", id="wave-float"),
    pytest.param(
        {OPTIONS: "Prune=confirm"}, OPTIONS, "is not Prune=false or Prune=true", id="confirm"
    ),
    pytest.param(
        {OPTIONS: "Bogus=true"}, OPTIONS, "'Bogus=true' is not a known Argo CD", id="option-unknown"
    ),
    pytest.param({OPTIONS: "Prune"}, OPTIONS, "'Prune' is not a list of", id="option-no-value"),
    pytest.param({PRUNE: "false"}, PRUNE, "'false' is not enabled or disabled", id="flux-prune"),
    pytest.param({SSA: "Always"}, SSA, "'Always' is not Override or Merge", id="flux-ssa"),
    pytest.param({RECONCILE: "off"}, RECONCILE, "'off' is not enabled or disabled", id="reconcile"),
    pytest.param({HELM: "pre-sync"}, HELM, "'pre-sync' is not a list of Helm hooks", id="helm"),
    pytest.param(
        {HELM: "pre-install", HELM_POLICY: "HookSucceeded"},
        HELM_POLICY,
        "'HookSucceeded' is not a list of before-hook-creation",
        id="helm-policy",
    ),
    pytest.param({HELM_WEIGHT: "high"}, HELM_WEIGHT, "'high' is not an integer", id="helm-weight"),
]


@pytest.mark.parametrize(("notes", "name", "message"), UNKNOWN)
def test_an_unknown_value_is_a_one_line_render_failure_naming_file_object_and_annotation(
    notes: dict[str, str], name: str, message: str
) -> None:
    with pytest.raises(RenderFailed) as raised:
        render_one(notes)
    text = str(raised.value)
    assert "\n" not in text
    assert text.startswith(f"app/a.yaml: Job.batch web-ns/x: annotation {name}: "), text
    assert message in text, text


def test_a_value_that_is_not_text_is_refused() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations:\n"
    with pytest.raises(RenderFailed, match=re.escape(f"annotation {HOOK}: 1 is not one of")):
        run({"app/a.yaml": text + f"    {HOOK}: 1\n"})


def test_an_integer_argo_wave_is_read_as_convoy_reads_its_own() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations:\n"
    (obj,) = run({"app/a.yaml": text + f"    {WAVE}: 4\n"}).objects
    assert obj.wave == 4


def test_the_docs_table_names_every_annotation_and_value_the_code_knows() -> None:
    guide = Path(__file__).resolve().parents[2] / "docs" / "guides" / "annotations.md"
    text = guide.read_text()
    table = text[text.index("# Argo CD and Flux annotations") :]
    names = (HOOK, POLICY, WAVE, OPTIONS, COMPARE, PRUNE, SSA, RECONCILE, HELM, HELM_POLICY)
    values = (
        *annotations.ARGO_HOOKS,
        annotations.SKIP,
        *annotations.DELETE_POLICIES,
        *annotations.FLUX_SSA_VALUES,
        *annotations.ARGO_IGNORED_OPTIONS,
        *annotations.HELM_HOOKS,
        *annotations.HELM_DELETE_POLICIES,
    )
    missing = [word for word in (*names, *values) if f"`{word}`" not in table]
    assert not missing
