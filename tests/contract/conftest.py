"""The contract suite's stores: `open_store` opens stores on the database under test
(`store_database`, tests/conftest.py: a SQLite file, a PostgreSQL database, the in-memory
store), each call another connection, as another process would open; all are closed
when the test ends."""

from __future__ import annotations

from collections.abc import Iterator

import databases
import pytest
from databases import Factory

from engine.bootstrap import open_store as open_backend
from engine.store.memory import MemoryDatabase, MemoryStore
from engine.store.ports import Store


def stores(database: str) -> Iterator[Factory]:
    """Opens stores on `database` (one shared in-memory database for the memory store)
    until the generator is closed, then closes every one."""
    opened: list[Store] = []
    memory = MemoryDatabase()

    def factory() -> Store:
        store = MemoryStore(memory) if database == databases.MEMORY else open_backend(database)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def open_store(store_database: str) -> Iterator[Factory]:
    """Opens stores on the database under test."""
    yield from stores(store_database)


@pytest.fixture
def open_pg_store(postgresql_database: str) -> Iterator[Factory]:
    """Like `open_store`, on PostgreSQL only: for what only a server backend allows."""
    yield from stores(postgresql_database)
