"""After every migration, the SQLite and the PostgreSQL schemas are the same: the same
tables, the same columns in the same order (with compatible types, nullability and
defaults), the same keys (primary, unique, foreign) and the same indexes. Each schema
is read from the database itself (SQLite's sqlite_master and pragmas, PostgreSQL's
catalogs), not from the migration files, so a migration written for one backend and
forgotten (or written differently) for the other fails here."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from engine.bootstrap import open_store

Schema = dict[str, dict[str, Any]]

# Declared types by the storage family both dialects give them (SQLite's affinity).
FAMILIES = {
    "integer": "integer",
    "bigint": "integer",
    "text": "text",
    "real": "real",
    "double precision": "real",
}


def family(declared: str) -> str:
    return FAMILIES.get(declared.lower(), declared.lower())


def normal_sql(text: str | None) -> str | None:
    """A default or an index predicate without the casts and the parentheses that
    PostgreSQL adds when it prints one back."""
    if text is None:
        return None
    text = re.sub(r"::[a-z ]+", "", text)
    return " ".join(text.replace("(", " ").replace(")", " ").split()).lower()


def sqlite_schema(path: Path) -> Schema:
    conn = sqlite3.connect(path)
    try:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        return {table: _sqlite_table(conn, table) for table in tables}
    finally:
        conn.close()


def _sqlite_table(conn: sqlite3.Connection, table: str) -> dict[str, Any]:
    info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
    key = tuple(name for _, name, _, _, _, pk in sorted(info, key=lambda c: c[5]) if pk)
    # A PRIMARY KEY column is NOT NULL on PostgreSQL; SQLite keeps a TEXT key's NULL
    # allowed for compatibility, but the engine never writes one: compare it as NOT NULL.
    columns = [
        (name, family(declared), bool(notnull) or name in key, normal_sql(default))
        for _, name, declared, notnull, default, _ in info
    ]
    unique: set[tuple[str, ...]] = set()
    indexes: dict[str, tuple[Any, ...]] = {}
    for _, name, is_unique, origin, partial in conn.execute(f'PRAGMA index_list("{table}")'):
        cols = tuple(c[2] for c in conn.execute(f'PRAGMA index_info("{name}")'))
        if origin == "u":
            unique.add(cols)
        elif origin == "c":
            (sql,) = conn.execute(
                "SELECT sql FROM sqlite_master WHERE name = ?", (name,)
            ).fetchone()
            where = sql.split(" WHERE ", 1)[1] if partial else None
            indexes[name] = (cols, bool(is_unique), normal_sql(where))
    references = {
        (row[3], row[2], row[4]) for row in conn.execute(f'PRAGMA foreign_key_list("{table}")')
    }
    return {
        "columns": columns,
        "primary key": key,
        "unique": unique,
        "indexes": indexes,
        "references": references,
    }


def postgres_schema(url: str) -> Schema:
    with psycopg.connect(url) as conn:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1"
            )
        ]
        return {table: _postgres_table(conn, table) for table in tables}


_PG_INDEXES = """
SELECT i.relname, ix.indisprimary, ix.indisunique,
       EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = ix.indexrelid),
       pg_get_expr(ix.indpred, ix.indrelid),
       ARRAY(SELECT a.attname FROM unnest(ix.indkey) WITH ORDINALITY AS k(attnum, n)
             JOIN pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = k.attnum
             ORDER BY k.n)
FROM pg_index ix
JOIN pg_class t ON t.oid = ix.indrelid
JOIN pg_class i ON i.oid = ix.indexrelid
JOIN pg_namespace s ON s.oid = t.relnamespace
WHERE s.nspname = 'public' AND t.relname = %s
"""


_PG_REFERENCES = """
SELECT k.column_name, u.table_name, u.column_name
FROM information_schema.table_constraints c
JOIN information_schema.key_column_usage k
  ON k.constraint_name = c.constraint_name AND k.table_schema = c.table_schema
JOIN information_schema.constraint_column_usage u
  ON u.constraint_name = c.constraint_name AND u.table_schema = c.table_schema
WHERE c.constraint_type = 'FOREIGN KEY' AND c.table_schema = 'public' AND c.table_name = %s
"""


def _postgres_table(conn: psycopg.Connection[Any], table: str) -> dict[str, Any]:
    info = conn.execute(
        "SELECT column_name, data_type, is_nullable, column_default, is_identity "
        "FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s "
        "ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    columns = [
        (name, family(declared), nullable == "NO", normal_sql(default))
        for name, declared, nullable, default, _ in info
    ]
    key: tuple[str, ...] = ()
    unique: set[tuple[str, ...]] = set()
    indexes: dict[str, tuple[Any, ...]] = {}
    for name, primary, is_unique, constraint, where, cols in conn.execute(_PG_INDEXES, (table,)):
        if primary:
            key = tuple(cols)
        elif constraint:
            unique.add(tuple(cols))
        else:
            indexes[name] = (tuple(cols), is_unique, normal_sql(where))
    references = set(conn.execute(_PG_REFERENCES, (table,)).fetchall())
    return {
        "columns": columns,
        "primary key": key,
        "unique": unique,
        "indexes": indexes,
        "references": references,
    }


@pytest.fixture
def schemas(tmp_path: Path, postgresql_database: str) -> tuple[Schema, Schema]:
    """The schemas of a SQLite file and a PostgreSQL database, each migrated by the
    store from empty."""
    lite = tmp_path / "engine.db"
    for db in (str(lite), postgresql_database):
        open_store(db).close()
    return sqlite_schema(lite), postgres_schema(postgresql_database)


def test_both_backends_have_the_same_tables(schemas: tuple[Schema, Schema]) -> None:
    """Every table of one backend's schema is a table of the other's."""
    lite, pg = schemas
    assert sorted(lite) == sorted(pg)
    assert {"events", "journal", "occurrences", "runs", "schema_migrations"} <= set(lite)


@pytest.mark.parametrize("part", ["columns", "primary key", "unique", "indexes", "references"])
def test_each_table_has_the_same_shape_on_both_backends(
    schemas: tuple[Schema, Schema], part: str
) -> None:
    """Each table has the same columns in the same order (names, type family, NOT NULL
    and default), the same primary key, unique columns and foreign keys, and the same
    indexes (names, columns, uniqueness and the predicate of a partial one) on both
    backends."""
    lite, pg = schemas
    for table in sorted(set(lite) & set(pg)):
        assert (table, lite[table][part]) == (table, pg[table][part])
