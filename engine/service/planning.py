"""Planning: each admitted event gets exactly one persisted Decision, and with it a
proposal or a run, before anything runs. Safe to run in several processes at once:
a decision is unique per event and a run unique per idempotency key."""

from __future__ import annotations

import logging

from engine.core.codec import encode_facts, with_facts
from engine.core.decide import decide, queue
from engine.core.records import EventRecord, RunRecord
from engine.errors import Unavailable
from engine.service.apply import apply, queued
from engine.service.batch import Batch, plan_all, planning_failed
from engine.service.context import Runtime
from engine.service.facts import read_facts
from engine.store.ports import Tx

log = logging.getLogger("engine.planning")

BATCH = 500


def plan_pending(rt: Runtime, limit: int = BATCH) -> int:
    """Plan up to `limit` unplanned events in one transaction; the number planned."""
    with rt.store.write() as tx:
        events = tx.unplanned_events(limit)
        at = rt.now()  # one instant for the batch: it commits at once
        batch = Batch(rt, tx, at)
        plan_all(rt, batch, events)
        batch.flush(last=True)
    return len(events)


def plan_safely(rt: Runtime, tx: Tx, event: EventRecord, at: str) -> None:
    """`plan_one` in a savepoint: an event whose planning fails is decided NOOP
    `planning_error` (visible, journaled, nothing runs) instead of rolling back, and
    blocking, every other event of the batch."""
    try:
        with tx.savepoint():
            plan_one(rt, tx, event, at)
    except Unavailable:  # the store's fault, not the event's: the batch is tried again
        raise
    except Exception as err:
        log.exception("planning event %s failed; recorded as planning_error", event.event_id)
        planning_failed(rt, tx, event, at, err)


def plan_one(rt: Runtime, tx: Tx, event: EventRecord, at: str) -> None:
    """Decide one event and persist the decision, its occurrence (with the triage
    decision and evidence) and its proposal or run, before anything runs: read the
    facts, decide purely (engine.core.decide), apply the plan. An event stored as
    planned (the scheduler admits and plans a tick in one commit) is fresh: nobody else
    can have decided it."""
    facts = read_facts(tx, rt.rules, event, at)
    plan = decide(event, rt.rules, facts, rt.lifecycle, at)
    apply(rt, tx, with_facts(plan, encode_facts(facts)), at)


def queue_run(
    rt: Runtime,
    tx: Tx,
    event: EventRecord,
    proposal_id: str | None,
    actor: str,
    at: str,
    attempt: int = 0,
) -> RunRecord:
    """Create the run for an approved event (once per idempotency key) and journal it.
    A retry of the occurrence's job (`attempt` > 0) is a run of its own: `key#N`."""
    decision = tx.get_decision(event.event_id)
    assert decision is not None and decision.definition is not None
    return queued(rt, tx, queue(event, decision.definition, proposal_id, actor, at, attempt), at)
