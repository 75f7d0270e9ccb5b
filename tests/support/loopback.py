"""One HTTP server on loopback, for every test that plays a server convoy-batch talks to (a
metrics endpoint, an exporter, a recorder, a notification receiver, a tenant's server, a
chart folder, the fault proxy in front of the API server).

Python's own ``ThreadingHTTPServer`` in a daemon thread: each request is read whole,
recorded in :attr:`Loopback.requests`, then given to the test's ``handle``, which answers
it through the :class:`Exchange` (a reply, JSON, a redirect, raw bytes, a connection reset
or nothing at all). The server logs nothing: a test reads ``requests``.
"""

import json
import socket
import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Request:
    """A request as it came: its line, method, path, headers and body."""

    line: str
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


class Exchange:
    """One request and the ways to answer it; a handle that answers nothing leaves the
    connection open until the client gives up (:meth:`drop` closes it)."""

    def __init__(self, handler: BaseHTTPRequestHandler, request: Request) -> None:
        self._handler = handler
        self.request = request

    def reply(
        self, status: int = 200, body: bytes | str = b"", headers: Mapping[str, str] = ({})
    ) -> None:
        data = body.encode() if isinstance(body, str) else body
        self._handler.send_response(status)
        for name, value in headers.items():
            self._handler.send_header(name, value)
        self._handler.send_header("Content-Length", str(len(data)))
        self._handler.end_headers()
        self._handler.wfile.write(data)

    def json(self, value: Any, status: int = 200) -> None:
        self.reply(status, json.dumps(value), {"Content-Type": "application/json"})

    def redirect(self, location: str) -> None:
        self.reply(302, headers={"Location": location})

    def raw(self, data: bytes) -> None:
        """``data`` as it is (a status line and headers the test wrote)."""
        self._handler.wfile.write(data)
        self._handler.wfile.flush()

    def reset(self, prefix: bytes = b"") -> None:
        """``prefix``, then a reset (no FIN): the answer ends where it was cut."""
        self.raw(prefix)
        linger = struct.pack("ii", 1, 0)
        self._handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        self._handler.close_connection = True

    def drop(self) -> None:
        """Close the connection without an answer."""
        self._handler.close_connection = True


Handle = Callable[[Exchange], None]


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (for a server the test starts as a process)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class Loopback:
    """``handle`` serving on ``host`` (a loopback address): on a free port, on ``port``,
    or on ``sock``, a socket the test bound already (it listens only from here on).
    ``keep_alive``: HTTP/1.1 connections kept open, as the API server keeps them."""

    def __init__(
        self,
        handle: Handle,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        sock: socket.socket | None = None,
        keep_alive: bool = False,
    ) -> None:
        self.requests: list[Request] = []
        self.host = host
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = Request(
                    self.requestline, self.command, self.path, dict(self.headers.items()), body
                )
                server.requests.append(request)
                handle(Exchange(self, request))

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

            def log_message(self, format: str, *args: Any) -> None:
                pass

        if sock is None:
            self._server = ThreadingHTTPServer((host, port), Handler)
        else:
            self._server = ThreadingHTTPServer((host, port), Handler, bind_and_activate=False)
            self._server.socket.close()
            self._server.socket = sock
            self._server.server_activate()
        self._server.daemon_threads = True
        self.port: int = self._server.socket.getsockname()[1]
        # shutdown() waits for the loop's next poll: 20 ms rather than the default 500.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def address(self) -> str:
        """``host:port``."""
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
