"""Helm charts from repositories (``https://``) and registries (``oci://``): resolved to a
version and the archive's digest, fetched with ``helm pull`` and kept in the state
directory by content. Does I/O: runs helm, reads and writes ``<state>/charts/``.

- ``<state>/charts/sha256-<hex>.tgz``: each archive, named by the SHA-256 of its bytes,
  written atomically and verified against its name before each use.
- ``<state>/charts/index.json``: (repository, chart, version as written) -> the version
  it resolved to, the digest, and when (the tick's ``now``). An exact version once
  fetched is never asked for again; a range is asked again once the Release's
  ``interval`` has passed since it was resolved. A failed request is kept there too, and
  the repository is asked again only once the interval has passed.

Credentials come from the operator's ``credentials.yaml`` in the state directory (or the
file ``$CONVOY_CREDENTIALS`` names), by the name the render gives, and only for a
Release file and a repository URL the operator bound them to (``releases:``, ``urls:``;
checked before anything is looked up or fetched, a chart in git's dependencies too).
They reach helm on its stdin or in a config file of a throwaway home, never on a command
line, and are scrubbed from any message; helm is never told ``--pass-credentials``, so
it sends them to the repository's own host only. A chart fetched with a credential is
kept apart in the index (its key names the credential): a Release without it never gets
that chart from the cache.
"""

import base64
import hashlib
import json
import re
import tempfile
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from convoy_batch.errors import RenderFailed, SourceFailed, StateFailed
from convoy_batch.manifests import yamlload
from convoy_batch.models import HelmRender, Release
from convoy_batch.renderers import process
from convoy_batch.repo.source import redact
from convoy_batch.state.files import atomic_write, os_problem
from convoy_batch.state.operator_files import (
    Auth,
    allowed_credential,
    credential_for,
    without_state_dir,
)
from convoy_batch.timefmt import format_time, parse_time

