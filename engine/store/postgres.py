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
- Reads are one repeatable-read, read-only snapshot on a connection of their own,
  which takes no advisory lock: a read never waits behind this process's writes.
- Every wait is bounded (`engine.store.limits`): the advisory lock wait by
  `lock_timeout` (`Busy`, 503 `database_busy`), a frozen holder by the server ending
  its session (`idle_in_transaction_session_timeout`), a runaway statement by
  `statement_timeout`, a vanished host by TCP keepalives on both ends.

psycopg 3 is the driver; each store holds a writer and (once it reads) a reader
connection, each opened again when the server dropped it."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from engine import clock
from engine.errors import Busy, ConfigError, Unavailable
from engine.store import schema
from engine.store.health import PROBE, Health, WatchedCursor, unwritable, watched
from engine.store.limits import (
    KEEPALIVES_COUNT,
    KEEPALIVES_IDLE_S,
    KEEPALIVES_INTERVAL_S,
    Limits,
    milliseconds,
)
from engine.store.postgres_url import connect_error, redacted, scrubbed
from engine.store.queries import check_versions, migrations
from engine.store.sqltx import SqlTx

# The advisory lock key that serialises writers ("engine" in ASCII), and the one that
# serialises migrations of a database several processes open at once.
WRITE_LOCK = 0x656E67696E65
MIGRATE_LOCK = WRITE_LOCK + 1
CONNECT_TIMEOUT_S = 10
# A migration may wait this long for another process's migration, and runs without a
# statement timeout (an index on a large table takes what it takes).
MIGRATE_LOCK_TIMEOUT_S = 120

_PARAM = re.compile(r"(?<![:\w]):([a-z_]+)")

Connection = psycopg.Connection[dict[str, Any]]


def pyformat(sql: str) -> str:
    """`:name` parameters to psycopg's `%(name)s` (a literal % is doubled)."""
    return _PARAM.sub(r"%(\1)s", sql.replace("%", "%%"))


