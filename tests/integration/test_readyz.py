"""`GET /readyz` of a real `engine serve` (docs/api.md#get-readyz): open to anyone, 200
while the database answers and holds exactly the migrations this engine ships, 503
with the reason when a migration is missing or unknown, when the SQLite file is gone
or the PostgreSQL server is down, or when the store is closed."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import API_TREE
from databases import MEMORY, execute

from engine.bootstrap import open_store
from engine.errors import Unavailable
from engine.service.readiness import readiness, shipped, verdict
from engine.store.memory import MemoryStore
from engine.store.sqlite import SqliteStore

NEWEST = max(shipped("sqlite"))
ENV = {"ENGINE_OPERATOR_TOKEN": "alice:alice-token"}


def ready(serve: Any) -> tuple[int, Any]:
    return serve.request("GET", "/readyz")  # no token


@pytest.mark.slow
def test_readyz_follows_the_migrations_of_the_database(serve_factory: Any, database: str) -> None:
    """Ready on a freshly migrated database; a migration row removed is `behind`, one
    this engine does not ship is `ahead`, each a 503 with its reason; put back, ready
    again. No token is asked for."""
    serve = serve_factory(API_TREE, ENV, "--db", database)
    status, answer = ready(serve)
    assert (status, answer["ready"]) == (200, True), answer
    assert answer["schema"] == {"applied": NEWEST, "shipped": NEWEST}

    execute(database, f"DELETE FROM schema_migrations WHERE version = {NEWEST}")
    status, answer = ready(serve)
    assert (status, answer["ready"], answer["reason"]) == (503, False, "migrations_behind")
    assert str(NEWEST) in answer["message"]

    execute(
        database,
        f"INSERT INTO schema_migrations (version, applied_at) VALUES ({NEWEST}, 'x')",
        f"INSERT INTO schema_migrations (version, applied_at) VALUES ({NEWEST + 1}, 'x')",
    )
    status, answer = ready(serve)
    assert (status, answer["reason"]) == (503, "migrations_ahead")
    assert answer["schema"] == {"applied": NEWEST + 1, "shipped": NEWEST}

    execute(database, f"DELETE FROM schema_migrations WHERE version = {NEWEST + 1}")
    assert ready(serve)[0] == 200
    assert serve.stop() == 0


def test_readyz_is_503_once_the_sqlite_file_is_gone(serve_factory: Any) -> None:
    """The database file removed under a running serve: not ready (503,
    database_unavailable, `Retry-After: 5`), while /healthz (liveness) still answers 200."""
    serve = serve_factory(API_TREE, ENV)
    assert ready(serve)[0] == 200
    Path(serve.db).unlink()
    status, answer = ready(serve)
    assert (status, answer["ready"], answer["reason"]) == (503, False, "database_unavailable")
    with pytest.raises(urllib.error.HTTPError) as refused:
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        direct.open(f"{serve.url}/readyz", timeout=30)
    assert refused.value.headers["Retry-After"] == "5"
    refused.value.close()
    assert "is gone" in answer["message"]
    assert serve.request("GET", "/healthz")[0] == 200


@pytest.mark.slow
def test_readyz_is_503_while_the_postgresql_server_is_down(
    serve_factory: Any, own_cluster: Any
) -> None:
    """The PostgreSQL server stopped under a running serve: 503 database_unavailable;
    started again, ready again."""
    serve = serve_factory(API_TREE, ENV, "--db", own_cluster.url)
    assert ready(serve)[0] == 200
    own_cluster.halt()
    status, answer = ready(serve)
    assert (status, answer["reason"]) == (503, "database_unavailable"), answer
    own_cluster.serve()
    serve.wait_for("/readyz", lambda a: a["ready"], "")


def test_every_store_answers_its_applied_migrations(store_database: str) -> None:
    """On SQLite, PostgreSQL and the memory store alike, a freshly opened store has
    applied every shipped migration, in order; once closed it is Unavailable."""
    store = MemoryStore() if store_database == MEMORY else open_store(store_database)
    assert store.applied_migrations() == shipped(store.dialect)
    store.close()
    with pytest.raises(Unavailable):
        store.applied_migrations()


def test_a_closed_store_is_not_ready(tmp_path: Path) -> None:
    """A closed SQLite store, and a closed memory store, are database_unavailable."""
    store = SqliteStore(tmp_path / "e.db")
    assert readiness(store)["ready"] is True
    store.close()
    assert readiness(store)["reason"] == "database_unavailable"
    memory = MemoryStore()
    assert readiness(memory)["ready"] is True
    memory.close()
    assert readiness(memory)["reason"] == "database_unavailable"


def test_the_verdict_compares_applied_and_shipped_versions() -> None:
    """Equal sets are ready; a gap is behind, an extra one ahead (ahead wins)."""
    assert verdict([1, 2, 3], [1, 2, 3])["ready"] is True
    assert verdict([1, 3], [1, 2, 3])["reason"] == "migrations_behind"
    assert verdict([1, 2, 3, 4], [1, 2, 3])["reason"] == "migrations_ahead"
    assert verdict([1, 4], [1, 2, 3])["reason"] == "migrations_ahead"
    assert verdict([], [1])["schema"] == {"applied": 0, "shipped": 1}
