"""The HTTP API against a real `engine serve` subprocess (tests/data/api, a real SQLite
file): intake and its refusals, operator routes, and the actors the journal records."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from engine.api import signing
from engine.api.auth import is_loopback
from engine.api.errors import error_middleware
from engine.api.settings import SettingsError, parse_tokens
from engine.bootstrap import open_service
from engine.core.envelope import Envelope
from engine.errors import Forbidden, Unauthorized
from engine.loading import Paths

API_TREE = Path(__file__).resolve().parent.parent / "data" / "api"
_ids = itertools.count(1)


def envelope(
    type: str = "api.work.requested", source: str = "manual", **payload: Any
) -> dict[str, Any]:
    return {
        "eventId": f"t-{time.time_ns()}-{next(_ids)}",
        "type": type,
        "source": source,
        "occurredAt": "2026-11-30T09:00:00Z",
        "payload": payload or {"repo": "alpha"},
    }


def signed(secret: str, body: bytes, at: float | None = None) -> dict[str, str]:
    """The signing recipe of docs/api.md, written out independently of the engine."""
    stamp = str(int(time.time() if at is None else at))
    mac = hmac.new(secret.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return {"X-Engine-Timestamp": stamp, "X-Engine-Signature": f"sha256={mac}"}


def post_signed(serve: Any, doc: Any, **kw: Any) -> tuple[int, Any]:
    body = json.dumps(doc).encode()
    secret = kw.pop("secret", serve.env.get("ENGINE_EVENT_SECRET", "none"))
    return serve.request("POST", "/events", raw=body, headers=signed(secret, body, **kw))


def nothing_written(serve: Any, event_id: str) -> bool:
    token = serve.token("alice")
    status, _ = serve.request("GET", f"/events/{event_id}", token=token)
    _, page = serve.request("GET", f"/journal?entityId={event_id}", token=token)
    return status == 404 and page["entries"] == []


def journal_of(serve: Any, *entity_ids: str) -> list[dict[str, Any]]:
    _, page = serve.request("GET", "/journal?limit=1000", token=serve.token("alice"))
    return [e for e in page["entries"] if e["entityId"] in entity_ids]


def proposal_for(serve: Any, event_id: str) -> dict[str, Any]:
    answer = serve.wait_for(
        "/proposals?state=all&limit=1000",
        lambda a: any(p["eventId"] == event_id for p in a["proposals"]),
        serve.token("alice"),
    )
    return next(p for p in answer["proposals"] if p["eventId"] == event_id)


def test_status_is_open_and_carries_no_secret(api_serve: Any) -> None:
    """GET /status answers without a token, with the version and digest and no secret."""
    status, answer = api_serve.request("GET", "/status")
    assert status == 200 and answer["ok"] is True
    assert answer["version"] and answer["rulesDigest"].startswith("sha256:")
    text = json.dumps(answer)
    assert api_serve.env["ENGINE_EVENT_SECRET"] not in text and "alice-token" not in text


def test_signed_event_is_admitted_with_bridge_as_actor(api_serve: Any) -> None:
    """A correctly signed envelope is admitted (202) and the journal names `bridge`, the
    actor signed intake proves, not the envelope's source."""
    doc = envelope(source="ci")
    status, answer = post_signed(api_serve, doc)
    assert (status, answer) == (
        202,
        {"admitted": True, "duplicate": False, "eventId": doc["eventId"]},
    )
    [entry] = [e for e in journal_of(api_serve, doc["eventId"]) if e["action"] == "admitted"]
    assert entry["actor"] == "bridge"


