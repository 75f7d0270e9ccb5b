"""Set up the embedded example and run convoy-batch on it (``make run``).

Copies the project's ``releases/`` folder into a fresh git repository under the given
folder (never into the project's own history) and reconciles every Release once.
"""

import shutil
import subprocess
import sys
from pathlib import Path

from convoy_batch.cli import main as cli

PROJECT = Path(__file__).resolve().parent.parent


def make_example_repo(dest: Path) -> Path:
    """A fresh git repository holding the example, with one commit."""
    repo = dest / "repo"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(PROJECT / "releases", repo, ignore=shutil.ignore_patterns("README.md"))
    git = ["git", "-C", str(repo)]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "config", "user.name", "example"], check=True)
    subprocess.run([*git, "config", "user.email", "example@localhost"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "example GitOps repository"], check=True)
    return repo


def main() -> int:
    dest = Path(sys.argv[1] if len(sys.argv) > 1 else ".convoy/example").resolve()
    repo = make_example_repo(dest)
    base = ["--repo", str(repo), "--state", str(dest / "state")]
    print(f"example repository: {repo}")
    code = cli([*base, "reconcile", "--all"])
    print("\nstatus:")
    cli([*base, "status"])
    print("\ngit log -- status/:")
    subprocess.run(
        ["git", "-C", str(repo), "log", "--format=%h %an: %s", "--", "status/"], check=True
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
