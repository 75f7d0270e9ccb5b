"""Sending one request (urllib3, on the pool of :mod:`convoy_batch.httpclient`). Does
network I/O.

No retries here (the outbox retries on later ticks) and a time-out on every request. A
failure is told in words that hold no URL, host or token (``httpclient.failure_words``):
urllib3's own messages repeat the URL, so they are never passed on.
"""

from dataclasses import dataclass

import urllib3

from convoy_batch.httpclient import failure_words
from convoy_batch.notify.payloads import HttpRequest


@dataclass(frozen=True)
class Failed:
    why: str
    """In words that hold no URL, host or token."""
    answered: bool = False
    """The receiver answered (an HTTP status), so it is up: other events may go."""


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
