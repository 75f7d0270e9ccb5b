"""The project's throwaway PostgreSQL server (``scripts/pg-testenv``) for the tests and the
bench: started on a free loopback port, one database per Dagster instance, the instance's
``dagster.yaml`` with Postgres storage. Does I/O; no pytest here (the bench uses it too):
a server that cannot start raises :class:`PgUnavailable`, which the ``postgres`` fixture
turns into a skip, or a failure under ``CI=true``.
"""

import os
import subprocess
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from tests.support.needs import require
from tests.support.testenv_script import NotStarted, start_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pg-testenv"
START_TIMEOUT = 120


class PgUnavailable(Exception):
    """No server: the binaries are missing or it did not start (the message says which)."""


@dataclass(frozen=True)
class PgServer:
    """A started server and one of its databases."""

    folder: Path
    host: str
    port: int
    user: str
    password: str
    database: str

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """Run one statement on this database (autocommit); the rows it returns."""
        import psycopg2  # type: ignore[import-untyped]  # the Postgres extra's, when used

        conn = psycopg2.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            dbname=self.database,
        )
        try:
            conn.autocommit = True  # CREATE DATABASE refuses a transaction
            with conn.cursor() as cursor:
                cursor.execute(sql)
                return list(cursor.fetchall()) if cursor.description else []
        finally:
            conn.close()

    def new_database(self, prefix: str = "dagster") -> "PgServer":
        """A new empty database on the same server (one per Dagster instance)."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        self.query(f'CREATE DATABASE "{name}"')
        return replace(self, database=name)

    def storage_config(self) -> dict[str, Any]:
        """The ``storage:`` block of a dagster.yaml over this database (runs, event log,
        schedules), through psycopg2: SQLAlchemy 2's ``postgresql://`` means psycopg 3."""
        return {
            "postgres": {
                "postgres_db": {
                    "hostname": self.host,
                    "port": self.port,
                    "username": self.user,
                    "password": self.password,
                    "db_name": self.database,
                    "scheme": "postgresql+psycopg2",
                }
            }
        }

    def dagster_home(self, home: Path) -> Path:
        """Write ``home/dagster.yaml``: this database as the instance's storage, telemetry
        off; returns ``home`` (a ``DAGSTER_HOME``)."""
        home.mkdir(parents=True, exist_ok=True)
        config = {"storage": self.storage_config(), "telemetry": {"enabled": False}}
        (home / "dagster.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        return home


def start(folder: Path) -> PgServer:
    """``scripts/pg-testenv start folder`` on a free port; PgUnavailable when it cannot."""
    require("postgres")
    env = {**os.environ, "CONVOY_PG_PORT": "auto"}
    try:
        out = start_script(SCRIPT, folder, env, START_TIMEOUT, lambda: stop(folder))
    except NotStarted as exc:
        raise PgUnavailable(str(exc)) from None
    values = dict(line.split("=", 1) for line in Path(out.strip()).read_text().splitlines())
    return PgServer(
        folder=folder,
        host=values["PGHOST"],
        port=int(values["PGPORT"]),
        user=values["PGUSER"],
        password=values["PGPASSWORD"],
        database=values["PGDATABASE"],
    )


def stop(folder: Path) -> None:
    subprocess.run([str(SCRIPT), "stop", str(folder)], capture_output=True, check=False)
