"""Readiness (`GET /readyz`, docs/api.md#get-readyz): the database answers one small
read, and the migrations it records are exactly the ones this engine ships. Liveness
(`GET /healthz`) asks nothing of the database; the doctor (`GET /status`) asks much
more."""

from __future__ import annotations

import logging
from typing import Any

from engine.errors import Unavailable
from engine.store.ports import Store
from engine.store.queries import migrations

log = logging.getLogger("engine.readiness")


def shipped(dialect: str) -> list[int]:
    """The migration versions this engine ships for a dialect (memory: SQLite's)."""
    return [v for v, _ in migrations("sqlite" if dialect == "memory" else dialect)]


def verdict(applied: list[int], ships: list[int]) -> dict[str, Any]:
    """Ready when the applied versions are the shipped ones; else why not: `behind`
    (a migration this engine ships is not applied) or `ahead` (the database holds a
    version this engine does not know: a newer engine migrated it)."""
    missing = sorted(set(ships) - set(applied))
    unknown = sorted(set(applied) - set(ships))
    schema = {"applied": max(applied, default=0), "shipped": max(ships, default=0)}
    if unknown:
        return {
            "ready": False,
            "reason": "migrations_ahead",
            "message": f"the database has migrations {unknown} this engine does not ship",
            "schema": schema,
        }
    if missing:
        return {
            "ready": False,
            "reason": "migrations_behind",
            "message": f"the database lacks migrations {missing} this engine ships",
            "schema": schema,
        }
    return {"ready": True, "schema": schema}


def readiness(store: Store) -> dict[str, Any]:
    """The verdict on the store: one read of its applied migrations. A database that
    cannot be read at all (any error) is not ready: `database_unavailable`."""
    try:
        applied = store.applied_migrations()
    except Unavailable as err:
        return _unavailable(err.message)
    except Exception as err:  # a probe answers, whatever the driver raised
        log.warning("readiness: the database did not answer: %s", type(err).__name__)
        return _unavailable(f"the database did not answer ({type(err).__name__})")
    return verdict(applied, shipped(store.dialect))


def _unavailable(message: str) -> dict[str, Any]:
    return {"ready": False, "reason": "database_unavailable", "message": message}
