"""Where a Cluster's target may be: a repository writer names a target, and only ever
one the operator placed.

- A Kubernetes Cluster's ``spec.kubernetes.kubeconfig``. Unset: the operator's
  environment (``$KUBECONFIG``, else ``~/.kube/config``), not checked. Named: relative to
  the state directory and in it (links resolved); or exactly a file ``$KUBECONFIG`` lists,
  or ``~/.kube/config``; or under a root of the operator's ``<state>/kubeconfigs.yaml``
  (or the file ``$CONVOY_KUBECONFIGS`` names: ``roots: [...]``, as ``directories.yaml``).
  Never, whatever the roots, a file of the GitOps repository's working tree or its git
  folder (a state directory inside the working tree is the operator's: a tick whose HEAD
  holds a file of it does not start, :func:`~convoy_batch.engine.tick.refuse_tracked_state`),
  of what convoy-batch writes (:data:`WRITTEN`, and its temporary
  folders ``convoy-*``), or of a directory Cluster's folder or a root of
  ``directories.yaml``. So an ``exec`` credential plugin runs, and a ``tokenFile`` is
  read, only from a kubeconfig the operator placed.
- A directory Cluster's folder: what one Cluster file may name is
  :func:`~convoy_batch.deployers.directory.cluster_root`'s; across the snapshot, two
  Clusters whose folders are the same, or one of which holds the other, are both
  refused, but for one in its own default folder ``clusters/<its name>``: a new Cluster
  never takes over another's objects.

Each refusal is ClusterNotFound, one line naming the Cluster file and field, the path as
written and why, with paths of the state directory shown as ``<state>/...``. The tick
checks a Cluster before it makes its deployer (:meth:`Targets.check`, from
``engine/tick.py``), so every way to a deployer (reconcile, observe, retire, the views)
passes here. Reads the file system (paths with their links resolved, the operator's roots
files); writes nothing.
"""

import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from convoy_batch.deployers.directory import (
    CLUSTERS_FOLDER,
    cluster_root,
    directory_roots,
    in_own_default,
    written_path,
)
from convoy_batch.errors import ClusterNotFound
from convoy_batch.models import Cluster, Model
from convoy_batch.state.operator_files import operator_path, read_operator_file, shown

KUBECONFIGS_ENV = "CONVOY_KUBECONFIGS"
KUBECONFIGS_FILE = "kubeconfigs.yaml"

WRITTEN = (
    # folders
    "locks",  # state/locks.py
    "renders",  # store.py
    "inventory",  # store.py
    "cache",  # the parse caches (engine/tick.py), repo/source.py's last-change.json
    "intents",  # state/intents.py
    "retiring",  # state/intents.py
    "outbox",  # notify/outbox.py
    "measurements",  # state/measurements.py
    "sources",  # repo/source.py: other repositories' clones
    "charts",  # renderers/charts.py
    CLUSTERS_FOLDER,  # the directory clusters (deployers/directory.py)
    "dagster",  # the Dagster instance, when its home is the state directory (make run)
    # files
    "ticks.json",  # state/caches.py
    "health.json",  # state/caches.py
    "last-tick.json",  # engine/retire.py
    "unpushed.bundle",  # status/remote.py
)
"""What convoy-batch writes in the state directory (tests/security/test_tenant_clusters.py
checks that a tick writes nothing else), by name: no kubeconfig is ever read from any of
them."""
TEMPORARY_PREFIXES = ("convoy-exports-", "convoy-render-", "convoy-chart-", "convoy-sops-")
"""How the folders convoy-batch makes in the system's temporary folder begin (exported
sources, a render's scratch, a chart's, a SOPS home): every ``prefix=`` of the package's
temporary folders (tests/security/test_tenant_clusters.py checks the list is whole)."""


def environment_kubeconfigs() -> tuple[Path, ...]:
    """The operator's own kubeconfigs: the files ``$KUBECONFIG`` lists, and
    ``~/.kube/config``. (Loaded by :mod:`convoy_batch.deployers.kubeconfig`, which this
    module does not import: a tick of directory Clusters never loads the Kubernetes
    client.)"""
    listed = os.environ.get("KUBECONFIG", "").split(os.pathsep)
    return (*(Path(f) for f in listed if f), Path("~/.kube/config").expanduser())


HOW = (
    "a named kubeconfig must be one the operator placed: in the state directory (named "
    "relatively), or under a root listed in {file} ('roots:'), outside the repository and "
    "what convoy-batch writes"
)


class KubeconfigRoots(Model):
    """The operator's ``kubeconfigs.yaml``: the folders named kubeconfigs may be in."""

    roots: tuple[str, ...] = ()


def kubeconfigs_path(state_dir: Path) -> Path:
    return operator_path(state_dir, KUBECONFIGS_ENV, KUBECONFIGS_FILE)


def _forms(path: Path | str) -> tuple[Path, ...]:
    """``path`` as written (absolute, normalised) and with its links resolved."""
    return tuple({Path(os.path.abspath(path)), Path(os.path.realpath(path))})


def _within(path: Path, folders: Iterable[Path]) -> Path | None:
    """The first of ``folders`` that is ``path`` or holds it."""
    return next((f for f in folders if path.is_relative_to(f)), None)


@dataclass(frozen=True)
class Folder:
    """A directory Cluster's folder (links resolved) and whether it is its own default."""

    path: Path
    own_default: bool


