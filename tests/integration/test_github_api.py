"""POST /github and POST /github/replay against a real `engine serve` on loopback (the
shipped loops/ and registry/, a repos.yaml naming the fixtures' repositories, a real
SQLite file): signatures over the raw bytes, rotation, every answer shape, redelivery,
the 25 MB limit, and `engine github replay` as a subprocess. Deliveries are GitHub's
own examples (tests/data/github-payloads) as they are, or variants derived here."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import http.client
import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from aiohttp.test_utils import make_mocked_request
from conftest import EngineRunner, Serve, launch_serve

from engine.api.routes.github import post_github_replay
from engine.errors import Forbidden

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data" / "github-payloads"  # GitHub's own examples, MIT
SECRETS = ("new-secret", "old-secret")  # ENGINE_GITHUB_WEBHOOK_SECRET=new-secret,old-secret
TOKEN = "tok"  # ENGINE_OPERATOR_TOKEN=alice:tok
MIB = 1024 * 1024


def raw(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(raw(name))
    return data


def config_dir(folder: Path) -> Path:
    """A repos.yaml naming the fixtures' repositories (as their payloads spell them), and
    a report-only one beside them."""
    pull = fixture("pull_request.opened.payload.json")
    run = fixture("workflow_run.completed.payload.json")["repository"]["full_name"]
    folder.mkdir()
    (folder / "repos.yaml").write_text(
        "repos:\n"
        f"  hello-world:\n    github: {pull['repository']['full_name']}\n"
        f"    base: {pull['pull_request']['base']['ref']}\n"
        f"  octo-repo:\n    github: {run}\n    base: master\n"
        f"  octo-docs:\n    github: {run.split('/')[0]}/octo-docs\n    base: master\n"
        "    report_only: true\n"
    )
    return folder


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """One `engine serve` with two GitHub secrets (rotation) for the whole module."""
    workdir = tmp_path_factory.mktemp("github")
    env = {"ENGINE_GITHUB_WEBHOOK_SECRET": ",".join(SECRETS), "ENGINE_OPERATOR_TOKEN": "alice:tok"}
    config = config_dir(workdir / "config")
    started = launch_serve(workdir, ROOT, env, "--config", str(config), "--no-worker")
    yield started
    started.stop()


def signature(secret: str, body: bytes) -> str:
    """GitHub's recipe, written out independently of the engine."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def deliver(
    serve: Serve,
    kind: str,
    body: bytes | dict[str, Any],
    *,
    delivery: str | None = None,
    secret: str = SECRETS[0],
    signed: bytes | None = None,
) -> tuple[int, Any]:
    """POST /github as GitHub does; `signed` signs other bytes than the ones sent."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {
        "X-GitHub-Event": kind,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": signature(secret, data if signed is None else signed),
    }
    return serve.request("POST", "/github", raw=data, headers=headers)


def stored(serve: Serve, event_id: str) -> dict[str, Any] | None:
    status, answer = serve.request("GET", f"/events/{event_id}", token=TOKEN)
    return answer["event"] if status == 200 else None


def kept(serve: Serve, event_id: str) -> dict[str, Any] | None:
    """The delivery kept beside the event, read from the served SQLite file."""
    conn = sqlite3.connect(f"file:{serve.db}?mode=ro", uri=True)
    try:
        conn.row_factory = sqlite3.Row
        row = conn.execute("SELECT * FROM deliveries WHERE event_id = ?", (event_id,)).fetchone()
        return None if row is None else dict(row)
    finally:
        conn.close()


def green_run() -> dict[str, Any]:
    """The completed run with one PR as a successful pull-request workflow."""
    payload = fixture("workflow_run.completed.with-pull-requests.payload.json")
    wr = payload["workflow_run"]
    wr["event"], wr["head_sha"] = "pull_request", wr["pull_requests"][0]["head"]["sha"]
    return payload


def variant(name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    payload = fixture(name)
    change(payload)
    return payload


# ---- signatures ----------------------------------------------------------------------


def test_unsigned_or_badly_signed_deliveries_are_401(serve: Serve) -> None:
    """No signature, a wrong secret, or a signature over re-serialised JSON is 401 (even
    for a body that is not JSON) and writes nothing."""
    body = raw("pull_request.opened.payload.json")
    guid = str(uuid.uuid4())
    headers = {"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": guid}
    status, answer = serve.request("POST", "/github", raw=body, headers=headers)
    assert (status, answer["details"]["reason"]) == (401, "missing_signature")
    status, answer = deliver(serve, "pull_request", body, delivery=guid, secret="wrong")
    assert (status, answer["details"]["reason"]) == (401, "bad_signature")
    resent = json.dumps(json.loads(body)).encode()
    status, answer = deliver(serve, "pull_request", resent, delivery=guid, signed=body)
    assert (status, answer["error"]) == (401, "unauthorized")
    status, answer = deliver(serve, "pull_request", b"{not json", delivery=guid, secret="wrong")
    assert status == 401  # the signature is checked before anything is parsed
    assert stored(serve, guid) is None


def test_runtime_without_a_secret_answers_401(serve_factory: Callable[..., Serve]) -> None:
    """With no ENGINE_GITHUB_WEBHOOK_SECRET every delivery is 401 and nothing is admitted."""
    closed = serve_factory(ROOT, {"ENGINE_OPERATOR_TOKEN": "alice:tok"}, "--no-worker")
    guid = str(uuid.uuid4())
    body = raw("pull_request.opened.payload.json")
    status, answer = deliver(closed, "pull_request", body, delivery=guid)
    assert (status, answer["details"]["reason"]) == (401, "no_secret")
    assert stored(closed, guid) is None


def test_either_rotated_secret_verifies(serve: Serve) -> None:
    """During rotation a delivery signed by the new or by the old secret is admitted."""
    for secret in SECRETS:
        status, answer = deliver(
            serve, "pull_request", raw("pull_request.opened.payload.json"), secret=secret
        )
        assert status == 202 and answer["admitted"] is True


# ---- admitted ------------------------------------------------------------------------


def test_pull_request_is_admitted_and_its_redelivery_is_a_duplicate(serve: Serve) -> None:
    """A signed pull_request delivery is 202 {admitted, eventId = GUID} within GitHub's
    timeout, stored with actor github; redelivering it is 200 duplicate, nothing written."""
    body, guid = raw("pull_request.synchronize.payload.json"), str(uuid.uuid4())
    started = time.monotonic()
    status, answer = deliver(serve, "pull_request", body, delivery=guid)
    assert time.monotonic() - started < 5
    assert (status, answer) == (202, {"admitted": True, "duplicate": False, "eventId": guid})
    event = stored(serve, guid)
    assert event is not None
    assert (event["type"], event["source"], event["subject"]) == (
        "factory.merge.requested",
        "github",
        "hello-world",
    )
    assert (event["payload"], event["admittedBy"]) == ({"repo": "hello-world"}, "github")
    status, answer = deliver(serve, "pull_request", body, delivery=guid)
    assert (status, answer) == (200, {"admitted": False, "duplicate": True, "eventId": guid})


def test_an_admitted_delivery_is_kept_beside_its_event(serve: Serve) -> None:
    """The delivery that admitted an event is kept with it, in the same commit: its
    GUID, kind, body as the very text GitHub sent, the `emit` line and when it was
    received (the event's occurredAt); a redelivery under another GUID keeps the first."""
    payload = green_run()
    payload["workflow_run"]["pull_requests"][0]["number"] = 3  # not the other tests' PR
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    status, answer = deliver(serve, "workflow_run", payload, delivery=first)
    assert status == 202
    deliver(serve, "workflow_run", payload, delivery=second)
    event = stored(serve, answer["eventId"])
    row = kept(serve, answer["eventId"])
    assert event is not None and row is not None
    text = json.dumps(payload)
    assert (row["delivery_id"], row["kind"], row["body"]) == (first, "workflow_run", text)
    assert row["rule"] == "loops/github.rules:36:8"
    assert row["received_at"] == event["occurredAt"]


def test_green_run_admits_one_scoped_merge_request(serve: Serve) -> None:
    """A successful PR run is admitted as merge-pr:<repo>:<pr>:<sha>; a second delivery of
    the same green run (another GUID) is a duplicate of it."""
    payload = green_run()
    expected = f"merge-pr:octo-repo:2:{payload['workflow_run']['head_sha']}"
    status, answer = deliver(serve, "workflow_run", payload)
    assert (status, answer) == (202, {"admitted": True, "duplicate": False, "eventId": expected})
    event = stored(serve, expected)
    assert event is not None and event["payload"] == {"repo": "octo-repo", "prNumbers": [2]}
    status, answer = deliver(serve, "workflow_run", payload)
    assert (status, answer) == (200, {"admitted": False, "duplicate": True, "eventId": expected})


def test_failed_run_of_a_report_only_repo_is_admitted(serve: Serve) -> None:
    """A failed run, even of a report-only repo, becomes github.workflow-run.failed."""

    def failed(p: dict[str, Any]) -> None:
        p["repository"]["full_name"] = "octo-org/octo-docs"
        p["workflow_run"]["conclusion"] = "failure"

    payload, guid = variant("workflow_run.completed.payload.json", failed), str(uuid.uuid4())
    status, answer = deliver(serve, "workflow_run", payload, delivery=guid)
    assert status == 202 and answer["eventId"] == guid
    event = stored(serve, guid)
    assert event is not None and (event["type"], event["subject"]) == (
        "github.workflow-run.failed",
        "ci",
    )
    assert event["payload"] == {
        "repo": "octo-org/octo-docs",
        "runId": payload["workflow_run"]["id"],
    }


# ---- ignored (200) -------------------------------------------------------------------


def _other_base(p: dict[str, Any]) -> None:
    p["pull_request"]["base"]["ref"] = "develop"


def _unconfigured(p: dict[str, Any]) -> None:
    p["repository"]["full_name"] = "someone/elsewhere"


def _report_only(p: dict[str, Any]) -> None:
    p["repository"]["full_name"] = "octo-org/octo-docs"


IGNORED = [
    ("ping", "ping.payload.json", None, "unhandled_event"),
    ("push", "push.payload.json", None, "unhandled_event"),
    ("pull_request", "pull_request.closed.payload.json", None, "unhandled_action"),
    ("workflow_run", "workflow_run.requested.payload.json", None, "unhandled_action"),
    ("workflow_run", "workflow_run.completed.payload.json", None, "not_pull_request_head"),
    ("pull_request", "pull_request.opened.payload.json", _unconfigured, "unconfigured_repo"),
    ("pull_request", "pull_request.opened.payload.json", _other_base, "not_base_branch"),
    ("pull_request", "pull_request.opened.payload.json", _report_only, "repo_report_only"),
]


@pytest.mark.parametrize(
    ("kind", "name", "change", "reason"), IGNORED, ids=[r[3] + "-" + r[0] for r in IGNORED]
)
def test_benign_non_events_are_200_ignored(
    serve: Serve,
    kind: str,
    name: str,
    change: Callable[[dict[str, Any]], None] | None,
    reason: str,
) -> None:
    """Each benign non-event (ping included) is 200 {admitted: false, ignored: true,
    reason} and writes nothing."""
    body = raw(name) if change is None else json.dumps(variant(name, change)).encode()
    guid = str(uuid.uuid4())
    status, answer = deliver(serve, kind, body, delivery=guid)
    assert (status, answer) == (200, {"admitted": False, "ignored": True, "reason": reason})
    assert stored(serve, guid) is None and kept(serve, guid) is None


def test_head_sha_mismatch_is_not_admitted(serve: Serve) -> None:
    """A green run whose PR head is not the run's head is ignored, not a merge request."""
    payload = green_run()
    payload["workflow_run"]["head_sha"] = "0" * 40
    status, answer = deliver(serve, "workflow_run", payload)
    assert (status, answer["reason"]) == (200, "not_pull_request_head")


# ---- rejected (422) and too large (413) -----------------------------------------------


def _two_prs(p: dict[str, Any]) -> None:
    p["workflow_run"]["pull_requests"].append(
        {**p["workflow_run"]["pull_requests"][0], "number": 3}
    )


def _no_base(p: dict[str, Any]) -> None:
    del p["pull_request"]["base"]


def _bad_run_id(p: dict[str, Any]) -> None:
    p["workflow_run"]["conclusion"], p["workflow_run"]["id"] = "failure", "not-a-number"


def test_malformed_deliveries_are_422_with_the_reason_first(serve: Serve) -> None:
    """Invalid JSON, a non-object, a missing field, two PR heads and a payload outside
    its event type's schema are 422 {errors: [reason, ...]}, nothing written."""
    green = green_run()
    _two_prs(green)
    cases = [
        ("pull_request", b'{"action": "opened"', "invalid_json"),
        ("pull_request", b"[]", "malformed_payload"),
        (
            "pull_request",
            variant("pull_request.opened.payload.json", _no_base),
            "malformed_payload",
        ),
        ("workflow_run", green, "ambiguous_pull_request_head"),
        (
            "workflow_run",
            variant("workflow_run.completed.payload.json", _bad_run_id),
            "invalid_payload",
        ),
    ]
    for kind, body, reason in cases:
        guid = str(uuid.uuid4())
        status, answer = deliver(serve, kind, body, delivery=guid)
        assert (status, answer["errors"][0]) == (422, reason), answer
        assert stored(serve, guid) is None


def test_missing_delivery_id_is_422(serve: Serve) -> None:
    """A signed delivery without X-GitHub-Delivery is 422 missing_delivery_id."""
    body = raw("pull_request.opened.payload.json")
    headers = {"X-GitHub-Event": "pull_request", "X-Hub-Signature-256": signature(SECRETS[0], body)}
    status, answer = serve.request("POST", "/github", raw=body, headers=headers)
    assert (status, answer["errors"][0]) == (422, "missing_delivery_id")


def test_body_over_25_mb_is_413_not_a_reset(serve: Serve) -> None:
    """A 26 MiB body is answered 413 (declared length or chunked), never a reset; a
    body just under 25 MiB is read whole."""
    big = b" " * (26 * MIB)
    status, answer = deliver(serve, "ping", big)
    assert (status, answer["details"]) == (413, {"reason": "body_too_large", "limit": 25 * MIB})
    assert _chunked(serve, big) == 413
    padded = fixture("ping.payload.json")
    padded["pad"] = "x" * (25 * MIB - 20_000)
    status, answer = deliver(serve, "ping", padded)
    assert (status, answer["reason"]) == (200, "unhandled_event")


def _chunked(serve: Serve, body: bytes) -> int:
    host, port = serve.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    chunks = (body[i : i + MIB] for i in range(0, len(body), MIB))
    headers = {"X-GitHub-Event": "ping", "X-GitHub-Delivery": "x", "X-Hub-Signature-256": "x"}
    try:
        connection.request("POST", "/github", body=chunks, headers=headers, encode_chunked=True)
        return connection.getresponse().status
    finally:
        connection.close()


# ---- replay --------------------------------------------------------------------------


def test_replay_cli_runs_the_same_translation(serve: Serve, run_engine: EngineRunner) -> None:
    """`engine github replay` admits a saved body unsigned (actor inject), a second
    replay of the same file is a duplicate, ping is ignored, and a refusal exits 1."""
    file = FIXTURES / "pull_request.ready_for_review.payload.json"
    replay = ("github", "replay", "--url", serve.url)
    first = run_engine(*replay, str(file), "--event", "pull_request")
    guid = "replay-" + hashlib.sha256(file.read_bytes()).hexdigest()[:12]
    assert (first.returncode, first.stdout) == (0, f"{guid}: admitted as {guid}\n"), first.stderr
    again = run_engine(*replay, str(file), "--event", "pull_request")
    assert again.returncode == 0 and "duplicate" in again.stdout
    event, row = stored(serve, guid), kept(serve, guid)
    assert event is not None and event["admittedBy"] == "inject"
    assert row is not None and (row["delivery_id"], row["kind"]) == (guid, "pull_request")
    assert row["body"] == file.read_text()
    ping = run_engine(*replay, str(FIXTURES / "ping.payload.json"), "--event", "ping", "--json")
    assert ping.returncode == 0
    assert json.loads(ping.stdout)["answer"] == {
        "admitted": False,
        "ignored": True,
        "reason": "unhandled_event",
    }
    bad = run_engine(
        *replay, str(FIXTURES / "MANIFEST.json"), "--event", "pull_request", "--delivery", "d-1"
    )
    assert bad.returncode == 1 and "malformed_payload" in bad.stderr


def test_replay_route_refuses_other_peers() -> None:
    """POST /github/replay answers 403 to a peer that is not loopback, before reading."""
    transport = mock.Mock()
    transport.get_extra_info.return_value = ("10.0.0.7", 40000)
    request = make_mocked_request("POST", "/github/replay", transport=transport)
    with pytest.raises(Forbidden):
        asyncio.run(post_github_replay(request))


# ---- refusals with their own reasons --------------------------------------------------


@pytest.mark.parametrize("delivery", ["not a guid", "x" * 65, "../etc", "a:b", "-dash"])
def test_bad_delivery_id_is_422_bad_delivery_id(serve: Serve, delivery: str) -> None:
    """A signed delivery whose X-GitHub-Delivery is not GUID-like is 422 bad_delivery_id
    (not a message about eventId), and nothing is admitted."""
    body = raw("pull_request.opened.payload.json")
    status, answer = deliver(serve, "pull_request", body, delivery=delivery)
    assert (status, answer["errors"][0]) == (422, "bad_delivery_id"), answer
    assert "eventId" not in json.dumps(answer)


@pytest.mark.parametrize("sha", [None, "", "deadbeef"])
def test_green_run_with_a_bad_head_sha_is_refused_and_not_stored(serve: Serve, sha: Any) -> None:
    """A green PR run whose head SHA is null, empty or short is 422 malformed_payload;
    no merge-pr:…:null event is stored."""
    payload = green_run()
    payload["workflow_run"]["head_sha"] = sha
    payload["workflow_run"]["pull_requests"][0]["head"]["sha"] = sha
    status, answer = deliver(serve, "workflow_run", payload)
    assert (status, answer["errors"][0]) == (422, "malformed_payload"), answer
    _, events = serve.request("GET", "/events?type=factory.merge.requested&limit=1000", token=TOKEN)
    assert not any(e["eventId"].endswith((":None", ":null", ":")) for e in events["events"])


def test_pull_request_without_repository_is_422(serve: Serve) -> None:
    """An opened pull_request without `repository` is 422 malformed_payload."""
    payload = variant("pull_request.opened.payload.json", lambda p: p.pop("repository"))
    status, answer = deliver(serve, "pull_request", payload)
    assert (status, answer["errors"][0]) == (422, "malformed_payload"), answer


def test_deeply_nested_delivery_is_422_not_500(serve: Serve) -> None:
    """A signed delivery nested 100,000 deep is a 422 with its reason."""
    body = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    status, answer = deliver(serve, "pull_request", body)
    assert (status, answer["errors"][0]) == (422, "too_deep"), answer