def test_duplicate_admission_answers_duplicate_and_writes_nothing(api_serve: Any) -> None:
    """A second admission of one eventId answers duplicate:true (200) and writes nothing."""
    doc = envelope()
    token = api_serve.token("bob")
    assert api_serve.request("POST", "/inject", doc)[0] == 202
    proposal_for(api_serve, doc["eventId"])  # planned: nothing else will write for it
    _, first = api_serve.request("GET", f"/events/{doc['eventId']}", token=token)
    before = journal_of(api_serve, doc["eventId"])
    status, answer = api_serve.request("POST", "/inject", {**doc, "payload": {"repo": "other"}})
    assert (status, answer["duplicate"], answer["admitted"]) == (200, True, False)
    _, again = api_serve.request("GET", f"/events/{doc['eventId']}", token=token)
    assert again == first and journal_of(api_serve, doc["eventId"]) == before
    assert [e["action"] for e in before if e["entity"] == "event"] == ["admitted"]


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("missing", "missing_signature"),
        ("wrong_secret", "bad_signature"),
        ("tampered", "bad_signature"),
        ("stale_past", "stale_timestamp"),
        ("stale_future", "stale_timestamp"),
    ],
)
def test_bad_or_stale_signatures_are_401_and_admit_nothing(
    api_serve: Any, case: str, reason: str
) -> None:
    """A missing, wrong or tampered signature, or a timestamp over 300 s off, is a 401."""
    doc = envelope()
    body = json.dumps(doc).encode()
    secret = api_serve.env["ENGINE_EVENT_SECRET"]
    headers = {
        "missing": {},
        "wrong_secret": signed("not-the-secret", body),
        "tampered": signed(secret, body + b" "),
        "stale_past": signed(secret, body, time.time() - 301),
        "stale_future": signed(secret, body, time.time() + 301),
    }[case]
    status, answer = api_serve.request("POST", "/events", raw=body, headers=headers)
    assert status == 401 and answer["error"] == "unauthorized" and answer["message"]
    assert answer["details"]["reason"] == reason
    assert nothing_written(api_serve, doc["eventId"])


def test_inject_records_inject_or_the_operator_of_the_token(api_serve: Any) -> None:
    """/inject from loopback admits with actor `inject`, or `operator:<name>` when the
    request carries that operator's token (with or without X-Engine-Operator naming them)."""
    plain, named, header = envelope(), envelope(), envelope()
    assert api_serve.request("POST", "/inject", plain)[0] == 202
    bob = api_serve.token("bob")
    assert api_serve.request("POST", "/inject", named, token=bob)[0] == 202
    by_header = {"X-Engine-Operator": "bob"}
    assert api_serve.request("POST", "/inject", header, token=bob, headers=by_header)[0] == 202
    token = api_serve.token("alice")
    actors = [
        api_serve.request("GET", f"/events/{doc['eventId']}", token=token)[1]["event"]["admittedBy"]
        for doc in (plain, named, header)
    ]
    assert actors == ["inject", "operator:bob", "operator:bob"]


@pytest.mark.parametrize(
    ("path", "token", "status", "reason"),
    [
        ("/inject", None, 401, "missing_token"),
        ("/inject", "bob", 403, "operator_mismatch"),
        ("/inject", "wrong", 401, "bad_token"),
        ("/github/replay", None, 401, "missing_token"),
        ("/github/replay", "bob", 403, "operator_mismatch"),
    ],
)
def test_naming_an_operator_takes_their_token(
    api_serve: Any, path: str, token: str | None, status: int, reason: str
) -> None:
    """X-Engine-Operator alone no longer makes any loopback process an operator: without
    the named operator's token it is refused and nothing is admitted."""
    doc = envelope()
    bearer = {"bob": api_serve.token("bob"), "wrong": "not-a-token", None: None}[token]
    headers = {"X-Engine-Operator": "alice"}
    if path == "/github/replay":
        headers |= {"X-GitHub-Event": "ping", "X-GitHub-Delivery": f"d-{time.time_ns()}"}
    found, answer = api_serve.request("POST", path, doc, token=bearer, headers=headers)
    assert (found, answer["details"]["reason"]) == (status, reason)
    assert nothing_written(api_serve, doc["eventId"])


