"""The PostgreSQL store, for several `engine serve` and `engine worker` processes (on
several hosts) sharing one database. Same schema, same named queries, same contract as
the SQLite store:

- Writers are serialised across every process by a transaction-level advisory lock,
  so planning (supersede, singleton, in-flight checks) sees exactly what SQLite's
  `BEGIN IMMEDIATE` would show it. The lock ends with the transaction, or with the
  connection when a process dies.
- A worker's lease steps (claim, start, heartbeat) take no such lock: they touch one
  run row, and the claim is `FOR UPDATE SKIP LOCKED`, so workers never queue behind
  planning nor behind each other.
- Reads are one repeatable-read, read-only snapshot.

psycopg 3 is the driver; each store holds one connection (one per process), opened
again when the server dropped it."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.rows import dict_row

from engine.errors import Unavailable
from engine.store.queries import migrations
from engine.store.sqltx import SqlTx

# The advisory lock key that serialises writers ("engine" in ASCII), and the one that
# serialises migrations of a database several processes open at once.
WRITE_LOCK = 0x656E67696E65
MIGRATE_LOCK = WRITE_LOCK + 1
CONNECT_TIMEOUT_S = 10

_PARAM = re.compile(r"(?<![:\w]):([a-z_]+)")


def redacted(url: str) -> str:
    """The URL with any password replaced, for logs and error messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def pyformat(sql: str) -> str:
    """`:name` parameters to psycopg's `%(name)s` (a literal % is doubled)."""
    return _PARAM.sub(r"%(\1)s", sql.replace("%", "%%"))


class PostgresStore:
    """`engine.store.ports.Store` over a PostgreSQL database."""

    dialect = "postgresql"

    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = threading.RLock()
        self._conn = self._connect()
        self.migrate()

    def _connect(self) -> psycopg.Connection[dict[str, Any]]:
        """A connection; Unavailable (with the server's reason, never the password)
        when the server cannot be reached or refuses."""
        try:
            return psycopg.connect(
                self.url,
                autocommit=True,
                row_factory=dict_row,
                connect_timeout=CONNECT_TIMEOUT_S,
                application_name="engine",
            )
        except psycopg.OperationalError as err:
            reason = " ".join(str(err).replace(self.url, redacted(self.url)).split())
            raise Unavailable(f"cannot open the database {redacted(self.url)}: {reason}") from None

    def _connection(self) -> psycopg.Connection[dict[str, Any]]:
        """The connection, opened again when the server or the network dropped it."""
        if self._conn.closed or self._conn.broken:
            self._conn = self._connect()
        return self._conn

    def migrate(self) -> None:
        """Apply the numbered migrations not yet applied, in one transaction that holds
        an advisory lock, so processes starting together migrate once."""
        with self._lock, self._connection().transaction():
            cur = self._conn.cursor()
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
            cur.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            cur.execute("SELECT version FROM schema_migrations")
            done = {row["version"] for row in cur.fetchall()}
            for version, sql in migrations(self.dialect):
                if version in done:
                    continue
                cur.execute(sql.encode("utf-8"))  # several statements, no parameters
                cur.execute(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)",
                    (version, datetime.now(UTC).isoformat()),
                )

    @contextmanager
    def write(self, exclusive: bool = True) -> Iterator[SqlTx]:
        """A write transaction. `exclusive` (the default) serialises it with every other
        exclusive writer of the database; the run-lease steps pass False."""
        with self._lock, self._connection().transaction():
            cur = self._conn.cursor()
            if exclusive:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            yield SqlTx(cur, self.dialect, pyformat)

    @contextmanager
    def read(self) -> Iterator[SqlTx]:
        with self._lock, self._connection().transaction():
            cur = self._conn.cursor()
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield SqlTx(cur, self.dialect, pyformat)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
