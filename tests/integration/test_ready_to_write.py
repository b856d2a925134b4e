"""Ready means able to write (docs/api.md#get-readyz): `GET /readyz` and the write routes
agree, on a SQLite file and on a PostgreSQL database. The real application on a
loopback port, its clock injected (it moves only when the test moves it): a database
a newer engine migrated is 503 `migrations_ahead` for readiness and for `POST /inject`
alike, nothing written; a database that refuses writes (SQLite "disk is full",
PostgreSQL read-only) is not ready either, until a probe once its Retry-After has
passed finds it takes writes again."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import API_TREE, NO_CONFIG
from databases import execute, refuse_writes, rows
from loopback import served

from engine.api.app import make_app
from engine.api.settings import Settings
from engine.bootstrap import open_service
from engine.loading import Paths
from engine.service import Service
from engine.service.readiness import shipped

NEWER = max(shipped("sqlite")) + 1
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class Clock:
    """The runtime's clock: it reads `now` until the test moves it."""

    now: datetime = field(default_factory=lambda: datetime(2026, 11, 30, 9, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now


@dataclass(frozen=True)
class Runtime:
    service: Service
    database: str
    url: str
    clock: Clock


@pytest.fixture
def runtime(database: str) -> Iterator[Runtime]:
    """A Service over tests/data/api on `database` (each backend), served on loopback
    with an injected clock, no worker."""
    clock = Clock()
    paths = Paths(API_TREE / "loops", API_TREE / "registry", NO_CONFIG)
    service = open_service(database, paths, clock=clock)
    try:
        with served(make_app(service, Settings(worker=False, pump_seconds=0.1))) as url:
            yield Runtime(service, database, url, clock)
    finally:
        service.rt.store.close()


def call(url: str, method: str, path: str, body: Any = None) -> tuple[int, Any, Any]:
    """(status, parsed JSON answer, headers) of one request."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with _DIRECT.open(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read()), answer.headers
    except urllib.error.HTTPError as err:
        with err:
            return err.code, json.loads(err.read()), err.headers


def envelope(n: int = 0) -> dict[str, Any]:
    return {
        "eventId": f"ready-{time.time_ns()}-{n}",
        "type": "api.work.requested",
        "source": "manual",
        "occurredAt": "2026-11-30T09:00:00Z",
        "payload": {"repo": "a" * 4000},  # more than a page: a write that needs new pages
    }


def stored(database: str, event_id: str) -> bool:
    return bool(rows(database, "SELECT event_id FROM events WHERE event_id = ?", event_id))


def test_a_schema_a_newer_engine_migrated_is_not_ready_and_takes_no_writes(
    runtime: Runtime,
) -> None:
    """A migration this engine does not ship appears under a running serve: /readyz is
    503 `migrations_ahead` and so is POST /inject, with the same Retry-After, nothing
    written; the migration removed, both take traffic again."""
    database, url = runtime.database, runtime.url
    assert call(url, "GET", "/readyz")[0] == 200
    execute(database, f"INSERT INTO schema_migrations (version, applied_at) VALUES ({NEWER}, 'x')")

    ready_status, ready, ready_headers = call(url, "GET", "/readyz")
    refused = envelope()
    status, answer, headers = call(url, "POST", "/inject", refused)
    assert (ready_status, ready["reason"]) == (503, "migrations_ahead")
    assert (status, answer["details"]["reason"]) == (503, "migrations_ahead"), answer
    assert ready_headers["Retry-After"] == headers["Retry-After"] == "60"
    assert f"[{NEWER}]" in answer["message"] and not stored(database, refused["eventId"])

    execute(database, f"DELETE FROM schema_migrations WHERE version = {NEWER}")
    assert call(url, "GET", "/readyz")[0] == 200
    admitted = envelope(1)
    assert call(url, "POST", "/inject", admitted)[0] == 202
    assert stored(database, admitted["eventId"])


def refuse_until_refused(url: str) -> dict[str, Any]:
    """POST /inject until the store refuses (a write or two may still fit); that answer."""
    deadline = time.monotonic() + 15
    for n in range(10_000):
        status, answer, _ = call(url, "POST", "/inject", envelope(n))
        if status == 503 and answer["details"]["reason"] in ("disk_full", "read_only"):
            return dict(answer)
        assert status in (202, 503), answer
        assert time.monotonic() < deadline, f"never refused: last {status} {answer}"
    raise AssertionError("unreachable")


def test_a_store_that_refuses_writes_is_not_ready_until_it_takes_them_again(
    runtime: Runtime,
) -> None:
    """While every admission is refused (SQLite: `disk_full`; PostgreSQL: `read_only`),
    /readyz is 503 with the same reason, and a probe due while the server is still
    read-only is refused too; the database fixed, readiness probes it once the
    reason's Retry-After (30 s) has passed on the runtime's clock, and is ready again,
    and the next admission is 202."""
    service, url = runtime.service, runtime.url
    assert call(url, "POST", "/inject", envelope())[0] == 202
    while call(url, "GET", "/status")[1]["unplannedEvents"]:  # the runtime loop is idle
        time.sleep(0.05)
    undo = refuse_writes(runtime.database, service.rt.store)
    try:
        reason = refuse_until_refused(url)["details"]["reason"]
        status, ready, headers = call(url, "GET", "/readyz")
        assert (status, ready["ready"], ready["reason"]) == (503, False, reason), ready
        assert headers["Retry-After"] == "30" and "cannot be written" in ready["message"]
        # A read-only server refuses the due probe too; SQLite's "full" file (its page
        # limit reached) still has room for the probe's one-row rewrite.
        if runtime.database.startswith("postgresql://"):
            runtime.clock.now += timedelta(seconds=31)
            assert call(url, "GET", "/readyz")[1]["reason"] == reason
    finally:
        health = service.rt.store.health
        committed: list[bool] = []
        wrote = health.wrote
        health.wrote = lambda: (committed.append(True), wrote())[1]  # type: ignore[method-assign]
        undo()
    # Fixed, but not probed before it is due: still 503, unless a write of the runtime's
    # own committed since (after the fix, its next pass may write, which proves it).
    status = call(url, "GET", "/readyz")[0]
    assert status == 503 or (status == 200 and committed), status
    health.wrote = wrote  # type: ignore[method-assign]
    runtime.clock.now += timedelta(seconds=31)
    status, ready, headers = call(url, "GET", "/readyz")
    assert (status, ready["ready"], headers["Retry-After"]) == (200, True, None), ready
    assert call(url, "POST", "/inject", envelope())[0] == 202
