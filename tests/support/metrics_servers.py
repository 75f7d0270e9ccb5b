"""Real metrics servers on loopback for the verification tests: an exporter the test
controls (one gauge per app, in Prometheus's text format), Debian's Prometheus scraping
it every second, and a recorder of every request it gets (a tenant's server). Each is
started by the test and stopped after it; without a ``prometheus`` binary the tests
that need it skip, or fail under ``CI=true``."""

import json
import subprocess
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.loopback import Exchange, Loopback, Request, free_port
from tests.support.needs import require
from tests.support.renderer_tools import installed

GAUGE = "http_success_ratio"


class Exporter:
    """``/metrics``: ``http_success_ratio{app="<app>"} <value>`` for each app the test set
    (a value of None: no sample for that app)."""

    def __init__(self) -> None:
        self.values: dict[str, str | None] = {}
        self._server = Loopback(self._handle)
        self.address = self._server.address

    def _handle(self, exchange: Exchange) -> None:
        lines = [
            f'{GAUGE}{{app="{app}"}} {value}'
            for app, value in sorted(self.values.items())
            if value is not None
        ]
        body = "\n".join(lines) + "\n"
        exchange.reply(200, body, {"Content-Type": "text/plain; version=0.0.4"})

    def close(self) -> None:
        self._server.close()


class Recorder:
    """An HTTP server on a loopback address (``host``) that records every request it
    gets and answers ``answer`` as JSON with ``status`` (a metrics endpoint, a
    Prometheus, a Vault of a tenant), or a redirect to :attr:`redirect` when it is set."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.answer: Any = {"data": {"ratio": 1.0}}
        self.status = 200
        self.redirect: str | None = None
        self._server = Loopback(self._handle, host=host)
        self.url = self._server.url

    def _handle(self, exchange: Exchange) -> None:
        if self.redirect is not None:
            exchange.redirect(self.redirect)
        else:
            exchange.json(self.answer, self.status)

    @property
    def requests(self) -> list[Request]:
        return self._server.requests

    def seen(self) -> str:
        """Every request as text, to look for a secret in."""
        return repr(self.requests)

    def close(self) -> None:
        self._server.close()


def prometheus_binary() -> str:
    """Debian's ``prometheus``; skips without it, or fails under CI."""
    return installed("prometheus", "Debian's prometheus package")


class Prometheus:
    """Debian's Prometheus on a free loopback port, scraping ``exporter`` every second,
    its data in ``folder``."""

    def __init__(self, binary: str, exporter: Exporter, folder: Path) -> None:
        require("prometheus")
        folder.mkdir(parents=True)
        config = folder / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n- job_name: exporter\n"
            f"  static_configs: [{{targets: ['{exporter.address}']}}]\n"
        )
        self.port = free_port()
        self.address = f"http://127.0.0.1:{self.port}"
        self.log = folder / "prometheus.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        self._wait("/-/ready")

    def _wait(self, path: str, limit: float = 60) -> None:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            if self.process.poll() is not None:
                pytest.fail(f"prometheus exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.address + path, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        pytest.fail(f"prometheus not ready in {limit}s: {self.log.read_text()[-2000:]}")

    def seen(self, query: str, expected: str | None, limit: float = 60) -> datetime:
        """Wait (bounded) until ``query`` gives ``expected`` as its first sample's value
        (None: an empty vector) at the real time; that time, for a tick's ``--now``."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            at = datetime.now(UTC).replace(microsecond=0)
            url = f"{self.address}/api/v1/query?" + urllib.parse.urlencode(
                {"query": query, "time": f"{at.timestamp():.3f}"}
            )
            with urllib.request.urlopen(url, timeout=5) as answer:
                result = json.loads(answer.read())["data"]["result"]
            value = result[0]["value"][1] if result else None
            if value == expected:
                return at
            time.sleep(0.5)
        pytest.fail(f"prometheus never gave {expected!r} for {query}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
