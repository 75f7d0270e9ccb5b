"""Files the operator writes outside the GitOps repository: in the state directory, or
where an environment variable names them. Command renderers (``renderers.yaml``),
notification providers (``providers.yaml``) and credentials (``credentials.yaml``: chart
repositories', metrics providers') live there, so a repository writer can name a
renderer, a provider or a credential but never define one.

A credential is bound twice by the operator: to the Release files that may name it
(``releases:``, glob patterns of paths in the repository) and to the URLs it may be sent
to (``urls:``, prefixes); without either it is used by none and sent nowhere
(:func:`credential_for`). Its secrets are files beside the credentials file, read when
they are sent and refused when they hold a control character. Messages name the file
and the field, never a value, and a file of the state directory as ``<state>/...``
(:func:`shown`), never where the state directory is.

Does file I/O. A file is read again only when its size or modification time changes.
"""

import dataclasses
import os
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import unquote, urlsplit

from pydantic import AfterValidator, Field

from convoy_batch.errors import one_line
from convoy_batch.manifests import yamlload
from convoy_batch.models import Model, parse_model

M = TypeVar("M", bound=Model)

_loaded: dict[tuple[str, str], tuple[tuple[int, int], Any]] = {}


def operator_path(state_dir: Path, env: str, file_name: str) -> Path:
    """The file ``$<env>`` names, else ``<state>/<file_name>``."""
    named = os.environ.get(env)
    return Path(named) if named else state_dir / file_name


def shown(path: Path | str, state_dir: Path) -> str:
    """``path`` as a message names it: ``<state>/REL`` inside the state directory (a
    message never says where the state directory is, nor whose machine it is on), else
    as it is. Symbolic links are not followed: the path as the operator wrote it."""
    path = Path(path)
    for base in (state_dir, Path(os.path.abspath(state_dir))):
        if path.is_relative_to(base):
            relative = path.relative_to(base).as_posix()
            return "<state>" if relative == "." else f"<state>/{relative}"
    return str(path)


def without_state_dir(text: str, state_dir: Path) -> str:
    """``text`` (a message some edge or program made) with the state directory's path,
    as given, absolute and with its links resolved, written ``<state>``."""
    forms = {str(state_dir), os.path.abspath(state_dir), os.path.realpath(state_dir)}
    for base in sorted(forms, key=len, reverse=True):
        if base not in ("", ".", "/"):  # the whole path, not a longer one it begins
            text = re.sub(re.escape(base) + r"(?![\w.-])", "<state>", text)
    return text


def read_operator_file(path: Path, model: type[M], state_dir: Path | None = None) -> M | None:
    """The YAML file ``path`` as ``model``; None when there is no such file. ValueError
    (one line naming the file and the field) when it cannot be read or is not valid;
    with ``state_dir``, the file is named as :func:`shown` names it."""
    try:
        st = path.stat()
    except OSError:
        return None
    stamp = (st.st_size, st.st_mtime_ns)
    key = (str(path), model.__qualname__)
    cached = _loaded.get(key)
    if cached is None or cached[0] != stamp:
        name = shown(path, state_dir) if state_dir is not None else str(path)
        try:
            docs = yamlload.documents(path.read_text(encoding="utf-8"), name)
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{name}: cannot be read ({_why(exc)})") from None
        data = docs[0].value if docs else {}
        cached = (stamp, parse_model(model, data, name))
        _loaded[key] = cached
    parsed: M = cached[1]
    return parsed