@pytest.mark.parametrize("name", ["schedule", "system", "chain", "github", "worker", "inject"])
def test_a_reserved_actor_name_is_no_operator(api_serve: Any, name: str) -> None:
    """X-Engine-Operator naming a reserved actor is a 400 before anything else."""
    doc = envelope()
    headers = {"X-Engine-Operator": name}
    status, answer = api_serve.request("POST", "/inject", doc, headers=headers)
    assert (status, answer["details"]["reason"]) == (400, "bad_operator_name")
    assert nothing_written(api_serve, doc["eventId"])


@pytest.mark.parametrize("claimed", ["schedule", "github", "system", "chain", "inject"])
def test_a_signed_envelope_is_admitted_as_bridge_whatever_its_source(
    api_serve: Any, claimed: str
) -> None:
    """POST /events takes its actor from the signature (`bridge`), never from the
    envelope's `source`: no signed envelope is journaled as the scheduler or GitHub."""
    doc = envelope(source=claimed)
    assert post_signed(api_serve, doc)[0] == 202
    token = api_serve.token("alice")
    _, seen = api_serve.request("GET", f"/events/{doc['eventId']}", token=token)
    assert (seen["event"]["admittedBy"], seen["event"]["source"]) == ("bridge", claimed)
    admitted = [e for e in journal_of(api_serve, doc["eventId"]) if e["action"] == "admitted"]
    assert [e["actor"] for e in admitted] == ["bridge"]


def test_a_signed_batch_may_mix_sources(api_serve: Any) -> None:
    """The actor of a signed batch is `bridge` for every envelope, so a batch may carry
    several sources (they are data, not who admitted it)."""
    docs = [envelope(source="manual"), envelope(source="ci")]
    status, answer = post_signed(api_serve, docs)
    assert status == 202 and [a["admitted"] for a in answer] == [True, True]


def test_event_ids_with_slashes_and_colons_are_served(api_serve: Any) -> None:
    """GET /events/{id} finds an event whose id holds "/" and ":" (allowed in eventIds)."""
    doc = {**envelope(), "eventId": f"merge-pr:alpha/{time.time_ns()}:abc123"}
    assert api_serve.request("POST", "/inject", doc)[0] == 202
    status, answer = api_serve.request(
        "GET", f"/events/{doc['eventId']}", token=api_serve.token("alice")
    )
    assert status == 200 and answer["event"]["eventId"] == doc["eventId"]


def test_inject_refuses_a_malformed_operator_name(api_serve: Any) -> None:
    """An X-Engine-Operator that is not a valid operator name is a 400; nothing is admitted."""
    doc = envelope()
    status, answer = api_serve.request(
        "POST", "/inject", doc, headers={"X-Engine-Operator": "Not A Name"}
    )
    assert status == 400 and answer["details"]["reason"] == "bad_operator_name"
    assert nothing_written(api_serve, doc["eventId"])


def test_body_over_the_limit_is_413(api_serve: Any) -> None:
    """A body over 1 MiB is refused with 413 and the limit, before anything is parsed."""
    doc = envelope(repo="a" * (1024 * 1024))
    status, answer = api_serve.request("POST", "/inject", doc)
    assert status == 413 and answer["details"] == {"reason": "body_too_large", "limit": 1048576}
    assert "1048576 bytes" in answer["message"]
    assert nothing_written(api_serve, doc["eventId"])


def test_invalid_json_is_400(api_serve: Any) -> None:
    """A body that is not JSON is a 400 naming the line and column."""
    status, answer = api_serve.request("POST", "/inject", raw=b'{"eventId": ')
    assert status == 400 and answer["details"]["reason"] == "invalid_json"
    assert "line 1" in answer["message"]


