"""Work items over HTTP (docs/work.md#over-http): the real application on a loopback
port over a real SQLite file and a real PostgreSQL database. Existing work first, the
controller's lease claimed by the principal its own token proves (never a name in the
body), terminal work that refuses every move, the journal naming each actor, and every
answer checked against the OpenAPI document the application serves."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from conftest import API_TREE, NO_CONFIG
from loopback import served
from schemathesis.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from engine.api.app import make_app
from engine.api.settings import Settings, parse_tokens
from engine.bootstrap import open_service
from engine.loading import Paths
from engine.service import Service

ALICE, AGENT, OTHER = "alice-token", "agent-token", "other-agent-token"
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class Api:
    service: Service
    url: str

    def call(self, method: str, path: str, body: Any = None, token: str | None = ALICE) -> Any:
        """(status, JSON answer) of one request."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data, method=method)
        request.add_header("Content-Type", "application/json")
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with _NO_PROXY.open(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def journal(self, work_id: str) -> list[tuple[str, str]]:
        _, page = self.call("GET", f"/journal?entityId={work_id}&limit=1000")
        return [(e["action"], e["actor"]) for e in page["entries"]]


@pytest.fixture
def api(database: str) -> Iterator[Api]:
    service = open_service(database, Paths(API_TREE / "loops", API_TREE / "registry", NO_CONFIG))
    settings = Settings(
        worker=False,
        pump_seconds=0.1,
        operators=parse_tokens(f"alice:{ALICE}", "test"),
        controllers=parse_tokens(f"agent:{AGENT},other:{OTHER}", "test"),
    )
    try:
        with served(make_app(service, settings)) as url:
            yield Api(service, url)
    finally:
        service.rt.store.close()


def opened(api: Api, key: str = "repair-42", **extra: Any) -> dict[str, Any]:
    body = {"semanticKey": key, "title": "Repair the flaky test", **extra}
    status, answer = api.call("POST", "/work", body)
    assert status in (200, 201), answer
    return answer["work"]  # type: ignore[no-any-return]


def test_opening_a_key_twice_answers_the_item_that_holds_it(api: Api) -> None:
    """201 with a new item, then 200 with that same item (`created: false`, journaled
    `existing_work`); once it is completed, the key opens a new item."""
    body = {"semanticKey": "repair-42", "title": "Repair it", "summary": "see the CI log"}
    first = api.call("POST", "/work", {**body, "links": ["https://ci.example/1"]})
    again = api.call("POST", "/work", {**body, "title": "Another title"})
    assert first[0] == 201 and first[1]["created"] is True
    assert again[0] == 200 and again[1] == {"work": first[1]["work"], "created": False}
    work = first[1]["work"]
    assert work["state"] == "open" and work["createdBy"] == "operator:alice"
    assert work["context"] == {"summary": "see the CI log", "links": ["https://ci.example/1"]}
    assert api.journal(work["workId"]) == [
        ("opened", "operator:alice"),
        ("existing_work", "operator:alice"),
    ]
    assert api.call("POST", f"/work/{work['workId']}/complete", {})[0] == 200
    status, fresh = api.call("POST", "/work", body)
    assert status == 201 and fresh["work"]["workId"] != work["workId"]


def test_a_controller_claims_the_lease_with_its_own_token(api: Api) -> None:
    """`continue` makes the token's principal the lease owner (no body can name
    another); a second controller is refused while that lease is live; the owner
    renews it and completes the work, which drops the lease."""
    work = opened(api)
    path = f"/work/{work['workId']}"
    status, claimed = api.call("POST", f"{path}/continue", {"session": "s-1"}, token=AGENT)
    assert status == 200, claimed
    lease = claimed["work"]["lease"]
    assert claimed["work"]["state"] == "active"
    assert (lease["owner"], lease["session"]) == ("controller:agent", "s-1")
    status, refused = api.call("POST", f"{path}/continue", {"session": "s-9"}, token=OTHER)
    assert (status, refused["details"]["reason"]) == (409, "lease_held")
    forged = {"session": "s-2", "owner": "controller:other"}
    assert api.call("POST", f"{path}/continue", forged, token=AGENT)[0] == 400
    status, renewed = api.call(
        "POST", f"{path}/continue", {"session": "s-2", "ttl": 60}, token=AGENT
    )
    assert status == 200 and renewed["work"]["lease"]["session"] == "s-2"
    status, done = api.call("POST", f"{path}/complete", {"note": "merged"}, token=AGENT)
    assert status == 200 and done["work"]["state"] == "completed"
    assert done["work"]["lease"] == {"owner": None, "session": None, "expiresAt": None}
    assert api.journal(work["workId"]) == [
        ("opened", "operator:alice"),
        ("continued", "controller:agent"),
        ("continued", "controller:agent"),
        ("completed", "controller:agent"),
    ]


def test_terminal_work_refuses_every_move(api: Api) -> None:
    """Cancelled work cannot be continued, completed, blocked or reopened (409
    `illegal_transition`), and nothing is journaled for the refusals."""
    work = opened(api)
    path = f"/work/{work['workId']}"
    assert api.call("POST", f"{path}/cancel", {"note": "not needed"})[0] == 200
    for move, token in (("continue", AGENT), ("complete", ALICE), ("block", ALICE)):
        body = {"session": "s"} if move == "continue" else {}
        status, refused = api.call("POST", f"{path}/{move}", body, token=token)
        assert (status, refused["details"]["reason"]) == (409, "illegal_transition"), move
    assert api.call("POST", f"{path}/reopen", {})[0] == 409
    assert api.journal(work["workId"]) == [
        ("opened", "operator:alice"),
        ("cancelled", "operator:alice"),
    ]


def test_who_may_call_what(api: Api) -> None:
    """A controller's token reads, continues, blocks and completes work; it cannot
    open, list, reopen or cancel it (401), and no token is refused everywhere."""
    work = opened(api)
    path = f"/work/{work['workId']}"
    assert api.call("GET", path, token=AGENT)[0] == 200
    assert api.call("POST", "/work", {"semanticKey": "k", "title": "t"}, token=AGENT)[0] == 401
    assert api.call("GET", "/work", token=AGENT)[0] == 401
    assert api.call("POST", f"{path}/cancel", {}, token=AGENT)[0] == 401
    assert api.call("POST", f"{path}/block", {}, token=AGENT)[0] == 200
    assert api.call("POST", f"{path}/reopen", {}, token=AGENT)[0] == 401
    for method, route in (("GET", path), ("POST", f"{path}/continue"), ("GET", "/work")):
        assert api.call(method, route, {} if method == "POST" else None, token=None)[0] == 401
    assert api.call("GET", "/work/work-nope")[1]["details"]["reason"] == "no_work"


def test_bad_requests_are_refused_with_a_reason_and_change_nothing(api: Api) -> None:
    """A blank key, an unknown field, a context beyond 64 KB, a ttl out of range: 4xx
    with a reason, and no item."""
    too_big = {"semanticKey": "k", "title": "t", "summary": "x" * (64 * 1024)}
    for body, status, reason in (
        ({"semanticKey": "", "title": "t"}, 400, "invalid_body"),
        ({"semanticKey": "k", "title": "t", "state": "completed"}, 400, "invalid_body"),
        (too_big, 413, "context_too_large"),
    ):
        answer = api.call("POST", "/work", body)
        assert (answer[0], answer[1]["details"]["reason"]) == (status, reason), body
    assert api.call("GET", "/work")[1] == {"work": [], "next": None}
    work = opened(api)
    ttl = {"session": "s", "ttl": 7 * 24 * 3600}
    assert api.call("POST", f"/work/{work['workId']}/continue", ttl, token=AGENT)[0] == 400


def test_pages_are_newest_first_and_filtered(api: Api) -> None:
    """GET /work pages newest first with a cursor; `state` and `key` filter."""
    ids = [opened(api, f"key-{n}")["workId"] for n in range(5)]
    api.call("POST", f"/work/{ids[1]}/cancel", {})
    seen, cursor = [], ""
    while True:
        _, page = api.call("GET", f"/work?limit=2{cursor}")
        seen += [w["workId"] for w in page["work"]]
        if page["next"] is None:
            break
        cursor = f"&before={page['next']}"
    assert seen == ids[::-1]
    _, open_only = api.call("GET", "/work?state=open")
    assert [w["workId"] for w in open_only["work"]] == [ids[4], ids[3], ids[2], ids[0]]
    _, by_key = api.call("GET", "/work?key=key-3")
    assert [w["workId"] for w in by_key["work"]] == [ids[3]]
    assert api.call("GET", "/work?before=garbage")[1]["details"]["reason"] == "bad_cursor"


CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance]


