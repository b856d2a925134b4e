"""The pure decision of an admitted event (engine/core/decide.py), unit-tested on the
in-memory store: facts read once, a plan of typed effects that names its rules, the
same plan for the same facts, nothing written until the plan is applied, and applying
it leaves what the service used to write. The tree is tests/data/waiting."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from engine.core.decide import decide
from engine.core.effects import (
    Admit,
    Decide,
    DecideProposal,
    Journal,
    MarkPlanned,
    OpenOccurrence,
    Propose,
    QueueRun,
    WorkCommand,
)
from engine.core.envelope import Envelope, iso
from engine.core.records import EventRecord
from engine.core.ticks import tick
from engine.core.validation import Validators
from engine.loading import Paths, load_rules
from engine.service.admission import admit_record
from engine.service.apply import apply
from engine.service.context import Runtime
from engine.service.facts import read_facts
from engine.store.memory import MemoryStore

TREE = Path(__file__).resolve().parents[1] / "data" / "waiting"
SLOT = datetime(2026, 12, 1, 10, tzinfo=UTC)
AT = iso(SLOT)


def runtime() -> Runtime:
    rules = load_rules(Paths(TREE / "loops", TREE / "registry", TREE / "config"))
    return Runtime(MemoryStore(), rules, Validators.build(rules), lambda: SLOT)


def admitted(rt: Runtime, envelope: Envelope, actor: str) -> EventRecord:
    with rt.store.write() as tx:
        row = admit_record(rt, tx, envelope, actor, AT)
    assert row is not None
    return row


def kinds(plan: tuple[object, ...]) -> list[str]:
    return [type(effect).__name__ for effect in plan]


def test_an_auto_loops_tick_plans_its_run_without_writing() -> None:
    """The nightly tick (approval auto) plans: taken for planning, decided `run` by the
    loop's rule, its occurrence opened dispatched with the budget reserved, an
    auto-approved proposal and its run; deciding writes nothing, and the same facts
    give the same plan."""
    rt = runtime()
    event = admitted(rt, tick(rt.rules.loops["nightly"], SLOT, 0), "schedule")
    with rt.store.read() as tx:
        facts = read_facts(tx, rt.rules, event, AT)
        plan = decide(event, rt.rules, facts, rt.lifecycle, AT)
        assert decide(event, rt.rules, facts, rt.lifecycle, AT) == plan
        assert tx.get_decision(event.event_id) is None  # nothing written by deciding
    assert kinds(plan) == [
        "MarkPlanned",
        "Decide",
        "OpenOccurrence",
        "Journal",
        "Propose",
        "QueueRun",
    ]
    decided = next(e for e in plan if isinstance(e, Decide)).record
    rule = str(rt.rules.loops["nightly"].origin)
    assert (decided.kind, decided.approved_by, decided.rule) == ("run", "schedule", rule)
    opened = next(e for e in plan if isinstance(e, OpenOccurrence))
    assert (opened.record.state, opened.rule) == ("work_dispatched", rule)
    assert opened.record.reserved == {"runs": 1, "wall_clock_seconds": 30}
    proposal = next(e for e in plan if isinstance(e, Propose))
    assert [type(e) for e in proposal.then] == [DecideProposal, Journal]
    run = next(e for e in plan if isinstance(e, QueueRun)).record
    assert (run.idempotency_key, run.approved_by) == (
        "loop:nightly:2026-12-01T10:00:00Z",
        "schedule",
    )


def test_applying_the_plan_writes_it_once() -> None:
    """Applied, the plan leaves the decision, the occurrence, the approved proposal and
    the queued run; deciding the event again reads that it is decided and plans only
    the bookkeeping."""
    rt = runtime()
    event = admitted(rt, tick(rt.rules.loops["nightly"], SLOT, 0), "schedule")
    with rt.store.write() as tx:
        plan = decide(event, rt.rules, read_facts(tx, rt.rules, event, AT), rt.lifecycle, AT)
        apply(rt, tx, plan, AT)
    with rt.store.read() as tx:
        decision = tx.get_decision(event.event_id)
        assert decision is not None and decision.kind == "run"
        assert tx.get_occurrence_state(event.event_id) == "work_dispatched"
        (queued,) = tx.list_runs(10)
        assert queued.state == "queued" and queued.approved_by == "schedule"
        again = decide(event, rt.rules, read_facts(tx, rt.rules, event, AT), rt.lifecycle, AT)
    assert again == (MarkPlanned(event.event_id),)


def test_an_event_of_a_watched_type_fires_its_on_event_loop() -> None:
    """A merge request of r1 (no route of its own: a no-op) plans the `review` loop's
    tick as an Admit effect, caused by the event, with the window the rule computes."""
    rt = runtime()
    request = Envelope(
        eventId="pr-7",
        type="wait.merge.requested",
        source="github",
        occurredAt=SLOT,
        payload={"repo": "r1", "prNumbers": [7]},
    ).with_defaults()
    event = admitted(rt, request, "github")
    with rt.store.read() as tx:
        plan = decide(event, rt.rules, read_facts(tx, rt.rules, event, AT), rt.lifecycle, AT)
    (fired,) = [e for e in plan if isinstance(e, Admit)]
    assert (fired.envelope.eventId, fired.actor, fired.cause) == (
        "on:review:pr-7",
        "schedule",
        ("event", "pr-7"),
    )
    assert fired.envelope.payload["window"] == '["r1",[7]]'
    decided = next(e for e in plan if isinstance(e, Decide)).record
    assert (decided.kind, decided.reason) == ("noop", "no_route")


def test_a_second_tick_of_one_window_folds() -> None:
    """Once the nightly slot's occurrence is open, another event of the same window (a
    coalesced follow-up is one) folds: decided duplicate_occurrence, journaled on the
    open occurrence, nothing opened."""
    rt = runtime()
    loop = rt.rules.loops["nightly"]
    first = admitted(rt, tick(loop, SLOT, 0), "schedule")
    with rt.store.write() as tx:
        apply(
            rt,
            tx,
            decide(first, rt.rules, read_facts(tx, rt.rules, first, AT), rt.lifecycle, AT),
            AT,
        )
    again = EventRecord(**{**{f: getattr(first, f) for f in first.__slots__}, "event_id": "other"})
    with rt.store.read() as tx:
        plan = decide(again, rt.rules, read_facts(tx, rt.rules, again, AT), rt.lifecycle, AT)
    assert kinds(plan) == ["MarkPlanned", "Decide", "Journal"]
    _, decided, journal = plan
    assert isinstance(decided, Decide) and decided.record.reason == "duplicate_occurrence"
    assert isinstance(journal, Journal)
    assert (journal.entity, journal.entity_id, journal.action) == (
        "occurrence",
        first.event_id,
        "duplicate_occurrence",
    )


def test_a_work_event_plans_its_command_as_its_admitting_actor() -> None:
    """An admitted `work.open` (docs/work.md#work-from-events) plans one WorkCommand
    with its payload and the actor that admitted it, before its decision (a no-op
    without a route); applied on the in-memory store, it opens the work."""
    shipped = Path(__file__).resolve().parents[2]
    rules = load_rules(Paths(shipped / "loops", shipped / "registry", TREE / "config"))
    rt = Runtime(MemoryStore(), rules, Validators.build(rules), lambda: SLOT)
    payload = {"semanticKey": "issue:r1#7", "title": "Fix #7"}
    envelope = Envelope.model_validate(
        {
            "eventId": "w-1",
            "type": "work.open",
            "source": "github",
            "occurredAt": AT,
            "payload": payload,
        }
    )
    event = admitted(rt, envelope, "github")
    with rt.store.read() as tx:
        plan = decide(event, rt.rules, read_facts(tx, rt.rules, event, AT), rt.lifecycle, AT)
    assert kinds(plan)[:3] == ["MarkPlanned", "WorkCommand", "Decide"]
    assert plan[1] == WorkCommand("w-1", "work.open", payload, "github")
    assert next(e for e in plan if isinstance(e, Decide)).record.kind == "noop"
    with rt.store.write() as tx:
        apply(rt, tx, plan, AT)
    with rt.store.read() as tx:
        item = tx.live_work_by_key("issue:r1#7")
    assert item is not None and (item.title, item.created_by) == ("Fix #7", "github")
