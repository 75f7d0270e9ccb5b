"""ReleaseSets through the CLI on directory clusters: one definition, a Release per
Cluster (README "ReleaseSets"). Members are Releases named ``<set>-<cluster>`` with their
own status files; members that leave are retired by the Release deletion rules, counted
per set by the guard; a member set that cannot be told removes nobody."""

from pathlib import Path

import pytest

from tests.support.scenario import DEPLOYMENT, Scenario, cluster_yaml


def labelled(name: str, labels: str, vars_: str = "{}") -> str:
    return cluster_yaml(name, labels=labels, vars=vars_)


SETTINGS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: ${release}-settings}
data: {env: "${env}", a: "${a}", b: "${b}", c: "${c}", d: "${d}"}
"""

BY_LABEL = """\
apiVersion: convoy.dev/v1alpha1
kind: ReleaseSet
metadata: {name: web}
spec:
  generators:
  - clusters: {selector: {matchLabels: {env: prod}}}
  template:
    namespace: web
    source: {path: apps/web}
    vars: {env: "${cluster.labels.env}", a: t, b: t, c: t, d: t}
"""


@pytest.fixture
def fleet(scenario: Scenario) -> Scenario:
    """Three Clusters (eu1 and us1 prod, dev1 dev), the app, and the set over prod."""
    scenario.commit(
        {
            "clusters/eu1.yaml": labelled("eu1", "{env: prod, region: eu}", "{b: c}"),
            "clusters/us1.yaml": labelled("us1", "{env: prod, region: us}"),
            "clusters/dev1.yaml": labelled("dev1", "{env: dev}"),
            "apps/web/deployment.yaml": DEPLOYMENT.replace("IMAGE", "1.0"),
            "apps/web/settings.yaml": SETTINGS,
            "releases/web.yaml": BY_LABEL,
        },
        "web on every prod cluster",
    )
    return scenario


def live(s: Scenario, cluster: str, name: str) -> Path:
    return s.state / "clusters" / cluster / "web" / "deployment.apps" / f"{name}.yaml"


def settings(s: Scenario, cluster: str, name: str) -> dict[str, str]:
    import yaml

    path = s.state / "clusters" / cluster / "web" / "configmap" / f"{name}-settings.yaml"
    return dict(yaml.safe_load(path.read_text())["data"])


def test_a_set_over_clusters_by_label_makes_one_release_per_cluster(fleet: Scenario) -> None:
    s = fleet
    result = s.reconcile()

    assert result.code == 0, result.err
    assert s.has_status("web-eu1") and s.has_status("web-us1")
    assert not s.has_status("web-dev1")
    assert live(s, "eu1", "web-eu1").exists() and live(s, "us1", "web-us1").exists()
    assert not (s.state / "clusters" / "dev1").exists()
    assert settings(s, "eu1", "web-eu1")["env"] == "prod"
    assert sorted(s.status_log()) == [
        "web-eu1: Synced", "web-us1: Synced", "web: ReleaseSet of 2 members (2 Synced)"
    ]  # fmt: skip
    # The set's own status: its generation and its members with their states.
    assert s.status("web") == {
        "releaseSet": {
            "generation": {"state": "Generated", "message": ""},
            "members": [
                {"name": "web-eu1", "cluster": "eu1", "state": "Synced"},
                {"name": "web-us1", "cluster": "us1", "state": "Synced"},
            ],
            "refused": [],
        }
    }
    head = s.head()
    assert s.reconcile(minutes=1, extra=("--all",)).code == 0
    assert s.head() == head  # a quiet tick commits nothing, the set's status included
    # A member is a Release: status, plan and history name it.
    assert "web-us1" in s.cli("status").out
    assert s.cli("plan", "web-eu1", "--now", "2026-11-29T12:01:00Z").code == 0


def test_a_cluster_that_gains_the_label_gains_a_member_and_one_that_loses_it_loses_one(
    fleet: Scenario,
) -> None:
    s = fleet
    assert s.reconcile().code == 0
    s.commit({"clusters/dev1.yaml": labelled("dev1", "{env: prod}")}, "dev1 is prod now")

    assert s.reconcile(minutes=1).code == 0
    assert s.has_status("web-dev1") and live(s, "dev1", "web-dev1").exists()

    s.commit({"clusters/us1.yaml": labelled("us1", "{env: staging}")}, "us1 leaves prod")
    result = s.reconcile(minutes=2)

    assert result.code == 0, result.err
    assert not s.has_status("web-us1")  # one of three members: the guard lets it go
    assert not live(s, "us1", "web-us1").exists()
    assert s.status_log()[1].startswith("web-us1: - -> Deleted (")
    assert s.status_log()[0] == "web: ReleaseSet of 2 members (2 Synced)"
    members = s.status("web")["releaseSet"]["members"]
    assert [m["name"] for m in members] == ["web-dev1", "web-eu1"]
    assert live(s, "eu1", "web-eu1").exists() and live(s, "dev1", "web-dev1").exists()


def test_a_cluster_file_made_unparseable_removes_no_member(fleet: Scenario) -> None:
    s = fleet
    assert s.reconcile().code == 0
    good = s.repo.git.log("-1", "--format=%H", "--", ".", ":(exclude)status")  # not a status
    s.commit({"clusters/us1.yaml": "kind: Cluster\nmetadata: [not, a, mapping\n"}, "oops")

    result = s.reconcile(minutes=1)

    # The set cannot tell whether us1 is still a member: web-us1 stays as it was.
    assert result.code == 0, result.err
    assert s.status("web-us1")["lastAttempted"]["reason"] == "Synced"
    assert live(s, "us1", "web-us1").exists()
    line = next(x for x in result.err.splitlines() if x.startswith("web: GenerationFailed: "))
    assert line == (
        "web: GenerationFailed: clusters/us1.yaml: line 3: invalid YAML: did not find "
        "expected ',' or ']'; no member is removed, those it cannot generate now sync as "
        f"{good[:12]} generated them"
    )
    generation = s.status("web")["releaseSet"]["generation"]
    assert generation["state"] == "GenerationFailed"
    assert generation["message"].startswith("clusters/us1.yaml: ")
    assert generation["frozenAt"] == good
    assert s.status_log()[0] == "web: ReleaseSet of 2 members (2 Synced); GenerationFailed"
    # Due, web-us1 is what a hand-written Release on that Cluster is: its Cluster is
    # unknown, named; nothing of it is removed.
    result = s.reconcile(minutes=6)
    assert result.code == 1
    assert "web-us1: ClusterNotFound: clusters/us1.yaml: line 3: invalid YAML" in result.err
    assert s.status("web-eu1")["lastAttempted"]["reason"] == "Synced"
    assert live(s, "us1", "web-us1").exists()

    s.commit({"clusters/us1.yaml": labelled("us1", "{env: prod, region: us}")}, "fixed")
    assert s.reconcile(minutes=12).code == 0  # web-us1 due again (interval)
    assert s.status("web-us1")["lastAttempted"]["reason"] == "Synced"
    assert live(s, "us1", "web-us1").exists()
    assert s.status("web")["releaseSet"]["generation"] == {"state": "Generated", "message": ""}
    assert not any("Delet" in line for line in s.status_log())


def test_a_selector_change_to_zero_members_is_blocked_until_allowed(fleet: Scenario) -> None:
    s = fleet
    assert s.reconcile().code == 0
    s.commit({"releases/web.yaml": BY_LABEL.replace("env: prod", "env: nowhere")}, "typo")

    result = s.reconcile(minutes=1)

    assert result.code == 0, result.err
    assert "DeletionBlocked" in result.err or "DeletionBlocked" in result.out
    assert s.has_status("web-eu1") and s.has_status("web-us1")
    assert live(s, "eu1", "web-eu1").exists() and live(s, "us1", "web-us1").exists()

    result = s.reconcile(minutes=2, extra=("--allow-deletions",))
    assert result.code == 0, result.err
    assert not s.has_status("web-eu1") and not s.has_status("web-us1")
    assert not live(s, "eu1", "web-eu1").exists()


def test_the_guard_counts_a_set_s_members(fleet: Scenario) -> None:
    """Two of two members of one set leave while each of their Clusters keeps most of its
    Releases: only the set's count holds them."""
    s = fleet
    others = {
        f"releases/other{i}.yaml": (
            "apiVersion: convoy.dev/v1alpha1\nkind: Release\n"
            f"metadata: {{name: other{i}}}\n"
            f"spec: {{cluster: {('eu1', 'us1')[i % 2]}, namespace: other{i}, "
            "source: {path: apps/other}}\n"
        )
        for i in range(6)
    }
    others["apps/other/configmap.yaml"] = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${release}}\ndata: {a: b}\n"
    )
    s.commit(others, "three more Releases on each of eu1 and us1")
    assert s.reconcile().code == 0
    s.commit({"releases/web.yaml": BY_LABEL.replace("env: prod", "env: nowhere")}, "typo")

    result = s.reconcile(minutes=1)

    assert "mass deletion: 2 of 2 members of ReleaseSet web" in result.err + result.out
    assert s.has_status("web-eu1") and s.has_status("web-us1")


