"""Every "now" the engine reads goes through engine/clock.py (docs/cli.md#environment:
ENGINE_NOW is set for every process or none, so no process may read the system time
on its own): a read of the wall clock anywhere else in engine/ or dsl/ fails here."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import clock
from engine.errors import BadRequest

ROOT = Path(__file__).resolve().parents[2]
CLOCK_MODULE = ROOT / "engine" / "clock.py"

# Attribute reads that give the wall clock's present: datetime.now(), date.today(),
# time.time() and the calls that default to it.
DATETIME_NOW = {"now", "utcnow", "today"}
TIME_NOW = {"time", "time_ns", "localtime", "gmtime", "ctime", "asctime", "strftime"}


def _last_name(node: ast.expr) -> str:
    """`datetime` for both `datetime` and `datetime.datetime`."""
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def stray_reads(source: str) -> list[tuple[int, str]]:
    """(line, spelling) of each wall-clock read in `source`: `datetime.now`,
    `date.today`, `time.time` and friends, as attributes or imported by name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            owner, name = _last_name(node.value), node.attr
            if owner in {"datetime", "date"} and name in DATETIME_NOW:
                found.append((node.lineno, f"{owner}.{name}"))
            if owner == "time" and name in TIME_NOW:
                found.append((node.lineno, f"time.{name}"))
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            for alias in node.names:
                if alias.name in TIME_NOW:
                    found.append((node.lineno, f"from time import {alias.name}"))
    return found


def test_no_module_but_the_clock_reads_the_wall_clock() -> None:
    """No module of engine/ or dsl/ except engine/clock.py reads datetime.now, date.today
    or time.time (durations use time.monotonic, which is no "now")."""
    strays = [
        f"{path.relative_to(ROOT)}:{line}: {spelling}"
        for tree in ("engine", "dsl")
        for path in sorted((ROOT / tree).rglob("*.py"))
        if path != CLOCK_MODULE
        for line, spelling in stray_reads(path.read_text())
    ]
    assert strays == [], "read the time through engine.clock:\n" + "\n".join(strays)


@pytest.mark.parametrize(
    "source",
    [
        "from datetime import UTC, datetime\nx = datetime.now(UTC)\n",
        "import datetime\nx = datetime.datetime.utcnow()\n",
        "import time\nx = time.time()\n",
        "import time\nf = time.time\n",
        "from time import time\n",
        "from datetime import date\nx = date.today()\n",
    ],
)
def test_the_check_sees_each_spelling_of_a_wall_clock_read(source: str) -> None:
    """Each way of reading the system time is caught, so the check above can fail."""
    assert stray_reads(source)


def test_a_monotonic_duration_is_no_stray_read() -> None:
    """time.monotonic and time.sleep measure and wait; they are not "now"."""
    assert stray_reads("import time\na = time.monotonic()\ntime.sleep(1)\n") == []


def test_the_process_clock_runs_on_from_its_first_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ENGINE_NOW every read of the process clock is the same clock: it starts at
    the placed instant and runs on, never back to it."""
    monkeypatch.setenv(clock.NOW_ENV, "2031-05-01T08:00:00+02:00")
    first = clock.now()
    assert clock.process_clock() is clock.process_clock()
    assert datetime(2031, 5, 1, 6, tzinfo=UTC) <= first <= clock.now()
    monkeypatch.delenv(clock.NOW_ENV)
    assert clock.process_clock() is clock.system_clock


@given(
    st.datetimes(
        timezones=st.just(UTC), min_value=datetime(1971, 1, 1), max_value=datetime(8999, 12, 31)
    )
)
def test_a_placed_clock_starts_at_its_instant(start: datetime) -> None:
    """ENGINE_NOW=<instant> gives a clock that reads that instant (to the second) at once,
    whatever the system time."""
    placed = clock.clock_from_env(start.isoformat())
    assert abs((placed() - start).total_seconds()) < 60
    assert clock.unix_seconds(placed) - int(start.timestamp()) in range(0, 60)


@pytest.mark.parametrize(
    "value",
    [
        "0001-01-01T00:00:00+14:00",
        "1969-12-31T23:59:59Z",
        "9000-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
    ],
)
def test_a_placed_clock_outside_1970_to_9000_is_refused(value: str) -> None:
    """ENGINE_NOW before the unix epoch or too near datetime's end is a bad setting
    (exit 2), not a clock whose next read or "a day ago" overflows."""
    with pytest.raises(BadRequest, match="between 1970 and 9000"):
        clock.clock_from_env(value)
