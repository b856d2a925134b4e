"""Wiring: rules + store + clock -> Service. The CLI (`serve`, `worker`, the listing
commands) and the tests open the runtime through here."""

from __future__ import annotations

import os
from pathlib import Path

from engine.core.validation import Validators
from engine.loading import Paths, load_rules
from engine.service import Runtime, Service
from engine.service.context import NOW_ENV, Clock, clock_from_env
from engine.store.ports import Store
from engine.store.sqlite import SqliteStore

DEFAULT_DB = Path("var/engine.db")


def database_path(cli_value: str | None) -> str:
    """`--db`, else ENGINE_DB, else var/engine.db."""
    return cli_value or os.environ.get("ENGINE_DB") or str(DEFAULT_DB)


def open_store(db: str) -> Store:
    return SqliteStore(db)


def open_service(db: str, paths: Paths, clock: Clock | None = None) -> Service:
    """Load and compile the rules (RulesError when they are invalid: fail closed), open
    the store and migrate it. The clock defaults to the system's, or ENGINE_NOW's."""
    clock = clock or clock_from_env(os.environ.get(NOW_ENV))
    rules = load_rules(paths)
    store = open_store(db)
    artifacts = (
        Path(db).resolve().parent / "artifacts" if db != ":memory:" else Path("var/artifacts")
    )
    runtime = Runtime(
        store=store,
        rules=rules,
        validators=Validators.build(rules),
        clock=clock,
        artifacts=artifacts,
    )
    return Service(runtime)
