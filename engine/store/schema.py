"""Whether a database's schema is this engine's to write (docs/api.md#get-readyz): the
migrations it records are exactly the ones this engine ships. One verdict, asked by
every write transaction of the SQLite and PostgreSQL stores (a database a newer engine
migrated while this one runs takes no more writes from it) and by readiness."""

from __future__ import annotations

from collections.abc import Iterable

from engine.errors import StoreUnwritable
from engine.store.queries import migrations

# Every write transaction reads this first (a handful of rows).
APPLIED = "SELECT version FROM schema_migrations"


def shipped(dialect: str) -> list[int]:
    """The migration versions this engine ships for a dialect (memory: SQLite's)."""
    return [v for v, _ in migrations("sqlite" if dialect == "memory" else dialect)]


def problem(applied: Iterable[int], ships: Iterable[int]) -> tuple[str, str] | None:
    """None when the applied versions are the shipped ones; else (reason, message):
    `migrations_ahead` (the database holds a version this engine does not know: a
    newer engine migrated it) before `migrations_behind` (a migration this engine
    ships is not applied: another tool removed it)."""
    done, known = set(applied), set(ships)
    if unknown := sorted(done - known):
        ahead = f"the database has migrations {unknown} this engine does not ship"
        return "migrations_ahead", ahead
    if missing := sorted(known - done):
        return "migrations_behind", f"the database lacks migrations {missing} this engine ships"
    return None


def refusal(what: str, applied: Iterable[int], dialect: str) -> StoreUnwritable | None:
    """The error a write meets on a schema that is not this engine's (None when it is)."""
    found = problem(applied, shipped(dialect))
    if found is None:
        return None
    reason, message = found
    return StoreUnwritable(
        f"the database {what} takes no writes from this engine: {message}", reason
    )
