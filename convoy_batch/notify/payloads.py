"""What each provider type sends for an event: the request's URL, headers and JSON body.

Pure (no I/O): the URL and token are handed in, read by the caller just before sending.

- ``generic``: the event as JSON (camelCase fields, ``id``, ``severity``, ``summary``),
  ``Authorization: Bearer <token>`` when a token is set.
- ``slack``: an incoming webhook's ``{"text": ...}``.
- ``github``, ``gitea``: a commit status on the event's source revision,
  ``POST <url>/repos/<owner>/<name>/statuses/<revision>``, context
  ``convoy-batch/<release>/<cluster>`` (one per Release and Cluster), state from the
  rollout: success, pending, failure, or error for an error reason.
"""

import json
from dataclasses import dataclass
from typing import Any

from convoy_batch.models import RolloutState
from convoy_batch.notify.event import Event
from convoy_batch.notify.providers import Provider, ProviderType
from convoy_batch.reasons import ERROR_REASONS, GATE_REASONS, Reason

EVENT_ID_HEADER = "X-Convoy-Event-Id"
CONTEXT_PREFIX = "convoy-batch"
DESCRIPTION_LIMIT = 140
"""GitHub refuses a longer commit status description."""


@dataclass(frozen=True)
class HttpRequest:
    url: str
    headers: dict[str, str]
    body: bytes


_STATUS_OF_STATE = {
    RolloutState.PROGRESSING.value: "pending",
    RolloutState.SUCCEEDED.value: "success",
    RolloutState.FAILED.value: "failure",
    RolloutState.ROLLED_BACK.value: "failure",
}
_WAITING = {r.value for r in GATE_REASONS - {Reason.WAVE_TIMEOUT}}
_ERRORS = {r.value for r in ERROR_REASONS}


def commit_state(event: Event) -> str:
    """The commit status of ``event``: error for an error reason, else the rollout
    state's; without a rollout, pending while a gate waits, failure after a wave
    timeout, else success."""
    if event.outcome in _ERRORS:
        return "error"
    if event.state in _STATUS_OF_STATE:
        return _STATUS_OF_STATE[event.state]
    if event.outcome in _WAITING:
        return "pending"
    return "failure" if event.outcome == Reason.WAVE_TIMEOUT.value else "success"


def context(event: Event) -> str:
    return f"{CONTEXT_PREFIX}/{event.release}/{event.cluster or '-'}"


def build(provider: Provider, url: str, token: str | None, event: Event) -> HttpRequest | None:
    """The request that tells ``event`` to ``provider``; None when there is nothing to
    send (a commit status without a source revision)."""
    headers = {"Content-Type": "application/json", EVENT_ID_HEADER: event.id}
    if provider.type == ProviderType.SLACK:
        return HttpRequest(url, headers, _json({"text": event.summary()}))
    if provider.type == ProviderType.GENERIC:
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return HttpRequest(url, headers, _json(generic_body(event)))
    if event.revision is None:
        return None
    if provider.type == ProviderType.GITHUB:
        headers["Accept"] = "application/vnd.github+json"
        headers["X-GitHub-Api-Version"] = "2022-11-28"
        headers["Authorization"] = f"Bearer {token}"
    else:
        headers["Authorization"] = f"token {token}"
    target = f"{url.rstrip('/')}/repos/{provider.repository}/statuses/{event.revision}"
    return HttpRequest(target, headers, _json(status_body(event)))


def generic_body(event: Event) -> dict[str, Any]:
    body = {"id": event.id, "severity": event.severity.value, "summary": event.summary()}
    return body | event.dump()


def status_body(event: Event) -> dict[str, Any]:
    description = event.summary()
    if len(description) > DESCRIPTION_LIMIT:
        description = description[: DESCRIPTION_LIMIT - 3] + "..."
    return {"state": commit_state(event), "context": context(event), "description": description}


def _json(data: dict[str, Any]) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
