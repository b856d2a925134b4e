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
from collections.abc import Iterator
from contextlib import contextmanager

from engine.errors import Busy
from engine.store.health import Health
from engine.store.limits import Limits
from engine.store.memory_tables import MemoryStoreError, Tables
from engine.store.memory_tx import MemoryTx, ReadOnlyMemoryTx

__all__ = ["MemoryDatabase", "MemoryStore", "MemoryStoreError", "MemoryTx"]


class MemoryDatabase:
    """The data that several `MemoryStore`s share, as several connections (or
    processes) share one database: the committed version and the writer lock."""

    def __init__(self) -> None:
        self.committed = Tables()
        self._lock = threading.Lock()
        self._writer: int | None = None  # the thread holding the writer lock

    @contextmanager
    def writing(self, timeout: float) -> Iterator[Tables]:
        """Hold the writer lock (Busy when it is not free within `timeout` seconds, a
        MemoryStoreError for a second write opened inside a write of the same thread,
        which SQL refuses too); the committed version to start from."""
        if self._writer == threading.get_ident():
            raise MemoryStoreError("cannot start a transaction within a transaction")
        if not self._lock.acquire(timeout=timeout):
            raise Busy(
                f"the memory store is busy: its writer lock was not free within {timeout:g}s"
            )
        self._writer = threading.get_ident()
        try:
            yield self.committed
        finally:
            self._writer = None
            self._lock.release()


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

    @contextmanager
    def write(self, exclusive: bool = True) -> Iterator[MemoryTx]:
        """A write transaction: serialised with every other writer of the database
        (`exclusive` changes nothing, as on SQLite); its changes are committed when the
        block ends and dropped, all of them, when it raises."""
        self._check_open()
        with self.database.writing(self.limits.lock_timeout) as committed:
            tx = MemoryTx(committed)
            try:
                yield tx
            except BaseException:
                tx.end()
                raise
            self.database.committed = tx.end()

    @contextmanager
    def read(self) -> Iterator[MemoryTx]:
        """A snapshot of the last commit: it never waits for a writer, and a write
        inside it is refused."""
        self._check_open()
        tx: MemoryTx = ReadOnlyMemoryTx(self.database.committed)
        try:
            yield tx
        finally:
            tx.end()

    def close(self) -> None:
        """This connection is closed; the database stays for the other stores on it."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryStoreError("the store is closed")
