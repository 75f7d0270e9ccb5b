"""Talking to a Kubernetes API server: one HTTP transport, discovery. Does network I/O.

The configuration comes from the kubeconfig (:mod:`convoy_batch.deployers.kubeconfig`);
requests go through one urllib3 pool built from that configuration, with raw
JSON in and out, because the generated typed client spends most of its time converting
objects we only pass through. Messages never carry credentials: errors are built from
the server's ``Status.message`` and the kubeconfig path, nothing else.

Request counts per method (and dry runs apart) are kept in ``COUNTS`` for the benchmark
and for logs.

A server that fails (SPEC 15: ``ClusterUnavailable``) is :class:`Unreachable`: no
connection, no answer within the client time-out, an answer cut short (a 2xx answer is
always a whole JSON object, so anything less was cut), a 5xx or a 429. urllib3's own log
lines about them (a retry, headers it could not parse, with a traceback) are kept off the
log: the outcome's one line says what failed. A request that got no answer within the
time-out silences the server for the instance's life (one tick): later requests fail at
once instead of each waiting out the time-out, so a tick on a hung server ends about one
time-out after its first request.

A 429 whose ``Retry-After`` is a number of seconds is the one answer whose request is sent
again, and only when it may be sent twice to the same effect (:func:`retry_safe`): after
sleeping that long, at most :data:`RETRY_TRIES` sends of the request, and at most
:data:`RETRY_BUDGET` seconds of such sleeps per instance (one Cluster and tick), shared
by its threads. The waits are ``Retry-After``'s own seconds, counted and slept: no clock
is read. Any other 429 (no ``Retry-After``, a date, more than the instance may still
wait, a request not retry-safe, the last try) is :class:`Unreachable` as it was answered.
"""

import json
import logging
import os
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import urllib3

from convoy_batch.deployers.base import Capabilities
from convoy_batch.deployers.kubeconfig import header_value
from convoy_batch.errors import ClusterUnavailable, Forbidden

log = logging.getLogger("convoy_batch")

COUNTS: Counter[str] = Counter()
"""Requests sent by this process: ``GET``, ``PATCH``, ``DELETE``..., ``dry-run PATCH``."""

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
TIMEOUT_ENV = "CONVOY_K8S_TIMEOUT"
DEFAULT_TIMEOUT = 60.0
"""Seconds a request waits for the server's answer (``$CONVOY_K8S_TIMEOUT`` overrides it)."""
CONNECT_TIMEOUT = 5.0  # seconds for a connection, at most (and at most the time-out)
# Connection failures are retried briefly here; a request that reached the server is not,
# but for a 429 with Retry-After, which ``KubeApi.request`` waits on (see module doc).
RETRIES = urllib3.Retry(
    total=2,
    connect=2,
    read=0,
    status=0,
    redirect=0,
    backoff_factor=0.2,
    respect_retry_after_header=False,
)
POOL_SIZE = 32
"""Connections kept open to one API server (requests in flight at once, at most)."""
RETRY_TRIES = 3
"""Sends of one request answered 429 with a ``Retry-After``, at most (the first included)."""
RETRY_BUDGET = 10.0
"""Seconds of ``Retry-After`` waited per Cluster and tick, at most, by all its requests."""
IDEMPOTENT_PATCHES = frozenset({APPLY_PATCH, MERGE_PATCH})


def write_count() -> int:
    """Write requests (not dry runs) sent by this process so far."""
    return sum(n for method, n in COUNTS.items() if method in WRITE_METHODS)


class Unreachable(Exception):
    """The server could not be reached, did not answer, cut its answer, or answered that it
    cannot serve now (5xx, 429): nothing said about the request itself."""


def retry_safe(method: str, content_type: str | None, dry: bool) -> bool:
    """A request that may be sent twice to the same effect: a read (GET: discovery, a
    LIST, an object), a dry run, a DELETE (once carried out, its repeat answers 404, which
    is "gone"), a server-side apply (the same fields from the same field manager, forced:
    the same object) or a JSON merge patch (fixed values). Not a POST that creates: its
    repeat after one that was carried out answers 409."""
    if dry or method in ("GET", "DELETE"):
        return True
    return method == "PATCH" and content_type in IDEMPOTENT_PATCHES


def retry_after(value: str | None) -> float | None:
    """The seconds a ``Retry-After`` asks for (the API server sends whole seconds); None
    without one, or for an HTTP date, which only the clock could turn into a wait."""
    text = (value or "").strip()
    return float(text) if text.isascii() and text.isdigit() else None


