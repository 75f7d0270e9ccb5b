"""Where the state directory is when none is named: ``$CONVOY_STATE``, else
``<repo>/.convoy``. Read at the edges (the command line, the Dagster resource), which pass
the folder down, and by the partition sensor's
:func:`~convoy_batch.ticks.wakeups.release_names`, which is given none. Does file I/O
(``.git/info/exclude``)."""

import os
from pathlib import Path


def default_state_dir(repo: Path) -> Path:
    """``$CONVOY_STATE``, else ``<repo>/.convoy`` (added to ``.git/info/exclude``)."""
    env = os.environ.get("CONVOY_STATE")
    if env:
        return Path(env)
    exclude = repo / ".git" / "info" / "exclude"
    if exclude.parent.is_dir():
        text = exclude.read_text() if exclude.exists() else ""
        if ".convoy/" not in text.splitlines():
            with exclude.open("a") as f:
                f.write(("" if text.endswith("\n") or not text else "\n") + ".convoy/\n")
    return repo / ".convoy"
