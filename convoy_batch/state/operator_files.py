"""Files the operator writes outside the GitOps repository: in the state directory, or
where an environment variable names them. Command renderers (``renderers.yaml``),
notification providers (``providers.yaml``) and credentials (``credentials.yaml``: chart
repositories', metrics providers') live there, so a repository writer can name a
renderer, a provider or a credential but never define one.

Does file I/O. A file is read again only when its size or modification time changes.
"""

import os
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field

from convoy_batch.manifests import yamlload
from convoy_batch.models import Model, parse_model

M = TypeVar("M", bound=Model)

_loaded: dict[tuple[str, str], tuple[tuple[int, int], Any]] = {}


def operator_path(state_dir: Path, env: str, file_name: str) -> Path:
    """The file ``$<env>`` names, else ``<state>/<file_name>``."""
    named = os.environ.get(env)
    return Path(named) if named else state_dir / file_name


def read_operator_file(path: Path, model: type[M]) -> M | None:
    """The YAML file ``path`` as ``model``; None when there is no such file. ValueError
    (one line naming the file and the field) when it cannot be read or is not valid."""
    try:
        st = path.stat()
    except OSError:
        return None
    stamp = (st.st_size, st.st_mtime_ns)
    key = (str(path), model.__qualname__)
    cached = _loaded.get(key)
    if cached is None or cached[0] != stamp:
        try:
            docs = yamlload.documents(path.read_text(encoding="utf-8"), str(path))
        except OSError as exc:
            raise ValueError(str(exc)) from None
        data = docs[0].value if docs else {}
        cached = (stamp, parse_model(model, data, str(path)))
        _loaded[key] = cached
    parsed: M = cached[1]
    return parsed


# --- credentials.yaml ------------------------------------------------------------------

CREDENTIALS_ENV = "CONVOY_CREDENTIALS"
CREDENTIALS_FILE = "credentials.yaml"


class BasicAuth(Model):
    username_file: str
    password_file: str
    """Paths relative to the credentials file."""


class BearerToken(Model):
    file: str
    """Relative to the credentials file."""


class Credential(Model):
    """One credential, by its name in the file: a username and password, or a token."""

    basic_auth: BasicAuth | None = None
    bearer_token: BearerToken | None = None


class CredentialsFile(Model):
    """``credentials: {NAME: {basicAuth: {usernameFile, passwordFile}} | {bearerToken:
    {file}}}``: what a Release names (``credentials: NAME``) and never holds."""

    credentials: dict[str, Credential] = Field(default_factory=dict)


def credentials_path(state_dir: Path) -> Path:
    return operator_path(state_dir, CREDENTIALS_ENV, CREDENTIALS_FILE)


def credential(state_dir: Path, name: str, field: str) -> tuple[Path, Credential]:
    """The credentials file and its credential ``name`` (ValueError, one line naming
    ``field``, when there is none or the file cannot be read)."""
    path = credentials_path(state_dir)
    loaded = read_operator_file(path, CredentialsFile)
    entry = loaded.credentials.get(name) if loaded is not None else None
    if entry is None:
        raise ValueError(f"{field} {name!r}: not defined in {path}")
    return path, entry


def secret_text(credentials: Path, name: str) -> str:
    """The text of the file ``name`` (relative to the credentials file), stripped
    (ValueError, one line: it cannot be read)."""
    path = credentials.parent / name
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(" ".join(f"credentials: {path} cannot be read: {exc}".split())) from None
