"""Where a wave's SQL time goes, by named query (bench/scheduler.py --queries).

cProfile shows one line for every `sqlite3.Cursor.execute`; this times each call of
`SqlTx`'s three query helpers by the query's name from sql/queries.sql, over one wave's
pump on a fresh tree and file, and prints SQLite's plan for the costliest ones. The
wrapping is undone afterwards; it adds a few microseconds a call."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from scheduler_runtime import ENABLED_AT, WAVE_AT, ManualClock, close, open_at, timed
from scheduler_tree import wave_loop, write_wave_tree

from engine.store.queries import queries
from engine.store.sqltx import SqlTx

HELPERS = ("_exec", "_one", "_all")
Totals = dict[str, list[float]]  # name -> [calls, seconds]


@contextmanager
def timing(totals: Totals) -> Iterator[None]:
    originals = {name: getattr(SqlTx, name) for name in HELPERS}

    def wrap(helper: Callable[..., Any]) -> Callable[..., Any]:
        def timed_helper(self: SqlTx, name: str, **params: Any) -> Any:
            start = time.perf_counter()
            try:
                return helper(self, name, **params)
            finally:
                entry = totals.setdefault(name, [0, 0.0])
                entry[0] += 1
                entry[1] += time.perf_counter() - start

        return timed_helper

    for name, helper in originals.items():
        setattr(SqlTx, name, wrap(helper))
    try:
        yield
    finally:
        for name, helper in originals.items():
            setattr(SqlTx, name, helper)


class Params(dict[str, Any]):
    """Any parameter a query names: a loop's name or a small limit, else a string."""

    def __missing__(self, key: str) -> Any:
        return {"loop": wave_loop(1), "limit": 500}.get(key, "x")


def plans(db: Path, names: list[str]) -> list[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    lines = []
    for name in names:
        rows = conn.execute("EXPLAIN QUERY PLAN " + queries()[name], Params()).fetchall()
        lines.append(f"  {name}: " + "; ".join(str(r[-1]) for r in rows))
    conn.close()
    return lines


def costliest_reads(ranked: list[tuple[str, list[float]]], count: int) -> list[str]:
    reads = [name for name, _ in ranked if queries()[name].lstrip().upper().startswith("SELECT")]
    return reads[:count]


def query_report(root: Path, loops: int, explain: int = 5) -> str:
    paths = write_wave_tree(root / "tree", loops)
    clock = ManualClock(ENABLED_AT)
    service = open_at(root, paths, clock)
    service.pump()
    clock.now = WAVE_AT
    totals: Totals = {}
    with timing(totals):
        seconds, _ = timed(service.pump)
    close(service)
    ranked = sorted(totals.items(), key=lambda item: -item[1][1])
    sql = sum(s for _, s in totals.values())
    lines = [
        f"SQL by named query over one wave of {loops:,} ticks: pump {seconds:.2f} s "
        f"(timed), of which SQL {sql:.2f} s",
        f"  {'query':<24}{'calls':>9}{'total s':>10}{'mean us':>10}",
    ]
    lines += [f"  {n:<24}{int(c):>9,}{s:>10.3f}{s / c * 1e6:>10.1f}" for n, (c, s) in ranked]
    lines.append("plans of the costliest reads:")
    lines += plans(root / "engine.db", costliest_reads(ranked, explain))
    return "\n".join(lines)