LISTED = """\
apiVersion: convoy.dev/v1alpha1
kind: ReleaseSet
metadata: {name: web}
spec:
  generators:
  - list:
      elements:
      - {cluster: eu1, image: "1.0", vars: {c: e, d: e}}
      - {cluster: us1}
  template:
    namespace: web
    source: {path: apps/web}
    vars: {env: "${element.image}", a: t, b: t, c: t, d: t}
  overrides:
  - selector: {matchLabels: {region: eu}}
    vars: {d: o}
"""


def test_vars_come_from_template_cluster_element_then_override(fleet: Scenario) -> None:
    s = fleet
    s.commit({"releases/web.yaml": LISTED}, "listed")

    result = s.reconcile()

    # template < Cluster spec.vars < the element's vars < the first matching override
    assert settings(s, "eu1", "web-eu1") == {"env": "1.0", "a": "t", "b": "c", "c": "e", "d": "o"}
    # us1's element has no image: that member alone is invalid, naming the name.
    assert "releases/web.yaml (member web-us1): spec.template: ${element.image} is not " \
        "defined" in result.err  # fmt: skip
    assert s.status("web-us1")["lastAttempted"]["reason"] == "InvalidRelease"
    assert not live(s, "us1", "web-us1").exists()
    assert result.code == 1