def _why(exc: Exception) -> str:
    """An error in words of its own (an OSError's text repeats the path)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else type(exc).__name__


# --- secret values -------------------------------------------------------------------


def clean_secret(text: str, *, header: bool = False) -> str:
    """``text`` without the white space around it (a file's trailing newline); ValueError
    (never the value) when what is left holds a control character (CR, LF, NUL, ...),
    which would end a header or a line, or, for a value sent as it is in a header
    (``header``), any character but printable ASCII."""
    value = text.strip()
    if any(unicodedata.category(c) == "Cc" for c in value):
        raise ValueError("holds a control character (CR, LF, NUL, ...), refused")
    if header and not all(" " <= c <= "~" for c in value):
        raise ValueError("holds a character that is not printable ASCII, refused")
    return value


# --- URL prefixes ----------------------------------------------------------------------

DEFAULT_PORTS = {"http": 80, "https": 443, "oci": 443}
_UNSAFE = re.compile(r"[\x00-\x20\x7f\\]")  # control characters, white space, backslash
_USERINFO = re.compile(r"://[^/@\s]*@")


def _url_parts(url: str) -> tuple[str, str, int, str] | None:
    """(scheme, host, port, path) of an absolute URL without a user name or password,
    its path free of dot segments (``..``, ``%2e%2e``) and of encoded slashes; None for
    any other."""
    if _UNSAFE.search(url):
        return None
    try:
        split = urlsplit(url)
        port = split.port
    except ValueError:
        return None
    scheme = split.scheme.lower()
    if scheme not in DEFAULT_PORTS or not split.hostname or "@" in split.netloc:
        return None
    for segment in split.path.split("/"):
        plain = unquote(segment)
        if plain in (".", "..") or "/" in plain or "\\" in plain:
            return None
    return scheme, split.hostname.lower(), port or DEFAULT_PORTS[scheme], split.path


def _is_prefix(text: str) -> bool:
    """A URL prefix: as :func:`_url_parts` wants it, and without a query or fragment."""
    if _url_parts(text) is None:
        return False
    split = urlsplit(text)
    return not split.query and not split.fragment


def url_matches(url: str, prefix: str) -> bool:
    """Whether a request to ``url`` is under ``prefix``: the same scheme, host and port
    (scheme and host compared case-insensitively, a default port as none), and the
    prefix's path a whole-segment prefix of the URL's (``/charts`` holds
    ``/charts/index.yaml``, not ``/charts-other``). Neither may hold a user name or
    password; a prefix holds no query or fragment, and neither holds a ``.`` or ``..``
    segment, white space or a control character: anything else does not match."""
    have, want = _url_parts(url), _url_parts(prefix)
    if have is None or want is None or not _is_prefix(prefix) or have[:3] != want[:3]:
        return False
    base = want[3].rstrip("/")
    return have[3] == base or have[3].startswith(base + "/")


def _url_prefix(text: str) -> str:
    if not _is_prefix(text):
        raise ValueError(  # the value not shown: it may hold a password
            "not a URL prefix (an http://, https:// or oci:// URL with a host, without a "
            "user name, password, query or fragment)"
        )
    return text


def _redacted(url: str) -> str:
    """A URL as a message shows it: on one line, without a user name or password."""
    return one_line(_USERINFO.sub("://***@", url))


def release_matches(release_file: str | None, patterns: Iterable[str]) -> bool:
    """Whether the Release of the repository's file ``release_file`` is one that
    ``patterns`` (shell-style, case-sensitive: ``releases/team-a-*.yaml``) name."""
    return release_file is not None and any(fnmatchcase(release_file, p) for p in patterns)


# --- credentials.yaml ------------------------------------------------------------------

CREDENTIALS_ENV = "CONVOY_CREDENTIALS"
CREDENTIALS_FILE = "credentials.yaml"
UrlPrefix = Annotated[str, AfterValidator(_url_prefix)]


class BasicAuth(Model):
    username_file: str
    password_file: str
    """Paths relative to the credentials file."""


class BearerToken(Model):
    file: str
    """Relative to the credentials file."""


class Credential(Model):
    """One credential, by its name in the file: a username and password, or a token;
    the URLs it may be sent to and the Release files that may name it (both needed)."""

    basic_auth: BasicAuth | None = None
    bearer_token: BearerToken | None = None
    urls: tuple[UrlPrefix, ...] | None = None
    """Prefixes of the URLs it may be sent to (:func:`url_matches`)."""
    releases: tuple[str, ...] | None = None
    """Glob patterns of the Release files that may name it (:func:`release_matches`)."""


class CredentialsFile(Model):
    """``credentials: {NAME: {basicAuth: {usernameFile, passwordFile}} | {bearerToken:
    {file}}, urls: [PREFIX, ...], releases: [PATTERN, ...]}``: what a Release names
    (``credentials: NAME``) and never holds."""

    credentials: dict[str, Credential] = Field(default_factory=dict)


def credentials_path(state_dir: Path) -> Path:
    return operator_path(state_dir, CREDENTIALS_ENV, CREDENTIALS_FILE)


@dataclass(frozen=True)
class Auth:
    """A credential read to be sent: a username and password, or a token."""

    username: str | None = None
    password: str = dataclasses.field(default="", repr=False)  # never in a repr
    token: str = dataclasses.field(default="", repr=False)

    def scrub(self, text: str) -> str:
        """``text`` with the password and the token as ``***``."""
        for secret in (self.password, self.token):
            text = text.replace(secret, "***") if secret else text
        return text


def credential_for(
    state_dir: Path, name: str, field: str, release_file: str | None, url: str
) -> Auth:
    """The credential ``name`` (``field`` of a Release names it) read to be sent to
    ``url`` by the Release of the repository's file ``release_file``. ValueError, one
    line naming the field (never a value): :func:`allowed_credential` refuses it, or a
    secret of it cannot be read or holds a control character."""
    path, entry = allowed_credential(state_dir, name, field, release_file, url)
    try:
        return _read(state_dir, path, name, entry)
    except ValueError as exc:
        raise ValueError(f"{field} {name!r}: {exc}") from None


def allowed_credential(
    state_dir: Path, name: str, field: str, release_file: str | None, url: str
) -> tuple[Path, Credential]:
    """The credentials file and its credential ``name``, when the Release of the file
    ``release_file`` may send it to ``url``; nothing of its secrets is read. ValueError,
    one line naming ``field``: no such credential, it binds no Release or not that one,
    it has no ``urls`` or none that holds ``url``."""
    path = credentials_path(state_dir)
    where = f"{field} {name!r}"
    try:
        loaded = read_operator_file(path, CredentialsFile, state_dir)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    entry = loaded.credentials.get(name) if loaded is not None else None
    file = shown(path, state_dir)
    if entry is None:
        raise ValueError(f"{where}: not defined in {file}")
    if not entry.releases:
        raise ValueError(
            f"{where}: used by no Release: {file} gives it no releases; bind it to the "
            "Release files that may use it with releases: [PATTERN, ...] (e.g. "
            "releases/shop.yaml, releases/team-a-*.yaml)"
        )
    if not release_matches(release_file, entry.releases):
        raise ValueError(
            f"{where}: not for {release_file or 'a Release read from no file'}: no pattern "
            f"of its releases in {file} names that file; nothing was sent"
        )
    if not entry.urls:
        raise ValueError(
            f"{where}: sent nowhere: {file} gives it no urls; bind it to the URLs it is for "
            "with urls: [PREFIX, ...] (e.g. https://charts.example.com/)"
        )
    if not any(url_matches(url, prefix) for prefix in entry.urls):
        raise ValueError(
            f"{where}: not sent to {_redacted(url)}: no prefix of its urls in {file} holds that URL"
        )
    return path, entry


def _read(state_dir: Path, path: Path, name: str, entry: Credential) -> Auth:
    at = f"credentials.{name}"
    if entry.bearer_token is not None:
        token = _secret(state_dir, path, entry.bearer_token.file, f"{at}.bearerToken.file")
        return Auth(token=token)
    if entry.basic_auth is not None:
        auth = entry.basic_auth
        user = _secret(state_dir, path, auth.username_file, f"{at}.basicAuth.usernameFile")
        password = _secret(state_dir, path, auth.password_file, f"{at}.basicAuth.passwordFile")
        return Auth(username=user, password=password)
    raise ValueError(f"{shown(path, state_dir)}: {at}: neither bearerToken nor basicAuth")


def _secret(state_dir: Path, credentials: Path, name: str, field: str) -> str:
    """The text of the file ``name`` (relative to the credentials file), checked
    (ValueError, one line naming the credentials file and ``field``)."""
    path = credentials.parent / name
    where = f"{shown(credentials, state_dir)}: {field}: {shown(path, state_dir)}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{where}: cannot be read ({_why(exc)})") from None
    try:
        return clean_secret(text, header=field.endswith("bearerToken.file"))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
