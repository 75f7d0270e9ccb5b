"""A Cluster's kubeconfig, loaded into the Kubernetes client's configuration: contexts,
certificates, tokens, exec plugins (which named kubeconfigs may be loaded at all:
:mod:`convoy_batch.deployers.targets`). Reads files and may run a kubeconfig's exec plugin.

Every failure is one ``ClusterUnavailable`` line naming the kubeconfig (``<state>/...``
inside the state directory) and never a credential: the loader's messages name files and
keys, and a header value from a kubeconfig is checked before any request carries it.
"""

import logging
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from convoy_batch.errors import ClusterUnavailable
from convoy_batch.models import KubernetesTarget
from convoy_batch.state.operator_files import shown, without_state_dir


def kubeconfig_path(target: KubernetesTarget, base: Path) -> str:
    """``spec.kubernetes.kubeconfig`` (relative to ``base``), else ``$KUBECONFIG``, else
    ``~/.kube/config``. ``$KUBECONFIG`` may list several files, as kubectl allows. (Which
    named files may be used: :mod:`convoy_batch.deployers.targets`.)"""
    if target.kubeconfig:
        path = Path(target.kubeconfig).expanduser()
        return str(path if path.is_absolute() else base / path)
    env = os.environ.get("KUBECONFIG")
    return env if env else str(Path("~/.kube/config").expanduser())


def load_configuration(target: KubernetesTarget, base: Path, where: str) -> Any:
    """The client configuration for the target's kubeconfig and context (ClusterUnavailable,
    one line naming the file as ``<state>/...`` when it is in ``base``, the state
    directory)."""
    path = kubeconfig_path(target, base)
    configuration = k8s_client.Configuration()
    try:
        with _loader_errors() as logged:
            k8s_config.load_kube_config(
                config_file=path,
                context=target.context,
                client_configuration=configuration,
                persist_config=False,
            )
    except Exception as exc:  # any way a user's file fails to load
        # (bad YAML, missing fields, bad certificate data) is one line naming the file;
        # the loader's messages name files and keys, never tokens.
        raise _unloadable(where, path, str(exc).strip() or type(exc).__name__, base) from None
    if logged:  # an exec plugin that failed: the configuration has no credentials
        raise _unloadable(where, path, logged[0], base)
    return configuration


def _unloadable(where: str, path: str, problem: str, state_dir: Path) -> ClusterUnavailable:
    lines = problem.strip().splitlines()
    first_line = lines[0] if lines else "unknown problem"
    # The loader's message may name a file of the state directory (a missing tokenFile).
    first_line = without_state_dir(first_line, state_dir)
    named = shown(path, state_dir)
    return ClusterUnavailable(f"{where}: cannot load kubeconfig {named}: {first_line}")


_LOADER = os.path.dirname(k8s_config.__file__) + os.sep
_LOADING = threading.Lock()


class _LoaderErrors(logging.Filter):
    """Takes the errors the kubeconfig loader logs off the log and keeps their messages."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR or not record.pathname.startswith(_LOADER):
            return True
        self.messages.append(record.getMessage())
        return False


@contextmanager
def _loader_errors() -> Iterator[list[str]]:
    """The messages of the errors the kubeconfig loader logs meanwhile. It logs an exec
    plugin that fails (exit code, missing command, output without a credential) instead of
    raising, and goes on without credentials: every request would be anonymous."""
    caught = _LoaderErrors()
    root = logging.getLogger()  # the loader logs through the logging module's functions
    with _LOADING:
        root.addFilter(caught)
        try:
            yield caught.messages
        finally:
            root.removeFilter(caught)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def header_value(key: str, value: str, where: str) -> str:
    """A header's value from the kubeconfig, as sent: without trailing white space (a
    ``tokenFile`` ending in a newline, which the client keeps); ClusterUnavailable, one line
    naming the header and never its value, for any other control character in it."""
    value = value.rstrip()
    if _CONTROL.search(value):
        raise ClusterUnavailable(
            f"{where}: the kubeconfig's credential (the {key} header) holds a control "
            "character, which no HTTP header can carry (its value is not shown)"
        )
    return value