class _Session:
    """One connection and the lock that serialises its use within the process; opened
    (again) on first use after the server or the network dropped it."""

    def __init__(self, connect: Callable[[], Connection], timeout: float, what: str) -> None:
        self._connect, self._timeout, self._what = connect, timeout, what
        self._lock = threading.RLock()
        self._conn: Connection | None = None

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A transaction on the connection; Busy when another thread of this process has
        held it for the whole lock timeout."""
        if not self._lock.acquire(timeout=self._timeout):
            raise Busy(
                f"the database {self._what} is busy: this process's connection was not "
                f"free within {self._timeout:g}s"
            )
        try:
            with ExitStack() as stack:
                yield self._begin(stack)
        finally:
            self._lock.release()

    def _begin(self, stack: ExitStack) -> Connection:
        """Begin a transaction. A connection the server dropped since its last use (a
        restart, an ended session) is opened again once: nothing was sent on it yet."""
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            conn = self._conn = self._connect()
            stack.enter_context(conn.transaction())
            return conn
        try:
            stack.enter_context(conn.transaction())
        except _LOST:
            conn.close()
            conn = self._conn = self._connect()
            stack.enter_context(conn.transaction())
        return conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()


class PostgresStore:
    """`engine.store.ports.Store` over a PostgreSQL database."""

    dialect = "postgresql"

    def __init__(
        self, url: str, limits: Limits | None = None, probe: bool = True, *, only_read: bool = False
    ) -> None:
        self.url = url
        self.limits = limits or Limits()
        self.health = Health()
        self._what = redacted(url)
        self._options = _connect_options(url, self._what)
        self._writer = _Session(self._connect, self.limits.lock_timeout, self._what)
        self._reader = _Session(self._connect, self.limits.lock_timeout, self._what)
        self._closed = False
        self._opened = False  # until the first connection was made and the schema checked
        try:
            if only_read:
                self.require_current()
            else:
                self.migrate(probe)
        except BaseException:
            self.close()
            raise
        self._opened = True

    def _connect(self) -> Connection:
        """A connection with the session's bounds set; Unavailable (with the server's
        reason, never the password) when the server cannot be reached, ConfigError
        when it refuses the role, the password or the database at open. Once open, a
        refused reconnection (the database dropped under a running serve) is
        Unavailable too: a 503 for the request, not a fault."""
        try:
            conn = psycopg.connect(self.url, **self._options)
        except psycopg.Error as err:
            raise self._typed(connect_error(err, self.url)) from None
        try:
            conn.execute(self._session_settings().encode())
        except psycopg.Error as err:
            conn.close()
            raise self._typed(connect_error(err, self.url)) from None
        return conn

    def _typed(self, err: ConfigError | Unavailable) -> ConfigError | Unavailable:
        if self._opened and isinstance(err, ConfigError):
            return Unavailable(err.message, reason="unavailable")
        return err

    def _session_settings(self) -> str:
        """The server side of the bounds, for this session."""
        limits = self.limits
        settings = {
            "lock_timeout": milliseconds(limits.lock_timeout),
            "idle_in_transaction_session_timeout": milliseconds(limits.idle_in_transaction),
            "statement_timeout": milliseconds(limits.statement_timeout),
            "tcp_keepalives_idle": KEEPALIVES_IDLE_S,
            "tcp_keepalives_interval": KEEPALIVES_INTERVAL_S,
            "tcp_keepalives_count": KEEPALIVES_COUNT,
        }
        return "; ".join(f"SET {name} = {value}" for name, value in settings.items())

    def require_current(self) -> None:
        """Refuse, without writing anything, a database this engine would have to
        migrate (ConfigError: nothing is changed) or one a newer engine migrated
        (SchemaTooNew): for a command that only reads a server database."""
        known = migrations(self.dialect)
        newest = max(v for v, _ in known)
        with self._transaction(writing=False) as cur:
            cur.execute("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")
            row = cur.fetchone()
            done: set[object] = set()
            if row is not None and row["present"]:
                cur.execute("SELECT version FROM schema_migrations")
                done = {r["version"] for r in cur.fetchall()}
        check_versions(self._what, done, newest)
        if {v for v, _ in known} - done:
            have = max((v for v in done if isinstance(v, int)), default=0)
            raise ConfigError(
                f"the database {self._what} has schema version {have}, older than this "
                f"engine's {newest}; it is only read here, never migrated: start the engine "
                "on it once (engine serve migrates it), or give a copy of it"
            )

    def migrate(self, probe: bool = True) -> None:
        """Apply the numbered migrations not yet applied, in one transaction that holds
        an advisory lock (so processes starting together migrate once) and ends with a
        write probe (unless not `probe`). SchemaTooNew when the database has a version
        this engine does not know; StoreUnwritable when it cannot be written. The
        migration lock is not the writers' lock: a frozen writer does not hold it."""
        known = migrations(self.dialect)
        with self._transaction(writing=True) as cur:
            cur.execute(f"SET LOCAL lock_timeout = {milliseconds(MIGRATE_LOCK_TIMEOUT_S)}")
            cur.execute("SET LOCAL statement_timeout = 0")
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
            cur.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            cur.execute("SELECT version FROM schema_migrations")
            done = {row["version"] for row in cur.fetchall()}
            newest = max(v for v, _ in known)
            check_versions(self._what, done, newest)
            for version, sql in known:
                if version in done:
                    continue
                cur.execute(sql.encode("utf-8"))  # several statements, no parameters
                cur.execute(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)",
                    (version, clock.now().isoformat()),
                )
            if probe:
                cur.execute(PROBE)

    @contextmanager
    def _transaction(self, writing: bool) -> Iterator[WatchedCursor]:
        session = self._writer if writing else self._reader
        with watched(self.health, self._classify, writing), session.transaction() as conn:
            cursor = WatchedCursor(conn.cursor(), self._classify, self.health, writing)
            yield cursor
            if writing:
                cursor.probe_if_unwritable()
        if cursor.wrote:
            self.health.wrote()

    @contextmanager
    def write(self, exclusive: bool = True) -> Iterator[SqlTx]:
        """A write transaction. `exclusive` (the default) serialises it with every other
        exclusive writer of the database; the run-lease steps pass False. Busy when the
        writer lock is not free within the lock timeout; StoreUnwritable
        (`migrations_ahead`, `migrations_behind`) when the schema is not this engine's
        (engine.store.schema), before anything is written."""
        with self._transaction(writing=True) as cur:
            if exclusive:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            applied = [row["version"] for row in cur.execute(schema.APPLIED).fetchall()]
            refused = schema.refusal(self._what, applied, self.dialect)
            if refused is not None:
                raise refused
            yield SqlTx(cur, self.dialect, pyformat)

    @contextmanager
    def read(self) -> Iterator[SqlTx]:
        with self._transaction(writing=False) as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield SqlTx(cur, self.dialect, pyformat)

    def _classify(self, err: BaseException, writing: bool) -> Unavailable | None:
        """The typed error of a storage fault; None for anything else (a constraint, a
        bad statement, a write attempted inside a read: bugs, raised as they are)."""
        if isinstance(err, pg.LockNotAvailable):
            return Busy(
                f"the database {self._what} is busy: its writer lock was not free within "
                f"{self.limits.lock_timeout:g}s (is another process stopped or hung?)"
            )
        if isinstance(err, pg.QueryCanceled):
            return Busy(f"the database {self._what} is busy: a statement was cancelled ({err})")
        if writing and isinstance(err, pg.ReadOnlySqlTransaction):
            return unwritable(self._what, "read_only", scrubbed(str(err), self.url))
        if writing and isinstance(err, pg.DiskFull):
            return unwritable(self._what, "disk_full", scrubbed(str(err), self.url))
        if isinstance(err, _LOST):  # the connection was lost, or the server ended it
            reason = scrubbed(str(err), self.url) or type(err).__name__
            return Unavailable(
                f"the database {self._what} is unavailable: {reason}", reason="unavailable"
            )
        return None

    def applied_migrations(self) -> list[int]:
        """The versions in schema_migrations, on the reader's session; Unavailable when
        the server cannot be reached or the store is closed (never opened again)."""
        if self._closed:
            raise Unavailable(f"the store of {self._what} is closed", reason="store_closed")
        with self.read() as tx:
            return tx.applied_migrations()

    def close(self) -> None:
        self._closed = True
        self._writer.close()
        self._reader.close()


