"""The store under faults, on both backends (a SQLite file and a database of a real
PostgreSQL server): every wait is bounded and answered with a typed error, reads never
wait for a writer, a database that refuses writes is typed and reported by `health`,
and a database migrated by a newer engine, or one that is not the engine's, is
refused before anything is written to it."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
from databases import execute, refuse_writes

from engine.bootstrap import open_store
from engine.core.records import EventRecord
from engine.errors import Busy, ConfigError, SchemaTooNew, StoreUnwritable, Unavailable
from engine.store.limits import Limits
from engine.store.ports import Store
from engine.store.queries import migrations
from engine.store.sqlite import APPLICATION_ID, SqliteStore

# The two databases only (conftest's `database`, not `store_database`): each test here
# is about a database itself (lock waits, files, connections, refused writes, schemas).
R = TypeVar("R")
Opener = Callable[..., Store]
PROMPT_S = 5.0  # a step that must not wait for a lock finishes well within this
NEWEST = max(v for v, _ in migrations("sqlite"))


@pytest.fixture
def opener(database: str) -> Iterator[Opener]:
    """Opens stores on one database (each another connection, as another process),
    with the given bounds."""
    opened: list[Store] = []

    def open_one(**limits: float) -> Store:
        opened.append(open_store(database, Limits(**limits)))
        return opened[-1]

    yield open_one
    for store in opened:
        store.close()


def event(event_id: str) -> EventRecord:
    at = "2026-11-30T10:00:00.000000Z"
    return EventRecord(event_id, "t", "inject", "s", at, event_id, {}, None, at, "inject", False)


def promptly(step: Callable[[], R]) -> R:
    """`step`'s result; fails when it has not finished within PROMPT_S (it waited)."""
    results: list[R] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            results.append(step())
        except BaseException as err:  # re-raised by the test
            errors.append(err)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(PROMPT_S)
    assert not thread.is_alive(), f"the step did not finish within {PROMPT_S}s: it waited"
    if errors:
        raise errors[0]
    return results[0]


class Holder:
    """Holds one exclusive write transaction of `store` open in a thread until the
    block ends (or `hold` seconds pass); what ending it raised is kept."""

    def __init__(self, store: Store, hold: float = 30.0) -> None:
        self.store, self.hold = store, hold
        self.held, self.release = threading.Event(), threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self) -> None:
        try:
            with self.store.write() as tx:
                tx.insert_event(event("held"))
                self.held.set()
                self.release.wait(self.hold)
        except BaseException as err:  # examined by the test
            self.errors.append(err)
            self.held.set()

    def __enter__(self) -> Holder:
        self.thread.start()
        assert self.held.wait(PROMPT_S) and not self.errors, self.errors
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.thread.join(PROMPT_S)


# ---- bounded waits -------------------------------------------------------------------


def test_a_write_waits_for_the_writer_lock_only_as_long_as_the_lock_timeout(
    opener: Opener,
) -> None:
    """While another process holds the writer lock, a write is refused with Busy
    (`database_busy`) once the lock timeout passes, and the store reports that it
    cannot write; once the holder commits, the next write goes through and the store
    is writable again (the error stays on record). On PostgreSQL this is lock_timeout
    bounding the advisory lock wait."""
    holder, waiter = opener(), opener(lock_timeout=0.5)
    with Holder(holder):
        with pytest.raises(Busy) as caught:
            promptly(lambda: waiter.write().__enter__())
        assert caught.value.details["reason"] == "database_busy"
        assert caught.value.status == 503 and caught.value.exit_code == 1
        health = waiter.health.as_dict()
        assert (health["writable"], health["reason"]) == (False, "database_busy")
    with waiter.write() as tx:
        assert tx.get_event("held") is not None
    health = waiter.health.as_dict()
    assert (health["writable"], health["reason"]) == (True, None)
    assert health["lastError"]["reason"] == "database_busy"


def test_a_read_never_waits_for_a_writer_of_its_own_process(opener: Opener) -> None:
    """A read answers at once while another thread of the same store holds a write
    open (reads have their own connection), and sees only what was committed."""
    store = opener()
    with store.write() as tx:
        tx.insert_event(event("before"))
    with Holder(store):

        def read() -> list[str]:
            with store.read() as tx:
                return [e.event_id for e in tx.list_events(10)]

        assert promptly(read) == ["before"]


def test_threads_of_one_process_wait_for_its_writer_within_the_bound(opener: Opener) -> None:
    """A write of another thread of the same process waits for this process's writer at
    most the lock timeout, then is Busy."""
    store = opener(lock_timeout=0.5)
    with Holder(store), pytest.raises(Busy):
        promptly(lambda: store.write().__enter__())


