"""A real HTTP receiver on loopback for the notification tests: Python's own server in a
thread, recording every request before it answers.

Its port is bound from the start, but nothing listens until :meth:`Receiver.up`: a
connection is refused (the receiver is down) and no other process can take the port
meanwhile.
"""

import json
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: Any


class Receiver:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.requests: list[Received] = []
        self.status = 200
        """What it answers."""
        self.server: ThreadingHTTPServer | None = None

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def up(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                receiver.requests.append(Received(self.path, dict(self.headers), body))
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler, bind_and_activate=False)
        server.socket.close()
        server.socket = self.sock
        server.server_activate()
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.server = server

    def ids(self) -> list[str]:
        """The event id of each request, in the order they came."""
        return [r.headers["X-Convoy-Event-Id"] for r in self.requests]

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        else:
            self.sock.close()


class Silent:
    """A port that takes connections (the kernel completes them) and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port: int = self.sock.getsockname()[1]

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.sock.close()
