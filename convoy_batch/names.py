"""What Kubernetes accepts as names, and whether an object's identity can name a stored
object. Pure: no I/O.

The directory cluster keeps each object in a file named from its identity, and an
inventory's entries name objects to prune: an identity that is not a Kubernetes name
could name a path outside the cluster, so it is refused in both places.
"""

import re

from convoy_batch.models import ObjectKey

_SEGMENT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(rf"^{_SEGMENT}$")
_DNS1123_SUBDOMAIN = re.compile(rf"^{_SEGMENT}(\.{_SEGMENT})*$")
KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
VERSION = re.compile(r"^[a-z0-9]+$")


def is_subdomain(name: str) -> bool:
    return len(name) <= 253 and bool(_DNS1123_SUBDOMAIN.match(name))


def is_label(name: str) -> bool:
    return len(name) <= 63 and bool(_DNS1123_LABEL.match(name))


def is_path_segment(name: str) -> bool:
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\%\0")


def key_problem(key: ObjectKey) -> str | None:
    """Why ``key`` cannot name a stored object (None: it can): a namespace that is not a
    DNS-1123 label, a kind or group that is not valid, a name that is no path segment."""
    if key.namespace is not None and not is_label(key.namespace):
        return f"{key}: namespace {key.namespace!r} is not a DNS-1123 label"
    if not KIND.match(key.kind) or (key.group and not is_subdomain(key.group)):
        return f"{key}: kind or group is not valid"
    if not is_path_segment(key.name):
        return f"{key}: name {key.name!r} cannot be a file name"
    return None
