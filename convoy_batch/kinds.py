"""What the reconciler knows of Kubernetes kinds without asking a server: scope and
apply order (SPEC 3), and the kinds a batch's CustomResourceDefinitions define. Pure,
no I/O.
"""

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

# Kinds that live outside namespaces, keyed by (group, kind).
CLUSTER_SCOPED: frozenset[tuple[str, str]] = frozenset(
    {
        ("", "Namespace"),
        ("", "Node"),
        ("", "PersistentVolume"),
        ("", "ComponentStatus"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("apiregistration.k8s.io", "APIService"),
        ("storage.k8s.io", "StorageClass"),
        ("storage.k8s.io", "CSIDriver"),
        ("storage.k8s.io", "CSINode"),
        ("storage.k8s.io", "VolumeAttachment"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("node.k8s.io", "RuntimeClass"),
        ("networking.k8s.io", "IngressClass"),
        ("policy", "PodSecurityPolicy"),
        ("certificates.k8s.io", "CertificateSigningRequest"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    }
)

# Apply order within a wave (SPEC 3); kinds not listed come after, then by name.
KIND_ORDER: tuple[str, ...] = (
    "Namespace",
    "CustomResourceDefinition",
    "ServiceAccount",
    "Secret",
    "ConfigMap",
    "PersistentVolumeClaim",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicaSet",
    "Deployment",
    "StatefulSet",
    "Job",
    "CronJob",
)
_RANK = {kind: i for i, kind in enumerate(KIND_ORDER)}


def group_of(api_version: str) -> str:
    """``apps/v1`` -> ``apps``; ``v1`` -> the core group ``""``."""
    return api_version.rpartition("/")[0]


def is_cluster_scoped(
    group: str, kind: str, extra: frozenset[tuple[str, str]] = frozenset()
) -> bool:
    """True for built-in cluster-scoped kinds and for ``extra`` (e.g. CRDs with scope Cluster)."""
    return (group, kind) in CLUSTER_SCOPED or (group, kind) in extra


def kind_rank(kind: str) -> int:
    return _RANK.get(kind, len(KIND_ORDER))


def _crds(objects: Iterable[Any]) -> Iterator[tuple[str, str, Any]]:
    """(group, kind, scope) of the custom resources these CustomResourceDefinitions
    define; objects of other kinds, and CRDs that name no kind, are passed over."""
    for obj in objects:
        if not isinstance(obj, Mapping) or obj.get("kind") != "CustomResourceDefinition":
            continue
        spec = obj.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        names = spec.get("names")
        kind = names.get("kind") if isinstance(names, Mapping) else None
        if kind:
            yield str(spec.get("group") or ""), str(kind), spec.get("scope")


def crd_kinds(objects: Iterable[Any]) -> frozenset[tuple[str, str]]:
    """(group, kind) of every custom resource these objects' CRDs define."""
    return frozenset((group, kind) for group, kind, _ in _crds(objects))


def cluster_scoped_crds(objects: Iterable[Any]) -> frozenset[tuple[str, str]]:
    """(group, kind) of every custom resource these objects' CRDs define with scope
    Cluster: the ``extra`` of :func:`is_cluster_scoped`."""
    return frozenset((group, kind) for group, kind, scope in _crds(objects) if scope == "Cluster")