def test_a_hand_written_release_keeps_its_name_over_a_member(fleet: Scenario) -> None:
    s = fleet
    hand = (
        "apiVersion: convoy.dev/v1alpha1\nkind: Release\nmetadata: {name: web-eu1}\n"
        "spec: {cluster: eu1, namespace: hand, source: {path: apps/web}, vars: "
        "{env: hand, a: h, b: h, c: h, d: h}}\n"
    )
    s.commit({"releases/web-eu1.yaml": hand}, "a hand-written web-eu1")

    result = s.reconcile()

    assert result.code == 0, result.err
    line = (
        "releases/web.yaml: member web-eu1 refused: releases/web-eu1.yaml (a Release) has that name"
    )
    assert line in result.err
    assert s.status("web")["releaseSet"]["refused"] == [line]
    hand_live = s.state / "clusters" / "eu1" / "hand" / "deployment.apps" / "web-eu1.yaml"
    assert hand_live.exists() and not live(s, "eu1", "web-eu1").exists()
    assert s.has_status("web-us1")


MATRIX = """\
apiVersion: convoy.dev/v1alpha1
kind: ReleaseSet
metadata: {name: addons}
spec:
  generators:
  - matrix:
      generators:
      - directories: {path: "addons/*"}
      - clusters: {selector: {matchExpressions: [{key: env, operator: In, values: [prod]}]}}
  template:
    namespace: "${path.basename}"
    source: {path: "${path}"}
"""


def test_a_matrix_of_folders_and_clusters_makes_every_combination(fleet: Scenario) -> None:
    s = fleet
    configmap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${release}}\ndata: {a: b}\n"
    s.commit(
        {
            "releases/web.yaml": None,
            "releases/addons.yaml": MATRIX,
            "addons/ingress/cm.yaml": configmap,
            "addons/certs/cm.yaml": configmap,
        },
        "addons",
    )

    result = s.reconcile()

    assert result.code == 0, result.err
    names = {f"addons-{a}-{c}" for a in ("certs", "ingress") for c in ("eu1", "us1")}
    assert all(s.has_status(n) for n in names)
    cm = s.state / "clusters" / "us1" / "ingress" / "configmap" / "addons-ingress-us1.yaml"
    assert cm.exists()