def test_a_reading_command_opens_the_store_while_the_writer_lock_is_held(
    database: str, opener: Opener
) -> None:
    """A store opened without the write probe (as the listing commands open it) opens
    and reads at once while another process holds the writer lock. With the probe (as
    serve and worker open it) SQLite must wait for the lock like any write, and is
    Busy; PostgreSQL migrates and probes under locks no writer holds, and opens."""
    holder = opener()
    with Holder(holder):
        reader = promptly(lambda: open_store(database, Limits(lock_timeout=0.5), probe=False))
        try:
            with reader.read() as tx:
                assert tx.list_events(10) == []
        finally:
            reader.close()
        if database.startswith("postgresql://"):
            promptly(lambda: open_store(database, Limits(lock_timeout=0.5))).close()
        else:
            with pytest.raises(Busy):
                promptly(lambda: open_store(database, Limits(lock_timeout=0.5)))


# ---- a database the engine must not use ------------------------------------------------


def test_a_database_migrated_by_a_newer_engine_is_refused(database: str, opener: Opener) -> None:
    """A schema version this engine does not know is refused at open (SchemaTooNew,
    exit 2) naming the database's version and the newest this engine knows, and
    nothing is migrated or written."""
    opener().close()
    execute(database, "INSERT INTO schema_migrations VALUES (99, 'by a newer engine')")
    before = rows(database, "SELECT version, applied_at FROM schema_migrations ORDER BY 1")
    with pytest.raises(SchemaTooNew) as caught:
        opener()
    assert caught.value.exit_code == 2
    assert "99" in caught.value.message and f"up to {NEWEST}" in caught.value.message
    assert rows(database, "SELECT version, applied_at FROM schema_migrations ORDER BY 1") == before


def test_an_empty_database_of_a_newer_engine_gets_no_tables(database: str, opener: Opener) -> None:
    """A database holding only a newer engine's version record gets none of this engine's
    tables."""
    execute(
        database,
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)",
        "INSERT INTO schema_migrations VALUES (99, 'x')",
    )
    with pytest.raises(SchemaTooNew):
        opener()
    assert table_names(database) == ["schema_migrations"]


def test_another_tools_migration_table_is_refused(database: str, opener: Opener) -> None:
    """A database whose schema_migrations another tool wrote (text versions, as Rails
    writes them) is a ConfigError, not a traceback, and gets none of the engine's
    tables."""
    execute(
        database,
        "CREATE TABLE schema_migrations (version TEXT PRIMARY KEY, applied_at TEXT NOT NULL)",
        "INSERT INTO schema_migrations VALUES ('20240101120000', 'x')",
    )
    with pytest.raises(ConfigError, match="did not write"):
        opener()
    assert table_names(database) == ["schema_migrations"]


def rows(database: str, query: str) -> list[tuple[object, ...]]:
    if database.startswith("postgresql://"):
        with psycopg.connect(database) as conn:
            return [tuple(r) for r in conn.execute(query.encode()).fetchall()]
    conn = sqlite3.connect(database)
    try:
        return [tuple(r) for r in conn.execute(query).fetchall()]
    finally:
        conn.close()


def table_names(database: str) -> list[str]:
    if database.startswith("postgresql://"):
        query = "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
    else:
        query = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1"
    return [str(name) for (name,) in rows(database, query)]


# ---- a database that stops taking writes ----------------------------------------------


def write_until_refused(store: Store) -> StoreUnwritable:
    """Write events (a lost connection is retried, as the runtime does) until the
    database refuses one as unwritable."""
    for n in range(200):
        try:
            with store.write() as tx:
                tx.insert_event(event(f"e-{n}-" + "x" * 2000))
        except StoreUnwritable as err:
            return err
        except Unavailable:
            continue
    raise AssertionError("every write was accepted")


def test_a_database_that_refuses_writes_is_typed_and_reported(
    database: str, opener: Opener
) -> None:
    """A write the database refuses for a storage reason (full, read-only) is
    StoreUnwritable with the reason, changes nothing, and leaves the store reporting
    that it cannot write, with the error; once the database takes writes again the
    next write commits and the store is writable."""
    store = opener()
    undo = refuse_writes(database, store)
    refused = write_until_refused(store)
    expected = "read_only" if database.startswith("postgresql://") else "disk_full"
    assert refused.details["reason"] == expected and refused.status == 503
    health = store.health.as_dict()
    assert (health["writable"], health["reason"]) == (False, expected)
    assert health["lastError"]["message"] == refused.message
    undo()
    deadline = time.monotonic() + PROMPT_S
    while True:
        try:
            with store.write() as tx:
                tx.insert_event(event("after"))
            break
        except Unavailable:  # PostgreSQL: the session ended by undo() is opened again
            assert time.monotonic() < deadline
    assert store.health.as_dict()["writable"] is True


