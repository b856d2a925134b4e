"""The intake's group commit (docs/architecture.md#intake-group-commit) on the real
application, a loopback aiohttp server and a real SQLite file or PostgreSQL database: concurrent
admissions commit together yet each is admitted exactly once with its journal entry,
a 202 is never sent before the commit that made it durable, a batch whose commit fails
answers every request of it 503 and writes nothing, and a request whose data breaks
its batch's commit fails alone."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer
from conftest import API_TREE, NO_CONFIG

from engine.api.app import make_app
from engine.api.context import INTAKE
from engine.api.settings import Settings
from engine.bootstrap import open_service
from engine.core.records import EventRecord
from engine.errors import Busy
from engine.loading import Paths
from engine.service import Service
from engine.store.ports import Store, Tx
from engine.store.sqlite import SqliteStore

DEADLINE_S = 20.0  # how long a step may take before the test calls it stuck


class Spy:
    """The service's store, with the transactions of the intake's writer thread counted
    (`batches`) and, when a test asks, held before their commit until `gate` is set,
    or refused at it (the batch numbers in `refuse`, from 1)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.batches = 0
        self.gate: threading.Event | None = None
        self.holding = threading.Event()  # a commit waited at the gate
        self.committed = threading.Event()  # a commit of the intake is done
        self.refuse: set[int] = set()
        self.poison: str | None = None  # an event id whose batch raises a bug

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    @contextmanager
    def write(self, exclusive: bool = True) -> Iterator[Tx]:
        if not threading.current_thread().name.startswith("engine-intake"):
            with self.store.write(exclusive) as tx:
                yield tx
            return
        self.batches += 1
        with self.store.write(exclusive) as tx:
            yield _Poisoned(tx, self.poison) if self.poison else tx  # type: ignore[misc]
            if self.gate is not None:
                self.holding.set()
                assert self.gate.wait(DEADLINE_S), "the test never let the commit go on"
            if self.batches in self.refuse:
                raise Busy("the database is busy: refused by the test")  # rolls back
        self.committed.set()


class _Poisoned:
    """A transaction that raises a bug (not a storage fault) on a batch holding one id."""

    def __init__(self, tx: Tx, poison: str) -> None:
        self.tx, self.poison = tx, poison

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tx, name)

    def insert_events(self, events: Sequence[EventRecord]) -> set[str]:
        if any(e.event_id == self.poison for e in events):
            raise RuntimeError("a bug that this event's data brings out")
        return self.tx.insert_events(events)


def envelope(event_id: str, **changes: Any) -> dict[str, Any]:
    return {
        "eventId": event_id,
        "type": "api.work.requested",
        "source": "manual",
        "occurredAt": "2026-11-30T09:00:00Z",
        "payload": {"repo": "alpha"},
        **changes,
    }


Scenario = Callable[[aiohttp.ClientSession, str, Service, Spy, TestServer], Any]


def serve(database: str, scenario: Scenario) -> None:
    """Run `scenario(session, url, service, spy, server)` against the real application
    on a loopback port, with a client of 16 connections."""
    service = open_service(database, Paths(API_TREE / "loops", API_TREE / "registry", NO_CONFIG))
    spy = Spy(service.rt.store)
    service.rt.store = spy  # type: ignore[assignment]  # the Spy delegates the rest

    async def run() -> None:
        server = TestServer(make_app(service, Settings(worker=False)), host="127.0.0.1")
        async with server:
            connector = aiohttp.TCPConnector(limit=16)
            async with aiohttp.ClientSession(connector=connector) as session:
                url = str(server.make_url("/inject"))
                await asyncio.wait_for(scenario(session, url, service, spy, server), DEADLINE_S)

    try:
        asyncio.run(run())
    finally:
        spy.store.close()


