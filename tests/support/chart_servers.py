"""Chart repositories on loopback for the tests: an HTTP chart repository (``helm package``
and ``helm repo index`` into a folder, served on loopback (``loopback.py``), every request's
path and headers logged, basic auth when asked, a redirect for a path when asked) and an
OCI registry (the distribution registry, Debian's ``docker-registry``, charts put there
with ``helm push``)."""

import base64
import hashlib
import json
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.support.loopback import Exchange, Loopback, free_port
from tests.support.needs import require
from tests.support.renderer_tools import installed

_STARTUP_S = 20.0
_PATH = os.environ.get("PATH", os.defpath)  # the machine's, before a test narrows it


def package(helm: str, files: Mapping[str, str], into: Path) -> Path:
    """``helm package`` of a chart made of ``files`` into ``into``: the archive."""
    with tempfile.TemporaryDirectory() as scratch:
        chart = Path(scratch) / "chart"
        for name, text in files.items():
            (chart / name).parent.mkdir(parents=True, exist_ok=True)
            (chart / name).write_text(text)
        into.mkdir(parents=True, exist_ok=True)
        out = _helm(helm, "package", str(chart), "--destination", str(into))
    return Path(out.strip().rsplit(": ", 1)[1])


def _helm(helm: str, *args: str, config: Path | None = None) -> str:
    with tempfile.TemporaryDirectory() as home:
        env = {"PATH": os.defpath, "HOME": home, "HELM_CONFIG_HOME": home, "HELM_CACHE_HOME": home}
        if config is not None:
            env["HELM_REGISTRY_CONFIG"] = str(config)
        done = subprocess.run(
            [helm, *args], capture_output=True, text=True, env=env, timeout=120, check=False
        )
    assert done.returncode == 0, done.stderr
    return done.stdout


class HttpChartRepo:
    """A chart repository folder served on ``host`` (a loopback address, 127.0.0.1 by
    default; a thread); :attr:`requests` holds each request's path, :attr:`headers` its
    path and headers. A path of :attr:`redirects` answers a redirect to its URL (once
    the login, when there is one, was given)."""

    def __init__(
        self,
        helm: str,
        folder: Path,
        login: tuple[str, str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.helm = helm
        self.folder = folder
        self.host = host
        folder.mkdir(parents=True, exist_ok=True)
        self.requests: list[str] = []
        self.headers: list[tuple[str, dict[str, str]]] = []
        self.redirects: dict[str, str] = {}
        self.auth = None
        if login is not None:
            token = base64.b64encode(f"{login[0]}:{login[1]}".encode()).decode()
            self.auth = f"Basic {token}"
        self._server: Loopback | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def publish(self, files: Mapping[str, str]) -> Path:
        """Package a chart into the folder and index the folder again."""
        archive = package(self.helm, files, self.folder)
        _helm(self.helm, "repo", "index", str(self.folder))
        return archive

    def start(self) -> None:
        self._server = Loopback(self._handle, host=self.host, port=self.port)
        self.port = self._server.port

    def _handle(self, exchange: Exchange) -> None:
        path = exchange.request.path
        self.requests.append(path)
        self.headers.append((path, exchange.request.headers))
        if self.auth is not None and exchange.request.headers.get("Authorization") != self.auth:
            exchange.reply(401, headers={"WWW-Authenticate": 'Basic realm="charts"'})
        elif path in self.redirects:
            exchange.redirect(self.redirects[path])
        else:
            file = self.folder / urllib.parse.unquote(urllib.parse.urlsplit(path).path).lstrip("/")
            if file.is_file() and file.resolve().is_relative_to(self.folder.resolve()):
                exchange.reply(200, file.read_bytes())
            else:
                exchange.reply(404)

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None


def docker_registry() -> str:
    """Debian's ``docker-registry``; skips without it, or fails under CI."""
    return installed("docker-registry", "Debian's package of the distribution registry")


class OciRegistry:
    """The distribution registry on 127.0.0.1 over plain HTTP, storage in ``folder``."""

    def __init__(
        self, program: str, helm: str, folder: Path, login: tuple[str, str] | None = None
    ) -> None:
        require("registry")
        self.program = program
        self.helm = helm
        self.folder = folder
        self.port = free_port()
        self.login = login
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"oci://127.0.0.1:{self.port}/charts"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        config = self.folder / "config.yml"
        config.write_text(
            "version: 0.1\n"
            f"storage: {{filesystem: {{rootdirectory: {self.folder / 'data'}}}}}\n"
            f"http: {{addr: '127.0.0.1:{self.port}'}}\n"
            "log: {level: error}\n"
        )
        if self.login is not None:
            htpasswd = self.folder / "htpasswd"
            htpasswd.write_text(f"{self.login[0]}:{_bcrypt(self.login[1])}\n")
            with config.open("a") as f:
                f.write(f"auth: {{htpasswd: {{realm: charts, path: {htpasswd}}}}}\n")
        log = (self.folder / "registry.log").open("ab")
        self._process = subprocess.Popen(
            [self.program, "serve", str(config)], stdout=log, stderr=log, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + _STARTUP_S
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v2/", timeout=1):
                    return
            except urllib.error.HTTPError:
                return  # it answers (401: it asks for the login)
            except (urllib.error.URLError, OSError):
                if self._process.poll() is not None:
                    raise AssertionError((self.folder / "registry.log").read_text()) from None
                time.sleep(0.05)  # waiting for the port to open, bounded
        self.stop()
        raise AssertionError(f"the registry did not answer within {_STARTUP_S} s")

    def push(self, files: Mapping[str, str]) -> str:
        """``helm push`` of the chart ``files`` make: the SHA-256 of its archive."""
        with tempfile.TemporaryDirectory() as scratch:
            archive = package(self.helm, files, Path(scratch))
            _helm(self.helm, "push", str(archive), self.url, "--plain-http", config=self._auth())
            return hashlib.sha256(archive.read_bytes()).hexdigest()

    def _auth(self) -> Path | None:
        """A registry config holding the login, for helm push."""
        if self.login is None:
            return None
        token = base64.b64encode(":".join(self.login).encode()).decode()
        config = self.folder / "auth.json"
        config.write_text(json.dumps({"auths": {f"127.0.0.1:{self.port}": {"auth": token}}}))
        return config

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=30)
            self._process = None


def _bcrypt(password: str) -> str:
    """A bcrypt hash (the registry's htpasswd takes no other), by the C library's crypt;
    skips where Python has no ``crypt`` module (3.13 and later)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        crypt = pytest.importorskip("crypt")
    hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))
    if not hashed or not hashed.startswith("$2"):
        pytest.skip("the C library's crypt makes no bcrypt hash")
    return str(hashed)
