"""SOPS-encrypted documents in a render (README, "SOPS secrets"). Pure: no I/O.

A document is SOPS-encrypted when it has a top-level ``sops`` mapping with a ``mac`` (as
Flux's kustomize-controller tells them). sops' MAC covers every value of the document in
its order, so the render cannot keep such a document as an object (the render adds a
namespace, and its canonical JSON sorts keys): it keeps a *sealed* object instead, its
identity and metadata (which must be in the clear) and, under :data:`SEALED`, the
encrypted document as JSON in its own key order. Only ciphertext is ever stored; the
plaintext object is made in memory right before the dry run and the apply
(:func:`opened`), from what sops decrypts.
"""

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from convoy_batch.errors import RenderFailed

Manifest = dict[str, Any]

SEALED = "convoy.dev/sops"
"""The field of a sealed object that holds the encrypted document (never sent)."""
_CLEAR = ("apiVersion", "kind", "metadata")
_ENCRYPTED_PREFIX = "ENC["


def is_encrypted(doc: Any) -> bool:
    """A SOPS-encrypted document: a top-level ``sops`` mapping with a ``mac``."""
    return (
        isinstance(doc, Mapping) and isinstance(doc.get("sops"), Mapping) and "mac" in doc["sops"]
    )


def is_sealed(obj: Mapping[str, Any]) -> bool:
    return SEALED in obj


def check_unsealed(doc: Manifest, where: str) -> Manifest:
    """A document of the source that is not encrypted: it may not hold :data:`SEALED`."""
    if SEALED in doc:
        raise RenderFailed(f"{where}: {SEALED}: a field convoy-batch keeps for itself")
    return doc


def seal(doc: Manifest, where: str, decrypts: bool) -> Manifest:
    """The sealed object of an encrypted document (``where``: its file, for errors).
    RenderFailed when the Release has no ``decryption`` (``decrypts``), when the document
    is not a v1 Secret, or when its identity or metadata is encrypted."""
    if not decrypts:
        raise RenderFailed(
            f"{where}: SOPS-encrypted (a top-level sops key), but the Release sets no "
            "spec.source.decryption"
        )
    if doc.get("apiVersion") != "v1" or doc.get("kind") != "Secret":
        raise RenderFailed(
            f"{where}: SOPS-encrypted, but not a v1 Secret (apiVersion and kind must be in "
            "the clear, and only Secrets may be encrypted)"
        )
    for name in _CLEAR:
        path = _encrypted_path(doc.get(name), name)
        if path is not None:
            raise RenderFailed(
                f"{where}: {path} is encrypted; encrypt only data and stringData "
                "(sops --encrypted-regex '^(data|stringData)$')"
            )
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    sealed = {"file": where, "document": text}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": dict(doc["metadata"]), SEALED: sealed}


def _encrypted_path(value: Any, path: str) -> str | None:
    """The first path under ``value`` that holds an ``ENC[...]`` value."""
    if isinstance(value, str):
        return path if value.startswith(_ENCRYPTED_PREFIX) else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = _encrypted_path(item, f"{path}.{key}")
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _encrypted_path(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def document(obj: Mapping[str, Any]) -> tuple[str, str]:
    """The file and the encrypted document (JSON, in its own key order) of a sealed
    object. RenderFailed for a sealed field of another shape (a damaged stored render)."""
    sealed = obj.get(SEALED)
    if not isinstance(sealed, Mapping):
        raise RenderFailed(f"{obj['kind']} {obj['metadata']['name']}: {SEALED}: not a mapping")
    where, text = sealed.get("file"), sealed.get("document")
    if not isinstance(where, str) or not isinstance(text, str):
        raise RenderFailed(f"{where}: {SEALED}: file and document must be strings")
    return where, text


def opened(obj: Mapping[str, Any], decrypted: Mapping[str, Any]) -> Manifest:
    """The object to send: what sops decrypted (without its ``sops`` key) with the sealed
    object's metadata (its namespace, the convoy label and render annotation)."""
    plain = {k: v for k, v in decrypted.items() if k != "sops"}
    return {**plain, "metadata": dict(obj["metadata"])}


def shown(obj: Mapping[str, Any]) -> Manifest:
    """A sealed object as views show it: the encrypted document by its digest only."""
    if not is_sealed(obj):
        return dict(obj)
    where, text = document(obj)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return {**obj, SEALED: f"{where} (encrypted, sha256:{digest})"}
