"""The embedded default store: one SQLite file in WAL mode. Writers are serialised
(BEGIN IMMEDIATE, a busy timeout across processes, a lock within one); several
processes may share the file."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from engine.store.queries import migrations
from engine.store.sqltx import SqlTx

BUSY_TIMEOUT_MS = 30_000


class SqliteStore:
    """`engine.store.ports.Store` over a SQLite file."""

    dialect = "sqlite"

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(
            str(path), isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
        )
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        for pragma in (
            "journal_mode = WAL",
            "synchronous = NORMAL",
            f"busy_timeout = {BUSY_TIMEOUT_MS}",
            "foreign_keys = ON",
        ):
            self._conn.execute(f"PRAGMA {pragma}")
        self.migrate()

    def migrate(self) -> None:
        """Apply numbered migrations not yet applied, each in its own transaction."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations "
                    "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
                )
                done = {r[0] for r in self._conn.execute("SELECT version FROM schema_migrations")}
                for version, sql in migrations("sqlite"):
                    if version in done:
                        continue
                    for statement in _statements(sql):
                        self._conn.execute(statement)
                    self._conn.execute(
                        "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                        (version, datetime.now(UTC).isoformat()),
                    )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    @contextmanager
    def write(self, exclusive: bool = True) -> Iterator[SqlTx]:
        """A write transaction. SQLite serialises every writer, so `exclusive` (which
        lets PostgreSQL run a worker's lease steps beside planning) changes nothing."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield SqlTx(self._conn.cursor())
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[SqlTx]:
        """A snapshot that refuses writes (query_only) and keeps nothing (rolled back)."""
        with self._lock:
            self._conn.execute("PRAGMA query_only = ON")
            self._conn.execute("BEGIN")
            try:
                yield SqlTx(self._conn.cursor())
            finally:
                self._conn.execute("ROLLBACK")
                self._conn.execute("PRAGMA query_only = OFF")

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _statements(sql: str) -> list[str]:
    """Split a migration into statements; trigger bodies (BEGIN ... END;) stay whole."""
    statements: list[str] = []
    current: list[str] = []
    for line in sql.splitlines():
        if line.strip().startswith("--") and not current:
            continue
        current.append(line)
        text = "\n".join(current).strip()
        if text.endswith(";") and sqlite3.complete_statement(text):
            statements.append(text)
            current = []
    if "\n".join(current).strip():
        statements.append("\n".join(current).strip())
    return statements
