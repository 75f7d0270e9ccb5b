"""Typed errors raised at the I/O edges (source, render, cluster, state directory), one per
outcome reason.

Each carries a one-line message that says what and where (file, object, field); the
reconcile maps them to the outcome reasons of SPEC 4 (:class:`~convoy_batch.reasons.Reason`)
in one place. Gates and holds are values, not exceptions.
"""

import os
import re
import traceback
from typing import ClassVar

from convoy_batch.reasons import Reason


class ConvoyError(Exception):
    """Base: ``reason`` is the outcome reason (set by every subclass, one each),
    ``str(err)`` the one-line message."""

    reason: ClassVar[Reason]

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def one_line(text: str) -> str:
    """``text`` on one line: white space folded, other control characters escaped
    (``\\x00``), so a message never breaks a line or a terminal."""
    folded = " ".join(text.split())
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", folded)


class InvalidRelease(ConvoyError):
    reason = Reason.INVALID_RELEASE


class SourceFailed(ConvoyError):
    reason = Reason.SOURCE_FAILED


class RenderFailed(ConvoyError):
    reason = Reason.RENDER_FAILED


class ClusterNotFound(ConvoyError):
    reason = Reason.CLUSTER_NOT_FOUND


class ClusterUnavailable(ConvoyError):
    reason = Reason.CLUSTER_UNAVAILABLE


class Forbidden(ConvoyError):
    """The cluster refused the credentials (HTTP 401) or the request (403)."""

    reason = Reason.FORBIDDEN


class OwnershipConflict(ConvoyError):
    """An object of the render belongs to a Release earlier in repository order."""

    reason = Reason.OWNERSHIP_CONFLICT


class DryRunFailed(ConvoyError):
    reason = Reason.DRY_RUN_FAILED


class ApplyFailed(ConvoyError):
    reason = Reason.APPLY_FAILED


class PruneFailed(ConvoyError):
    reason = Reason.PRUNE_FAILED


class StateFailed(ConvoyError):
    """A file or folder of the state directory that cannot be read or written (a folder
    where a file belongs, a symlink leading out of it, permissions)."""

    reason = Reason.STATE_FAILED


class DeletionPending(ConvoyError):
    """A removed Release whose retirement cannot be carried out yet: a Release file or
    the repository cannot be read, its Cluster cannot be reached, or a delete failed."""

    reason = Reason.DELETION_PENDING


class InvalidSyncWindow(ConvoyError):
    """A sync window of the Release or its Cluster does not parse: the Release applies
    nothing (a window fails closed)."""

    reason = Reason.INVALID_SYNC_WINDOW


class UsageError(Exception):
    """A CLI usage problem (exit code 2): unreadable repository, unknown Release name."""


def unexpected(exc: BaseException) -> str:
    """One line for an exception no edge turned into its error: its type and where it
    was raised (the innermost frame of this package, and the outermost frame of a library
    beyond it), never its message, which may quote a secret it was handed (a header, a
    token, a password), nor its traceback."""
    # Each frame as (file, line, function), whatever ``sys.tracebacklimit`` says.
    frames = [
        (f.f_code.co_filename, n, f.f_code.co_name) for f, n in traceback.walk_tb(exc.__traceback__)
    ]
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    ours = [f for f in frames if os.path.abspath(f[0]).startswith(package)]
    where = ""
    if ours:
        file, line, _ = ours[-1]
        relative = os.path.relpath(os.path.abspath(file), os.path.dirname(package[:-1]))
        where = f" at {relative.replace(os.sep, '/')}:{line}"
        beyond = frames[frames.index(ours[-1]) + 1 :]
        if beyond:
            where += f" (in {beyond[0][2]} of {os.path.basename(beyond[0][0])})"
    elif frames:
        where = f" in {frames[-1][2]} of {os.path.basename(frames[-1][0])}"
    return (
        f"internal error: {type(exc).__name__}{where}; its message is withheld, since it "
        "may quote a secret: please report it"
    )