def _connect_options(url: str, what: str) -> dict[str, Any]:
    """psycopg.connect's keyword options: the engine's defaults (client keepalives, a
    connect timeout, the application name) for what the URL does not set itself.
    ConfigError for a malformed URL or an unknown option (never showing the password)."""
    try:
        given = conninfo_to_dict(url)
    except psycopg.Error as err:
        raise ConfigError(
            f"the database URL {what} is malformed: {scrubbed(str(err), url)}"
        ) from None
    except UnicodeDecodeError:  # a %-escape that decodes to no UTF-8 text (`%80`)
        raise ConfigError(
            f"the database URL {what} is malformed: a %-escape in it is not UTF-8 text"
        ) from None
    defaults: dict[str, Any] = {
        "connect_timeout": CONNECT_TIMEOUT_S,
        "application_name": "engine",
        "keepalives": 1,
        "keepalives_idle": KEEPALIVES_IDLE_S,
        "keepalives_interval": KEEPALIVES_INTERVAL_S,
        "keepalives_count": KEEPALIVES_COUNT,
    }
    options = {k: v for k, v in defaults.items() if k not in given}
    return {**options, "autocommit": True, "row_factory": dict_row}


# What a session that was lost or ended by the server raises (25P03 is the server
# ending a session idle in its transaction too long: an InternalError to psycopg).
_LOST = (psycopg.OperationalError, psycopg.InterfaceError, pg.IdleInTransactionSessionTimeout)
