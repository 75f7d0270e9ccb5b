"""Notification providers: defined by the operator outside the GitOps repository, in the
state directory's ``providers.yaml`` or the file ``$CONVOY_PROVIDERS`` names (as Command
renderers are). An Alert in the repository names one; it cannot define one, so a
repository writer never chooses where events go or reads a token.

    providers:
      team-slack:
        type: slack                        # an incoming webhook: {"text": ...}
        url: {env: SLACK_WEBHOOK_URL}
      hooks:
        type: generic                      # the event as JSON
        url: https://hooks.example.com/convoy
        token: {file: /etc/convoy/hook-token}   # Authorization: Bearer <token>
      commits:
        type: github                       # or gitea: a commit status per Release and Cluster
        repository: acme/gitops
        url: https://api.github.com        # the API's base (gitea: https://host/api/v1)
        token: {env: GITHUB_TOKEN}

A URL may be written out or come from the environment or a file; a token only from the
environment or a file. Neither ever appears in a log line, a status or a commit: errors
name the provider and the variable or file (a file of the state directory as
``<state>/...``), never the value. A value read is stripped of the white space around it
and refused when what is left holds a control character (a token: anything but
printable ASCII), since it would end a header. Does file I/O (the file, and secrets when
they are read).
"""

import os
from enum import StrEnum
from pathlib import Path

from pydantic import Field, model_validator

from convoy_batch.models import Model, Name
from convoy_batch.state.operator_files import (
    clean_secret,
    operator_path,
    read_operator_file,
    shown,
)

FILE_ENV = "CONVOY_PROVIDERS"
FILE_NAME = "providers.yaml"
GITHUB_API = "https://api.github.com"


class ProviderType(StrEnum):
    GENERIC = "generic"
    SLACK = "slack"
    GITHUB = "github"
    GITEA = "gitea"


COMMIT_STATUS_TYPES = frozenset({ProviderType.GITHUB, ProviderType.GITEA})


class Secret(Model):
    """Where a value comes from: an environment variable or a file (its text, stripped;
    a relative path is relative to the providers file's folder)."""

    env: str | None = None
    file: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> "Secret":
        if (self.env is None) == (self.file is None):
            raise ValueError("give exactly one of env and file")
        return self

    def read(self, base: Path, state_dir: Path, *, header: bool = False) -> str:
        """The value; ValueError (naming the variable or file, never the value): not
        set, empty, or holding a control character (``header``: a character that is not
        printable ASCII)."""
        if self.env is not None:
            where = f"environment variable {self.env}"
            text = os.environ.get(self.env, "")
            if not text.strip():
                raise ValueError(f"{where} is not set")
        else:
            path = base / (self.file or "")
            where = shown(path, state_dir)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not text"
                raise ValueError(f"{where}: cannot be read ({why})") from None
        try:
            value = clean_secret(text, header=header)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if not value:
            raise ValueError(f"{where}: empty")
        return value


class Provider(Model):
    type: ProviderType
    url: str | Secret | None = None
    """generic, slack: the webhook; github, gitea: the API's base URL."""
    token: Secret | None = None
    repository: str | None = None
    """github, gitea: ``owner/name`` of the repository whose commits get statuses."""

    @model_validator(mode="after")
    def _fields_of_type(self) -> "Provider":
        if self.type in COMMIT_STATUS_TYPES:
            if self.repository is None or self.repository.count("/") != 1:
                raise ValueError(f"{self.type}: repository: give owner/name")
            if self.token is None:
                raise ValueError(f"{self.type}: token: required")
            if self.type == ProviderType.GITEA and self.url is None:
                raise ValueError("gitea: url: the API's base URL is required")
        elif self.url is None:
            raise ValueError(f"{self.type}: url: required")
        return self

    def resolve(self, base: Path, state_dir: Path) -> tuple[str, str | None]:
        """(URL, token), read now; ValueError naming the field (not the value). ``base``:
        the providers file's folder; ``state_dir``: for messages (``<state>/...``)."""
        try:
            url = self._url(base, state_dir)
        except ValueError as exc:
            raise ValueError(f"url: {exc}") from None
        try:
            token = self.token.read(base, state_dir, header=True) if self.token else None
        except ValueError as exc:
            raise ValueError(f"token: {exc}") from None
        return url, token

    def _url(self, base: Path, state_dir: Path) -> str:
        if isinstance(self.url, Secret):
            return self.url.read(base, state_dir)
        return self.url or GITHUB_API


class ProvidersFile(Model):
    providers: dict[Name, Provider] = Field(default_factory=dict)


def providers_path(state_dir: Path) -> Path:
    return operator_path(state_dir, FILE_ENV, FILE_NAME)


def load_providers(path: Path, state_dir: Path | None = None) -> dict[str, Provider]:
    """The operator's providers in ``path`` (none without the file); ValueError (one
    line naming the file, as ``<state>/...`` with ``state_dir``, and the field) when the
    file is not valid."""
    loaded = read_operator_file(path, ProvidersFile, state_dir)
    return dict(loaded.providers) if loaded is not None else {}