def test_a_folder_that_cannot_be_read_removes_no_member(fleet: Scenario) -> None:
    s = fleet
    configmap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ${release}}\ndata: {a: b}\n"
    files = {"addons/ingress/cm.yaml": configmap, "addons/certs/cm.yaml": configmap}
    s.commit({"releases/web.yaml": None, "releases/addons.yaml": MATRIX, **files}, "addons")
    assert s.reconcile().code == 0
    good = s.repo.head.commit.hexsha
    dns = s.commit({"addons/dns/cm.yaml": configmap}, "dns")
    # The new addons/ folder's object is lost (a broken copy of the repository).
    tree = s.repo.git.rev_parse("HEAD:addons")
    (s.root / ".git" / "objects" / tree[:2] / tree[2:]).unlink()

    result = s.reconcile(minutes=1)

    line = next(x for x in result.err.splitlines() if x.startswith("addons: GenerationFailed: "))
    assert "addons/*: the folders cannot be read" in line, line
    assert line.endswith(f"those it cannot generate now sync as {good[:12]} generated them")
    names = {f"addons-{a}-{c}" for a in ("certs", "ingress") for c in ("eu1", "us1")}
    status = s.status("addons")["releaseSet"]
    assert {m["name"] for m in status["members"]} == names
    assert status["generation"]["frozenAt"] == good
    # Their source cannot be read either: each says so, and stays as applied.
    assert f"addons-certs-eu1: SourceFailed: commit {dns[:12]} " \
        f"cannot be read: error: Could not read {tree}" in result.err  # fmt: skip
    assert all(s.has_status(n) for n in names)
    cm = s.state / "clusters" / "us1" / "ingress" / "configmap" / "addons-ingress-us1.yaml"
    assert cm.exists()
    assert not any("Delet" in x for x in s.status_log())


def test_a_removed_set_s_members_are_retired_once_allowed(fleet: Scenario) -> None:
    s = fleet
    assert s.reconcile().code == 0
    s.commit({"releases/web.yaml": None}, "no more web")

    result = s.reconcile(minutes=1)

    assert "web-eu1: - DeletionBlocked render=- since=- (mass deletion: " in result.out
    assert live(s, "eu1", "web-eu1").exists()
    s.commit({"README.md": "web is gone\n"}, "let it go\n\nConvoy-Allow-Delete: all")
    result = s.reconcile(minutes=2)
    assert result.code == 0, result.err
    assert not s.has_status("web-eu1") and not s.has_status("web-us1")
    assert not live(s, "eu1", "web-eu1").exists() and not live(s, "us1", "web-us1").exists()
    # The set's own status goes with its last member's.
    assert not s.has_status("web")
    assert "web: ReleaseSet removed" in s.status_log()


def test_a_set_file_that_does_not_parse_keeps_its_members_syncing(fleet: Scenario) -> None:
    s = fleet
    assert s.reconcile().code == 0
    good = s.repo.git.log("-1", "--format=%H", "--", ".", ":(exclude)status")
    s.commit({"releases/web.yaml": BY_LABEL.replace("template:", "templat:")}, "oops")
    s.commit({"releases/web.yaml": "kind: ReleaseSet\nspec: [not, a, mapping\n"}, "worse")
    s.commit({"apps/web/deployment.yaml": DEPLOYMENT.replace("IMAGE", "2.0")}, "2.0")

    result = s.reconcile(minutes=1)

    # The set is its newest version that parsed: its members keep syncing (2.0 reaches
    # them), none is removed, and the file's error is the set's GenerationFailed.
    assert result.code == 0, result.err
    line = next(x for x in result.err.splitlines() if x.startswith("web: GenerationFailed: "))
    assert line.startswith("web: GenerationFailed: releases/web.yaml: line 3: invalid YAML")
    assert line.endswith(f"those it cannot generate now sync as {good[:12]} generated them")
    assert "InvalidRelease" not in result.err
    for cluster in ("eu1", "us1"):
        assert f"example/web-{cluster}:2.0" in live(s, cluster, f"web-{cluster}").read_text()
    status = s.status("web")["releaseSet"]
    assert status["generation"]["state"] == "GenerationFailed"
    assert [m["name"] for m in status["members"]] == ["web-eu1", "web-us1"]
    assert not any("Delet" in x for x in s.status_log())
    # Another Release's file removed meanwhile waits: the broken file could be it.
    s.commit({"releases/other.yaml": OTHER}, "other")
    assert s.reconcile(minutes=2).code == 0
    s.commit({"releases/other.yaml": None}, "other goes")
    result = s.reconcile(minutes=3)
    assert "other: DeletionPending: deletion waits: releases/web.yaml: line 3" in result.err

    s.commit({"releases/web.yaml": BY_LABEL}, "fixed")
    assert s.reconcile(minutes=4).code == 0
    assert s.status("web")["releaseSet"]["generation"] == {"state": "Generated", "message": ""}
    assert not s.has_status("other")


