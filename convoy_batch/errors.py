"""Typed errors raised at the I/O edges (source, render, cluster, state directory), one per
outcome reason.

Each carries a one-line message that says what and where (file, object, field); the
reconcile maps them to the outcome reasons of SPEC 4 in one place. Gates and holds are
values, not exceptions.
"""

import re
from typing import ClassVar


class ConvoyError(Exception):
    """Base: ``reason`` is the outcome reason, ``str(err)`` the one-line message."""

    reason: ClassVar[str] = "Error"

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def one_line(text: str) -> str:
    """``text`` on one line: white space folded, other control characters escaped
    (``\\x00``), so a message never breaks a line or a terminal."""
    folded = " ".join(text.split())
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", folded)


class InvalidRelease(ConvoyError):
    reason = "InvalidRelease"


class SourceFailed(ConvoyError):
    reason = "SourceFailed"


class RenderFailed(ConvoyError):
    reason = "RenderFailed"


class ClusterNotFound(ConvoyError):
    reason = "ClusterNotFound"


class ClusterUnavailable(ConvoyError):
    reason = "ClusterUnavailable"


class Forbidden(ConvoyError):
    """The cluster refused the credentials (HTTP 401) or the request (403)."""

    reason = "Forbidden"


class OwnershipConflict(ConvoyError):
    """An object of the render belongs to a Release earlier in repository order."""

    reason = "OwnershipConflict"


class DryRunFailed(ConvoyError):
    reason = "DryRunFailed"


class ApplyFailed(ConvoyError):
    reason = "ApplyFailed"


class PruneFailed(ConvoyError):
    reason = "PruneFailed"


class StateFailed(ConvoyError):
    """A file or folder of the state directory that cannot be read or written (a folder
    where a file belongs, a symlink leading out of it, permissions)."""

    reason = "StateFailed"


class UsageError(Exception):
    """A CLI usage problem (exit code 2): unreadable repository, unknown Release name."""
