"""What a store knows about its own writability, for `GET /status`, and the one place
a driver's storage error becomes a typed `engine.errors` error.

Each backend supplies a `classify(err, writing)` that names the storage faults it
recognises (a lock wait that ran out, a read-only or full database, a lost
connection) and answers None for anything else, which is raised unchanged: a
constraint violation or a bad statement is a bug, not a fault of the storage."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from engine import clock
from engine.errors import StoreUnwritable, Unavailable

Classify = Callable[[BaseException, bool], Unavailable | None]


class Health:
    """Whether the last write committed, and the last storage error seen. A store is
    writable until a write fails for a storage reason, and again from the next write
    that commits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.writable = True
        self.reason: str | None = None
        self.last_error: dict[str, Any] | None = None

    def wrote(self) -> None:
        with self._lock:
            self.writable, self.reason = True, None

    def failed(self, err: Unavailable, writing: bool) -> None:
        """Record a storage error; a failed write makes the store unwritable."""
        reason = str(err.details.get("reason") or err.code)
        with self._lock:
            if writing:
                self.writable, self.reason = False, reason
            self.last_error = {
                "reason": reason,
                "message": err.message,
                "at": clock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            }

    def as_dict(self) -> dict[str, Any]:
        """`{"writable", "reason", "lastError"}` for `GET /status`."""
        with self._lock:
            return {"writable": self.writable, "reason": self.reason, "lastError": self.last_error}


@contextmanager
def watched(health: Health, classify: Classify, writing: bool) -> Iterator[None]:
    """Raise a storage fault inside the block as its typed error (recorded in
    `health`); anything else passes unchanged."""
    try:
        yield
    except Unavailable as err:  # already typed (e.g. a lock wait inside this process)
        health.failed(err, writing)
        raise
    except Exception as err:
        typed = classify(err, writing)
        if typed is None:
            raise
        health.failed(typed, writing)
        raise typed from err


# A write that tests the store can write, made when a transaction that wrote nothing
# commits while the store is marked unwritable: rewrite the newest migration row.
PROBE = (
    "UPDATE schema_migrations SET applied_at = applied_at "
    "WHERE version = (SELECT max(version) FROM schema_migrations)"
)


class WatchedCursor:
    """A driver cursor whose storage faults are raised as typed errors the moment a
    statement fails, so that no caller (a savepoint that catches errors, say) can take
    a full disk for its own failure; it notes whether a statement changed any row."""

    def __init__(self, cursor: Any, classify: Classify, health: Health, writing: bool) -> None:
        self._cur, self._classify, self._health, self._writing = cursor, classify, health, writing
        self.wrote = False

    def execute(self, sql: Any, *params: Any) -> WatchedCursor:
        self._run(self._cur.execute, sql, *params)
        return self

    def executemany(self, sql: Any, params: Any) -> WatchedCursor:
        """One statement for every set of parameters (one round trip where the driver
        pipelines them)."""
        self._run(self._cur.executemany, sql, params)
        return self

    def _run(self, call: Callable[..., Any], sql: Any, *params: Any) -> None:
        try:
            call(sql, *params)
        except Exception as err:
            typed = self._classify(err, self._writing)
            if typed is None:
                raise
            self._health.failed(typed, self._writing)
            raise typed from err
        if not self.wrote and self._cur.rowcount > 0 and not _reads(sql):
            self.wrote = True

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        rows: list[Any] = self._cur.fetchall()
        return rows

    @property
    def rowcount(self) -> int:
        return int(self._cur.rowcount)

    def probe_if_unwritable(self) -> None:
        """Before a commit: when the store is marked unwritable and this transaction
        wrote nothing, write the probe, so the store learns it can write again."""
        if not self.wrote and not self._health.writable:
            self.execute(PROBE)


def _reads(sql: Any) -> bool:
    text = sql.decode() if isinstance(sql, bytes) else str(sql)
    return text.lstrip()[:6].upper() == "SELECT"


def unwritable(what: str, reason: str, detail: str) -> StoreUnwritable:
    """The error of a database that refuses writes, with what to do about it."""
    advice = {
        "read_only": "make it writable for this user",
        "disk_full": "free space on its disk",
        "io_error": "check its disk",
    }[reason]
    return StoreUnwritable(f"the database {what} cannot be written ({detail}): {advice}", reason)