_EXACT = re.compile(r"^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
_REPO_NAME = "convoy"
_TIMEOUT_S = 120.0
FIELD = "spec.source.render.credentials"


@dataclass(frozen=True)
class Chart:
    """A chart resolved to one archive."""

    version: str
    digest: str
    """Hex SHA-256 of the archive."""

    @property
    def revision(self) -> str:
        """The Release's source revision: ``0.2.0@sha256:<hex>``."""
        return f"{self.version}@sha256:{self.digest}"


def is_exact(version: str) -> bool:
    """A version rather than a range (``1.2.3``, ``v1.2.3-rc.1``)."""
    return bool(_EXACT.match(version))


class ChartResolver:
    """One per tick: resolves each (repository, chart, version) once, and fetches only
    what the index does not hold (or holds a range of, resolved an interval ago)."""

    def __init__(self, state_dir: Path, now: datetime | None) -> None:
        self._state_dir = state_dir
        self._folder = state_dir / "charts"
        self._now = now
        self._lock = threading.RLock()
        self._resolved: dict[str, Chart] = {}
        self._failed: dict[str, str] = {}

    def resolve(self, release: Release) -> Chart:
        """The chart ``release`` renders (SourceFailed, one line, when it cannot be had)."""
        return self._resolve_once(_spec(release), release)

    def dependencies(self, release: Release, chart_yaml: str | None) -> list[Path]:
        """The verified archives of the dependencies from repositories that the chart in
        git (its ``Chart.yaml``: ``chart_yaml``) names, each resolved and fetched as a
        chart from a repository is, into the same cache (SourceFailed, one line)."""
        return [
            self._archive(spec, release) for spec in self._dependency_specs(release, chart_yaml)
        ]

    def dependency_revisions(self, release: Release, chart_yaml: str | None) -> list[str]:
        """``<chart> <version>@sha256:<hex>`` of each of those dependencies: a render
        input (no request for an exact version already fetched)."""
        return [
            f"{spec.chart} {self._resolve_once(spec, release).revision}"
            for spec in self._dependency_specs(release, chart_yaml)
        ]

    def _dependency_specs(self, release: Release, chart_yaml: str | None) -> list[HelmRender]:
        render = release.spec.source.render
        assert isinstance(render, HelmRender)
        found = []
        for dep in _dependencies(chart_yaml):
            same = dep.repository.rstrip("/") == (render.repository or "").rstrip("/")
            found.append(
                HelmRender(
                    type="Helm",
                    repository=dep.repository,
                    chart=dep.name,
                    version=dep.version,
                    credentials=render.credentials if same or render.repository is None else None,
                    plain_http=render.plain_http,
                )
            )
        return found

    def _resolve_once(self, spec: HelmRender, release: Release) -> Chart:
        self._check_credentials(spec, release)  # before the cache: it holds what they fetched
        key = _key(spec)
        with self._lock:
            if key in self._failed:
                raise SourceFailed(self._failed[key])
            if key not in self._resolved:
                try:
                    self._resolved[key] = self._resolve(spec, key, release)
                except SourceFailed as exc:
                    self._failed[key] = str(exc)  # asked once a tick
                    raise
            return self._resolved[key]

    def archive(self, release: Release) -> Path:
        """The verified archive of the chart ``release`` renders; fetched again when the
        stored one is missing or no longer matches its digest."""
        return self._archive(_spec(release), release)

    def _archive(self, spec: HelmRender, release: Release) -> Path:
        chart = self._resolve_once(spec, release)
        with self._lock:
            path = self._path(chart.digest)
            if _digest_of(path) == chart.digest:
                return path
            fetched, data = self._pull(spec, chart.version, release)
            if fetched.digest != chart.digest:
                raise SourceFailed(
                    f"{_where(spec)}: version {chart.version} is now sha256:{fetched.digest}, "
                    f"not sha256:{chart.digest}"
                )
            self._store(data, fetched.digest)
            return path

    def _resolve(self, spec: HelmRender, key: str, release: Release) -> Chart:
        assert spec.version is not None
        entry = self._index().get(key, {})
        if "error" in entry and self._within(entry.get("triedAt", ""), release):
            raise SourceFailed(entry["error"])  # asked again once the interval is over
        known = "digest" in entry and "error" not in entry
        if known and (is_exact(spec.version) or self._within(entry["resolvedAt"], release)):
            return Chart(entry["version"], entry["digest"])
        try:
            chart, data = self._pull(spec, spec.version, release)
        except SourceFailed as exc:
            self._record(spec, {**entry, "error": str(exc), "triedAt": self._stamp()})
            raise
        self._store(data, chart.digest)
        found = {"version": chart.version, "digest": chart.digest, "resolvedAt": self._stamp()}
        self._record(spec, found, chart.version)
        return chart

    def _within(self, stamp: str, release: Release) -> bool:
        """``stamp`` (a tick's ``now``) is less than the Release's interval ago; always
        without a ``now`` (a render outside a tick)."""
        if self._now is None:
            return True
        try:
            return self._now - parse_time(stamp) < release.spec.interval
        except ValueError:
            return False

    def _stamp(self) -> str:
        return format_time(self._now) if self._now is not None else ""

    def _check_credentials(self, spec: HelmRender, release: Release) -> None:
        """SourceFailed (one line naming the field and the URL) when ``spec`` names a
        credential that ``release`` may not use, or not for ``spec``'s repository."""
        if spec.credentials is not None:
            try:
                allowed_credential(
                    self._state_dir, spec.credentials, _field(release), release.file,
                    spec.repository or "",
                )  # fmt: skip
            except ValueError as exc:
                raise SourceFailed(f"{_where(spec)}: {exc}") from None

    def _login(self, spec: HelmRender, release: Release) -> Auth | None:
        """The username and password the render's ``credentials`` names, for ``spec``'s
        repository (SourceFailed, one line naming the field, when they may not be sent
        there, are not a basicAuth, or cannot be read)."""
        if spec.credentials is None:
            return None
        try:
            auth = credential_for(
                self._state_dir, spec.credentials, _field(release), release.file,
                spec.repository or "",
            )  # fmt: skip
        except ValueError as exc:
            raise SourceFailed(f"{_where(spec)}: {exc}") from None
        if auth.username is None:
            raise SourceFailed(
                f"{_where(spec)}: {_field(release)} {spec.credentials!r}: a chart repository "
                "takes a basicAuth credential, not a bearerToken"
            )
        return auth

    def _pull(self, spec: HelmRender, version: str, release: Release) -> tuple[Chart, bytes]:
        """``helm pull`` of ``spec``'s chart at ``version`` (a range resolves to its
        newest match): the chart and the archive's bytes."""
        login = self._login(spec, release)
        with tempfile.TemporaryDirectory(prefix="convoy-chart-") as scratch:
            home = Path(scratch)
            env = process.minimal_env(home, _helm_homes(home))
            out = home / "out"
            out.mkdir()
            tool = _helm()
            argv = [tool, "pull", *_reference(spec, home, env, login, tool)]
            argv += ["--version", version, "--destination", str(out)]
            if spec.plain_http:
                argv.append("--plain-http")
            _run(spec, login, "helm pull", argv, home, env)
            archives = sorted(out.glob("*.tgz"))
            if len(archives) != 1:
                raise SourceFailed(f"{_where(spec)}: helm pull wrote no chart archive")
            data = archives[0].read_bytes()
            shown = _run(spec, login, "helm show chart", [tool, "show", "chart", str(archives[0])],
                         home, env)  # fmt: skip
        return Chart(_version_of(shown, spec), hashlib.sha256(data).hexdigest()), data

    def _store(self, data: bytes, digest: str) -> None:
        path = self._path(digest)
        if _digest_of(path) != digest:
            self._write(path, data)

    def _write(self, path: Path, data: bytes) -> None:
        """``path`` of the state directory written (StateFailed, one line naming it as
        ``<state>/...``, when it cannot be)."""
        try:
            atomic_write(path, data, root=self._state_dir)
        except OSError as exc:
            raise StateFailed(without_state_dir(os_problem(path, exc), self._state_dir)) from None
        except StateFailed as exc:
            raise StateFailed(without_state_dir(str(exc), self._state_dir)) from None

    def _path(self, digest: str) -> Path:
        return self._folder / f"sha256-{digest}.tgz"

    def _index(self) -> dict[str, dict[str, str]]:
        try:
            loaded = json.loads((self._folder / "index.json").read_text())
        except (OSError, ValueError):
            return {}  # a lost index costs a fetch, nothing else
        return loaded if isinstance(loaded, dict) else {}

    def _record(self, spec: HelmRender, entry: dict[str, str], version: str = "") -> None:
        """Write ``entry`` for ``spec``'s version as written (and for ``version``, the
        exact one a range picked). Processes that race lose an entry: a fetch more."""
        index = self._index()
        index[_key(spec)] = entry
        if version:
            index[_key(spec, version)] = entry
        text = json.dumps(index, indent=1, sort_keys=True).encode()
        self._write(self._folder / "index.json", text)


@dataclass(frozen=True)
class Dependency:
    name: str
    version: str
    repository: str


def _dependencies(chart_yaml: str | None) -> list[Dependency]:
    """The dependencies of a ``Chart.yaml`` that come from a repository (``https://``,
    ``http://``, ``oci://``): the others (``file://``, none) are the chart's own
    ``charts/``, left to helm. One that does not parse is left to helm's message."""
    if not chart_yaml:
        return []
    try:
        docs = yamlload.documents(chart_yaml, "Chart.yaml")
    except ValueError:
        return []
    data = docs[0].value if docs else None
    listed = data.get("dependencies") if isinstance(data, dict) else None
    found = []
    for dep in listed if isinstance(listed, list) else ():
        if not isinstance(dep, dict):
            continue
        name, version, repository = dep.get("name"), dep.get("version"), dep.get("repository")
        if not all(isinstance(v, str) and v for v in (name, version, repository)):
            continue
        if str(repository).startswith(("https://", "http://", "oci://")):
            found.append(Dependency(str(name), str(version), str(repository)))
    return found


def _spec(release: Release) -> HelmRender:
    spec = release.spec.source.render
    assert isinstance(spec, HelmRender) and spec.from_repository
    return spec


def _key(spec: HelmRender, version: str | None = None) -> str:
    """The index's key: what a chart was asked as, and the credential it was fetched
    with (none: the key it had before credentials were bound)."""
    key = [spec.repository, spec.chart, version or spec.version]
    return json.dumps(key if spec.credentials is None else [*key, spec.credentials])


def _field(release: Release) -> str:
    """The field that names a credential: the render's, for its chart or for a
    dependency of its chart in git."""
    render = release.spec.source.render
    if isinstance(render, HelmRender) and render.from_repository:
        return FIELD
    return f"{FIELD} (for a dependency in Chart.yaml)"


def _where(spec: HelmRender) -> str:
    return f"chart {spec.chart!r} from {redact(spec.repository or '')}"


def _digest_of(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _helm() -> str:
    tool = process.find_tool("helm")
    if tool is None:
        raise SourceFailed("Helm: helm is not on PATH; install Helm on the reconciler's PATH")
    return tool.path


def _helm_homes(home: Path) -> dict[str, str]:
    return {
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_DATA_HOME": str(home / "data"),
    }


def _reference(
    spec: HelmRender, home: Path, env: dict[str, str], login: Auth | None, tool: str
) -> list[str]:
    """What ``helm pull`` is given to find the chart. An OCI registry's login is written
    in the throwaway home's registry config; an HTTP repository is added under a name of
    the throwaway home, its password on helm's stdin."""
    assert spec.repository is not None and spec.chart is not None
    if spec.repository.startswith("oci://"):
        if login is not None:
            _write_registry_login(spec.repository, home, login)
        return [f"{spec.repository.rstrip('/')}/{spec.chart}"]
    argv = [tool, "repo", "add", _REPO_NAME, spec.repository]
    stdin = b""
    if login is not None:  # never --pass-credentials: only the repository's host gets them
        argv += ["--username", login.username or "", "--password-stdin"]
        stdin = login.password.encode()
    _run(spec, login, "helm repo add", argv, home, env, stdin)
    return [f"{_REPO_NAME}/{spec.chart}"]


def _write_registry_login(repository: str, home: Path, login: Auth) -> None:
    host = repository.removeprefix("oci://").split("/", 1)[0]
    token = base64.b64encode(f"{login.username}:{login.password}".encode()).decode()
    config = home / "config" / "registry" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(config, json.dumps({"auths": {host: {"auth": token}}}).encode(), durable=False)


def _run(
    spec: HelmRender,
    login: Auth | None,
    label: str,
    argv: list[str],
    home: Path,
    env: dict[str, str],
    stdin: bytes = b"",
) -> str:
    try:
        return process.run(label, argv, home, env, timeout=_TIMEOUT_S, stdin=stdin)
    except RenderFailed as exc:
        message = login.scrub(str(exc)) if login is not None else str(exc)
        raise SourceFailed(f"{_where(spec)}: {message}") from None


def _version_of(chart_yaml: str, spec: HelmRender) -> str:
    docs = yamlload.documents(chart_yaml, "Chart.yaml")
    data = docs[0].value if docs else None
    version = data.get("version") if isinstance(data, dict) else None
    if not isinstance(version, str) or not version:
        raise SourceFailed(f"{_where(spec)}: the pulled chart has no version")
    return version
