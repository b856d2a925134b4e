"""A database that `engine simulate --db` and `engine replay` read is never written
(engine.bootstrap.read_only_copy, docs/simulate.md, docs/replay.md): on a SQLite file
and on a PostgreSQL database, the records are read and every table is the same after;
a PostgreSQL database this engine would have to migrate is refused, exit 2, and left
as it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from databases import execute, rows

from engine.bootstrap import open_service
from engine.cli.main import main
from engine.core.envelope import parse_iso
from engine.loading import Paths

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "tests" / "data" / "simulate"
NO_CONFIG = ROOT / "tests" / "data" / "no_config"
TABLES = ("events", "decisions", "journal", "loop_state", "slot_skips", "schema_migrations")
START = parse_iso("2026-12-01T10:00:01Z")


def contents(db: str) -> dict[str, Any]:
    return {t: sorted(map(repr, rows(db, f"SELECT * FROM {t}"))) for t in TABLES}


def recorded(db: str) -> None:
    """A database with history: the loops ran a minute, then `gather` was paused."""
    now = [START]
    service = open_service(db, Paths(TREE / "loops", TREE / "registry", NO_CONFIG), lambda: now[0])
    service.pump()
    now[0] = parse_iso("2026-12-01T10:01:00.5Z")
    service.pump()
    service.pause("gather", "operator:alice", "holding it")
    service.rt.store.close()


def simulate(db: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    args = ["simulate", "--rules", str(TREE / "loops"), "--registry", str(TREE / "registry")]
    args += ["--config", str(NO_CONFIG), "--db", db, "--json"]
    args += ["--from", "2026-12-01T10:02:00Z", "--to", "2026-12-01T10:03:00Z"]
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_seed_database_is_read_and_left_as_it_was(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The simulation starts from the database's records (a paused loop stays paused)
    and no table of the database changes."""
    recorded(database)
    before = contents(database)
    code, out, err = simulate(database, capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["loops"]["gather"]["fired"] == 0
    # from the seed's cursor (10:01:00) on: the slots since, as the first pass finds them
    assert doc["loops"]["gather"]["skippedBy"] == {"paused": 20}
    assert doc["loops"]["quick"]["fired"] == 16
    assert doc["loops"]["quick"]["skippedBy"] == {"catchup_none": 14}
    assert contents(database) == before


def test_a_postgresql_database_older_than_the_engine_is_refused_not_migrated(
    postgresql_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reading a server database never migrates it: one line, exit 2, and its schema
    stays at the version it had."""
    recorded(postgresql_database)
    execute(
        postgresql_database,
        "DROP TABLE deliveries",
        "DELETE FROM schema_migrations WHERE version = 7",
    )
    before = contents(postgresql_database)
    code, out, err = simulate(postgresql_database, capsys)
    assert (code, out) == (2, "")
    assert "older than this engine's" in err and len(err.strip().splitlines()) == 1
    assert contents(postgresql_database) == before
    assert rows(postgresql_database, "SELECT to_regclass('deliveries')") == [(None,)]
