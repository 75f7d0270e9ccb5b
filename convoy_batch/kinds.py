"""What the reconciler knows of Kubernetes kinds without asking a server: scope and
apply order (SPEC 3). Pure, no I/O.
"""

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
