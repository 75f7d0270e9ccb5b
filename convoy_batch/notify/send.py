"""Sending one request (urllib3, which the Kubernetes client brings). Does network I/O.

No retries here (the outbox retries on later ticks) and a time-out on every request. A
failure is told in words that hold no URL, host or token: urllib3's own messages repeat
the URL, so they are never passed on.
"""

from dataclasses import dataclass

import urllib3

from convoy_batch.notify.payloads import HttpRequest


@dataclass(frozen=True)
class Failed:
    why: str
    """In words that hold no URL, host or token."""
    answered: bool = False
    """The receiver answered (an HTTP status), so it is up: other events may go."""


def pool() -> urllib3.PoolManager:
    return urllib3.PoolManager(retries=False, maxsize=2)


def send(http: urllib3.PoolManager, request: HttpRequest, timeout: float) -> Failed | None:
    """POST ``request``; None when the receiver took it (2xx), else why not."""
    try:
        response = http.request(
            "POST",
            request.url,
            body=request.body,
            headers=request.headers,
            timeout=urllib3.Timeout(total=timeout),
            redirect=False,
            preload_content=True,
        )
    except urllib3.exceptions.HTTPError as exc:
        return Failed(failure_words(exc))
    except ValueError:  # a URL urllib3 cannot use: its message would repeat it
        return Failed("not a usable URL")
    except Exception as exc:  # anything else: its message might name the URL too
        return Failed(type(exc).__name__)
    if 200 <= response.status < 300:
        return None
    return Failed(f"HTTP {response.status}", answered=True)


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
