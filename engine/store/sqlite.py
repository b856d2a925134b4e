"""The embedded default store: one SQLite file in WAL mode, shared by the processes of
one host; every commit is synced to disk (`synchronous = FULL`: docs/guarantees.md).

- Writers are serialised (BEGIN IMMEDIATE) across processes by SQLite and within one
  by a lock; both waits are bounded by `Limits.lock_timeout`, after which the write is
  refused with `Busy` (503 `database_busy`) instead of waiting for a frozen holder.
- Reads have a connection of their own (query_only; each a snapshot, rolled back): a
  WAL reader never waits for the writer, so `GET /status` answers while writes wait.
- Nothing is written to a file before it is known to be an engine database (marked
  with `PRAGMA application_id`) or an empty one: a file that is not SQLite, another
  application's database, or one migrated by a newer engine is refused (ConfigError).
- Opening ends with a write that commits (the probe), so a store that cannot be
  written is refused at start; a write that fails later for a storage reason is a
  typed `StoreUnwritable` (read_only, disk_full, io_error), recorded in `health`."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path

from engine import clock
from engine.errors import Busy, ConfigError, Unavailable
from engine.store import schema
from engine.store.health import PROBE, Health, WatchedCursor, unwritable, watched
from engine.store.limits import Limits, milliseconds
from engine.store.queries import check_versions, migrations
from engine.store.sqltx import SqlTx

# Marks a SQLite file as an engine database ("eng1" in ASCII).
APPLICATION_ID = 0x656E6731


class SqliteStore:
    """`engine.store.ports.Store` over a SQLite file."""

    dialect = "sqlite"

    def __init__(self, path: Path | str, limits: Limits | None = None, probe: bool = True) -> None:
        self.path = Path(path)
        self.limits = limits or Limits()
        self.health = Health()
        self._memory = str(path) == ":memory:"
        self._wlock = threading.RLock()
        self._busy_ms = milliseconds(self.limits.lock_timeout)
        self._writer = self._connect()
        try:
            self._check_owner(self._writer)
            self._writer.execute("PRAGMA journal_mode = WAL")
            self._writer.execute("PRAGMA synchronous = FULL")  # a 202 outlives a power loss
            self.migrate(probe)
            self._reader = self._writer if self._memory else self._connect(reader=True)
        except BaseException:
            self._writer.close()
            raise
        self._rlock = self._wlock if self._memory else threading.RLock()

    # ---- opening ------------------------------------------------------------------------
    def _connect(self, reader: bool = False) -> sqlite3.Connection:
        """A connection with the busy timeout; ConfigError (naming the file and what is
        wrong with it) when the file cannot be opened."""
        if not self._memory:
            _check_path(self.path)
        try:
            conn = sqlite3.connect(
                str(self.path),
                isolation_level=None,
                check_same_thread=False,
                timeout=self.limits.lock_timeout,
            )
        except sqlite3.Error as err:
            raise _cannot_open(self.path, err) from None
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
        conn.execute("PRAGMA foreign_keys = ON")
        if reader:
            conn.execute("PRAGMA query_only = ON")
        return conn

    def _check_owner(self, conn: sqlite3.Connection) -> None:
        """Refuse a file that is not an engine database or an empty one, before
        anything is written to it."""
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = {
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            columns = {r[1] for r in conn.execute("PRAGMA table_info(schema_migrations)")}
        except sqlite3.DatabaseError as err:
            if getattr(err, "sqlite_errorname", "") == "SQLITE_NOTADB":
                raise ConfigError(f"the database {self.path} is not a SQLite database") from None
            typed = self._classify(err, False)
            raise (typed or _cannot_open(self.path, err)) from None
        if app_id not in (0, APPLICATION_ID):
            raise ConfigError(
                f"the database {self.path} belongs to another application "
                f"(application_id {app_id:#x}): give the engine a file of its own"
            )
        foreign = sorted(tables - {"schema_migrations"})
        ours = app_id == APPLICATION_ID or {"version", "applied_at"} <= columns
        if foreign and not ours:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise ConfigError(
                f"the database {self.path} holds another application's tables ({shown}) "
                "and no engine schema; the engine never adds its tables to another "
                "application's database: give it a file of its own"
            )

    def migrate(self, probe: bool = True) -> None:
        """Apply the numbered migrations not yet applied, in one transaction that also
        marks the file as the engine's and probes that it can be written. SchemaTooNew
        when the database has a version this engine does not know. Without `probe`, a
        database that is up to date is only read: no writer lock is taken, so a command
        that only reads opens it while another process holds the lock."""
        known = migrations("sqlite")
        newest = max(v for v, _ in known)
        if not probe and self._up_to_date(newest):
            return
        with self._write(schema=False):  # the writer's lock is held: its connection is ours
            conn = self._writer
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            check_versions(str(self.path), done, newest)
            for version, sql in known:
                if version in done:
                    continue
                for statement in _statements(sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                    (version, clock.now().isoformat()),
                )
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(PROBE)

    def _up_to_date(self, newest: int) -> bool:
        """Whether the file is marked as the engine's and has every known migration,
        read without the writer lock; SchemaTooNew for a version past `newest`."""
        conn = self._writer
        with watched(self.health, self._classify, False):
            if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                return False
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
        check_versions(str(self.path), done, newest)
        return {v for v, _ in migrations("sqlite")} <= done

    # ---- transactions -------------------------------------------------------------------
    def write(self, exclusive: bool = True) -> AbstractContextManager[SqlTx]:
        """A write transaction. SQLite serialises every writer, so `exclusive` (which
        lets PostgreSQL run a worker's lease steps beside planning) changes nothing.
        Busy when the writer lock is not free within the lock timeout; StoreUnwritable
        (`migrations_ahead`, `migrations_behind`) when the schema is not this engine's
        (engine.store.schema), before anything is written."""
        return self._write(schema=True)

    @contextmanager
    def _write(self, schema: bool) -> Iterator[SqlTx]:
        """A write transaction; `schema`: refuse one on a schema not this engine's."""
        with watched(self.health, self._classify, True), self._held(self._wlock) as waited:
            conn = self._writer
            self._set_busy_timeout(conn, self.limits.lock_timeout - waited)
            conn.execute("BEGIN IMMEDIATE")
            cursor = WatchedCursor(conn.cursor(), self._classify, self.health, writing=True)
            try:
                if schema:
                    self._check_schema(cursor)
                yield SqlTx(cursor)
                cursor.probe_if_unwritable()
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
        if cursor.wrote:
            self.health.wrote()

    def _check_schema(self, cursor: WatchedCursor) -> None:
        applied = [row[0] for row in cursor.execute(schema.APPLIED).fetchall()]
        refused = schema.refusal(str(self.path), applied, self.dialect)
        if refused is not None:
            raise refused

    @contextmanager
    def read(self) -> Iterator[SqlTx]:
        """A snapshot that refuses writes (query_only) and keeps nothing (rolled back),
        on the reader's own connection: it never waits for a writer."""
        with watched(self.health, self._classify, False), self._held(self._rlock):
            conn = self._reader
            if self._memory:  # one connection: it reads as the writer between writes
                conn.execute("PRAGMA query_only = ON")
            conn.execute("BEGIN")
            try:
                yield SqlTx(WatchedCursor(conn.cursor(), self._classify, self.health, False))
            finally:
                _rollback(conn)
                if self._memory:
                    conn.execute("PRAGMA query_only = OFF")

    @contextmanager
    def _held(self, lock: threading.RLock) -> Iterator[float]:
        """Hold a connection's lock; the seconds waited for it. Busy when another
        thread of this process has held it for the whole lock timeout."""
        started = time.monotonic()
        if not lock.acquire(timeout=self.limits.lock_timeout):
            raise Busy(
                f"the database {self.path} is busy: this process's connection was not "
                f"free within {self.limits.lock_timeout:g}s"
            )
        try:
            yield time.monotonic() - started
        finally:
            lock.release()

    def _set_busy_timeout(self, conn: sqlite3.Connection, seconds: float) -> None:
        """Wait at most what is left of the lock timeout for other processes."""
        ms = milliseconds(max(seconds, 0.001))
        if ms != self._busy_ms:
            conn.execute(f"PRAGMA busy_timeout = {ms}")
            self._busy_ms = ms

    def _classify(self, err: BaseException, writing: bool) -> Unavailable | None:
        """The typed error of a storage fault; None for anything else (a constraint,
        a bad statement, a write attempted inside a read: bugs, raised as they are)."""
        if not isinstance(err, sqlite3.Error):
            return None
        name: str = getattr(err, "sqlite_errorname", "")
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            return Busy(
                f"the database {self.path} is busy: its writer lock was not free within "
                f"{self.limits.lock_timeout:g}s (is another process stopped or hung?)"
            )
        if name.startswith("SQLITE_IOERR") or name == "SQLITE_CANTOPEN":
            if writing:
                return unwritable(str(self.path), "io_error", str(err))
            return Unavailable(
                f"the database {self.path} cannot be read ({err})", reason="io_error"
            )
        if writing and name.startswith("SQLITE_READONLY"):
            return unwritable(str(self.path), "read_only", str(err))
        if writing and name == "SQLITE_FULL":
            return unwritable(str(self.path), "disk_full", str(err))
        return None

    def applied_migrations(self) -> list[int]:
        """The versions in schema_migrations; Unavailable when the file is no longer at
        its path (removed or moved: this process would write to a file nobody opens
        again), or the store is closed."""
        if not self._memory and not self.path.is_file():
            raise Unavailable(f"the database {self.path} is gone", reason="database_missing")
        try:
            with self.read() as tx:
                return tx.applied_migrations()
        except sqlite3.ProgrammingError as err:  # "Cannot operate on a closed database."
            raise Unavailable(f"the database {self.path}: {err}", reason="store_closed") from None

    def close(self) -> None:
        with self._wlock, self._rlock:
            self._writer.close()
            if self._reader is not self._writer:
                self._reader.close()


def _rollback(conn: sqlite3.Connection) -> None:
    """End the connection's transaction, if it has one (a failed COMMIT may have ended
    it already); never raises over the error that got here."""
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _check_path(path: Path) -> None:
    """ConfigError for a path that cannot hold the database file."""
    if path.is_dir():
        raise ConfigError(f"the database {path} is a directory, not a SQLite file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(
            f"cannot create the directory {path.parent} for the database: {err.strerror}"
        ) from None


def _cannot_open(path: Path, err: sqlite3.Error) -> ConfigError:
    """Why a file could not be opened, as far as the file system tells."""
    if path.exists() and not os.access(path, os.R_OK):
        return ConfigError(f"cannot read the database {path}: permission denied")
    if not path.exists() and not os.access(path.parent, os.W_OK):
        return ConfigError(
            f"cannot create the database {path}: the directory {path.parent} is not writable"
        )
    return ConfigError(f"cannot open the database {path}: {err}")


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
