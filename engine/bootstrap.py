"""Wiring: rules + store + clock -> Service. The CLI (`serve`, `worker`, the listing
commands) and the tests open the runtime through here."""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from engine.adapters.probe import ProbeRunner
from engine.clock import Clock, process_clock
from engine.core.validation import Validators
from engine.errors import BadRequest, ConfigError
from engine.home import DATABASE_FILE, instance_home, named_home, var_dir
from engine.loading import Paths, load_rules
from engine.service import Runtime, Service, instances, probing
from engine.store.limits import Limits
from engine.store.ports import Store

if TYPE_CHECKING:
    from engine.store.postgres import PostgresStore

URL_ENV = "ENGINE_DATABASE_URL"


def database_path(cli_value: str | None) -> str:
    """`--db`, else ENGINE_DATABASE_URL, else ENGINE_DB, else var/engine.db of the
    instance directory (ENGINE_HOME, docs/deploy.md#the-instance-directory; ConfigError
    when it is not a readable directory), else ./var/engine.db. A
    PostgreSQL URL given on the command line must not carry a password (every process
    listing shows it): BadRequest; put it in ENGINE_DATABASE_URL, PGPASSWORD or
    ~/.pgpass instead. A URL of another kind (mysql://…, sqlite://…) is a ConfigError,
    never a path to create."""
    if cli_value is not None and not cli_value.strip():
        raise BadRequest("--db is empty: give the path of a SQLite file or a postgresql:// URL")
    if cli_value and is_database_url(cli_value) and _has_password(cli_value):
        raise BadRequest(
            "--db carries a password, which every process listing shows; "
            f"set {URL_ENV} (or PGPASSWORD, or ~/.pgpass) instead"
        )
    found = cli_value or os.environ.get(URL_ENV) or os.environ.get("ENGINE_DB")
    if found and not is_database_url(found) and (scheme := _OTHER_URL.match(found)):
        raise ConfigError(
            f"the database is a {scheme[1]}:// URL: give a postgresql:// URL or the path "
            "of a SQLite file"
        )
    return found or str(var_dir(instance_home()) / DATABASE_FILE)


# A URL's scheme (RFC 3986), which no SQLite path the engine should create starts with.
_OTHER_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def _has_password(url: str) -> bool:
    """Whether a URL carries a password (a malformed one is asked of libpq's rules:
    anything between the user and the last '@')."""
    try:
        return urlsplit(url).password is not None
    except ValueError:
        user_part = url.partition("://")[2].rpartition("@")[0]
        return ":" in user_part or "password=" in url.lower()


def is_database_url(db: str) -> bool:
    """A PostgreSQL URL (postgresql://… or postgres://…), not a SQLite file."""
    return db.startswith(("postgresql://", "postgres://"))


def database_exists(db: str) -> bool:
    """Whether `db` names a database already there: anything at that path (or
    :memory:), so that opening it says what is wrong with what is there (a directory,
    a file of another kind); a server database is taken as there (connecting tells)."""
    return db == ":memory:" or is_database_url(db) or os.path.lexists(db)


def _postgres() -> type[PostgresStore]:
    """The PostgreSQL store, imported only when a URL asks for it: its driver (psycopg)
    is the `postgres` extra, which a SQLite installation does not have
    (docs/deploy.md#installing)."""
    try:
        from engine.store.postgres import PostgresStore
    except ImportError as err:
        if (err.name or "").split(".")[0] != "psycopg":
            raise
        raise ConfigError(
            "a PostgreSQL database URL needs the PostgreSQL driver, which is not installed: "
            "pip install 'engine[postgres]'"
        ) from None
    return PostgresStore


def open_store(db: str, limits: Limits | None = None, probe: bool = True) -> Store:
    """PostgreSQL for a URL, else the SQLite file at `db` (created when missing),
    migrated and, with `probe`, written once: ConfigError (exit 2) for a database the
    engine cannot use, SchemaTooNew for one migrated by a newer engine,
    StoreUnwritable for one that cannot be written, Unavailable for a server that
    cannot be reached. A command that mostly reads passes probe=False: it then opens
    an up-to-date database without waiting for the writer lock. The time bounds come
    from the environment (`engine.store.limits`) unless given."""
    limits = limits or Limits.from_env(os.environ)
    if is_database_url(db):
        return _postgres()(db, limits, probe)
    from engine.store.sqlite import SqliteStore

    return SqliteStore(db, limits, probe)


@contextmanager
def read_only_copy(db: str) -> Iterator[Store]:
    """A store over the records of `db` that never writes `db` (`engine simulate
    --db`, `engine replay`): a SQLite file is copied (with its write-ahead log) to a
    temporary directory and opened there (migrated there when it is older); a
    PostgreSQL database is only read, and one this engine would have to migrate is
    refused (ConfigError). ConfigError when there is no such file."""
    if is_database_url(db):
        server = _postgres()(db, only_read=True)
        try:
            yield server
        finally:
            server.close()
        return
    if not os.path.isfile(db):
        raise ConfigError(f"no database file at {db}")
    with tempfile.TemporaryDirectory(prefix="engine-copy-") as scratch:
        copy = Path(scratch) / "copy.db"
        shutil.copyfile(db, copy)
        if os.path.isfile(f"{db}-wal"):  # commits not yet checkpointed into the file
            shutil.copyfile(f"{db}-wal", f"{copy}-wal")
        store = open_store(str(copy))
        try:
            yield store
        finally:
            store.close()


def artifacts_dir(db: str) -> Path:
    """Run artifacts: beside a SQLite file; under var/ for a server database (the
    instance directory's when there is one; each host keeps its own)."""
    if db == ":memory:" or is_database_url(db):
        return (var_dir(named_home()) / "artifacts").resolve()
    return Path(db).resolve().parent / "artifacts"


def log_rule_warnings(service: Service, log: logging.Logger) -> None:
    """One log line (level warning) per warning the rules loaded with (an old spelling,
    W0901: docs/rules.md#old-spellings), as `engine check` would show its first line."""
    for warning in service.rt.rules.warnings:
        hint = f"; help: {warning.hint}" if warning.hint else ""
        log.warning("%s: warning[%s]: %s%s", warning.span, warning.code, warning.message, hint)


def open_service(
    db: str,
    paths: Paths,
    clock: Clock | None = None,
    probe: bool = True,
    probe_threads: int = probing.SIZE,
) -> Service:
    """Load and compile the rules (RulesError when they are invalid: fail closed), open
    the store and migrate it (`probe`: see `open_store`). The clock defaults to the
    process's (engine.clock: the system's, or ENGINE_NOW's); watch probes run
    `probe_threads` at a time."""
    clock = clock or process_clock()
    rules = load_rules(paths)
    store = open_store(db, probe=probe)
    artifacts = artifacts_dir(db)
    runtime = Runtime(
        store=store,
        rules=rules,
        validators=Validators.build(rules),
        clock=clock,
        artifacts=artifacts,
        roots=paths.roots(),
    )
    instances.refresh(runtime)  # the work-bound instances bound so far
    return Service(runtime, observer=ProbeRunner(), probe_threads=probe_threads)
