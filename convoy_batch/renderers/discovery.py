"""A stand-in API server for a Helm render: a loopback HTTP server, in this process,
that answers Kubernetes discovery (``/version``, ``/api``, ``/apis`` and each group
version's resource list) from the :class:`Capabilities` read from the Cluster's server,
and every other request as not found (a read) or forbidden (a write), with a throwaway
kubeconfig naming it. Helm, run against it in its mode that reads the cluster, sees
exactly the server's version and API versions (``helm template`` alone adds its own
built-in list to any ``--api-versions``), while its ``lookup`` finds nothing, it can
store nothing, and the real server is never reached. I/O: a socket on 127.0.0.1 and one
file (the kubeconfig).

``mappable`` kinds (group/version/Kind) are kinds the render itself brings (custom
resources of a chart that also brings their definitions) that Helm must map to build
its objects, though the server does not serve them yet: they are listed from the second
discovery round on, never in the first, the one Helm's ``.Capabilities`` are read from.
"""

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from convoy_batch.deployers.base import Capabilities

_LOOPBACK = "127.0.0.1"
_VERSION = re.compile(r"v\d+((alpha|beta)\d+)?")


class _Discovery:
    """The answers, built once from the capabilities; counts the rounds asked."""

    def __init__(self, capabilities: Capabilities, mappable: frozenset[str]) -> None:
        self.version = capabilities.kube_version
        self.kinds = _kinds(capabilities.api_versions)
        self.later = _kinds(tuple(mappable))
        self.rounds = 0
        self.lock = threading.Lock()

    def answer(self, path: str) -> dict[str, Any] | None:
        """The JSON body for a discovery ``path``; None: not found."""
        if path == "/version":
            return _version(self.version)
        if path in ("/api", "/apis"):
            with self.lock:
                if path == "/apis":
                    self.rounds += 1
        kinds = self._served()
        if path == "/api":
            listed = [gv for gv in kinds if "/" not in gv]
            return {"kind": "APIVersions", "versions": listed, "serverAddressByClientCIDRs": []}
        if path == "/apis":
            return _group_list(kinds)
        for prefix in ("/api/", "/apis/"):
            group_version = path[len(prefix) :] if path.startswith(prefix) else ""
            if group_version in kinds and ("/" in group_version) == (prefix == "/apis/"):
                return _resource_list(group_version, kinds[group_version])
        return None

    def _served(self) -> dict[str, list[str]]:
        with self.lock:
            later = self.rounds > 1
        if not later:
            return self.kinds
        merged = {gv: list(kinds) for gv, kinds in self.kinds.items()}
        for gv, kinds in self.later.items():
            merged[gv] = sorted({*merged.get(gv, []), *kinds})
        return merged


def _kinds(api_versions: tuple[str, ...]) -> dict[str, list[str]]:
    """Group version -> its kinds, from ``v1``, ``v1/ConfigMap``, ``apps/v1/Deployment``."""
    found: dict[str, list[str]] = {}
    for item in api_versions:
        parts = item.split("/")
        size = 1 if _VERSION.fullmatch(parts[0]) else 2  # the core group has no name
        group_version, kind = "/".join(parts[:size]), "/".join(parts[size:])
        found.setdefault(group_version, [])
        if kind:
            found[group_version].append(kind)
    return {gv: sorted(set(kinds)) for gv, kinds in sorted(found.items())}


def _version(git_version: str) -> dict[str, Any]:
    major, _, rest = git_version.lstrip("v").partition(".")
    minor = rest.split(".")[0]
    return {"major": major, "minor": minor, "gitVersion": git_version}


def _group_list(kinds: dict[str, list[str]]) -> dict[str, Any]:
    groups: dict[str, list[str]] = {}
    for gv in kinds:
        if "/" in gv:
            group, version = gv.split("/", 1)
            groups.setdefault(group, []).append(version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {
                "name": group,
                "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
                "preferredVersion": {
                    "groupVersion": f"{group}/{versions[0]}",
                    "version": versions[0],
                },
            }
            for group, versions in groups.items()
        ],
    }


def _resource_list(group_version: str, kinds: list[str]) -> dict[str, Any]:
    """What the server serves of ``group_version``: the kinds are all Helm reads; the
    resource names and scope stand in (every other request is answered as not found,
    whatever its path)."""
    resources = [
        {
            "name": kind.lower() + "s",
            "singularName": kind.lower(),
            "namespaced": True,
            "kind": kind,
            "verbs": ["get", "list"],
        }
        for kind in kinds
    ]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


def _status(code: int, reason: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "code": code,
    }


def _handler(discovery: _Discovery) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = discovery.answer(self.path.split("?", 1)[0])
            if body is None:
                self._send(404, _status(404, "NotFound"))  # a lookup finds nothing
            else:
                self._send(200, body)

        def _refuse(self) -> None:
            self._send(403, _status(403, "Forbidden"))

        do_POST = do_PUT = do_PATCH = do_DELETE = _refuse

        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per request would flood the reconciler's log

    return Handler


@contextmanager
def serving(
    capabilities: Capabilities, folder: Path, mappable: frozenset[str] = frozenset()
) -> Iterator[Path]:
    """A kubeconfig (written in ``folder``) naming a discovery server for
    ``capabilities``, on 127.0.0.1 and a free port, for the block's duration."""
    server = ThreadingHTTPServer((_LOOPBACK, 0), _handler(_Discovery(capabilities, mappable)))
    server.daemon_threads = True
    # shutdown() waits for the loop's next poll: 20 ms a render, rather than up to 500.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        port = server.server_address[1]
        yield _kubeconfig(folder, f"http://{_LOOPBACK}:{port}")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _kubeconfig(folder: Path, url: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "render", "cluster": {"server": url}}],
        "users": [{"name": "render", "user": {}}],
        "contexts": [{"name": "render", "context": {"cluster": "render", "user": "render"}}],
        "current-context": "render",
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "kubeconfig.json"
    path.write_text(json.dumps(config))
    return path