def test_unregistered_type_and_bad_payload_are_422_with_reasons(api_serve: Any) -> None:
    """An unregistered type or a payload outside its schema is a 422 that says why."""
    unknown = envelope(type="api.nothing.requested")
    bad = envelope(repo="Not A Repo")
    status, answer = api_serve.request("POST", "/inject", unknown)
    assert status == 422 and answer["details"]["reason"] == "unregistered_type"
    assert answer["errors"] == ["type: 'api.nothing.requested' is not registered"]
    status, answer = post_signed(api_serve, bad)
    assert status == 422 and answer["details"]["reason"] == "invalid_payload"
    assert any("repo" in line for line in answer["errors"])
    assert nothing_written(api_serve, unknown["eventId"])
    assert nothing_written(api_serve, bad["eventId"])


def test_invalid_envelope_lists_every_reason(api_serve: Any) -> None:
    """An envelope that is not factory.event/v1 is a 422 listing each bad field."""
    doc = {"type": "api.work.requested", "source": "Bad Source", "occurredAt": "2026-11-30T09:00"}
    status, answer = api_serve.request("POST", "/inject", {**doc, "surprise": 1})
    assert status == 422 and answer["details"]["reason"] == "invalid_envelope"
    fields = {line.split(":")[0] for line in answer["errors"]}
    assert fields == {"eventId", "source", "occurredAt", "surprise"}


def test_operator_routes_need_a_known_token(api_serve: Any) -> None:
    """Every operator route answers 401 without a known bearer token, 200 with one."""
    for path in ("/proposals", "/runs", "/events", "/journal", "/proposals/x", "/runs/x"):
        assert api_serve.request("GET", path)[0] == 401
        status, answer = api_serve.request("GET", path, token="alice-token-guess")
        assert status == 401 and answer["details"]["reason"] == "bad_token"
    assert api_serve.request("POST", "/proposals/x/approve", {})[0] == 401
    assert api_serve.request("GET", "/journal", token=api_serve.token("alice"))[0] == 200


def test_watched_proposal_approved_over_http_runs_and_chains(api_serve: Any) -> None:
    """Approving a watched proposal queues a run approved by the token's operator; the
    embedded worker finishes it and its outcome's chained event is admitted."""
    doc = envelope(repo="beta")
    assert api_serve.request("POST", "/inject", doc)[0] == 202
    proposal = proposal_for(api_serve, doc["eventId"])
    assert proposal["state"] == "open" and proposal["definition"] == "work@1"
    path = f"/proposals/{proposal['proposalId']}/approve"
    status, answer = api_serve.request(
        "POST", path, {"note": "ship it"}, token=api_serve.token("bob")
    )
    assert status == 200 and answer["proposal"]["decidedBy"] == "operator:bob"
    assert answer["run"]["approvedBy"] == "operator:bob"
    again, refused = api_serve.request("POST", path, {}, token=api_serve.token("alice"))
    assert again == 409 and refused["error"] == "conflict"
    token = api_serve.token("alice")
    run = api_serve.wait_for(
        f"/runs/{answer['run']['runId']}", lambda a: a["run"]["state"] == "succeeded", token
    )["run"]
    assert run["outcome"] == "DONE"
    chained = api_serve.wait_for(
        "/events?type=api.work.done&limit=1000",
        lambda a: any(e["correlationId"] == doc["eventId"] for e in a["events"]),
        token,
    )
    event = next(e for e in chained["events"] if e["correlationId"] == doc["eventId"])
    assert event["admittedBy"] == "chain" and event["payload"] == {"repo": "beta"}
    approvals = [
        e for e in journal_of(api_serve, proposal["proposalId"]) if e["action"] == "approved"
    ]
    assert [e["actor"] for e in approvals] == ["operator:bob"]
    status, explained = api_serve.request("GET", f"/explain/{event['eventId']}", token=token)
    assert status == 200 and explained["cause"]["kind"] == "chain"
    assert explained["cause"]["from"]["event"]["eventId"] == doc["eventId"]
    assert api_serve.request("GET", f"/explain/{doc['eventId']}")[0] == 401


