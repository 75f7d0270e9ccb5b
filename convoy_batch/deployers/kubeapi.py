"""Talking to a Kubernetes API server: kubeconfig loading, one HTTP transport, discovery.
Does network I/O.

The ``kubernetes`` package loads the kubeconfig (contexts, certificates, tokens, exec
plugins); requests go through one urllib3 pool built from that configuration, with raw
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
"""

import json
import logging
import os
import re
import ssl
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from convoy_batch.deployers.base import Capabilities
from convoy_batch.errors import ClusterUnavailable, Forbidden
from convoy_batch.models import KubernetesTarget
from convoy_batch.state.operator_files import shown, without_state_dir

log = logging.getLogger("convoy_batch")

COUNTS: Counter[str] = Counter()
"""Requests sent by this process: ``GET``, ``PATCH``, ``DELETE``..., ``dry-run PATCH``."""

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
TIMEOUT_ENV = "CONVOY_K8S_TIMEOUT"
DEFAULT_TIMEOUT = 60.0
"""Seconds a request waits for the server's answer (``$CONVOY_K8S_TIMEOUT`` overrides it)."""
CONNECT_TIMEOUT = 5.0  # seconds for a connection, at most (and at most the time-out)
# Connection failures are retried briefly; a request that reached the server is not (nor
# is a 429 or 503 with Retry-After: the answer is reported, and the next tick retries).
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


def write_count() -> int:
    """Write requests (not dry runs) sent by this process so far."""
    return sum(n for method, n in COUNTS.items() if method in WRITE_METHODS)


class Unreachable(Exception):
    """The server could not be reached, did not answer, cut its answer, or answered that it
    cannot serve now (5xx, 429): nothing said about the request itself."""


class ApiError(Exception):
    """An HTTP answer other than 2xx, with the server's one-line message."""

    def __init__(self, status: int, reason: str, message: str, details: Mapping[str, Any]):
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.details = details


# --- kubeconfig -----------------------------------------------------------------------


def kubeconfig_path(target: KubernetesTarget, base: Path) -> str:
    """``spec.kubernetes.kubeconfig`` (relative to ``base``), else ``$KUBECONFIG``, else
    ``~/.kube/config``. ``$KUBECONFIG`` may list several files, as kubectl allows. (Which
    named files may be used: :mod:`convoy_batch.deployers.targets`.)"""
    if target.kubeconfig:
        path = Path(target.kubeconfig).expanduser()
        return str(path if path.is_absolute() else base / path)
    env = os.environ.get("KUBECONFIG")
    return env if env else str(Path("~/.kube/config").expanduser())


def environment_kubeconfigs() -> tuple[Path, ...]:
    """The operator's own kubeconfigs: the files ``$KUBECONFIG`` lists, and
    ``~/.kube/config``."""
    listed = os.environ.get("KUBECONFIG", "").split(os.pathsep)
    return (*(Path(f) for f in listed if f), Path("~/.kube/config").expanduser())


def load_configuration(target: KubernetesTarget, base: Path, where: str) -> Any:
    """The client configuration for the target's kubeconfig and context (ClusterUnavailable,
    one line naming the file as ``<state>/...`` when it is in ``base``, the state
    directory)."""
    path = kubeconfig_path(target, base)
    configuration = k8s_client.Configuration()
    try:
        with _loader_errors() as logged:
            k8s_config.load_kube_config(
                config_file=path,
                context=target.context,
                client_configuration=configuration,
                persist_config=False,
            )
    except Exception as exc:  # any way a user's file fails to load
        # (bad YAML, missing fields, bad certificate data) is one line naming the file;
        # the loader's messages name files and keys, never tokens.
        raise _unloadable(where, path, str(exc).strip() or type(exc).__name__, base) from None
    if logged:  # an exec plugin that failed: the configuration has no credentials
        raise _unloadable(where, path, logged[0], base)
    return configuration


def _unloadable(where: str, path: str, problem: str, state_dir: Path) -> ClusterUnavailable:
    lines = problem.strip().splitlines()
    first_line = lines[0] if lines else "unknown problem"
    # The loader's message may name a file of the state directory (a missing tokenFile).
    first_line = without_state_dir(first_line, state_dir)
    named = shown(path, state_dir)
    return ClusterUnavailable(f"{where}: cannot load kubeconfig {named}: {first_line}")


_LOADER = os.path.dirname(k8s_config.__file__) + os.sep
_LOADING = threading.Lock()


class _LoaderErrors(logging.Filter):
    """Takes the errors the kubeconfig loader logs off the log and keeps their messages."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR or not record.pathname.startswith(_LOADER):
            return True
        self.messages.append(record.getMessage())
        return False


@contextmanager
def _loader_errors() -> Iterator[list[str]]:
    """The messages of the errors the kubeconfig loader logs meanwhile. It logs an exec
    plugin that fails (exit code, missing command, output without a credential) instead of
    raising, and goes on without credentials: every request would be anonymous."""
    caught = _LoaderErrors()
    root = logging.getLogger()  # the loader logs through the logging module's functions
    with _LOADING:
        root.addFilter(caught)
        try:
            yield caught.messages
        finally:
            root.removeFilter(caught)


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

    def __init__(self, configuration: Any, where: str, timeout: float = DEFAULT_TIMEOUT) -> None:
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
        own, for credentials or a request the server refuses: 401, 403)."""
        what = f"{self.host}: {method} {path}"
        if self._unanswered is not None:
            raise Unreachable(f"{what}: not sent: {self._unanswered}")
        url = self._base + path + (f"?{urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        dry = bool(query and query.get("dryRun"))
        COUNTS[f"dry-run {method}" if dry else method] += 1
        headers = self._headers(content_type)  # checked before anything is sent
        try:
            response = self._urlopen(method, url, body=data, headers=headers, redirect=False)
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
        return self._answer(method, path, response.status, response.data)

    def _answer(self, method: str, path: str, status: int, data: bytes) -> Any:
        """The decoded answer, or its error: Unreachable for a server that cannot serve
        (5xx, 429) and for an answer cut short, Forbidden for 401 and 403, else ApiError."""
        if status >= 500 or status == 429:
            raise Unreachable(f"{self.host}: {method} {path}: {_status_text(status, data)}")
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


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def header_value(key: str, value: str, where: str) -> str:
    """A header's value from the kubeconfig, as sent: without trailing white space (a
    ``tokenFile`` ending in a newline, which the client keeps); ClusterUnavailable, one line
    naming the header and never its value, for any other control character in it."""
    value = value.rstrip()
    if _CONTROL.search(value):
        raise ClusterUnavailable(
            f"{where}: the kubeconfig's credential (the {key} header) holds a control "
            "character, which no HTTP header can carry (its value is not shown)"
        )
    return value


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