async def post(session: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    async with session.post(url, json=body) as response:
        return response.status, await response.json()


def stored(service: Service) -> tuple[list[str], list[tuple[str, str]]]:
    """The admitted event ids, and (event id, actor) of every `admitted` journal entry."""
    with service.rt.store.read() as tx:
        events = [e.event_id for e in tx.list_events(10_000)]
        journal = tx.list_journal(100_000, entity="event")
    return events, [(j.entity_id, j.actor) for j in journal if j.action == "admitted"]


async def until(check: Callable[[], bool]) -> None:
    while not check():
        await asyncio.sleep(0.005)


def test_concurrent_admissions_commit_together_and_each_exactly_once(database: str) -> None:
    """200 admissions over 16 connections, a quarter of them repeating an id (some at
    the same moment): every id is answered 202 once and 200 duplicate otherwise, is
    stored once with one `admitted` journal entry, and the admissions took fewer
    transactions than requests."""
    ids = [f"gc-{n}" for n in range(150)] + [f"gc-{n}" for n in range(0, 150, 3)]

    async def scenario(
        session: aiohttp.ClientSession, url: str, service: Service, spy: Spy, _: TestServer
    ) -> None:
        answers = await asyncio.gather(*(post(session, url, envelope(i)) for i in ids))
        status = Counter((a["eventId"], code) for code, a in answers)
        assert {status[(i, 202)] for i in set(ids)} == {1}
        assert sum(status[(i, 200)] for i in set(ids)) == len(ids) - len(set(ids))
        assert all(a["duplicate"] == (code == 200) for code, a in answers)
        events, admitted = stored(service)
        assert sorted(events) == sorted(set(ids))
        assert sorted(admitted) == sorted((i, "inject") for i in set(ids))
        assert 1 <= spy.batches < len(ids)

    serve(database, scenario)


def test_a_202_is_sent_only_after_its_commit(database: str) -> None:
    """While the commit of an admission is held, its request gets no answer; once the
    commit is done the answer is 202 and the event is stored."""

    async def scenario(
        session: aiohttp.ClientSession, url: str, service: Service, spy: Spy, _: TestServer
    ) -> None:
        spy.gate = threading.Event()
        answer = asyncio.ensure_future(post(session, url, envelope("held-1")))
        await until(spy.holding.is_set)
        await asyncio.sleep(0.2)
        assert not answer.done() and not spy.committed.is_set()
        spy.gate.set()
        status, body = await answer
        assert spy.committed.is_set()
        assert (status, body["admitted"]) == (202, True)
        assert stored(service) == (["held-1"], [("held-1", "inject")])

    serve(database, scenario)


def test_a_batch_whose_commit_fails_answers_every_request_503_and_writes_nothing(
    database: str,
) -> None:
    """Nine admissions queued behind a held commit form the next batch; when that
    batch's commit is refused as busy, all nine are 503 `database_busy` and none of them
    is stored or journaled; the held one and the next admission are 202."""

    async def scenario(
        session: aiohttp.ClientSession, url: str, service: Service, spy: Spy, server: TestServer
    ) -> None:
        spy.gate, spy.refuse = threading.Event(), {2}
        first = asyncio.ensure_future(post(session, url, envelope("before")))
        await until(spy.holding.is_set)
        nine = [asyncio.ensure_future(post(session, url, envelope(f"b-{n}"))) for n in range(9)]
        await until(lambda: server.app[INTAKE].queued == 9)
        spy.gate.set()
        answers = await asyncio.gather(first, *nine)
        assert (answers[0][0], spy.batches) == (202, 2)
        assert {(s, a["details"]["reason"]) for s, a in answers[1:]} == {(503, "database_busy")}
        assert stored(service) == (["before"], [("before", "inject")])
        assert (await post(session, url, envelope("after")))[0] == 202

    serve(database, scenario)


def test_a_request_whose_data_breaks_the_batch_fails_alone(database: str) -> None:
    """When a batch's commit fails for a reason other than the store (a bug one
    request's data brings out), that request alone is answered 500 and the others of
    its batch are admitted."""

    async def scenario(
        session: aiohttp.ClientSession, url: str, service: Service, spy: Spy, server: TestServer
    ) -> None:
        spy.gate, spy.poison = threading.Event(), "poison"
        first = asyncio.ensure_future(post(session, url, envelope("before")))
        await until(spy.holding.is_set)
        ids = ["ok-1", "poison", "ok-2", "ok-3"]
        rest = [asyncio.ensure_future(post(session, url, envelope(i))) for i in ids]
        await until(lambda: server.app[INTAKE].queued == len(ids))
        spy.gate.set()
        answers = dict(zip(["before", *ids], await asyncio.gather(first, *rest), strict=True))
        assert {i: s for i, (s, _) in answers.items()} == {
            "before": 202, "ok-1": 202, "poison": 500, "ok-2": 202, "ok-3": 202
        }  # fmt: skip
        assert answers["poison"][1] == {"error": "internal_error"}
        events, admitted = stored(service)
        assert sorted(events) == ["before", "ok-1", "ok-2", "ok-3"]
        assert sorted(admitted) == [(i, "inject") for i in sorted(events)]

    serve(database, scenario)


def test_sqlite_syncs_every_commit_to_disk(tmp_path: Path) -> None:
    """The SQLite store's writer commits with `synchronous = FULL`, so an admission
    answered 202 survives an operating-system crash or a power loss, not only a crash
    of the process (docs/guarantees.md)."""
    store = SqliteStore(tmp_path / "e.db")
    try:
        assert store._writer.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        store.close()
