"""A scenario harness: a real GitOps repository in a temporary folder, the directory
cluster under the state directory, and the CLI run in-process (or as its own process, to
see every line it prints). Tests play the cluster's controllers by writing ``status``
into the cluster's object files."""

import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import git
import pytest
import yaml

from convoy_batch.cli import main
from convoy_batch.timefmt import format_time, parse_time
from tests.support.forked import Forked

T0 = parse_time("2026-11-29T12:00:00Z")
PROJECT = Path(__file__).resolve().parents[2]

CLUSTER = """\
apiVersion: convoy.dev/v1alpha1
kind: Cluster
metadata: {name: staging}
spec:
  vars: {env: staging}
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${release}
spec:
  replicas: 2
  selector: {matchLabels: {app: ${release}}}
  template:
    metadata: {labels: {app: ${release}}}
    spec:
      containers: [{name: app, image: "example/${release}:IMAGE"}]
"""

CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: ${release}-config
data: {env: ${env}}
"""


def hook_job(
    name: str, annotations: str, *, image: str = "1.0", ttl: bool = False, account: str = ""
) -> str:
    """A hook Job of one container ``example/<name>:<image>`` that is never retried;
    ``annotations`` are its annotation lines (four spaces in), ``ttl``: it deletes itself
    once finished (``ttlSecondsAfterFinished: 0``), ``account``: its pod's service account."""
    ttl_line = "  ttlSecondsAfterFinished: 0\n" if ttl else ""
    account_line = f"      serviceAccountName: {account}\n" if account else ""
    return f"""\
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  annotations:
{annotations}spec:
{ttl_line}  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
{account_line}      containers:
      - name: {name}
        image: example/{name}:{image}
        resources: {{requests: {{cpu: 10m, memory: 16Mi}}}}
"""


def release_yaml(
    name: str = "web",
    *,
    spec_extra: str = "",
    annotations: str = "",
    cluster: str = "staging",
    source: str = "",
) -> str:
    """The tests' one Release file: ``name`` on ``cluster`` into namespace ``name``, its
    source ``apps/<name>`` (or ``source``, a YAML flow mapping), then ``spec_extra``
    (indented lines of ``spec``)."""
    meta = f"metadata:\n  name: {name}\n"
    if annotations:
        meta += f"  annotations:\n{annotations}"
    return (
        "apiVersion: convoy.dev/v1alpha1\nkind: Release\n"
        + meta
        + f"spec:\n  cluster: {cluster}\n  namespace: {name}\n"
        + f"  source: {source or '{path: apps/' + name + '}'}\n"
        + spec_extra
    )


def cluster_yaml(name: str = "staging", *, labels: str = "", **spec: str) -> str:
    """The tests' one Cluster file: ``name`` with ``labels`` (a YAML flow mapping) and the
    fields ``spec`` of its ``spec``, each a YAML value on its own line (``wave="1"``,
    ``vars="{env: east}"``), so a test may add lines below; none: ``vars: {env: <name>}``."""
    meta = f"{{name: {name}, labels: {labels}}}" if labels else f"{{name: {name}}}"
    fields = spec or {"vars": f"{{env: {name}}}"}
    lines = "".join(f"  {field}: {value}\n" for field, value in fields.items())
    return f"apiVersion: convoy.dev/v1alpha1\nkind: Cluster\nmetadata: {meta}\nspec:\n{lines}"


FAILURE_POLICY = "  failurePolicy: {rollback: Auto, progressDeadline: 10m}\n"


@dataclass
class Result:
    code: int
    out: str
    err: str