def test_a_set_file_broken_from_its_first_commit_is_a_release_that_does_not_parse(
    scenario: Scenario,
) -> None:
    s = scenario
    s.commit({"releases/web.yaml": BY_LABEL.replace("template:", "templat:")}, "oops")

    result = s.reconcile()

    assert result.code == 1
    assert "web: InvalidRelease: releases/web.yaml: spec" in result.err


OTHER = """\
apiVersion: convoy.dev/v1alpha1
kind: Release
metadata: {name: other}
spec:
  cluster: dev1
  namespace: other
  source: {path: apps/web}
  vars: {env: x, a: t, b: t, c: t, d: t}
"""


WAVES = """\
apiVersion: convoy.dev/v1alpha1
kind: ReleaseSet
metadata: {name: web}
spec:
  generators:
  - clusters: {selector: {matchLabels: {fleet: web}}}
  maxInFlight: 1
  template:
    namespace: web
    convoy: web
    source: {path: apps/web}
    vars: {env: x, a: t, b: t, c: t, d: t}
    failurePolicy: {rollback: Auto, progressDeadline: 10m}
"""


def wave_cluster(name: str, wave: int) -> str:
    return cluster_yaml(name, labels="{fleet: web}", wave=str(wave))


def deployment_status(s: Scenario, cluster: str, name: str, healthy: bool) -> None:
    """Play the Deployment controller of ``cluster``: ready, or past its deadline."""
    import yaml

    path = live(s, cluster, name)
    obj = yaml.safe_load(path.read_text())
    gen, n = obj["metadata"].get("generation", 1), obj["spec"]["replicas"]
    if healthy:
        counts = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
        status = {"observedGeneration": gen, **dict.fromkeys(counts, n)}
        status["conditions"] = [{"type": "Available", "status": "True"}]
    else:
        status = {"observedGeneration": gen, "replicas": n, "updatedReplicas": n}
        status["conditions"] = [
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
        ]
    obj["status"] = status
    path.write_text(yaml.safe_dump(obj))


def reasons(s: Scenario, *names: str) -> list[str]:
    return [s.status(n)["lastAttempted"]["reason"] for n in names]


def test_max_in_flight_rolls_a_wave_out_one_member_at_a_time(scenario: Scenario) -> None:
    s = scenario
    s.commit(
        {
            "clusters/a.yaml": wave_cluster("a", 0),
            "clusters/b.yaml": wave_cluster("b", 0),
            "clusters/c.yaml": wave_cluster("c", 0),
            "clusters/z.yaml": wave_cluster("z", 1),
            "apps/web/deployment.yaml": DEPLOYMENT.replace("IMAGE", "1.0"),
            "apps/web/settings.yaml": SETTINGS,
            "releases/web.yaml": WAVES,
        },
        "web in two waves, one member at a time",
    )

    result = s.reconcile()

    assert result.code == 0, result.err
    assert reasons(s, "web-a", "web-b", "web-c", "web-z") == [
        "Synced", "WaitingForMaxInFlight", "WaitingForMaxInFlight", "WaitingForClusterWave"
    ]  # fmt: skip
    assert s.status("web-b")["lastAttempted"]["message"] == (
        "ReleaseSet web: 1 of 3 members of cluster wave 0 not yet Succeeded (maxInFlight 1): web-a"
    )
    assert not live(s, "b", "web-b").exists()
    head = s.head()
    assert s.reconcile(minutes=0.5, extra=("--all",)).code == 0
    assert s.head() == head  # waiting, a quiet tick commits nothing

    deployment_status(s, "a", "web-a", healthy=True)
    assert s.reconcile(minutes=1).code == 0  # web-a Succeeded
    assert s.status("web-a")["rollout"]["state"] == "Succeeded"
    # The next tick wakes the waiting members (another member's status changed): b starts.
    assert s.reconcile(minutes=2).code == 0
    assert reasons(s, "web-b", "web-c") == ["Synced", "WaitingForMaxInFlight"]
    assert live(s, "b", "web-b").exists()

    # b fails (a first rollout: nothing to roll back to): its place stays taken, so c
    # and the next wave wait.
    deployment_status(s, "b", "web-b", healthy=False)
    assert s.reconcile(minutes=3).code == 0
    assert s.status("web-b")["rollout"]["state"] == "Failed"
    assert s.reconcile(minutes=4, extra=("--all",)).code == 0
    assert reasons(s, "web-c", "web-z") == ["WaitingForMaxInFlight", "WaitingForClusterWave"]
    assert not live(s, "c", "web-c").exists() and not live(s, "z", "web-z").exists()


