"""``syncPolicy.createNamespace`` on the directory cluster, where a namespace is a folder
that needs no Namespace object: with the field, the Namespace object is made as on a
real cluster (labelled, never pruned, left alone once there); without it, as before."""

from pathlib import Path

import pytest
import yaml

from convoy_batch.models import Release, parse_model
from tests.rollout.test_models import refusal, release_data
from tests.support.scenario import FAILURE_POLICY, Scenario, release_yaml

CREATE = "  syncPolicy: {createNamespace: true}\n"
EXTRA = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {a: b}\n"
PRE_SYNC = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: before\n"
    "  annotations: {convoy.dev/hook: PreSync}\n"
)


def namespace_file(s: Scenario, name: str = "web") -> Path:
    return s.object_path("_cluster", "namespace", name)


def test_create_namespace_defaults_to_false_and_takes_a_boolean() -> None:
    assert parse_model(Release, release_data(), "r.yaml").spec.sync_policy.create_namespace is False
    data = release_data(syncPolicy={"createNamespace": True})
    assert parse_model(Release, data, "r.yaml").spec.sync_policy.create_namespace is True
    message = refusal(Release, release_data(syncPolicy={"createNamespace": "sometimes"}), "r.yaml")
    assert message.startswith("r.yaml: spec.syncPolicy.createNamespace: "), message


def test_the_namespace_is_made_labelled_with_the_first_apply_and_never_pruned(
    scenario: Scenario,
) -> None:
    s = scenario
    s.app(extra={"extra.yaml": EXTRA, "before.yaml": PRE_SYNC}, spec_extra=CREATE + FAILURE_POLICY)
    result = s.reconcile("web", minutes=0)
    assert result.code == 0, result.err
    namespace = yaml.safe_load(namespace_file(s).read_text())
    assert namespace["metadata"]["name"] == "web"
    assert namespace["metadata"]["labels"] == {"convoy.dev/release": "web"}
    assert "annotations" not in namespace["metadata"]  # no render: not an object of one
    assert s.object_path("web", "configmap", "before").exists()
    inventory = (s.state / "inventory" / "web.json").read_text()
    assert '"Namespace"' not in inventory

    # Every object leaves the render: each is pruned, the namespace stays.
    spec = "  syncPolicy: {createNamespace: true, allowEmpty: true}\n"
    s.commit(
        {
            "apps/web/deployment.yaml": None,
            "apps/web/configmap.yaml": None,
            "apps/web/extra.yaml": None,
            "apps/web/before.yaml": None,
            "apps/web/empty.yaml": "# nothing\n",
            "releases/web.yaml": release_yaml("web", spec_extra=spec),
        }
    )
    result = s.reconcile("web", minutes=1)
    assert result.code == 0, result.err
    assert not s.object_path("web", "configmap", "extra").exists()
    assert not s.object_path("web", "deployment.apps", "web").exists()
    assert namespace_file(s).exists()
    # The Release removed (Delete, the default with prune): the namespace it made goes
    # with it, nothing else being in it; with Orphan it would stay
    # (tests/engine/test_delete_release.py).
    s.commit({"releases/web.yaml": None})
    s.reconcile(minutes=2)
    assert not namespace_file(s).exists() and not s.has_status("web")


def test_a_namespace_already_there_is_left_as_it_is(scenario: Scenario) -> None:
    s = scenario
    theirs = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: web\n  labels: {team: a}\n"
    path = namespace_file(s)
    path.parent.mkdir(parents=True)
    path.write_text(theirs)
    s.app(spec_extra=CREATE)
    assert s.reconcile("web", minutes=0).code == 0
    assert path.read_text() == theirs
    assert s.deployment_image() == "example/web:1.0"


def test_a_rendered_namespace_is_the_renders_own_object(scenario: Scenario) -> None:
    s = scenario
    own = "apiVersion: v1\nkind: Namespace\nmetadata: {name: web}\n"
    s.app(extra={"namespace.yaml": own}, spec_extra=CREATE)
    assert s.reconcile("web", minutes=0).code == 0
    namespace = yaml.safe_load(namespace_file(s).read_text())
    ref = s.status()["lastAttempted"]["renderRef"]
    assert namespace["metadata"]["annotations"]["convoy.dev/render"] == ref
    assert '"Namespace"' in (s.state / "inventory" / "web.json").read_text()


@pytest.mark.parametrize("spec_extra", ["", "  syncPolicy: {createNamespace: false}\n"])
def test_without_create_namespace_no_namespace_object_is_made(
    scenario: Scenario, spec_extra: str
) -> None:
    s = scenario
    s.app(spec_extra=spec_extra)
    assert s.reconcile("web", minutes=0).code == 0
    assert s.deployment_image() == "example/web:1.0"
    assert not namespace_file(s).exists()