class Targets:
    """What one tick checks Clusters against (see module doc): made once per tick; each
    check reads the roots files (cached by their stat) and the paths it is given."""

    def __init__(
        self,
        state_dir: Path,
        clusters: Mapping[str, Cluster],
        repository: Iterable[Path] = (),
    ) -> None:
        """``repository``: the GitOps repository's working tree and git folder."""
        self.state_dir = state_dir
        self.clusters = clusters
        self._state = _forms(state_dir)
        self._repository = tuple(f for p in repository for f in _forms(p))

    def check(self, cluster: Cluster) -> None:
        """ClusterNotFound (one line) when the Cluster's target is not one it may use."""
        if cluster.spec.kubernetes is not None:
            self._check_kubeconfig(cluster)
        else:
            self._check_directory(cluster)

    # --- directory clusters ----------------------------------------------------------

    @cached_property
    def folders(self) -> dict[str, Folder]:
        """Each directory Cluster of the snapshot that :func:`cluster_root` accepts, by name."""
        found: dict[str, Folder] = {}
        for name, cluster in self.clusters.items():
            if cluster.spec.kubernetes is not None:
                continue
            try:
                root, _ = cluster_root(cluster, self.state_dir)
            except ClusterNotFound:
                continue  # refused, it writes nowhere
            found[name] = Folder(Path(os.path.realpath(root)), in_own_default(cluster))
        return found

    @cached_property
    def _sharing(self) -> dict[str, tuple[str, str]]:
        """Cluster -> how its folder meets another's, and that Cluster's name (the first)."""
        by_path: dict[Path, list[str]] = {}
        for name, folder in self.folders.items():
            by_path.setdefault(folder.path, []).append(name)
        found: dict[str, tuple[str, str]] = {}
        for path, names in sorted(by_path.items()):
            for name in names:
                others = [n for n in names if n != name]
                if others:
                    found.setdefault(name, ("is also the folder of", others[0]))
            for above in path.parents:  # a folder that holds this one
                for holder in by_path.get(above, ()):
                    found.setdefault(holder, ("holds the folder of", names[0]))
                    for name in names:
                        found.setdefault(name, ("lies in the folder of", holder))
        return found

    def _check_directory(self, cluster: Cluster) -> None:
        cluster_root(cluster, self.state_dir)  # what the Cluster alone may name
        where = f"clusters/{cluster.name}.yaml: spec.directory.path: {written_path(cluster)!r}"
        sharing = self._sharing.get(cluster.name)
        if sharing is None or in_own_default(cluster):
            return
        how, other = sharing
        raise ClusterNotFound(
            f"{where} {how} Cluster {other!r}: Clusters that share a folder are refused, "
            f"but one in its own default {CLUSTERS_FOLDER}/<its name>"
        )

    # --- kubeconfigs -------------------------------------------------------------------

    def _check_kubeconfig(self, cluster: Cluster) -> None:
        target = cluster.spec.kubernetes
        assert target is not None
        if not target.kubeconfig:
            return  # the operator's environment
        written = target.kubeconfig
        where = f"clusters/{cluster.name}.yaml: spec.kubernetes.kubeconfig: {written!r}"
        try:
            if "\x00" in written:
                raise ValueError(written)
            named = Path(written).expanduser()
        except (RuntimeError, ValueError):  # ~nobody/..., a NUL character
            raise ClusterNotFound(f"{where} is not a path of this machine") from None
        path = named if named.is_absolute() else self.state_dir / named
        file = kubeconfigs_path(self.state_dir)
        how = HOW.format(file=shown(file, self.state_dir))
        if problem := self._never(path):
            raise ClusterNotFound(f"{where} {problem}; {how}")
        real = Path(os.path.realpath(path))
        if not named.is_absolute() and _within(real, self._state):
            return
        if real in {Path(os.path.realpath(p)) for p in environment_kubeconfigs()}:
            return
        try:
            roots = read_operator_file(file, KubeconfigRoots, self.state_dir)
        except ValueError as exc:
            raise ClusterNotFound(f"{where}: kubeconfig roots: {exc}") from None
        for root in roots.roots if roots is not None else ():
            if os.path.isabs(root) and real.is_relative_to(os.path.realpath(root)):
                return
        raise ClusterNotFound(
            f"{where} is outside the state directory and no root of {shown(file, self.state_dir)}"
            " allows it (an operator lists allowed roots there under 'roots:')"
        )

    def _never(self, path: Path) -> str | None:
        """Why no kubeconfig may be read at ``path`` whatever the roots (None: it may)."""
        for form in _forms(path):
            if problem := self._written(form) or self._of_a_cluster(form):
                return problem
            if _within(form, self._repository) and not _within(form, self._state):
                return "lies in the GitOps repository's working tree"
        return None

    def _written(self, form: Path) -> str | None:
        state = _within(form, self._state)
        if state is not None and form != state:
            top = form.relative_to(state).parts[0]
            if top in WRITTEN:
                return f"lies in {shown(state / top, state)}, which convoy-batch writes"
        temporary = _within(form, _forms(tempfile.gettempdir()))
        if temporary is None or form == temporary:
            return None
        if form.relative_to(temporary).parts[0].startswith(TEMPORARY_PREFIXES):
            return "lies in a temporary folder of convoy-batch"
        return None

    def _of_a_cluster(self, form: Path) -> str | None:
        for name, folder in self.folders.items():
            if form.is_relative_to(folder.path):
                return f"lies in the folder of directory Cluster {name!r}"
        try:
            roots_file, roots = directory_roots(self.state_dir)
        except ValueError as exc:
            return f"cannot be told apart from the directory clusters' roots: {exc}"
        for root in roots:
            if _within(form, _forms(root)):
                return f"lies under a root of {shown(roots_file, self.state_dir)}"
        return None
