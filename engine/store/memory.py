"""An in-memory store, for fast unit tests and simulations of deciding and applying
without a database; never for serving (the CLI's `--db` does not open it).

It behaves as the SQLite and PostgreSQL stores do, and the contract suite
(tests/contract/) holds it to that: inserts are idempotent on the same keys, state
changes are compare-and-set, lists come in the order the SQL gives, the journal's,
the outbox's and the notifications' `seq` only grow, a failed savepoint undoes its
own writes and a write transaction that raises keeps nothing. What a database would
refuse (a missing event behind a run, a NULL in a NOT NULL column, a write inside a
read) it refuses with a `MemoryStoreError`, as a driver raises its own error.

Persistent tables: each committed version of the data is never changed again, so a
read is a snapshot that never waits; a write makes new versions of the tables it
changes, sharing all but a few nodes with the old ones (`memory_tables.py`), so that
a write costs the same whatever the number of rows; a savepoint keeps the version it
started from; the commit makes the write's version the committed one. The reads the
runtime makes on every pass go through indexes kept with their tables (by state and
loop, the events not planned, the outbox not published), never through a whole
table. Writers are serialised, like SQLite's."""

from __future__ import annotations

import threading
from types import TracebackType

from engine.errors import Busy, Unavailable
from engine.store.health import Health
from engine.store.limits import Limits
from engine.store.memory_tables import MemoryStoreError, Tables
from engine.store.memory_tx import MemoryTx, ReadOnlyMemoryTx
from engine.store.queries import migrations

__all__ = ["MemoryDatabase", "MemoryStore", "MemoryStoreError", "MemoryTx"]


class MemoryDatabase:
    """The data that several `MemoryStore`s share, as several connections (or
    processes) share one database: the committed version and the writer lock."""

    def __init__(self) -> None:
        self.committed = Tables()
        self._lock = threading.Lock()
        self._writer: int | None = None  # the thread holding the writer lock

    def begin(self, timeout: float) -> Tables:
        """Take the writer lock (Busy when it is not free within `timeout` seconds, a
        MemoryStoreError for a second write opened inside a write of the same thread,
        which SQL refuses too); the committed version to start from."""
        me = threading.get_ident()
        if self._writer == me:
            raise MemoryStoreError("cannot start a transaction within a transaction")
        if not (self._lock.acquire(False) or self._lock.acquire(timeout=timeout)):
            raise Busy(
                f"the memory store is busy: its writer lock was not free within {timeout:g}s"
            )
        self._writer = me
        return self.committed

    def finish(self, tables: Tables | None) -> None:
        """Commit `tables` (None: nothing, a rollback) and free the writer lock."""
        if tables is not None:
            self.committed = tables
        self._writer = None
        self._lock.release()


class _Write:
    """The block of one write transaction (`MemoryStore.write`)."""

    __slots__ = ("_store", "_tx")

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def __enter__(self) -> MemoryTx:
        store = self._store
        store._check_open()
        self._tx = MemoryTx(store.database.begin(store.limits.lock_timeout))
        return self._tx

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        tables = self._tx.end()
        self._store.database.finish(tables if kind is None else None)


class _Read:
    """The block of one read (`MemoryStore.read`)."""

    __slots__ = ("_store", "_tx")

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def __enter__(self) -> MemoryTx:
        self._store._check_open()
        self._tx: MemoryTx = ReadOnlyMemoryTx(self._store.database.committed)
        return self._tx

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._tx.end()


class MemoryStore:
    """`engine.store.ports.Store` in memory, for tests and simulations only. Another
    store over the same `database` is another connection to it."""

    dialect = "memory"

    def __init__(
        self, database: MemoryDatabase | None = None, limits: Limits | None = None
    ) -> None:
        self.database = database or MemoryDatabase()
        self.limits = limits or Limits()
        self.health = Health()  # always writable: nothing here can fill up or fail
        self._closed = False

    def write(self, exclusive: bool = True) -> _Write:
        """A write transaction: serialised with every other writer of the database
        (`exclusive` changes nothing, as on SQLite); its changes are committed when the
        block ends and dropped, all of them, when it raises."""
        return _Write(self)

    def read(self) -> _Read:
        """A snapshot of the last commit: it never waits for a writer, and a write
        inside it is refused."""
        return _Read(self)

    def applied_migrations(self) -> list[int]:
        """Every version this engine ships: a memory database is born at its schema.
        Unavailable once this store is closed."""
        if self._closed:
            raise Unavailable("the memory store is closed", reason="store_closed")
        return [v for v, _ in migrations("sqlite")]

    def close(self) -> None:
        """This connection is closed; the database stays for the other stores on it."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryStoreError("the store is closed")