def test_a_read_only_server_database_is_refused_at_open(postgresql_database: str) -> None:
    """PostgreSQL: a database that refuses writes is refused when the store opens, by
    the write probe (StoreUnwritable `read_only`, exit 2), not at the first admission.
    (SQLite's read-only file is held by the acceptance tests, as a real unprivileged
    process.)"""
    open_store(postgresql_database).close()
    name = postgresql_database.rsplit("/", 1)[1]
    execute(postgresql_database, f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    with pytest.raises(StoreUnwritable) as caught:
        open_store(postgresql_database)
    assert caught.value.details["reason"] == "read_only" and caught.value.exit_code == 2


def test_a_database_dropped_under_an_open_store_is_unavailable_not_a_fault(
    postgres_server: Any,
) -> None:
    """PostgreSQL: a database that does not exist is ConfigError at open (exit 2: a
    restart will not help), but once the store is open, the same refusal on a
    reconnection (the database dropped under a running serve) is Unavailable: a 503
    for the request, not a 500."""
    url = postgres_server.new_database()
    store = open_store(url)
    try:
        postgres_server.drop(url)  # WITH (FORCE): the store's sessions are ended
        with pytest.raises(Unavailable) as caught, store.write() as tx:
            tx.insert_event(event("after-the-drop"))
        assert not isinstance(caught.value, ConfigError)
        assert "does not exist" in caught.value.message
    finally:
        store.close()
    with pytest.raises(ConfigError) as refused:
        open_store(url)
    assert refused.value.exit_code == 2 and "does not exist" in refused.value.message


# ---- PostgreSQL: the server's own bounds -------------------------------------------------


def test_the_server_ends_a_frozen_holders_session(postgresql_database: str) -> None:
    """PostgreSQL: a holder that stays idle inside its transaction longer than
    idle_in_transaction_session_timeout has its session ended by the server, which
    frees the writer lock for the others while the holder is still stuck; the holder
    learns it as Unavailable when it moves again."""
    frozen = open_store(postgresql_database, Limits(idle_in_transaction=1.0))
    other = open_store(postgresql_database, Limits(lock_timeout=PROMPT_S * 2))
    try:
        with Holder(frozen, hold=4.0) as holder:

            def write() -> None:
                with other.write() as tx:
                    tx.insert_event(event("other"))

            promptly(write)
            assert holder.thread.is_alive(), "the holder finished before the others wrote"
        holder.thread.join(PROMPT_S)
        assert [type(e) for e in holder.errors] == [Unavailable]
        with other.read() as tx:
            assert tx.get_event("other") is not None and tx.get_event("held") is None
    finally:
        frozen.close()
        other.close()


def test_every_session_carries_the_bounds(postgresql_database: str) -> None:
    """PostgreSQL: the writer's and the reader's sessions have lock_timeout,
    idle_in_transaction_session_timeout, statement_timeout and server-side TCP
    keepalives set from the store's limits."""
    store = open_store(postgresql_database, Limits(2.0, 7.0, 11.0))
    try:
        for transaction in (store.write, store.read):
            with transaction() as tx:
                cur = tx._cur  # the session's own cursor
                shown = {}
                for name in (
                    "lock_timeout",
                    "idle_in_transaction_session_timeout",
                    "statement_timeout",
                    "tcp_keepalives_idle",
                ):
                    cur.execute(f"SHOW {name}")
                    shown[name] = cur.fetchone()[name]
            assert shown == {
                "lock_timeout": "2s",
                "idle_in_transaction_session_timeout": "7s",
                "statement_timeout": "11s",
                "tcp_keepalives_idle": "30",
            }
    finally:
        store.close()


# ---- SQLite: whose file it is -------------------------------------------------------------


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path) -> None:
    """SQLite: a --db file that is not a SQLite database is a ConfigError (exit 2)
    naming it, and its bytes are left as they were."""
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes\n" * 100)
    with pytest.raises(ConfigError, match="not a SQLite database") as caught:
        SqliteStore(path)
    assert caught.value.exit_code == 2
    assert path.read_bytes() == b"these are my notes\n" * 100


def test_another_applications_database_gets_no_engine_tables(tmp_path: Path) -> None:
    """SQLite: a database with another application's tables and no engine schema, or
    marked with another application id, is refused (ConfigError) and keeps exactly its
    own tables and its journal mode."""
    theirs, marked = tmp_path / "theirs.db", tmp_path / "marked.db"
    execute(str(theirs), "CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    execute(str(marked), "PRAGMA application_id = 42")
    with pytest.raises(ConfigError, match="another application's tables"):
        SqliteStore(theirs)
    with pytest.raises(ConfigError, match="another application"):
        SqliteStore(marked)
    assert table_names(str(theirs)) == ["invoices"] and table_names(str(marked)) == []
    assert rows(str(theirs), "PRAGMA journal_mode") == [("delete",)]


def test_a_directory_is_not_a_database_file(tmp_path: Path) -> None:
    """SQLite: a --db that is a directory is a ConfigError naming it."""
    with pytest.raises(ConfigError, match="is a directory"):
        SqliteStore(tmp_path)


def test_an_engine_database_from_before_the_mark_is_kept_and_marked(tmp_path: Path) -> None:
    """SQLite: a database the engine made before it marked its files (its schema, no
    application id) opens as the engine's, and is marked from then on."""
    path = tmp_path / "engine.db"
    SqliteStore(path).close()
    execute(str(path), "PRAGMA application_id = 0")
    SqliteStore(path).close()
    assert rows(str(path), "PRAGMA application_id") == [(APPLICATION_ID,)]
