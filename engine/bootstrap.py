"""Wiring: rules + store + clock -> Service. The CLI (`serve`, `worker`, the listing
commands) and the tests open the runtime through here."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from engine.core.validation import Validators
from engine.errors import BadRequest
from engine.loading import Paths, load_rules
from engine.service import Runtime, Service
from engine.service.context import NOW_ENV, Clock, clock_from_env
from engine.store.ports import Store

DEFAULT_DB = Path("var/engine.db")
URL_ENV = "ENGINE_DATABASE_URL"


def database_path(cli_value: str | None) -> str:
    """`--db`, else ENGINE_DATABASE_URL, else ENGINE_DB, else var/engine.db. A
    PostgreSQL URL given on the command line must not carry a password (every process
    listing shows it): BadRequest; put it in ENGINE_DATABASE_URL, PGPASSWORD or
    ~/.pgpass instead."""
    if cli_value and is_database_url(cli_value) and urlsplit(cli_value).password is not None:
        raise BadRequest(
            "--db carries a password, which every process listing shows; "
            f"set {URL_ENV} (or PGPASSWORD, or ~/.pgpass) instead"
        )
    return cli_value or os.environ.get(URL_ENV) or os.environ.get("ENGINE_DB") or str(DEFAULT_DB)


def is_database_url(db: str) -> bool:
    """A PostgreSQL URL (postgresql://… or postgres://…), not a SQLite file."""
    return db.startswith(("postgresql://", "postgres://"))


def database_exists(db: str) -> bool:
    """Whether `db` names a database already there: a SQLite file that exists (or
    :memory:); a server database is taken as there (connecting tells)."""
    return db == ":memory:" or is_database_url(db) or Path(db).is_file()


def open_store(db: str) -> Store:
    """PostgreSQL for a URL, else the SQLite file at `db` (created when missing)."""
    if is_database_url(db):
        from engine.store.postgres import PostgresStore  # psycopg only when it is used

        return PostgresStore(db)
    from engine.store.sqlite import SqliteStore

    return SqliteStore(db)


def artifacts_dir(db: str) -> Path:
    """Run artifacts: beside a SQLite file; under var/ for a server database (each host
    keeps its own)."""
    if db == ":memory:" or is_database_url(db):
        return Path("var/artifacts").resolve()
    return Path(db).resolve().parent / "artifacts"


def open_service(db: str, paths: Paths, clock: Clock | None = None) -> Service:
    """Load and compile the rules (RulesError when they are invalid: fail closed), open
    the store and migrate it. The clock defaults to the system's, or ENGINE_NOW's."""
    clock = clock or clock_from_env(os.environ.get(NOW_ENV))
    rules = load_rules(paths)
    store = open_store(db)
    artifacts = artifacts_dir(db)
    runtime = Runtime(
        store=store,
        rules=rules,
        validators=Validators.build(rules),
        clock=clock,
        artifacts=artifacts,
    )
    return Service(runtime)
