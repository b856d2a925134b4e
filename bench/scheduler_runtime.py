"""The engine under a manual clock, for the scheduler benchmark (bench/scheduler.py):
open a service over a generated tree, time a call, read a wave's rows back."""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.bootstrap import open_service
from engine.loading import Paths
from engine.service import Service

SLOT = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
ENABLED_AT = SLOT - timedelta(seconds=1)  # a loop is due only from its enablement
WAVE_AT = SLOT + timedelta(milliseconds=500)
TICK_TABLES = ("events", "decisions", "occurrences", "proposals")


@dataclass
class ManualClock:
    """The injected clock: the service reads `now`; the benchmark moves it."""

    now: datetime

    def __call__(self) -> datetime:
        return self.now


def open_at(root: Path, paths: Paths, clock: ManualClock, db: str | None = None) -> Service:
    """The service on `db` (a PostgreSQL URL), else on root/engine.db."""
    return open_service(db or str(root / "engine.db"), paths, clock=clock)


def close(service: Service) -> None:
    service.rt.store.close()


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = action()
    return time.perf_counter() - start, value


def tick_counts(db: Path | str) -> dict[str, int]:
    """Rows of each kind a tick leaves, read back from the engine's database."""
    queries = {t: f"SELECT COUNT(*) FROM {t}" for t in TICK_TABLES} | {
        "journal": "SELECT COUNT(*) FROM journal WHERE entity != 'loop'",
        "open_proposals": "SELECT COUNT(*) FROM proposals WHERE state = 'open'",
        "unplanned": "SELECT COUNT(*) FROM events WHERE planned = 0",
    }
    if str(db).startswith("postgresql://"):
        import psycopg

        with psycopg.connect(str(db)) as pg:
            return {k: int(pg.execute(q.encode()).fetchone()[0]) for k, q in queries.items()}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {k: int(conn.execute(q).fetchone()[0]) for k, q in queries.items()}
    finally:
        conn.close()


def verify(counts: dict[str, int], ticks: int, what: str) -> None:
    """Exit 1 unless every tick was admitted, decided, proposed and journalled."""
    wanted = {t: ticks for t in TICK_TABLES} | {"open_proposals": ticks, "unplanned": 0}
    wanted["journal"] = 3 * ticks
    if counts != wanted:
        sys.exit(f"error: the {what} left {counts}, not {wanted}")
