"""A store that stops taking writes while serving (issue 12): the real application on
a loopback aiohttp server, over a real SQLite file whose writes the database refuses as
"disk is full", or a real PostgreSQL database switched to read-only. Admissions are 503
with the reason in the API's error shape (never a 500 with a traceback), `GET /status`
says the store cannot write and why, and once the database takes writes again the
runtime admits and reports healthy without a restart."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from conftest import API_TREE, NO_CONFIG
from databases import refuse_writes

from engine.api.app import make_app
from engine.api.settings import Settings
from engine.bootstrap import open_service
from engine.loading import Paths
from engine.service import Service

DEADLINE_S = 15.0


def envelope(n: int) -> dict[str, Any]:
    return {
        "eventId": f"full-{time.time_ns()}-{n}",
        "type": "api.work.requested",
        "source": "manual",
        "occurredAt": "2026-11-30T09:00:00Z",
        "payload": {"repo": "a" * 4000},  # more than a page: a write that needs new pages
    }


async def admit_until(client: TestClient[Any, Any], done: Any) -> tuple[int, Any]:
    """Admit fresh envelopes until `done(status, answer)`; that answer. Any other
    answer must be a 503 (a lost connection is 503 `unavailable` on the way)."""
    deadline = time.monotonic() + DEADLINE_S
    for n in range(10_000):
        response = await client.post("/inject", json=envelope(n))
        answer = await response.json()
        if done(response.status, answer):
            return response.status, answer
        assert response.status in (202, 503), answer
        assert time.monotonic() < deadline, f"never reached: last {response.status} {answer}"
    raise AssertionError("unreachable")


def test_a_store_that_stops_taking_writes_answers_503_and_status_says_so(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    """While the database refuses writes, admissions are 503 with `details.reason`
    (disk_full on SQLite, read_only on PostgreSQL) and /status answers `ok: false` with
    the store's reason and last error; the runtime loop logs it without a traceback;
    when the database takes writes again the next admission is 202 and /status is ok."""
    service: Service = open_service(
        database, Paths(API_TREE / "loops", API_TREE / "registry", NO_CONFIG)
    )
    expected = "read_only" if database.startswith("postgresql://") else "disk_full"

    async def scenario() -> None:
        app = make_app(service, Settings(worker=False, pump_seconds=0.1))
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            await admit_until(client, lambda status, _: status == 202)
            # Once what was admitted is planned, the runtime loop writes nothing more:
            # no write of its (that fits in the pages left) can make the store writable
            # again between the refused admission and the /status read.
            while (await (await client.get("/status")).json())["unplannedEvents"]:
                await asyncio.sleep(0.05)
            undo = refuse_writes(database, service.rt.store)
            _, refused = await admit_until(
                client, lambda s, a: s == 503 and a["details"]["reason"] == expected
            )
            assert refused["error"] == "unavailable" and "cannot be written" in refused["message"]
            report = await (await client.get("/status")).json()
            assert report["ok"] is False
            assert (report["store"]["writable"], report["store"]["reason"]) == (False, expected)
            assert report["store"]["lastError"]["reason"] in (expected, "unavailable")
            undo()
            await admit_until(client, lambda status, _: status == 202)
            report = await (await client.get("/status")).json()
            assert report["ok"] is True and report["store"]["writable"] is True

    with caplog.at_level(logging.INFO):
        try:
            asyncio.run(scenario())
        finally:
            service.rt.store.close()
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