class _WaitBudget:
    """The seconds of ``Retry-After`` one instance may still sleep, shared by its threads:
    a wait is taken whole before it is slept, or not at all."""

    def __init__(self, seconds: float) -> None:
        self.left = seconds
        self._lock = threading.Lock()

    def take(self, seconds: float) -> bool:
        with self._lock:
            if seconds > self.left:
                return False
            self.left -= seconds
            return True


class ApiError(Exception):
    """An HTTP answer other than 2xx, with the server's one-line message."""

    def __init__(self, status: int, reason: str, message: str, details: Mapping[str, Any]):
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.details = details


# --- kubeconfig -----------------------------------------------------------------------


def client_timeout(where: str) -> float:
    """The client time-out in seconds: ``$CONVOY_K8S_TIMEOUT`` when set (read here only),
    else 60 (ClusterUnavailable for a value that is not a positive number)."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise ClusterUnavailable(f"{where}: ${TIMEOUT_ENV}={text!r} is not a number of seconds")
    return seconds


class _LibraryNoise(logging.Filter):
    """Drops urllib3's warnings about a failure the request reports itself: a retry of a
    broken connection, headers it could not parse (logged with a whole traceback)."""

    NOISE = ("Retrying (", "Failed to parse headers")

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.NOISE)


_NOISE = _LibraryNoise()


def _quiet_library_log() -> None:
    for name in ("urllib3.connection", "urllib3.connectionpool"):
        logger = logging.getLogger(name)
        if _NOISE not in logger.filters:
            logger.addFilter(_NOISE)


def _pool(configuration: Any, timeout: float) -> urllib3.PoolManager:
    """The connections for the configuration's server (TLS, client certificates, proxy)."""
    kwargs: dict[str, Any] = {
        "num_pools": 2,
        "maxsize": POOL_SIZE,
        "cert_reqs": ssl.CERT_REQUIRED if configuration.verify_ssl else ssl.CERT_NONE,
        "ca_certs": configuration.ssl_ca_cert,
        "cert_file": configuration.cert_file,
        "key_file": configuration.key_file,
        "retries": RETRIES,
        "timeout": urllib3.Timeout(connect=min(CONNECT_TIMEOUT, timeout), read=timeout),
    }
    if configuration.assert_hostname is not None:
        kwargs["assert_hostname"] = configuration.assert_hostname
    server_name = getattr(configuration, "tls_server_name", None)
    if server_name:
        kwargs["server_hostname"] = server_name
    if configuration.proxy:
        headers = configuration.proxy_headers or {}
        return urllib3.ProxyManager(configuration.proxy, proxy_headers=headers, **kwargs)
    return urllib3.PoolManager(**kwargs)


# --- requests ---------------------------------------------------------------------------


def _status_error(status: int, data: bytes) -> ApiError:
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        text = data.decode("utf-8", "replace").strip().splitlines()
        return ApiError(status, "", f"HTTP {status}: {text[0] if text else 'no body'}", {})
    message = str(body.get("message") or f"HTTP {status}")
    return ApiError(status, str(body.get("reason") or ""), message, body.get("details") or {})


def _status_text(status: int, data: bytes) -> str:
    """``HTTP 500: <the server's message>``."""
    error = str(_status_error(status, data))
    return error if error.startswith("HTTP ") else f"HTTP {status}: {error}"


