"""What Kubernetes accepts as names: DNS-1123 labels and subdomains, DNS-1035 labels,
kinds, API versions, and names that can be one file name. Pure: no I/O.
"""

import re

_SEGMENT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(rf"^{_SEGMENT}$")
_DNS1123_SUBDOMAIN = re.compile(rf"^{_SEGMENT}(\.{_SEGMENT})*$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
VERSION = re.compile(r"^[a-z0-9]+$")


def is_subdomain(name: str) -> bool:
    return len(name) <= 253 and bool(_DNS1123_SUBDOMAIN.match(name))


def is_label(name: str) -> bool:
    return len(name) <= 63 and bool(_DNS1123_LABEL.match(name))


def is_dns1035_label(name: str) -> bool:
    """A DNS-1123 label that starts with a letter (Service names)."""
    return len(name) <= 63 and bool(_DNS1035_LABEL.match(name))


def is_path_segment(name: str) -> bool:
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\%\0")
