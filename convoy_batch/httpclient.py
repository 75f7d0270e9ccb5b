"""The HTTP requests of notifications and of verification's providers (urllib3, which the
Kubernetes client brings): the pool they go through, and why one failed, in words.

No retries (a notification's outbox retries on later ticks, a measurement is taken again
an interval later). urllib3's own messages repeat the URL, so they are never passed on:
a failure is told in words that hold no URL, host or token.
"""

import urllib3


def pool() -> urllib3.PoolManager:
    return urllib3.PoolManager(retries=False, maxsize=2)


def failure_words(exc: urllib3.exceptions.HTTPError) -> str:
    """Why a request failed, in words that hold no URL, host or token."""
    errors = urllib3.exceptions
    if isinstance(exc, errors.MaxRetryError) and isinstance(exc.reason, errors.HTTPError):
        return failure_words(exc.reason)
    if isinstance(exc, errors.NewConnectionError):  # before TimeoutError: a subclass of it
        reason = exc.__cause__ or exc.__context__
        detail = reason.strerror if isinstance(reason, OSError) and reason.strerror else ""
        return f"cannot connect ({detail.lower()})" if detail else "cannot connect"
    if isinstance(exc, errors.TimeoutError):
        return "timed out"
    if isinstance(exc, errors.SSLError):
        return "TLS error"
    if isinstance(exc, errors.ProtocolError):
        return "connection broken"
    if isinstance(exc, errors.LocationValueError | errors.URLSchemeUnknown):
        return "not a usable URL"
    return type(exc).__name__
