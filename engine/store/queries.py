"""Named SQL queries read from `sql/queries.sql` (`-- name: X` sections), with a
dialect's own versions (`sql/<dialect>/queries.sql`) taking the place of shared ones."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from engine.errors import ConfigError, SchemaTooNew

_NAME = re.compile(r"^-- name: ([a-z_]+)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    """Split a queries file into {name: sql}; comment lines are dropped."""
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        queries[name] = "\n".join(lines).strip().rstrip(";")
    return queries


@cache
def queries(dialect: str = "sqlite") -> dict[str, str]:
    """The shared queries, overridden and extended by the dialect's own."""
    root = resources.files("engine.store").joinpath("sql")
    found = parse_queries(root.joinpath("queries.sql").read_text("utf-8"))
    own = root.joinpath(dialect, "queries.sql")
    if own.is_file():
        found.update(parse_queries(own.read_text("utf-8")))
    return found


def migrations(dialect: str) -> list[tuple[int, str]]:
    """(version, sql) of every numbered migration of a dialect, in order."""
    folder = resources.files("engine.store").joinpath(f"sql/{dialect}")
    found = []
    for entry in folder.iterdir():
        match = re.match(r"^([0-9]{3})_[a-z0-9_]+\.sql$", entry.name)
        if match:
            found.append((int(match.group(1)), entry.read_text("utf-8")))
    return sorted(found)


def newer_schema(what: str, version: int, newest: int) -> SchemaTooNew:
    """The refusal of a database migrated by a newer engine (as Flyway and Alembic
    refuse a version they do not know): nothing is read or written."""
    return SchemaTooNew(
        f"the database {what} has schema version {version}, newer than this engine "
        f"knows (up to {newest}): it was migrated by a newer engine; run that engine, "
        "or restore a backup made for this one"
    )


def check_versions(what: str, done: set[object], newest: int) -> None:
    """Refuse a database whose `schema_migrations` another tool wrote (versions that
    are not the engine's whole numbers: ConfigError) or a newer engine migrated
    (SchemaTooNew), before anything is written to it."""
    if any(isinstance(v, bool) or not isinstance(v, int) for v in done):
        raise ConfigError(
            f"the database {what} has a schema_migrations table the engine did not write "
            "(its versions are not whole numbers): give the engine a database of its own"
        )
    versions = {v for v in done if isinstance(v, int)}
    if versions and max(versions) > newest:
        raise newer_schema(what, max(versions), newest)
