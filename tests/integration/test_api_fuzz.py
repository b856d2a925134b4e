"""Every route that parses a body, fuzzed over a real in-process aiohttp server on
loopback (make_app over tests/data/api and a real SQLite file): odd bodies answer a 4xx
in the API's error shape or a success, never a 500; stored events stay readable."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.api import signing
from engine.api.app import make_app
from engine.api.settings import Settings, parse_secrets, parse_tokens
from engine.bootstrap import open_service
from engine.loading import Paths

API_TREE = Path(__file__).resolve().parent.parent / "data" / "api"
SECRET = b"fuzz-secret"
TOKEN = "fuzz-token"
ROUTES = [
    "/events",
    "/inject",
    "/github",
    "/github/replay",
    "/proposals/p-1/approve",
    "/proposals/p-1/reject",
    "/runs/r-1/cancel",
    "/schedules/nightly/pause",
    "/schedules/nightly/resume",
    "/findings/f-1/promote",
    "/findings/f-1/dismiss",
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=20,
)
bodies = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.integers(min_value=0, max_value=5000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(min_value=30, max_value=400).map(
        lambda n: json.dumps(
            {
                "eventId": f"deep-{n}-{time.time_ns()}",
                "type": "api.work.requested",
                "source": "manual",
                "occurredAt": "2026-11-30T09:00:00Z",
                "payload": {"repo": "alpha", "x": json.loads("[" * n + "]" * n)},
            }
        ).encode()
    ),
    st.sampled_from(
        [
            b'{"eventId":"y0","type":"api.work.requested","source":"manual",'
            b'"occurredAt":"0000-01-01T00:00:00Z"}',
            b'{"eventId":"y1","type":"api.work.requested","source":"manual",'
            b'"occurredAt":"0001-01-01T00:00:00+01:00"}',
            b'{"eventId":"y2","type":"api.work.requested","source":"manual",'
            b'"occurredAt":"9999-12-31T23:59:59-23:59","payload":{"repo":"a"}}',
            b"1e400",
            b'"\\ud800"',
            b'{"note":"\\u0000"}',
            b"\xff\xfe\x00",
        ]
    ),
)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, TestClient[Any, Any]]]:
    """A real loopback server running make_app, and a client for it, on one loop."""
    loop = asyncio.new_event_loop()
    service = open_service(
        str(tmp_path_factory.mktemp("fuzz") / "e.db"),
        Paths(API_TREE / "loops", API_TREE / "registry", API_TREE / "config"),
    )
    config = Settings(
        event_secret=SECRET,
        github_secrets=parse_secrets("gh"),
        operators=parse_tokens(f"alice:{TOKEN}", "test"),
        worker=False,
    )

    async def start() -> TestClient[Any, Any]:
        started: TestClient[Any, Any] = TestClient(TestServer(make_app(service, config)))
        await started.start_server()
        return started

    test_client = loop.run_until_complete(start())
    yield loop, test_client
    loop.run_until_complete(test_client.close())
    loop.close()


def headers_for(route: str, body: bytes) -> dict[str, str]:
    if route == "/events":
        stamp = str(int(time.time()))
        return {
            signing.TIMESTAMP_HEADER: stamp,
            signing.SIGNATURE_HEADER: signing.sign(SECRET, stamp, body),
        }
    if route.startswith("/github"):
        from engine.intake.github import sign

        return {
            "X-GitHub-Event": "pull_request",
            "X-GitHub-Delivery": "d-1",
            "X-Hub-Signature-256": sign(b"gh", body),
        }
    return {"Authorization": f"Bearer {TOKEN}"}


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.sampled_from(ROUTES), bodies)
def test_no_body_on_any_route_is_a_500(client: Any, route: str, body: bytes) -> None:
    """Random bytes, random JSON, deep nesting, huge numbers, non-UTF-8 and out-of-range
    instants on every body-parsing route: a 2xx, or a 4xx with `error` and `message`."""
    loop, http = client

    async def post() -> tuple[int, Any]:
        async with http.post(route, data=body, headers=headers_for(route, body)) as answer:
            return answer.status, await answer.json()

    status, answer = loop.run_until_complete(post())
    assert status < 500, (route, body[:80], answer)
    if status >= 400:
        assert answer["error"] and answer["message"], answer


def test_stored_events_stay_readable(client: Any) -> None:
    """After the fuzzing, `GET /events` (every stored payload serialised) is a 200."""
    loop, http = client

    async def get() -> int:
        async with http.get(
            "/events?limit=1000", headers={"Authorization": f"Bearer {TOKEN}"}
        ) as answer:
            await answer.json()
            return answer.status

    assert loop.run_until_complete(get()) == 200
