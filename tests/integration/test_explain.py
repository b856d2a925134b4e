"""`engine explain` and `GET /explain/{id}` (docs/explain.md): the causal chain of an
event, both ways, from the durable records: an approved mutating run's OK chains an
event, which runs; explaining either end shows the other, with the decision's rule,
the approver and the runs; a slot, a proposal and a run name their event."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import tree_args

from engine.core.envelope import Envelope
from engine.core.explain import tree
from engine.core.records import DeliveryRecord
from engine.core.validation import Validators
from engine.errors import NotFound
from engine.loading import Paths, load_rules
from engine.service import Service
from engine.service.context import Runtime
from engine.store.sqlite import SqliteStore
from engine.worker import work_once

RUNTIME_TREE = Path(__file__).resolve().parent.parent / "data" / "runtime"
START = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


@pytest.fixture
def chained(
    runtime_paths: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Service, str]:
    """A watched mutating request approved by alice; its run's OK chains an event that
    runs too. The service and the request's event id."""
    monkeypatch.setenv("RUNTIME_SCRIPTS", str(RUNTIME_TREE / "scripts"))
    rules = load_rules(runtime_paths)
    clock = iter(START + timedelta(milliseconds=n) for n in range(1, 100_000))
    store = SqliteStore(tmp_path / "engine.db")
    service = Service(
        Runtime(store, rules, Validators.build(rules), lambda: next(clock), tmp_path / "a")
    )
    envelope = Envelope(
        eventId="request-1",
        type="test.slow-mutating.requested",
        source="test",
        occurredAt=START,
        payload={"seconds": 0},
    )
    service.admit(envelope, "operator:tester")
    service.pump()
    (proposal,) = service.proposals(state="open")
    service.approve(proposal.proposal_id, "operator:alice", "looks right")
    while asyncio.run(work_once(service, "w1", 5.0)) is not None:
        service.pump()
    return service, "request-1"


def test_the_request_explains_its_decision_approval_run_and_what_it_chained(
    chained: tuple[Service, str],
) -> None:
    """Explaining the request shows who admitted it, the rule that decided it and the
    rules digest, alice's approval with her note, its run's outcome, and the chained
    event with its own decision and run."""
    service, request = chained
    doc = service.explain(request)
    assert doc["cause"] == {"kind": "admitted", "actor": "operator:tester", "source": "test"}
    assert doc["decision"]["kind"] == "propose" and doc["decision"]["rule"]
    assert doc["decision"]["rulesDigest"] == service.rt.rules.digest
    (proposal,) = doc["proposals"]
    approved = [s for s in proposal["steps"] if s["action"] == "approved"]
    assert [(s["actor"], s["note"]) for s in approved] == [("operator:alice", "looks right")]
    (run,) = doc["runs"]
    assert (run["state"], run["outcome"]) == ("succeeded", "OK")
    (follow,) = run["chained"]
    assert follow["rule"] and follow["event"]["source"] == "chain"
    assert [r["state"] for r in follow["runs"]] == ["succeeded"]
    text = "\n".join(tree(doc))
    assert "approved by operator:alice" in text and "chained by" in text


def test_the_chained_event_explains_its_cause_up_to_the_request(
    chained: tuple[Service, str],
) -> None:
    """Explaining the chained event names the run whose outcome chained it, through
    which rule, and that run's event, the request."""
    service, request = chained
    (run,) = service.explain(request)["runs"]
    follow = run["chained"][0]["event"]["eventId"]
    cause = service.explain(follow)["cause"]
    assert (cause["kind"], cause["run"], cause["outcome"]) == ("chain", run["runId"], "OK")
    assert cause["rule"] and cause["from"]["event"]["eventId"] == request


def test_a_proposal_a_run_and_an_occurrence_name_their_event(
    chained: tuple[Service, str],
) -> None:
    """A proposal id, a run id and an occurrence id (the event's) explain the event
    they belong to; anything else is not found, with what may be given."""
    service, request = chained
    doc = service.explain(request)
    for ident in (doc["proposals"][0]["proposalId"], doc["runs"][0]["runId"], request):
        assert service.explain(ident)["event"]["eventId"] == request
    with pytest.raises(NotFound, match="LOOP@TIME"):
        service.explain("nothing-here")


def test_a_delivery_guid_explains_the_event_it_became_under_another_id(
    chained: tuple[Service, str],
) -> None:
    """A GitHub delivery's GUID names the event it was admitted as, also when a
    `webhook github` line gave the event an id of its own."""
    service, request = chained
    guid = "c0ffee00-0000-4000-8000-000000000001"
    with service.rt.store.write() as tx:
        received = tx.get_event(request)
        assert received is not None
        kept = DeliveryRecord(request, guid, "pull_request", "{}", "github.rules:1:1", "x")
        tx.insert_deliveries([kept])
    assert service.explain(guid)["event"]["eventId"] == request


def test_a_slot_is_explained_by_its_loop_and_time(tmp_path: Path) -> None:
    """`LOOP@TIME` names the scheduler's tick of that slot: its cause is the slot."""
    tree_dir = Path(__file__).resolve().parent.parent / "data" / "scheduler"
    paths = Paths(tree_dir / "loops", tree_dir / "registry", tree_dir / "config")
    rules = load_rules(paths)
    now = [datetime(2026, 11, 30, 9, 59, 59, tzinfo=UTC)]
    store = SqliteStore(tmp_path / "engine.db")
    service = Service(Runtime(store, rules, Validators.build(rules), lambda: now[0]))
    service.pump()
    now[0] = datetime(2026, 11, 30, 12, 0, 1, tzinfo=UTC)
    service.pump()
    ticks = [e for e in service.events(100) if e.source == "schedule"]
    assert ticks, "the scheduler fired nothing"
    tick = ticks[0]
    doc = service.explain(f"{tick.loop}@{tick.payload['slot']}")
    assert doc["event"]["eventId"] == tick.event_id
    assert doc["cause"] == {
        "kind": "slot",
        "loop": tick.loop,
        "slot": tick.payload["slot"],
        "source": "schedule",
    }
    json.dumps(doc)  # a document scripts can read


def test_engine_explain_prints_the_tree_and_the_json(
    chained: tuple[Service, str], run_engine: Any, tmp_path: Path
) -> None:
    """`engine explain ID` prints the chain as a tree; `--json` the API's document; an
    unknown id is one `error:` line and exit 1."""
    _, request = chained
    args = tree_args(tmp_path / "engine.db", RUNTIME_TREE)
    shown = run_engine("explain", request, *args)
    assert shown.returncode == 0, shown.stderr
    assert f"event {request}" in shown.stdout and "approved by operator:alice" in shown.stdout
    as_json = run_engine("explain", request, "--json", *args)
    assert json.loads(as_json.stdout)["event"]["eventId"] == request
    missing = run_engine("explain", "nothing-here", *args)
    assert missing.returncode == 1 and missing.stderr.startswith("error:")
