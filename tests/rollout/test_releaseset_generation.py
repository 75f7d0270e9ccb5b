"""A ReleaseSet's generation, pure (``rollout/releaseset.py``): selectors, generators,
names, template names and the certainty of the member set."""

from typing import Any

import pytest

from convoy_batch.models import LABEL_RELEASE_SET, Cluster, ReleaseSet, parse_model
from convoy_batch.rollout.releaseset import Folders, Generation, generate

PATH = "releases/web.yaml"


def cluster(name: str, **labels: str) -> Cluster:
    data = {"apiVersion": "convoy.dev/v1alpha1", "kind": "Cluster"}
    return parse_model(Cluster, {**data, "metadata": {"name": name, "labels": labels}}, "c")


CLUSTERS = {
    "eu1": cluster("eu1", env="prod", region="eu"),
    "us1": cluster("us1", env="prod", region="us"),
    "dev1": cluster("dev1", env="dev"),
    "bare": cluster("bare"),
}


def release_set(generators: list[dict[str, Any]], **spec: Any) -> ReleaseSet:
    template = spec.pop("template", {"source": {"path": "apps/web"}})
    data = {
        "apiVersion": "convoy.dev/v1alpha1",
        "kind": "ReleaseSet",
        "metadata": {"name": "web"},
        "spec": {"generators": generators, "template": template, **spec},
    }
    return parse_model(ReleaseSet, data, PATH)


def run(
    generators: list[dict[str, Any]],
    errors: dict[str, str] | None = None,
    folders: Folders | None = None,
    **spec: Any,
) -> Generation:
    return generate(
        release_set(generators, **spec), PATH, CLUSTERS, errors or {}, folders or Folders()
    )


def names(generation: Generation) -> list[str]:
    return [m.name for m in generation.members]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({}, ["web-bare", "web-dev1", "web-eu1", "web-us1"]),
        ({"matchLabels": {"env": "prod"}}, ["web-eu1", "web-us1"]),
        ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["dev"]}]}, ["web-dev1"]),
        (
            {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]},
            ["web-bare", "web-dev1"],
        ),
        ({"matchExpressions": [{"key": "region", "operator": "Exists"}]}, ["web-eu1", "web-us1"]),
        (
            {"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]},
            ["web-bare"],
        ),
        (
            {
                "matchLabels": {"env": "prod"},
                "matchExpressions": [{"key": "region", "operator": "NotIn", "values": ["us"]}],
            },
            ["web-eu1"],
        ),
    ],
)
def test_a_clusters_generator_selects_by_label(
    selector: dict[str, Any], expected: list[str]
) -> None:
    generation = run([{"clusters": {"selector": selector}}])
    assert generation.failed is None
    assert names(generation) == expected


def test_a_member_is_a_release_labelled_with_its_set() -> None:
    (member,) = run([{"list": {"elements": [{"cluster": "eu1"}]}}]).members
    assert member.release is not None and member.error is None
    assert member.release.spec.cluster == "eu1"
    assert member.release.metadata.labels == {LABEL_RELEASE_SET: "web"}


def test_a_cluster_file_that_cannot_be_read_makes_the_set_uncertain() -> None:
    errors = {"broken": "clusters/broken.yaml: not a mapping"}
    generation = run([{"clusters": {"selector": {"matchLabels": {"env": "prod"}}}}], errors)
    # The others are generated; the caller removes none of the last members.
    assert names(generation) == ["web-eu1", "web-us1"]
    assert generation.failed == "clusters/broken.yaml: not a mapping"


def test_a_list_element_on_an_unreadable_cluster_is_uncertain_only_for_it() -> None:
    errors = {"us1": "clusters/us1.yaml: not a mapping"}
    generation = run([{"list": {"elements": [{"cluster": "eu1"}, {"cluster": "us1"}]}}], errors)
    assert names(generation) == ["web-eu1"]
    assert generation.failed == "clusters/us1.yaml: not a mapping"


