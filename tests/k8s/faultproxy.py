"""A fault proxy for the Kubernetes tests: plain HTTP on a loopback port in front of the
real API server (reached over TLS with its CA), forwarding every request unless a fault is
switched on. Does network I/O; threads of its own, stopped by ``close`` (or the ``with``
block), every wait bounded.

Faults (:class:`Fault`), each for the requests it matches, a number of times or every
time: an answer cut (reset) in its headers (within a header's name, after the status
line and the first headers) or its body after the server answered, an
HTTP status of the proxy's own (5xx, 429, 409: the request never reaches the server; a
429 or 503 says ``Retry-After: 1`` unless told another value or none), a request held
without an answer, an answer delayed. :func:`throttled_once` is the 429 a new custom
resource type's first LIST gets from a Kubernetes 1.34 server.
"""

import http.client
import json
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from tests.support.loopback import Exchange, Loopback

HOLD_LIMIT = 120.0  # seconds a held request waits at most (switching the fault ends it first)
UPSTREAM_TIMEOUT = 30.0  # seconds for the real server's answer
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "host", "transfer-encoding", "content-length", "upgrade"}
)
STATUS_REASONS = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError"}

Match = Callable[[str, str], bool]
"""(method, path with its query) -> the fault applies to the request."""


def every(_method: str, _path: str) -> bool:
    return True


def applies(method: str, path: str) -> bool:
    """A server-side apply that is not a dry run: the request that changes the cluster."""
    return method == "PATCH" and "dryRun" not in path


def lists(plural: str) -> Match:
    """The LISTs of one kind (its plural), in any namespace or across all of them."""

    def match(method: str, path: str) -> bool:
        return method == "GET" and path.split("?", 1)[0].endswith(f"/{plural}")

    return match


@dataclass(frozen=True)
class Fault:
    """What the proxy does to the requests ``match`` selects, ``times`` of them (None:
    every one). ``kind``: ``cut-headers``, ``cut-body``, ``status``, ``hold``, ``slow``.
    ``retry_after``: the header a 429 or 503 of the proxy's says (None: none)."""

    kind: str
    match: Match = every
    times: int | None = None
    status: int = 503
    delay: float = 0.2
    retry_after: str | None = "1"


def throttled_once(match: Match = every) -> Fault:
    """429 with ``Retry-After: 1`` to the first request ``match`` selects, then pass."""
    return Fault("status", match, times=1, status=429, retry_after="1")


@dataclass
class _Answer:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes

    def raw(self) -> bytes:
        lines = [f"HTTP/1.1 {self.status} {self.reason}"]
        lines += [f"{k}: {v}" for k, v in self.headers if k.lower() not in HOP_BY_HOP]
        lines.append(f"Content-Length: {len(self.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


@dataclass
class FaultProxy:
    """``url`` forwards to ``upstream`` (https) trusting ``ca_file``; ``hits`` lists the
    requests a fault was applied to (``METHOD path``), ``seen`` every request since the
    fault was last switched, in the order they came."""

    upstream: str
    ca_file: Path
    hits: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    fault: Fault | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _release: threading.Event = field(default_factory=threading.Event)
    """Set when the fault is switched: the requests it holds are let go."""
    _left: int | None = None
    """How many more requests the fault hits (None: every one)."""

    def __post_init__(self) -> None:
        self._context = ssl.create_default_context(cafile=str(self.ca_file))
        self._server = Loopback(self._handle, keep_alive=True)  # as the API server keeps them

    @property
    def url(self) -> str:
        return self._server.url

    def set(self, fault: Fault | None) -> None:
        """Switch the fault (None: forward everything); held requests are let go."""
        with self._lock:
            self._release.set()
            self._release = threading.Event()
            self.fault = fault
            self._left = None if fault is None else fault.times
            self.hits.clear()
            self.seen.clear()

    def close(self) -> None:
        self.set(None)
        self._server.close()

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()

    # --- the requests ------------------------------------------------------------------

    def _handle(self, exchange: Exchange) -> None:
        request = exchange.request
        fault, release = self.take(request.method, request.path)
        if fault is not None and fault.kind == "hold":
            release.wait(timeout=HOLD_LIMIT)
            exchange.drop()
            return
        if fault is not None and fault.kind == "status":
            exchange.raw(_status(fault.status, fault.retry_after).raw())
            return
        if fault is not None and fault.kind == "slow":
            release.wait(timeout=fault.delay)
        try:
            answer = self.forward(request.method, request.path, request.headers, request.body)
        except OSError:  # the server is down: the client sees its connection cut
            exchange.reset()
            return
        raw = answer.raw()
        if fault is not None and fault.kind == "cut-headers":  # in a header's name
            exchange.reset(raw[: raw.index(b"\r\nContent-Type:") + len(b"\r\nCont")])
        elif fault is not None and fault.kind == "cut-body":
            start = raw.index(b"\r\n\r\n") + 4
            exchange.reset(raw[: start + len(answer.body) // 2])
        else:
            exchange.raw(raw)

    def take(self, method: str, path: str) -> tuple[Fault | None, threading.Event]:
        """The fault for this request, counted (None: forward it), and the event that
        ends its waits."""
        with self._lock:
            self.seen.append(f"{method} {path}")
            fault = self.fault
            if fault is None or self._left == 0 or not fault.match(method, path):
                return None, self._release
            if self._left is not None:
                self._left -= 1
            self.hits.append(f"{method} {path}")
            return fault, self._release

    def forward(self, method: str, path: str, headers: Any, body: bytes) -> _Answer:
        """The real server's answer (OSError when it cannot be reached)."""
        where = urlsplit(self.upstream)
        conn = http.client.HTTPSConnection(
            where.hostname or "127.0.0.1",
            where.port,
            context=self._context,
            timeout=UPSTREAM_TIMEOUT,
        )
        try:
            sent = {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}
            conn.request(method, path, body=body or None, headers=sent)
            response = conn.getresponse()
            data = response.read()
            return _Answer(response.status, response.reason, response.getheaders(), data)
        except http.client.HTTPException as exc:
            raise OSError(str(exc)) from exc
        finally:
            conn.close()


def _status(code: int, retry_after: str | None) -> _Answer:
    reason = STATUS_REASONS.get(code, "ServiceUnavailable")
    message = f"the fault proxy answers {code}"
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message}
    headers = [("Content-Type", "application/json")]
    if code in (429, 503) and retry_after is not None:  # as the API server sheds load
        headers.append(("Retry-After", retry_after))
    data = json.dumps({**body, "reason": reason, "code": code}).encode()
    return _Answer(code, reason, headers, data)


def proxy_kubeconfig(kubeconfig: Path, proxy: FaultProxy, path: Path) -> Path:
    """A copy of ``kubeconfig`` whose server is the proxy (plain HTTP, the same token)."""
    import yaml

    config = yaml.safe_load(kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"] = {"server": proxy.url}
    path.write_text(yaml.safe_dump(config))
    return path
