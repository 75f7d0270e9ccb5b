"""Files the operator writes outside the GitOps repository: in the state directory, or
where an environment variable names them. Command renderers (``renderers.yaml``) and
notification providers (``providers.yaml``) live there, so a repository writer can name
a renderer or a provider but never define one.

Does file I/O. A file is read again only when its size or modification time changes.
"""

import os
from pathlib import Path
from typing import Any, TypeVar

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