def test_reject_needs_a_reason_and_names_the_operator(api_serve: Any) -> None:
    """Rejecting without a reason is a 400; with one, the proposal is rejected by the operator."""
    doc = envelope()
    api_serve.request("POST", "/inject", doc)
    proposal = proposal_for(api_serve, doc["eventId"])
    path = f"/proposals/{proposal['proposalId']}/reject"
    token = api_serve.token("alice")
    assert api_serve.request("POST", path, {}, token=token)[0] == 400
    status, answer = api_serve.request("POST", path, {"reason": "not now"}, token=token)
    assert status == 200 and answer["proposal"]["state"] == "rejected"
    assert (answer["proposal"]["decidedBy"], answer["proposal"]["note"]) == (
        "operator:alice",
        "not now",
    )


def test_unknown_ids_and_routes_are_404(api_serve: Any) -> None:
    """Unknown event, run and proposal ids, and unknown paths, answer a JSON 404."""
    token = api_serve.token("alice")
    for path in ("/events/nope", "/runs/nope", "/proposals/nope"):
        status, answer = api_serve.request("GET", path, token=token)
        assert status == 404 and answer["error"] == "not_found"
    assert api_serve.request("POST", "/proposals/nope/approve", {}, token=token)[0] == 404
    assert api_serve.request("GET", "/no/such/route")[0] == 404


def test_bad_query_parameters_are_400(api_serve: Any) -> None:
    """A limit out of range or an unknown state is a 400 naming the parameter."""
    token = api_serve.token("alice")
    for path in ("/runs?limit=0", "/proposals?state=pending", "/journal?after=-1"):
        status, answer = api_serve.request("GET", path, token=token)
        assert status == 400 and answer["details"]["reason"] == "bad_query"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/runs?limit=5&loops=nightly"),
        ("GET", "/events/nope?verbose=1"),
        ("GET", "/status?pileup=3&x="),
        ("GET", "/healthz?probe"),
        ("POST", "/proposals/nope/approve?force=yes"),
        ("POST", "/inject?dry=1"),
    ],
)
def test_unknown_query_parameters_are_400_naming_them(
    api_serve: Any, method: str, path: str
) -> None:
    """A query parameter a JSON route does not take is refused before anything is read or
    written: a 400 `bad_query` naming it and listing the ones the route takes."""
    token = api_serve.token("alice")
    body = envelope() if path.startswith("/inject") else ({} if method == "POST" else None)
    status, answer = api_serve.request(method, path, body, token=token)
    unknown = path.rsplit("&", 1)[-1].split("?")[-1].split("=")[0]
    assert status == 400 and answer["details"]["reason"] == "bad_query", answer
    assert answer["details"]["parameter"] == unknown
    assert f"'{unknown}'" in answer["message"]
    if path.startswith("/runs"):
        assert answer["details"]["accepted"] == ["loop", "state", "limit", "before"]
    if path.startswith("/inject"):
        assert nothing_written(api_serve, body["eventId"])


@pytest.mark.parametrize(
    "since", ["0001-01-01T00:00:00%2B14:00", "9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00Z"]
)
def test_a_since_at_the_ends_of_time_is_a_400_bad_time(api_serve: Any, since: str) -> None:
    """`?since=` before 1970 or from 9000 on (in UTC past year 1 or 9999 at the extremes)
    is a 400 `bad_time` naming it, not a 500 from moving it to UTC."""
    path = f"/schedules/any-loop/slots?since={since}"
    status, answer = api_serve.request("GET", path, token=api_serve.token("alice"))
    assert status == 400 and answer["details"] == {"reason": "bad_time"}, answer
    assert "not between 1970 and 9000" in answer["message"]


def test_a_query_parameter_given_twice_is_400(api_serve: Any) -> None:
    """`?limit=1&limit=2` is ambiguous: refused rather than one of them picked."""
    status, answer = api_serve.request("GET", "/runs?limit=1&limit=2", token=api_serve.token("bob"))
    assert status == 400 and answer["details"] == {"reason": "bad_query", "parameter": "limit"}


