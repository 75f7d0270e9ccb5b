"""A real HTTP receiver on loopback for the notification tests (``tests/support/loopback.py``),
recording every request before it answers.

Its port is bound from the start, but nothing listens until :meth:`Receiver.up`: a
connection is refused (the receiver is down) and no other process can take the port
meanwhile.
"""

import socket
from dataclasses import dataclass
from typing import Any

from tests.support.loopback import Loopback


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
        self.status = 200
        """What it answers."""
        self.server: Loopback | None = None

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def up(self) -> None:
        self.server = Loopback(lambda exchange: exchange.reply(self.status), sock=self.sock)

    @property
    def requests(self) -> list[Received]:
        """What it was sent (a JSON body each), in the order it came."""
        seen = self.server.requests if self.server is not None else []
        return [Received(r.path, r.headers, r.json()) for r in seen]

    def ids(self) -> list[str]:
        """The event id of each request, in the order they came."""
        return [r.headers["X-Convoy-Event-Id"] for r in self.requests]

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
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
