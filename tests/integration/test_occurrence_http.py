"""The occurrence engine over HTTP (docs/occurrences.md: findings, shadow mode, metrics; issue 8): a
real `engine serve` over tests/data/occurrence_engine on a real database (each test runs on SQLite
and on PostgreSQL), its clock placed by ENGINE_NOW just before the 10:00 slot, runs executed by the
embedded worker through scripts/act.py. Each test's config directory switches on only the loops it
watches; everything is read back through the operator routes."""

from __future__ import annotations

import re
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Serve, ServeClock
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent.parent
TREE = ROOT / "tests" / "data" / "occurrence_engine"
LOOPS = tuple(re.findall(r"^loop (\S+)", (TREE / "loops" / "occurrences.rules").read_text(), re.M))
# A serve's clock starts at START when it opens its store; its first pass (a fraction of
# a second later) records the enablement, so 10:00 is the first slot, ~2 s in.
START = "2026-12-01T09:59:58Z"
SLOT = "2026-12-01T10:00:00Z"
TOKENS = {"alice": "alice-token", "bob": "bob-token"}
ALICE, BOB = TOKENS["alice"], TOKENS["bob"]
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))

pytestmark = pytest.mark.slow

Start = Callable[..., Serve]


@pytest.fixture
def occ_serve(database: str, tmp_path: Path) -> Iterator[Start]:
    """Start `engine serve` over the occurrence tree on this test's database with only
    `loops` enabled (extra arguments go to `engine serve`, e.g. --no-worker)."""
    control = tmp_path / "control"
    control.mkdir()
    env = {
        "ENGINE_OPERATOR_TOKEN": ",".join(f"{k}:{v}" for k, v in TOKENS.items()),
        "OCC_SCRIPTS": str(TREE / "scripts"),
        "OCC_CONTROL": str(control),
    }
    with ServeClock(tmp_path, TREE, db=database) as clock:

        def start(*loops: str, args: tuple[str, ...] = ()) -> Serve:
            config = tmp_path / f"config{len(clock.started)}"
            config.mkdir()
            shutil.copy(TREE / "config" / "repos.yaml", config / "repos.yaml")
            lines = [f"  {n}: {{enabled: {str(n in loops).lower()}}}" for n in LOOPS]
            (config / "schedule.yaml").write_text("schedules:\n" + "\n".join(lines) + "\n")
            return clock.start(START, *args, config=config, env=env)

        yield start


def get(serve: Serve, path: str, token: str = ALICE) -> Any:
    status, answer = serve.request("GET", path, token=token)
    assert status == 200, (path, status, answer)
    return answer


def tick(loop: str) -> str:
    return f"clock:{loop}:{SLOT}"


def occurrence_reaches(serve: Serve, loop: str, state: str, within: float = 15) -> None:
    """Wait until the loop's 10:00 occurrence is in `state` (GET /events/{id})."""
    serve.wait_for(
        f"/events/{tick(loop)}", lambda a: a["occurrence"] == state, ALICE, within=within
    )


def runs_of(serve: Serve, loop: str) -> list[dict[str, Any]]:
    return [r for r in get(serve, "/runs?state=all&limit=1000")["runs"] if r["loop"] == loop]


def journal_of(serve: Serve, entity: str, entity_id: str) -> list[dict[str, Any]]:
    path = f"/journal?entity={entity}&entityId={entity_id}&limit=1000"
    return list(get(serve, path)["entries"])


