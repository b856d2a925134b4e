"""Readiness (`GET /readyz`, docs/api.md#get-readyz): ready means able to write. The
database answers one small read, the migrations it records are exactly the ones this
engine ships (engine.store.schema, the check every write transaction makes), and the
store is not refusing writes for a storage reason (its `health`, which every write
updates). Liveness (`GET /healthz`) asks nothing of the database; the doctor
(`GET /status`) asks much more.

So readiness and the write routes agree: a schema a newer engine migrated is 503
`migrations_ahead` for both, and a full disk is 503 `disk_full` for both. A store that
refused a write is probed again (a write that writes nothing) once the Retry-After of
its reason has passed since readiness first saw it refused, so a serve taken out of
the pool learns when it can write again although nothing else writes."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import Any

from engine import retry_after
from engine.clock import Clock, system_clock
from engine.errors import Unavailable
from engine.store import schema
from engine.store.ports import Store
from engine.store.schema import shipped as shipped

log = logging.getLogger("engine.readiness")

# The reasons a refused write makes a store not ready: the database itself refuses
# writes. A busy one is ready (contention passes, and a probe would wait behind the very
# lock); a lost connection is found by readiness's own read.
STORAGE = frozenset({"read_only", "disk_full", "io_error"})


def verdict(applied: list[int], ships: list[int]) -> dict[str, Any]:
    """Ready when the applied versions are the shipped ones; else why not
    (engine.store.schema.problem), with both schema versions."""
    versions = {"applied": max(applied, default=0), "shipped": max(ships, default=0)}
    found = schema.problem(applied, ships)
    if found is None:
        return {"ready": True, "schema": versions}
    reason, message = found
    return {"ready": False, "reason": reason, "message": message, "schema": versions}


class Readiness:
    """The readiness of one store on the runtime's clock; thread-safe (readiness is
    asked from the read threads)."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store, self.clock = store, clock
        self._lock = threading.Lock()
        self._refused_since: datetime | None = None  # when readiness first saw a refusal

    def __call__(self) -> dict[str, Any]:
        """The verdict: the schema read from the database, then the store's health."""
        try:
            applied = self.store.applied_migrations()
        except Unavailable as err:
            return _unavailable(err.message)
        except Exception as err:  # a probe answers, whatever the driver raised
            log.warning("readiness: the database did not answer: %s", type(err).__name__)
            return _unavailable(f"the database did not answer ({type(err).__name__})")
        found = verdict(applied, shipped(self.store.dialect))
        if not found["ready"]:
            return found
        return self._writable(found)

    def _writable(self, found: dict[str, Any]) -> dict[str, Any]:
        """`found` while the store takes writes; else why not, probed again when due."""
        health = self.store.health
        if health.writable or health.reason not in STORAGE:
            with self._lock:
                self._refused_since = None
            return found
        if self._due(str(health.reason)) and self._probe():
            return found
        error = health.as_dict()["lastError"] or {}
        message = error.get("message") or f"the database refuses writes ({health.reason})"
        return {**found, "ready": False, "reason": health.reason, "message": message}

    def _due(self, reason: str) -> bool:
        """Whether to probe a refused store now: once its reason's Retry-After has
        passed since readiness first saw it refused (then the wait starts again)."""
        now = self.clock()
        with self._lock:
            if self._refused_since is None:
                self._refused_since = now
                return False
            if now - self._refused_since < timedelta(seconds=retry_after.seconds(reason)):
                return False
            self._refused_since = now
            return True

    def _probe(self) -> bool:
        """A write that writes nothing: while the store is marked unwritable its commit
        writes the store's probe, so success marks it writable again."""
        try:
            with self.store.write(exclusive=False):
                pass
        except Unavailable:
            return False
        with self._lock:
            self._refused_since = None
        return self.store.health.writable


def readiness(store: Store, clock: Clock = system_clock) -> dict[str, Any]:
    """One verdict on `store` (a Readiness of its own: no memory of refusals seen)."""
    return Readiness(store, clock)()


def _unavailable(message: str) -> dict[str, Any]:
    return {"ready": False, "reason": "database_unavailable", "message": message}