class Scenario:
    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.root = tmp_path / "repo"
        self.state = tmp_path / "state"
        self.capsys = capsys
        self.repo = git.Repo.init(self.root, initial_branch="main")
        with self.repo.config_writer() as cfg:
            cfg.set_value("user", "name", "tester")
            cfg.set_value("user", "email", "tester@localhost")
        self.commit({"clusters/staging.yaml": CLUSTER}, "cluster")

    # --- the GitOps repository -------------------------------------------------------

    def commit(self, files: Mapping[str, str | None], message: str = "change") -> str:
        for rel, text in files.items():
            path = self.root / rel
            if text is None:
                if path.is_symlink() or path.exists():
                    self.repo.index.remove([rel], working_tree=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            self.repo.index.add([rel])
        return self.repo.index.commit(message).hexsha

    def app(
        self,
        name: str = "web",
        *,
        image: str = "1.0",
        extra: Mapping[str, str] = ({}),
        release: str | None = None,
        spec_extra: str = FAILURE_POLICY,
    ) -> str:
        files: dict[str, str | None] = {
            f"apps/{name}/deployment.yaml": DEPLOYMENT.replace("IMAGE", image),
            f"apps/{name}/configmap.yaml": CONFIGMAP,
            f"releases/{name}.yaml": release or release_yaml(name, spec_extra=spec_extra),
        }
        files.update({f"apps/{name}/{k}": v for k, v in extra.items()})
        return self.commit(files, f"{name} {image}")

    def status(self, name: str = "web") -> dict[str, Any]:
        """The status file as committed at HEAD."""
        blob = self.repo.head.commit.tree / f"status/{name}.yaml"
        return dict(yaml.safe_load(blob.data_stream.read()))

    def has_status(self, name: str = "web") -> bool:
        try:
            self.repo.head.commit.tree / f"status/{name}.yaml"
        except KeyError:
            return False
        return True

    def status_log(self, name: str = "") -> list[str]:
        """The summaries of the commits that changed a status (``status/<name>.yaml`` when
        given), newest first."""
        path = f"status/{name}.yaml" if name else "status/"
        return [c.summary for c in self.repo.iter_commits(paths=path)]  # type: ignore[misc]

    def head(self) -> str:
        return self.repo.head.commit.hexsha

    # --- the operator's files ------------------------------------------------------

    def allow_kubeconfigs(self, *folders: Path) -> Path:
        """Write the operator's ``<state>/kubeconfigs.yaml``: Clusters may name kubeconfigs
        under ``folders`` (absolute paths). The file."""
        return self._roots("kubeconfigs.yaml", folders)

    def allow_directories(self, *folders: Path) -> Path:
        """Write ``<state>/directories.yaml``: the operator lets directory clusters write
        under ``folders`` (absolute paths). The file."""
        return self._roots("directories.yaml", folders)

    def _roots(self, name: str, folders: tuple[Path, ...]) -> Path:
        """Write the operator's file ``<state>/<name>`` of ``roots``: ``folders``."""
        self.state.mkdir(parents=True, exist_ok=True)
        file = self.state / name
        file.write_text("roots: [" + ", ".join(f"'{f}'" for f in folders) + "]\n")
        return file

    def unreachable_cluster(self, name: str = "prod", token: str = "t0ken") -> Path:
        """Commit a Kubernetes Cluster ``name`` whose kubeconfig (the operator's, outside
        the repository, allowed by :meth:`allow_kubeconfigs`) names a loopback port nothing
        listens on, with ``token``. The kubeconfig."""
        operator = self.root.parent / "operator"
        operator.mkdir(exist_ok=True)
        self.allow_kubeconfigs(operator)
        with socket.socket() as sock:  # bound, then released: nothing listens there
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        kubeconfig = operator / f"{name}.kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\n"
            f"users: [{{name: u, user: {{token: {token}}}}}]\n"
            "contexts: [{name: ctx, context: {cluster: c, user: u}}]\ncurrent-context: ctx\n"
        )
        cluster = (
            f"apiVersion: convoy.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\n"
            f"spec: {{vars: {{env: {name}}}, kubernetes: {{kubeconfig: '{kubeconfig}'}}}}\n"
        )
        self.commit({f"clusters/{name}.yaml": cluster}, f"cluster {name}")
        return kubeconfig

    # --- the CLI ---------------------------------------------------------------------

    def cli(self, *args: str) -> Result:
        self.capsys.readouterr()
        code = main(["--repo", str(self.root), "--state", str(self.state), *args])
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def cli_process(self, *args: str) -> Result:
        """The CLI in a process of its own (``tests/support/forked.py``: as ``python -m
        convoy_batch.cli`` runs it): its exit code and everything a person sees, the log's
        lines included."""
        argv = ["--repo", str(self.root), "--state", str(self.state), *args]
        run = Forked(argv, Path.cwd(), os.environ)
        out, err = run.communicate(timeout=300)
        assert run.returncode is not None
        return Result(run.returncode, out.decode(), err.decode())

    def reconcile(self, *names: str, minutes: float = 0, extra: tuple[str, ...] = ()) -> Result:
        now = format_time(T0 + timedelta(minutes=minutes))
        return self.cli("reconcile", *names, *extra, "--now", now)

    def reconcile_in_a_process(
        self, minutes: float, *names: str, modules: tuple[str, ...]
    ) -> tuple[int, set[str]]:
        """``reconcile`` in a Python process of its own: its exit code, and which of
        ``modules`` it loaded."""
        now = format_time(T0 + timedelta(minutes=minutes))
        argv = ["--repo", str(self.root), "--state", str(self.state), "reconcile", *names]
        code = (
            "import sys\n"
            "from convoy_batch.cli import main\n"
            f"code = main({[*argv, '--now', now]!r})\n"
            f"print(' '.join(m for m in {modules!r} if m in sys.modules) or '-')\n"
            "sys.exit(code)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
            check=False, env={**os.environ, "PYTHONPATH": str(PROJECT)},
        )  # fmt: skip
        assert done.stdout.splitlines(), done.stderr
        return done.returncode, set(done.stdout.splitlines()[-1].split()) - {"-"}

    # --- the directory cluster -------------------------------------------------------

    def object_path(self, namespace: str, kind_dir: str, name: str) -> Path:
        return self.state / "clusters" / "staging" / namespace / kind_dir / f"{name}.yaml"

    def live(self, namespace: str, kind_dir: str, name: str) -> dict[str, Any]:
        return dict(yaml.safe_load(self.object_path(namespace, kind_dir, name).read_text()))

    def set_status(self, namespace: str, kind_dir: str, name: str, status: dict[str, Any]) -> None:
        path = self.object_path(namespace, kind_dir, name)
        obj = yaml.safe_load(path.read_text())
        obj["status"] = status
        path.write_text(yaml.safe_dump(obj, sort_keys=False))

    def deployment_ready(self, name: str = "web", namespace: str | None = None) -> None:
        """Play the Deployment's controller: ready (its namespace: the Release's name)."""
        namespace = namespace or name
        obj = self.live(namespace, "deployment.apps", name)
        gen = obj["metadata"].get("generation", 1)
        n = obj["spec"].get("replicas", 1)
        self.set_status(
            namespace,
            "deployment.apps",
            name,
            {
                "observedGeneration": gen,
                "replicas": n,
                "updatedReplicas": n,
                "readyReplicas": n,
                "availableReplicas": n,
                "conditions": [{"type": "Available", "status": "True"}],
            },
        )

    def deployment_failed(self, name: str = "web") -> None:
        obj = self.live(name, "deployment.apps", name)
        gen = obj["metadata"].get("generation", 1)
        self.set_status(
            name,
            "deployment.apps",
            name,
            {
                "observedGeneration": gen,
                "replicas": 2,
                "updatedReplicas": 2,
                "conditions": [
                    {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
                ],
            },
        )

    def deployment_image(self, name: str = "web") -> str:
        obj = self.live(name, "deployment.apps", name)
        return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])