def get_text(serve: Serve, path: str, token: str | None) -> tuple[int, str, str]:
    """(status, Content-Type, body) of a GET whose answer is not JSON."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    req = urllib.request.Request(serve.url + path, headers=headers)
    try:
        with _NO_PROXY.open(req, timeout=30) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.headers["Content-Type"], err.read().decode()


# ---- GET /metrics (docs/occurrences.md#audit-and-metrics) --------------------------------


def test_metrics_are_prometheus_text_for_operators_only(occ_serve: Start) -> None:
    """A scraper with an operator token gets the audit figures as Prometheus text
    (0.0.4) that a Prometheus parser reads, and they match what happened: the budgeted
    loop's completed occurrence and its successful run, the finder's candidate; without
    a token the figures stay private (401)."""
    serve = occ_serve("budgeted", "finder")
    occurrence_reaches(serve, "budgeted", "completed")
    occurrence_reaches(serve, "finder", "candidate_recorded")

    status, _, body = get_text(serve, "/metrics", None)
    assert status == 401 and "engine_occurrences" not in body
    status, _, _ = get_text(serve, "/metrics", "not-a-token")
    assert status == 401

    status, content_type, body = get_text(serve, "/metrics", BOB)
    assert status == 200
    assert content_type.startswith("text/plain") and "version=0.0.4" in content_type
    families = {f.name: f for f in text_string_to_metric_families(body)}
    occurrences = {
        (s.labels["loop"], s.labels["state"]): s.value
        for s in families["engine_occurrences"].samples
    }
    assert occurrences == {("budgeted", "completed"): 1, ("finder", "candidate_recorded"): 1}
    runs = {
        (s.labels["loop"], s.labels["state"], s.labels["outcome"]): s.value
        for s in families["engine_runs"].samples
    }
    assert runs == {("budgeted", "succeeded", "OK"): 1}
    decisions = {
        (s.labels["kind"], s.labels["reason"]): s.value
        for s in families["engine_decisions"].samples
    }
    assert decisions == {("run", ""): 1, ("noop", "candidate_recorded"): 1}
    findings = {s.labels["status"]: s.value for s in families["engine_findings"].samples}
    assert findings == {"candidate": 1}
    budget = {
        s.labels["kind"]: s.value
        for s in families["engine_budget_used_24h"].samples
        if s.labels["loop"] == "budgeted"
    }
    assert budget["runs"] == 1


# ---- POST /runs/{id}/cancel ---------------------------------------------------------------


def test_an_operator_cancels_a_queued_run(occ_serve: Start) -> None:
    """An operator's cancel of a queued run: 200, the run ends `cancelled`, the journal
    names operator:alice with her note and the occurrence ends `cancelled`; a second
    cancel is a conflict (409), an unknown run 404, and without a token nothing happens
    (401)."""
    serve = occ_serve("budgeted", args=("--no-worker",))
    answer = serve.wait_for(
        "/runs?state=queued", lambda a: any(r["loop"] == "budgeted" for r in a["runs"]), ALICE
    )
    (run,) = answer["runs"]
    run_id = run["runId"]

    status, refused = serve.request("POST", f"/runs/{run_id}/cancel", {}, token=None)
    assert status == 401 and refused["error"] == "unauthorized"
    assert get(serve, f"/runs/{run_id}")["run"]["state"] == "queued"

    status, answer = serve.request(
        "POST", f"/runs/{run_id}/cancel", {"note": "not now"}, token=ALICE
    )
    assert status == 200, answer
    assert answer["run"]["runId"] == run_id and answer["run"]["state"] == "cancelled"
    assert get(serve, f"/runs/{run_id}")["run"]["state"] == "cancelled"
    (entry,) = [e for e in journal_of(serve, "run", run_id) if e["action"] == "cancelled"]
    assert (entry["actor"], entry["fromState"], entry["toState"], entry["note"]) == (
        "operator:alice",
        "queued",
        "cancelled",
        "not now",
    )
    assert get(serve, f"/events/{tick('budgeted')}")["occurrence"] == "cancelled"

    status, again = serve.request("POST", f"/runs/{run_id}/cancel", {}, token=BOB)
    assert status == 409 and again["error"] == "conflict", again
    status, missing = serve.request("POST", "/runs/run-0000000000000000/cancel", {}, token=ALICE)
    assert status == 404 and missing["error"] == "not_found"
    assert [e["action"] for e in journal_of(serve, "run", run_id)].count("cancelled") == 1


# ---- findings (docs/occurrences.md#candidate-findings) -----------------------------------


def test_only_an_operator_promotes_a_finding_over_http(occ_serve: Start) -> None:
    """The finder's candidate is listed by GET /findings; a dismissal needs a reason
    (400, still a candidate); a promotion records the token's operator and admits a
    `finding.promoted` event (GET /events/finding:<id>); a second decision is a conflict
    (409) and the candidate list is empty afterwards."""
    serve = occ_serve("finder")
    listed = serve.wait_for("/findings", lambda a: bool(a["findings"]), ALICE)["findings"]
    (finding,) = listed
    assert (finding["semanticKey"], finding["category"], finding["status"]) == (
        "lint:r1",
        "lint",
        "candidate",
    )
    assert (finding["loop"], finding["repo"], finding["occurrenceCount"]) == ("finder", "r1", 1)
    fid = finding["findingId"]
    assert runs_of(serve, "finder") == []

    status, _ = serve.request("POST", f"/findings/{fid}/promote", {}, token=None)
    assert status == 401
    status, refused = serve.request("POST", f"/findings/{fid}/dismiss", {}, token=ALICE)
    assert status == 400 and refused["error"] == "bad_request", refused
    assert get(serve, f"/findings/{fid}")["finding"]["status"] == "candidate"

    status, answer = serve.request(
        "POST", f"/findings/{fid}/promote", {"note": "worth fixing"}, token=BOB
    )
    assert status == 200, answer
    promoted = answer["finding"]
    assert (promoted["status"], promoted["decidedBy"]) == ("promoted", "operator:bob")
    assert promoted["promotedEvent"] == f"finding:{fid}"
    event = get(serve, f"/events/finding:{fid}")["event"]
    assert event["type"] == "finding.promoted" and event["admittedBy"] == "operator:bob"
    assert event["payload"]["semanticKey"] == "lint:r1"
    (entry,) = [
        e
        for e in get(serve, "/journal?limit=1000")["entries"]
        if e["entityId"] == fid and e["action"] == "promoted"
    ]
    assert (entry["entity"], entry["actor"], entry["note"]) == (
        "finding",
        "operator:bob",
        "worth fixing",
    )

    status, again = serve.request("POST", f"/findings/{fid}/promote", {}, token=ALICE)
    assert status == 409 and again["error"] == "conflict", again
    status, again = serve.request(
        "POST", f"/findings/{fid}/dismiss", {"reason": "too late"}, token=ALICE
    )
    assert status == 409
    assert get(serve, "/findings")["findings"] == []
    assert [f["findingId"] for f in get(serve, "/findings?status=promoted")["findings"]] == [fid]


# ---- GET /shadow/{loop} (docs/occurrences.md#shadow-mode) --------------------------------


def test_the_shadow_report_shows_what_a_shadowed_loop_would_dispatch(occ_serve: Start) -> None:
    """A mutating loop in shadow mode: GET /shadow/shadowed reports the slot it would
    have dispatched (act@1) while no proposal and no run exist; an unknown loop is 404,
    with a did-you-mean when the name is close."""
    serve = occ_serve("shadowed")
    occurrence_reaches(serve, "shadowed", "shadow_recorded")

    status, _ = serve.request("GET", "/shadow/shadowed", token=None)
    assert status == 401
    report = get(serve, "/shadow/shadowed")
    assert (report["loop"], report["shadow"], report["definition"]) == ("shadowed", True, "act@1")
    assert (report["occurrences"], report["wouldDispatch"]) == (1, 1)
    assert report["byState"] == {"shadow_recorded": 1}
    (window,) = report["windows"]
    assert (window["occurrence"], window["wouldDispatch"]) == (tick("shadowed"), "act@1")
    assert report["divergence"]["shadowOnly"] == 1 and report["divergence"]["agree"] == 0
    assert runs_of(serve, "shadowed") == []
    assert get(serve, "/proposals?state=all")["proposals"] == []
    assert get(serve, "/shadow/shadowed?since=2026-12-01T11:00:00Z")["occurrences"] == 0

    status, missing = serve.request("GET", "/shadow/shadowd", token=ALICE)
    assert status == 404 and missing["error"] == "not_found"
    assert "did you mean 'shadowed'" in missing["message"]
    status, missing = serve.request("GET", "/shadow/zzz", token=ALICE)
    assert status == 404 and "no loop 'zzz'" in missing["message"]
    assert "did you mean" not in missing["message"]


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_the_journal_filters_to_one_findings_history(occ_serve: Start) -> None:
    """An operator reads one finding's history with GET /journal?entity=finding&entityId=ID:
    recorded by the system when the triage saw it."""
    serve = occ_serve("finder")
    (finding,) = serve.wait_for("/findings", lambda a: bool(a["findings"]), ALICE)["findings"]
    entries = journal_of(serve, "finding", finding["findingId"])
    assert [(e["action"], e["actor"]) for e in entries] == [("recorded", "system")]
