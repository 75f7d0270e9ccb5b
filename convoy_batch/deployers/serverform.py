"""Whether a live object already is what the API server would store for a manifest, told
from the server's own answers to the manifest instead of from its text. No I/O of its
own: :class:`ServerForms` keeps its entries in the :class:`~convoy_batch.state.caches.ParseCache`
it is given (the tick's ``<state>/cache/cluster-<name>.json``, read on first use and
saved when the tick closes).

The server stores a manifest in its own form: ``cpu: 2000m`` as ``2``, ``hostNetwork:
false`` and ``minReadySeconds: 0`` not at all, defaults filled in. Comparing the text of
the manifest with the live object would see drift on every tick; the server is the only
normaliser, so its answer to a dry run or an apply of the manifest is what is compared.

:func:`project` takes an object at the paths a manifest sets (see there). An answer and
a live object are compared by their projections on the manifest, never whole: the server
adds fields of its own (``resourceVersion``, ``generation``, status) that change without
anyone touching what convoy-batch manages.

The cache (:class:`ServerForms`):

- key: ``k8s:<group>/<kind>/<namespace>/<name>``, the object on its Cluster (the
  directory deployer's keys are file paths, so the two never meet);
- signature: a digest of the manifest as sent (``with_defaults``, convoy-batch's label and
  ``convoy.dev/render`` annotation stamped), as JSON with sorted keys: the same for every
  render of the same manifest, whatever order its mappings' keys come in (a fresh Helm
  render and the render store's copy of it order them differently) and whatever else a
  commit changes (the revision, the status commit: neither is in the manifest);
- data: a digest of the projection of the server's last answer to that manifest (dry run
  or apply) on the manifest's paths, as a mapping from each path to its leaf
  (:func:`form_digest`), so that it too does not depend on the order of the manifest's
  keys. Digests only: no value of the object (a Secret's ``data``) is ever written to
  the file.
- invariant: an entry is only ever the server's answer to exactly the manifest its
  signature names, and is compared with a live object over that manifest's paths alone,
  each by its path: two manifests with the same signature have the same paths, so the
  entry is right for every render that sends the same object, and an unrelated commit
  (the same render) finds it. Applying a manifest again to an object whose projection
  on the manifest's paths equals that of the server's answer to the same manifest
  changes nothing (a server-side apply of the same configuration by the same manager
  is idempotent), so such an object is settled. A lost or stale entry costs one dry
  run, never a wrong decision: the entry is only trusted when the signature and the
  live projection match.
"""

import hashlib
import json
import threading
from collections.abc import Mapping
from typing import Any

from convoy_batch.deployers.base import Manifest
from convoy_batch.deployers.kubediff import managed, same_render
from convoy_batch.manifests.annotations import create_only, is_hook
from convoy_batch.manifests.drift import pointer
from convoy_batch.models import key_of
from convoy_batch.state.caches import ParseCache

FieldPath = tuple[str | int, ...]
Leaf = tuple[str, FieldPath, Any]
"""``("value", path, v)``: the object holds ``v`` there; ``("absent", path, None)``: it
holds nothing there; ``("length", path, n)``: a list of ``n`` items."""
KEY_PREFIX = "k8s:"


def project(obj: Any, manifest: Any) -> list[Leaf]:
    """``obj`` at every leaf path ``manifest`` sets, in the manifest's order: through
    mappings key by key, through lists item by item (with the list's length, so an item
    added or removed is seen). A path ``obj`` lacks is recorded as absent, so a later
    change that sets it is seen too. A null in the manifest sets nothing (server-side
    apply drops it) and is left out; where ``obj`` has another type than the manifest
    (a value where the manifest has a mapping), its value there is recorded whole."""
    found: list[Leaf] = []
    _project(obj, manifest, (), found)
    return found


def _project(obj: Any, manifest: Any, path: FieldPath, found: list[Leaf]) -> None:
    if manifest is None:
        return
    if isinstance(manifest, Mapping) and isinstance(obj, Mapping):
        for key, value in manifest.items():
            _project(obj.get(key, _ABSENT), value, (*path, key), found)
    elif isinstance(manifest, list) and isinstance(obj, list):
        found.append(("length", path, len(obj)))
        for index, value in enumerate(manifest):
            _project(obj[index] if index < len(obj) else _ABSENT, value, (*path, index), found)
    elif obj is _ABSENT or obj is None:
        found.append(("absent", path, None))
    else:
        found.append(("value", path, obj))


_ABSENT = object()
"""What a path the object lacks reads as while projecting (never returned)."""


def digest(value: Any) -> str:
    """A digest of JSON data, its mappings' keys in sorted order (lists keep theirs)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def form_digest(obj: Any, manifest: Any) -> str:
    """The digest of ``obj``'s projection on ``manifest`` (:func:`project`) taken leaf by
    path, not in the manifest's order: the same for every order of the manifest's keys.
    A path is keyed by its JSON text, which tells a list index from a key."""
    leaves = {
        json.dumps(path, ensure_ascii=False): [kind, value]
        for kind, path, value in project(obj, manifest)
    }
    return digest(leaves)


def comparable(sent: Manifest, live: Manifest | None) -> bool:
    """Whether ``live`` may be found in sync with ``sent`` by its server form: it exists and
    carries this render, and ``sent`` is neither a hook nor create-only (they have their
    own rules, see :func:`~convoy_batch.deployers.kubediff.settled`)."""
    return live is not None and same_render(sent, live) and not (is_hook(sent) or create_only(sent))


def in_sync(sent: Manifest, answer: Manifest, live: Manifest | None) -> bool:
    """``live`` is what the server answered for ``sent`` (a dry run's answer), on the
    fields of ``sent``: applying it would change nothing."""
    if not comparable(sent, live):
        return False
    fields = managed(sent)
    return project(answer, fields) == project(live, fields)


def drifted(sent: Manifest, answer: Manifest, live: Manifest) -> list[str]:
    """The pointers where ``live`` differs from the server's answer to ``sent`` (what an
    apply of it would leave), on the fields of ``sent``: the object's drift, paths only."""
    fields = managed(sent)
    leaves = {path: (kind, value) for kind, path, value in project(live, fields)}
    return [
        pointer(path)
        for kind, path, value in project(answer, fields)
        if leaves.get(path) != (kind, value)
    ]


class ServerForms:
    """The server's answer to each manifest, remembered across ticks (see module doc).
    Without a cache it remembers nothing. Safe to share between threads."""

    def __init__(self, cache: ParseCache | None) -> None:
        self._cache = cache
        self._lock = threading.Lock()

    def remember(self, sent: Manifest, answer: Manifest) -> None:
        """Keep the server's answer to ``sent`` (its digest on the manifest's paths)."""
        if self._cache is None or is_hook(sent) or create_only(sent):
            return
        data = form_digest(answer, managed(sent))
        with self._lock:
            self._cache.put(_key(sent), digest(sent), data)

    def matches(self, sent: Manifest, live: Manifest | None) -> bool:
        """``live`` is, on the fields of ``sent``, what the server last answered for it."""
        if self._cache is None or not comparable(sent, live):
            return False
        with self._lock:
            data = self._cache.get(_key(sent), digest(sent))
        return data is not None and data == form_digest(live, managed(sent))


def _key(sent: Manifest) -> str:
    return KEY_PREFIX + "/".join(key_of(sent).identity())