class KubeApi:
    """One API server: raw JSON requests and per-instance discovery (one tick)."""

    def __init__(
        self,
        configuration: Any,
        where: str,
        timeout: float = DEFAULT_TIMEOUT,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``sleep``: how a ``Retry-After`` is waited on (tests count the waits instead)."""
        self.host = str(configuration.host).rstrip("/")
        self.where = where
        self.timeout = timeout
        self._configuration = configuration
        manager = _pool(configuration, timeout)
        self._urlopen: Any = manager.urlopen
        self._base = self.host
        if not (configuration.proxy and self.host.startswith("http:")):
            # Straight to the server's one connection pool, past the manager's URL routing
            # (a plain-HTTP proxy needs whole URLs, so it keeps the manager).
            self._urlopen = manager.connection_from_url(self.host).urlopen
            self._base = urlsplit(self.host).path  # a server behind a path prefix
        self._discovery: dict[str, dict[str, Resource] | Exception] = {}
        self._discovering = threading.Lock()
        self._described: Capabilities | Exception | None = None
        self._describing = threading.Lock()
        self._unanswered: str | None = None  # the request that got no answer (see module doc)
        self._sleep = sleep
        self._waits = _WaitBudget(RETRY_BUDGET)  # Retry-After's seconds (see module doc)
        _quiet_library_log()

    def _headers(self, content_type: str | None) -> dict[str, str]:
        """The request's headers, the kubeconfig's credentials among them (ClusterUnavailable
        for a credential no HTTP header can carry: see :func:`header_value`)."""
        headers = {"Accept": "application/json", "User-Agent": "convoy-batch"}
        if content_type:
            headers["Content-Type"] = content_type
        try:
            # It runs the kubeconfig's refresh hook (exec plugins, expiring tokens).
            settings = list(self._configuration.auth_settings().values())
        except Exception as exc:  # whatever the hook raises may quote the credential
            problem = f"the kubeconfig's credentials failed: {type(exc).__name__}"
            raise ClusterUnavailable(f"{self.where}: {problem}") from None
        for setting in settings:
            if setting.get("in") == "header" and setting.get("value"):
                key = str(setting["key"])
                headers[key] = header_value(key, str(setting["value"]), self.where)
        return headers

    def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> Any:
        """The decoded JSON answer (Unreachable, ApiError; Forbidden, an outcome of its
        own, for credentials or a request the server refuses: 401, 403). A retry-safe
        request answered 429 with a short ``Retry-After`` is sent again (see module doc)."""
        url = self._base + path + (f"?{urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        dry = bool(query and query.get("dryRun"))
        headers = self._headers(content_type)  # checked before anything is sent
        safe = retry_safe(method, content_type, dry)
        tries, waited = 1, 0.0
        while True:
            response = self._send(method, path, url, data, headers, dry)
            if response.status != 429:
                return self._answer(method, path, response.status, response.data)
            wait = self._retry_wait(response, method, safe, tries, waited)
            if isinstance(wait, str):
                return self._answer(method, path, 429, response.data, wait)
            self._sleep(wait)
            tries, waited = tries + 1, waited + wait

    def _retry_wait(
        self, response: Any, method: str, safe: bool, tries: int, waited: float
    ) -> float | str:
        """The seconds to wait before sending a request answered 429 again, taken from the
        budget here; or why it is not sent again, a note to the server's message."""
        wait = retry_after(response.headers.get("Retry-After"))
        if wait is None:
            return ""  # the server named no time: reported as it was answered
        if not safe:
            return f" (not sent again: a {method} that may have been carried out)"
        if tries == RETRY_TRIES:
            return f" ({tries} tries, {waited:g}s waited as Retry-After asked)"
        if not self._waits.take(wait):
            after = f", after {tries} tries" if tries > 1 else ""
            left = f"the {self._waits.left:g}s this Cluster may still wait in this tick"
            return f" (Retry-After: {wait:g}s, more than {left}{after})"
        return wait

    def _send(
        self,
        method: str,
        path: str,
        url: str,
        data: bytes | None,
        headers: dict[str, str],
        dry: bool,
    ) -> Any:
        """One send of the request: urllib3's response (Unreachable when none came)."""
        what = f"{self.host}: {method} {path}"
        if self._unanswered is not None:
            raise Unreachable(f"{what}: not sent: {self._unanswered}")
        COUNTS[f"dry-run {method}" if dry else method] += 1
        try:
            return self._urlopen(method, url, body=data, headers=headers, redirect=False)
        except urllib3.exceptions.HTTPError as exc:
            if not _timed_out(exc):
                raise Unreachable(f"{what}: {_reason(exc)}") from None
            waited = f"no answer within {self.timeout:g}s"
            # Other threads read it without a lock: a str is assigned in one step.
            self._unanswered = f"{method} {path} got {waited} in this tick"
            raise Unreachable(f"{what}: {waited}") from None
        except Exception as exc:  # anything else the client raises
            # (http.client's "Invalid header value b'Bearer ...'" quotes a credential): its
            # kind alone, in one line, never its message.
            raise Unreachable(f"{what}: the request failed: {type(exc).__name__}") from None

    def _answer(self, method: str, path: str, status: int, data: bytes, note: str = "") -> Any:
        """The decoded answer, or its error: Unreachable for a server that cannot serve
        (5xx, 429; ``note`` said after its message) and for an answer cut short, Forbidden
        for 401 and 403, else ApiError."""
        if status >= 500 or status == 429:
            text = _status_text(status, data)
            raise Unreachable(f"{self.host}: {method} {path}: {text}{note}")
        if status in (401, 403):
            error = _status_error(status, data)
            raise Forbidden(f"{self.where}: {method} {path}: {error}")
        if status >= 300:
            raise _status_error(status, data)
        if status == 204:
            return {}
        try:
            decoded = json.loads(data)
        except ValueError:
            decoded = None
        if not isinstance(decoded, dict):  # the API server's every answer to us is one
            cut = f"HTTP {status} and {len(data)} bytes, not a whole JSON object"
            raise Unreachable(f"{self.host}: {method} {path}: the answer was cut: {cut}")
        return decoded

    # --- discovery --------------------------------------------------------------------

    def resources(self, api_version: str, refresh: bool = False) -> dict[str, "Resource"]:
        """Kind -> Resource served for one group version (cached; empty when not served).
        A failure (Unreachable, ApiError, Forbidden) is cached too: asked once per tick."""
        found = self._discovery.get(api_version)
        if refresh or found is None:
            with self._discovering:  # Releases side by side ask once
                found = self._discovery.get(api_version)
                if refresh or found is None:
                    found = self._discovery[api_version] = self._discovered(api_version)
        if isinstance(found, Exception):
            raise found.with_traceback(None)
        return found

    def _discovered(self, api_version: str) -> dict[str, "Resource"] | Exception:
        try:
            return self._discover(api_version)
        except (Unreachable, ApiError, Forbidden) as exc:
            return exc

    def _discover(self, api_version: str) -> dict[str, "Resource"]:
        path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        try:
            listing = self.request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return {}
            raise
        found: dict[str, Resource] = {}
        for item in listing.get("resources") or []:
            name = str(item.get("name", ""))
            if "/" in name or not item.get("kind"):
                continue  # subresources such as deployments/status
            kind = str(item["kind"])
            found[kind] = Resource(api_version, kind, name, bool(item.get("namespaced")))
        return found

    def capabilities(self) -> Capabilities:
        """The server's version and what it serves, read once (its answer, or its failure:
        Unreachable, ApiError, Forbidden, is kept for the instance's life, one tick)."""
        with self._describing:
            if self._described is None:
                try:
                    self._described = self._describe()
                except (Unreachable, ApiError, Forbidden) as exc:
                    self._described = exc
        if isinstance(self._described, Exception):
            raise self._described
        return self._described

    def _describe(self) -> Capabilities:
        """``/version``, then every group version of ``/api`` and ``/apis`` and the kinds of
        each (discovery, kept for the deployer). A group version whose kinds cannot be read
        (an aggregated API whose service is down) is listed without them, as client-go's
        discovery goes on past a broken group."""
        version = str(self.request("GET", "/version").get("gitVersion") or "")
        served = [str(v) for v in self.request("GET", "/api").get("versions") or []]
        for group in self.request("GET", "/apis").get("groups") or []:
            served += [str(v.get("groupVersion")) for v in group.get("versions") or []]
        found = set(served)
        for api_version in served:
            try:
                found.update(f"{api_version}/{kind}" for kind in self.resources(api_version))
            except (Unreachable, ApiError, Forbidden) as exc:
                log.warning("%s: %s: kinds unknown: %s", self.where, api_version, exc)
        return Capabilities(version, tuple(sorted(found)))


def _timed_out(exc: Exception) -> bool:
    """The server took the connection (or never completed it) and gave no answer in time
    (not a refused connection, which urllib3 files under connect time-outs too)."""
    inner = getattr(exc, "reason", None) or exc
    timeout = urllib3.exceptions.TimeoutError
    return isinstance(inner, timeout) and not isinstance(
        inner, urllib3.exceptions.NewConnectionError
    )


def _reason(exc: Exception) -> str:
    """A short cause for a transport error (the innermost one of a retry chain)."""
    inner = getattr(exc, "reason", None) or exc
    if isinstance(inner, urllib3.exceptions.ProtocolError) and inner.args:
        # ('Connection broken: IncompleteRead(..)', IncompleteRead(..)) or ('Connection
        # aborted.', RemoteDisconnected('Remote end closed connection without response'))
        said = [str(a).strip() for a in inner.args]
        detail = f" {said[1]}" if len(said) > 1 and said[1] not in said[0] else ""
        return f"no whole answer: {said[0]}{detail}"
    text = str(inner).strip()
    # urllib3 repeats object reprs ("<urllib3.connection.HTTPSConnection object at 0x..>: ...").
    return text.split(">: ", 1)[-1] if ">: " in text else text or type(inner).__name__


@dataclass(frozen=True)
class Resource:
    """A served kind: where its objects live in the API."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        root = f"/apis/{self.api_version}" if "/" in self.api_version else "/api/v1"
        where = f"/namespaces/{quote(namespace, safe='')}" if self.namespaced and namespace else ""
        tail = f"/{quote(name, safe='')}" if name else ""
        return f"{root}{where}/{self.plural}{tail}"