@pytest.mark.parametrize(
    ("generators", "spec", "why"),
    [
        ([{"directories": {"path": "apps/*"}}], {}, "a member without a cluster"),
        (
            [{"matrix": {"generators": [
                {"list": {"elements": [{"cluster": "eu1"}]}},
                {"list": {"elements": [{"cluster": "us1"}]}},
            ]}}],
            {},
            "both generators name a cluster (eu1, us1)",
        ),
        ([{"clusters": {}}], {"nameTemplate": "web"}, "two members are named 'web'"),
        ([{"clusters": {}}], {"nameTemplate": "Web_${cluster}"}, "is not a DNS-1123 label"),
        ([{"clusters": {}}], {"nameTemplate": "${element.x}"}, "${element.x} is not defined"),
        (
            [{"clusters": {}}],
            {"template": {"cluster": "eu1", "source": {"path": "a"}}},
            "spec.template.cluster: set by the generators",
        ),
    ],
)  # fmt: skip
def test_a_set_wrong_in_itself_fails_its_generation(
    generators: list[dict[str, Any]], spec: dict[str, Any], why: str
) -> None:
    generation = run(generators, **spec)
    assert generation.members == ()
    assert generation.failed is not None and generation.failed.startswith(f"{PATH}: ")
    assert why in generation.failed


def test_a_folder_that_cannot_be_read_fails_the_generation_but_not_the_others() -> None:
    folders = Folders(errors={"apps/*": "the folders cannot be read: bad object"})
    generation = run(
        [
            {"matrix": {"generators": [{"directories": {"path": "apps/*"}}, {"clusters": {}}]}},
            {"list": {"elements": [{"cluster": "eu1"}]}},
        ],
        folders=folders,
    )
    assert names(generation) == ["web-eu1"]
    assert generation.failed is not None and "apps/*" in generation.failed


def test_template_names_are_replaced_and_other_references_left() -> None:
    template = {
        "namespace": "${path.basename}",
        "source": {"path": "${path}"},
        "vars": {
            "region": "${cluster.labels.region}",
            "name": "${cluster}",
            "tier": "${element.tier}",
            "on": "${element.on}",
            "kept": "${release}",
            "literal": "$${cluster}",
        },
    }
    folders = Folders(found={"addons/*": ["addons/ingress"]})
    generators = [
        {
            "matrix": {
                "generators": [
                    {"directories": {"path": "addons/*"}},
                    {"list": {"elements": [{"cluster": "eu1", "tier": 1, "on": True}]}},
                ]
            }
        }
    ]
    (member,) = run(generators, folders=folders, template=template).members

    assert member.name == "web-ingress-eu1"
    assert member.release is not None
    spec = member.release.spec
    assert (spec.namespace, spec.source.path) == ("ingress", "addons/ingress")
    assert spec.vars == {
        "region": "eu",
        "name": "eu1",
        "tier": "1",
        "on": "true",
        "kept": "${release}",
        "literal": "${cluster}",
    }


def test_an_undefined_template_name_makes_that_member_alone_invalid() -> None:
    template = {"source": {"path": "apps/web"}, "vars": {"zone": "${cluster.labels.region}"}}
    generation = run([{"clusters": {"selector": {"matchLabels": {"env": "dev"}}}},
                      {"list": {"elements": [{"cluster": "eu1"}]}}], template=template)  # fmt: skip

    dev, eu = generation.members
    assert dev.release is None and eu.release is not None
    assert dev.error == (
        f"{PATH} (member web-dev1): spec.template: ${{cluster.labels.region}} is not "
        "defined for this member"
    )


def test_a_member_whose_spec_is_wrong_names_the_field() -> None:
    template = {"source": {"path": "apps/web"}, "interval": "${element.every}"}
    (member,) = run(
        [{"list": {"elements": [{"cluster": "eu1", "every": "soon"}]}}], template=template
    ).members
    assert member.release is None
    assert member.error is not None
    assert member.error.startswith(f"{PATH} (member web-eu1): spec.interval")


def test_the_first_matching_override_wins() -> None:
    overrides = [
        {"selector": {"matchLabels": {"region": "eu"}}, "vars": {"a": "first"}},
        {"selector": {"matchLabels": {"env": "prod"}}, "vars": {"a": "second"}},
    ]
    generation = run([{"clusters": {"selector": {"matchLabels": {"env": "prod"}}}}],
                     overrides=overrides)  # fmt: skip
    found = {m.name: m.release.spec.vars["a"] for m in generation.members if m.release}
    assert found == {"web-eu1": "first", "web-us1": "second"}


@pytest.mark.parametrize("value", [0, "0%", "101%", "x", True])
def test_max_in_flight_is_a_positive_number_or_a_share(value: Any) -> None:
    with pytest.raises(ValueError, match="maxInFlight"):
        release_set([{"clusters": {}}], maxInFlight=value)