def test_status_of_a_set_lists_its_members_and_what_stops_its_generation(
    fleet: Scenario,
) -> None:
    import json

    s = fleet
    assert s.reconcile().code == 0

    lines = s.cli("status", "web").out.splitlines()
    assert lines[0] == "web: ReleaseSet of 2 members (releases/web.yaml)"
    assert [line.split()[0] for line in lines[1:]] == ["web-eu1", "web-us1"]
    rows = json.loads(s.cli("status", "web", "--output", "json").out)
    assert [(r["name"], r["releaseSet"]) for r in rows] == [("web-eu1", "web"), ("web-us1", "web")]

    s.commit({"clusters/dev1.yaml": "kind: Cluster\nmetadata: [oops\n"}, "oops")
    first = s.cli("status", "web").out.splitlines()[0]
    assert first.startswith(
        "web: ReleaseSet of 2 members (releases/web.yaml); GenerationFailed: clusters/dev1.yaml"
    )


def test_diff_of_a_branch_shows_the_members_a_label_change_adds_and_removes(
    fleet: Scenario,
) -> None:
    from tests.cli.test_diff import everything, on_branch

    s = fleet
    assert s.reconcile().code == 0
    on_branch(
        s,
        "pr",
        {
            "clusters/us1.yaml": labelled("us1", "{env: staging}"),
            "clusters/dev1.yaml": labelled("dev1", "{env: prod}"),
        },
    )
    before = everything(s)

    result = s.cli("diff", "--all", "--revision", "pr")

    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert "web-dev1: 2 added, 0 changed, 0 removed against the render at HEAD (never " \
        "applied from this state directory)" in lines  # fmt: skip
    assert "web-us1: removed at the revision: Delete: web-us1: - -> Deleted (2 objects " \
        "deleted, 0 kept)" in lines  # fmt: skip
    assert "  - Deployment.apps web/web-us1 (deleted)" in lines
    assert everything(s) == before


def test_plan_says_which_set_generated_a_member(fleet: Scenario) -> None:
    s = fleet
    result = s.cli("plan", "web-eu1", "--now", "2026-11-29T12:00:00Z")

    assert result.code == 0, result.err
    assert result.out.rstrip().endswith(
        "; generated by ReleaseSet web (releases/web.yaml) for Cluster eu1"
    )


def test_a_set_wrong_in_itself_keeps_its_members_syncing_as_last_generated(
    fleet: Scenario,
) -> None:
    s = fleet
    assert s.reconcile().code == 0
    good = s.repo.git.log("-1", "--format=%H", "--", ".", ":(exclude)status")  # not a status
    # Every member named "web": the set cannot tell its members apart.
    broken = BY_LABEL.replace("template:", "nameTemplate: web\n  template:")
    s.commit({"releases/web.yaml": broken}, "one name for all")
    # A change of the app still reaches the members, at the spec the set last generated.
    s.commit({"apps/web/deployment.yaml": DEPLOYMENT.replace("IMAGE", "2.0")}, "2.0")

    result = s.reconcile(minutes=1)

    assert result.code == 0, result.err
    line = next(x for x in result.err.splitlines() if x.startswith("web: GenerationFailed: "))
    assert "two members are named 'web'" in line
    assert line.endswith(f"those it cannot generate now sync as {good[:12]} generated them")
    assert s.has_status("web-eu1") and s.has_status("web-us1")
    assert "example/web-eu1:2.0" in live(s, "eu1", "web-eu1").read_text()
    assert not any("Deleted" in x or "Deletion" in x for x in s.status_log())


def test_a_sharded_tick_records_the_set_s_status_once_its_shards_end(fleet: Scenario) -> None:
    s = fleet
    result = s.reconcile(extra=("--jobs", "2"))

    assert result.code == 0, result.err
    members = s.status("web")["releaseSet"]["members"]
    assert [(m["name"], m["state"]) for m in members] == [
        ("web-eu1", "Synced"), ("web-us1", "Synced")
    ]  # fmt: skip
    assert s.status_log()[0] == "web: ReleaseSet of 2 members (2 Synced)"