def test_every_work_answer_is_what_the_document_says(api: Api) -> None:
    """Each work route's answers (success and refusal) match the OpenAPI document the
    application serves."""
    document = schemathesis.openapi.from_url(f"{api.url}/openapi.json")
    headers = {"Authorization": f"Bearer {ALICE}"}

    def check(method: str, path: str, body: Any = None, **params: str) -> Any:
        operation = document[path][method]
        kw: dict[str, Any] = {"headers": headers}
        if body is not None:
            kw.update(body=body, media_type="application/json")
        if params:
            kw["path_parameters"] = params
        case = operation.Case(**kw)
        response = case.call(base_url=api.url, timeout=30)
        case.validate_response(response, checks=CHECKS)
        return response.json()

    made = check("POST", "/work", {"semanticKey": "k", "title": "t", "links": ["a"]})
    check("POST", "/work", {"semanticKey": "k", "title": "t"})
    work_id = made["work"]["workId"]
    check("GET", "/work")
    check("GET", "/work/{id}", id=work_id)
    check("GET", "/work/{id}", id="work-none")
    check("POST", "/work/{id}/continue", {"session": "s"}, id=work_id)
    check("POST", "/work/{id}/block", {}, id=work_id)
    check("POST", "/work/{id}/reopen", {}, id=work_id)
    check("POST", "/work/{id}/complete", {}, id=work_id)
    check("POST", "/work/{id}/cancel", {}, id=work_id)
