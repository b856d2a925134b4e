"""Overload says when to come back (docs/api.md#when-to-come-back): every 503 carries
`Retry-After` in whole seconds, by its reason, and the OpenAPI document says so. The
real application on a loopback port over a real SQLite file whose writer lock another
connection holds (`database_busy`), whose writes the database refuses as "disk is
full" (`disk_full`), or that holds a migration this engine does not ship
(`GET /readyz` `migrations_ahead`); schemathesis checks each answer against the
document the application serves (status, content type, body and headers)."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import pytest
import schemathesis
from conftest import API_TREE, NO_CONFIG
from databases import execute, refuse_writes
from loopback import served
from schemathesis.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from engine import retry_after
from engine.api import schema
from engine.api.app import make_app
from engine.api.settings import Settings
from engine.bootstrap import open_service
from engine.loading import Paths
from engine.service import Service
from engine.service.readiness import shipped

ROOT = Path(__file__).resolve().parents[2]
CHECKS = [
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
LOCK_S = 0.2  # the writer-lock wait before a write is refused as busy


@dataclass(frozen=True)
class Runtime:
    service: Service
    database: str  # the SQLite file
    url: str  # the application's base URL on loopback


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    """A Service on a fresh SQLite file (lock timeout LOCK_S) served on loopback."""
    monkeypatch.setenv("ENGINE_DB_LOCK_TIMEOUT", str(LOCK_S))
    database = str(tmp_path / "e.db")
    service = open_service(database, Paths(API_TREE / "loops", API_TREE / "registry", NO_CONFIG))
    try:
        with served(make_app(service, Settings(worker=False, pump_seconds=0.1))) as url:
            yield Runtime(service, database, url)
    finally:
        service.rt.store.close()


def envelope() -> dict[str, Any]:
    return {
        "eventId": f"retry-{time.time_ns()}",
        "type": "api.work.requested",
        "source": "manual",
        "occurredAt": "2026-11-30T09:00:00Z",
        "payload": {"repo": "a" * 4000},  # more than a page: a write that needs new pages
    }


def answer(url: str, method: str, path: str, body: Any = None) -> Any:
    """Send one request the document describes and check the answer against the
    document the application serves; the answer."""
    document = schemathesis.openapi.from_url(f"{url}/openapi.json")
    operation = document[path][method]
    case = operation.Case(body=body, media_type="application/json") if body else operation.Case()
    response = case.call(base_url=url, timeout=30)
    case.validate_response(response, checks=CHECKS)
    return response


def waits(response: Any) -> list[str] | None:
    """The Retry-After values of an answer (schemathesis keeps headers lower-cased)."""
    found: list[str] | None = response.headers.get("retry-after")
    return found


def inject_until_503(url: str) -> Any:
    """POST /inject fresh envelopes until one is refused with 503 (the store's refusal
    may take a write or two to show); that answer."""
    deadline = time.monotonic() + 15
    while True:
        response = answer(url, "POST", "/inject", envelope())
        if response.status_code == 503:
            return response
        assert response.status_code == 202, response.text
        assert time.monotonic() < deadline, "the store never refused a write"


def test_a_busy_database_answers_503_with_retry_after_one_second(runtime: Runtime) -> None:
    """While another connection holds SQLite's writer lock past the lock timeout, an
    admission is 503 `database_busy` with `Retry-After: 1`, as the document says."""
    holder = sqlite3.connect(runtime.database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        refused = inject_until_503(runtime.url)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert refused.json()["details"]["reason"] == "database_busy"
    assert waits(refused) == ["1"]


def test_a_full_disk_answers_503_with_retry_after(runtime: Runtime) -> None:
    """While the database refuses writes as "disk is full", an admission is 503
    `disk_full` with `Retry-After: 30` (a person must free space), as documented."""
    undo = refuse_writes(runtime.database, runtime.service.rt.store)
    try:
        refused = inject_until_503(runtime.url)
    finally:
        undo()
    assert refused.json()["details"]["reason"] == "disk_full"
    assert waits(refused) == ["30"]


def test_readyz_not_ready_answers_retry_after(runtime: Runtime) -> None:
    """GET /readyz on a database a newer engine migrated is 503 `migrations_ahead` with
    `Retry-After: 60`; ready again, it is a 200 without one."""
    database, url = runtime.database, runtime.url
    newer = max(shipped("sqlite")) + 1
    execute(database, f"INSERT INTO schema_migrations (version, applied_at) VALUES ({newer}, 'x')")
    refused = answer(url, "GET", "/readyz")
    assert (refused.status_code, refused.json()["reason"]) == (503, "migrations_ahead")
    assert waits(refused) == ["60"]
    execute(database, f"DELETE FROM schema_migrations WHERE version = {newer}")
    ready = answer(url, "GET", "/readyz")
    assert ready.status_code == 200 and waits(ready) is None


def test_every_readiness_and_store_reason_has_its_own_wait() -> None:
    """Each reason a 503 can give — every readiness reason, every reason the store
    refuses a write for — is in the table, so none falls back to the default unseen."""
    (literal, _) = get_args(schema.Ready.model_fields["reason"].annotation)
    ready_reasons = set(get_args(literal))
    store_reasons = {"database_busy", "read_only", "disk_full", "io_error", "unavailable"}
    edge = {"too_many_connections", "store_closed", "database_missing"}
    assert ready_reasons | store_reasons | edge <= set(retry_after.SECONDS)
    assert all(seconds >= 1 for seconds in retry_after.SECONDS.values())


def test_the_documented_waits_are_the_table() -> None:
    """docs/api.md's table of when to come back lists exactly the waits the engine sends."""
    text = (ROOT / "docs" / "api.md").read_text()
    section = text.split("## When to come back", 1)[1].split("\n## ", 1)[0]
    documented: dict[str, int] = {}
    for reasons, seconds in re.findall(r"^\| ((?:`[a-z_]+`(?:, )?)+) \| (\d+) \|", section, re.M):
        for reason in re.findall(r"`([a-z_]+)`", reasons):
            documented[reason] = int(seconds)
    assert documented == retry_after.SECONDS