def test_auto_route_never_names_an_operator(api_serve: Any) -> None:
    """An auto-approved route runs with `system` in its proposal, run and journal records,
    and no record names an operator."""
    doc = envelope(type="api.check.requested", source="schedule")
    assert post_signed(api_serve, doc)[0] == 202
    proposal = proposal_for(api_serve, doc["eventId"])
    token = api_serve.token("alice")
    runs = api_serve.wait_for(
        "/runs?limit=1000",
        lambda a: any(
            r["eventId"] == doc["eventId"] and r["state"] == "succeeded" for r in a["runs"]
        ),
        token,
    )
    run = next(r for r in runs["runs"] if r["eventId"] == doc["eventId"])
    assert (proposal["decidedBy"], run["approvedBy"]) == ("system", "system")
    records = journal_of(api_serve, doc["eventId"], proposal["proposalId"], run["runId"])
    actors = {e["actor"] for e in records}
    assert {"bridge", "system"} <= actors
    assert all(a in {"bridge", "system", "chain"} or a.startswith("worker:") for a in actors)


def test_closed_runtime_refuses_signed_events_and_operator_routes(serve_factory: Any) -> None:
    """Without ENGINE_EVENT_SECRET and ENGINE_OPERATOR_TOKEN, /events and the operator
    routes answer 401 (fail closed) and nothing is admitted (here with --no-worker)."""
    serve = serve_factory(API_TREE, {}, "--no-worker")
    doc = envelope()
    status, answer = post_signed(serve, doc, secret="anything")
    assert status == 401 and answer["details"]["reason"] == "no_secret"
    status, answer = serve.request("GET", "/proposals", token="anything")
    assert status == 401 and answer["details"]["reason"] == "no_token_configured"
    _, status = serve.request("GET", "/status")
    assert status["unplannedEvents"] == 0 and status["runs"] == {}
    assert (status["signedIntake"], status["operatorRoutes"], status["worker"]) == (
        False,
        False,
        False,
    )


def test_sigterm_stops_serve_promptly_with_exit_0(serve_factory: Any) -> None:
    """SIGTERM drains the loop and the worker, closes the store and exits 0 within seconds."""
    serve = serve_factory()
    serve.request("POST", "/inject", envelope(type="api.check.requested"))
    started = time.monotonic()
    assert serve.stop(signal.SIGTERM) == 0
    assert time.monotonic() - started < 5
    assert "stopped" in serve.log.read_text()


# ---- pure pieces (no server) ----------------------------------------------------------


def test_peer_check_accepts_only_loopback() -> None:
    """/inject's peer check accepts 127.0.0.0/8 and ::1 (also IPv4-mapped), nothing else."""
    for peer in ("127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"):
        assert is_loopback(peer), peer
    for peer in (None, "", "10.0.0.1", "192.168.1.5", "::ffff:10.0.0.1", "fe80::1", "junk"):
        assert not is_loopback(peer), peer


def test_signature_recipe_round_trips() -> None:
    """sign() matches the documented recipe and verify() accepts it within the window only."""
    body, secret = b'{"a":1}', b"s3cret"
    expected = "sha256=" + hmac.new(secret, b"1000." + body, hashlib.sha256).hexdigest()
    assert signing.sign(secret, 1000, body) == expected
    signing.verify(secret, "1000", expected, body, now=1300, window=300)
    with pytest.raises(Unauthorized):
        signing.verify(secret, "1000", expected, body, now=1301, window=300)
    with pytest.raises(Unauthorized):
        signing.verify(secret, "1e3", expected, body, now=1000, window=300)


def test_operator_token_list_is_parsed_and_checked() -> None:
    """ENGINE_OPERATOR_TOKEN pairs name operators; a malformed entry is a SettingsError."""
    tokens = parse_tokens("alice:s3cret, bob:t0ken", "ENV")
    assert (tokens.identify("t0ken"), tokens.identify("s3cret"), tokens.identify("x")) == (
        "bob",
        "alice",
        None,
    )
    for bad in ("alice", "alice:", "Alice:x", "a:x,b:x"):
        with pytest.raises(SettingsError):
            parse_tokens(bad, "ENV")


