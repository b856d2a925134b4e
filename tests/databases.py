"""The databases the tests run on: a SQLite file, or a database on a throwaway
PostgreSQL cluster that the suite starts itself (initdb and pg_ctl in a temporary
directory, on a free loopback port, stopped at the end of the session).

ENGINE_TEST_POSTGRES_URL points the suite at an existing server instead (a role that
may create databases). Without either, the PostgreSQL tests are skipped with the reason;
with ENGINE_REQUIRE_POSTGRES=1 (set by .ci/run) they fail instead, so CI never skips
them silently."""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

if TYPE_CHECKING:
    from engine.store.ports import Store

BACKENDS = ("sqlite", "postgresql")
# The in-memory store (engine.store.memory) is no database: the contract suite holds it
# to the same behaviour as the two backends (conftest's `store_database`).
MEMORY = "memory"
STORES = (*BACKENDS, MEMORY)
# For a test that sends the database SQL of its own: the two databases, not the memory
# store (the contract suite's `open_store` runs on `store_database`, tests/conftest.py).
real_databases = pytest.mark.parametrize("store_database", BACKENDS, indirect=True)
# What the contract suite's `open_store` fixture gives: each call opens another store.
Factory = Callable[[], "Store"]
REQUIRE_ENV = "ENGINE_REQUIRE_POSTGRES"
URL_ENV = "ENGINE_TEST_POSTGRES_URL"


def server_binaries() -> Path | None:
    """The directory holding initdb and pg_ctl: on PATH, else Debian's newest."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).resolve().parent
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version)
    return Path(debian[-1]).parent if debian else None


def _version(path: str) -> float:
    try:
        return float(Path(path).parent.parent.name)
    except ValueError:
        return 0.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Cluster:
    """A PostgreSQL cluster of the tests' own. initdb refuses to run as root, so under
    root the cluster belongs to the `postgres` user that Debian's package creates."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="engine-pg-"))
        self.data = self.root / "data"
        self.user: str | None = None
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError("running as root and there is no 'postgres' user") from None
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self.user = "postgres"

    def _run(self, *argv: str) -> None:
        done = subprocess.run(
            [str(self.bindir / argv[0]), *argv[1:]],
            user=self.user,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}")

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "engine", "-A", "trust", "-E", "UTF8",
                  "--locale=C", "--no-sync")  # fmt: skip
        self.serve()

    def serve(self) -> None:
        """Start the server of an initialised cluster (again, after `halt`), same port."""
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"),
                  "-w", "-t", "60", "start")  # fmt: skip

    def halt(self) -> None:
        """Stop the server as a restart does (`-m fast`: every session is cut off,
        committed work is kept), leaving the cluster for `serve`."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    @property
    def url(self) -> str:
        return f"postgresql://engine@127.0.0.1:{self.port}/postgres"


class Server:
    """Hands out fresh, empty databases on one server."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self._ids = itertools.count()
        self._prefix = f"engine_test_{os.getpid()}"

    def new_database(self) -> str:
        """A URL to a new empty database."""
        name = f"{self._prefix}_{next(self._ids)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.admin_url.rsplit("/", 1)[0] + f"/{name}"

    def drop(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def started_cluster() -> Cluster:
    """A new cluster, started: skipped (failed under ENGINE_REQUIRE_POSTGRES=1) with the
    reason when the server's binaries are missing or it does not start."""
    bindir = server_binaries()
    if bindir is None:
        unavailable("initdb/pg_ctl not found (install Debian's postgresql package)")
    assert bindir is not None
    cluster = Cluster(bindir)
    try:
        cluster.start()
    except (RuntimeError, OSError) as err:
        cluster.stop()
        unavailable(f"could not start a cluster: {err}")
    return cluster


def unavailable(reason: str) -> None:
    """Skip, or fail under ENGINE_REQUIRE_POSTGRES=1."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"PostgreSQL is required here ({REQUIRE_ENV}=1): {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


def rows(db: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run one query (`?` parameters) on either backend; the rows as tuples."""
    if db.startswith("postgresql://"):
        with psycopg.connect(db) as conn:
            if not params:  # no placeholders to fill: a literal % stays as it is
                return [tuple(r) for r in conn.execute(query.encode()).fetchall()]
            found = conn.execute(query.replace("?", "%s"), params).fetchall()
            return [tuple(r) for r in found]
    import sqlite3

    lite = sqlite3.connect(db)
    try:
        return [tuple(r) for r in lite.execute(query, params).fetchall()]
    finally:
        lite.close()


def execute(database: str, *statements: str) -> None:
    """Run statements on either backend outside any store (autocommit)."""
    if database.startswith("postgresql://"):
        with psycopg.connect(database, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement.encode())
        return
    import sqlite3

    lite = sqlite3.connect(database, isolation_level=None)
    try:
        for statement in statements:
            lite.execute(statement)
    finally:
        lite.close()


def refuse_writes(database: str, store: Any) -> Callable[[], None]:
    """Make the database refuse the store's writes for a storage reason, as a full disk
    or a read-only server would; returns how to undo it. SQLite: max_page_count on the
    store's writer connection (SQLite then answers "database or disk is full" for any
    write that needs a page). PostgreSQL: the database turned read-only for new
    sessions, and the store's sessions ended by the server."""
    if not database.startswith("postgresql://"):
        from engine.store.sqlite import SqliteStore

        assert isinstance(store, SqliteStore)

        def set_max_pages(pages: int | None) -> None:
            with store._wlock:  # the writer's connection, between its transactions
                writer = store._writer
                count = writer.execute("PRAGMA page_count").fetchone()[0]
                writer.execute(f"PRAGMA max_page_count = {pages or count}")

        set_max_pages(None)
        return lambda: set_max_pages(1 << 30)
    name = database.rsplit("/", 1)[1]
    terminate = (
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
    )
    execute(database, f'ALTER DATABASE "{name}" SET default_transaction_read_only = on', terminate)
    return lambda: execute(
        database,
        "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
        f'ALTER DATABASE "{name}" SET default_transaction_read_only = off',
        terminate,
    )


def create_at(database: str, version: int, statements: Sequence[str]) -> None:
    """A database as schema `version` left it (its migrations 1 to `version` only, as an
    older engine made it), with `statements` committed in it."""
    from engine.store.queries import migrations

    postgres = database.startswith("postgresql://")
    dialect = "postgresql" if postgres else "sqlite"
    old = [(v, sql) for v, sql in migrations(dialect) if v <= version]
    ddl = "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
    done = [f"INSERT INTO schema_migrations VALUES ({v}, 'then')" for v, _ in old]
    if postgres:
        with psycopg.connect(database, autocommit=True) as conn:
            for statement in (ddl, *(sql for _, sql in old), *done, *statements):
                conn.execute(statement.encode())
        return
    import sqlite3

    lite = sqlite3.connect(database)
    try:
        lite.execute(ddl)
        for _, sql in old:
            lite.executescript(sql)
        for statement in (*done, *statements):
            lite.execute(statement)
        lite.commit()
    finally:
        lite.close()