@pytest.mark.parametrize(
    "name", ["schedule", "system", "chain", "github", "worker", "inject", "bridge"]
)
def test_a_reserved_actor_name_is_no_operator_token_name(name: str) -> None:
    """ENGINE_OPERATOR_TOKEN cannot name an operator after a reserved actor: the runtime
    refuses to start rather than journal `operator:schedule`; the secret is never echoed."""
    with pytest.raises(SettingsError) as caught:
        parse_tokens(f"alice:a1,{name}:s3cret-{name}", "ENV")
    assert "reserved actor name" in caught.value.message
    assert "s3cret" not in caught.value.message


def test_unexpected_error_is_a_json_500_without_traceback() -> None:
    """An unexpected exception in a handler answers {"error": "internal_error"} only."""

    async def boom(request: web.Request) -> web.Response:
        raise RuntimeError("secret internals")

    async def scenario() -> tuple[int, Any]:
        app = web.Application(middlewares=[error_middleware])
        app.router.add_get("/boom", boom)
        async with TestClient(TestServer(app)) as client:
            response = await client.get("/boom")
            return response.status, await response.json()

    assert asyncio.run(scenario()) == (500, {"error": "internal_error"})


def test_non_human_approval_of_human_only_proposal_changes_nothing(tmp_path: Path) -> None:
    """Service.approve(id, "schedule") on a human-only proposal raises Forbidden and
    leaves the proposal open, no run queued and the journal as it was."""
    service = open_service(
        str(tmp_path / "e.db"),
        Paths(API_TREE / "loops", API_TREE / "registry", API_TREE / "config"),
    )
    try:
        service.admit(Envelope.model_validate(envelope(type="api.ship.requested")), "inject")
        service.pump()
        [proposal] = service.proposals()
        assert proposal.human_only
        journal = service.journal(limit=1000)
        with pytest.raises(Forbidden):
            service.approve(proposal.proposal_id, "schedule")
        assert service.proposal(proposal.proposal_id).state == "open"
        assert service.runs() == [] and service.journal(limit=1000) == journal
    finally:
        service.rt.store.close()


def test_a_proposals_review_says_what_will_run_and_why(api_serve: Any) -> None:
    """GET /proposals/{id}/review (an operator's) gives the payload, the deciding rule's
    lines and the definition that will run; a bad lastRuns is a 400, an unknown id 404,
    no token 401."""
    doc = envelope(repo="gamma")
    assert api_serve.request("POST", "/inject", doc)[0] == 202
    proposal_id = proposal_for(api_serve, doc["eventId"])["proposalId"]
    path = f"/proposals/{proposal_id}/review"
    status, answer = api_serve.request("GET", path + "?lastRuns=2", token=api_serve.token("bob"))
    assert status == 200, answer
    assert answer["event"]["payload"] == {"repo": "gamma"}
    assert answer["definition"]["ref"] == "work@1" and answer["definition"]["mutating"] is True
    assert any("route api.work.requested" in line["text"] for line in answer["rule"]["lines"])
    assert answer["explain"]["event"]["eventId"] == doc["eventId"]
    assert api_serve.request("GET", path + "?lastRuns=101", token="alice-token")[0] == 400
    assert api_serve.request("GET", "/proposals/prop-nope/review", token="alice-token")[0] == 404
    assert api_serve.request("GET", path)[0] == 401


def test_healthz_answers_anyone_with_the_version(api_serve: Any) -> None:
    """GET /healthz is 200 with the version for anyone: no token is asked for."""
    status, answer = api_serve.request("GET", "/healthz")
    assert status == 200 and answer == {"ok": True, "version": answer["version"]}
    assert answer["version"] == api_serve.request("GET", "/status")[1]["version"]
