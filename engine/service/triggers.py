"""Firing the triggers that wait for something (docs/scheduling.md, "Triggers that
wait"): an admitted event fires the `on-event` loops of its type, and a concluded
occurrence fires the `after` loops of its loop. Each firing is a tick admitted by the
runtime (actor `schedule`) in the transaction that saw its cause, so it is durable
exactly when the cause is: a worker that concludes an occurrence while serve is down
leaves the downstream tick admitted, and serve plans it when it comes back. The tick's
id is its cause's, so a second firing of one cause is a duplicate admission; its
window (engine.core.triggers) folds different events of one fact into one occurrence."""

from __future__ import annotations

from engine.core.envelope import Envelope, parse_iso
from engine.core.records import EventRecord, OccurrenceRecord
from engine.core.ticks import idempotency_key
from engine.core.triggers import Conclusion, after_tick, dependents, event_tick, fired_by
from engine.errors import Unprocessable
from engine.service.admission import admit_record, check
from engine.service.context import Runtime
from engine.store.ports import Tx

ACTOR = "schedule"


def _admit(rt: Runtime, tx: Tx, tick: Envelope, kind: str, cause: str, at: str) -> None:
    """Admit one firing, unplanned (the planning batch decides it next); a tick that
    does not fit its type's input schema is journaled on its cause, not admitted."""
    try:
        checked = check(rt, tick)
    except Unprocessable as err:
        details = "; ".join(err.errors)
        rt.journal(
            tx,
            kind,
            cause,
            "trigger_refused",
            ACTOR,
            at=at,
            note=f"loop '{tick.payload.get('loop')}': {details}",
            data={"eventId": tick.eventId},
        )
        return
    if admit_record(rt, tx, checked, ACTOR, at) is not None:
        rt.journal(
            tx,
            kind,
            cause,
            "fired",
            ACTOR,
            at=at,
            note=f"fired loop '{tick.payload.get('loop')}' ({tick.source})",
            data={"eventId": tick.eventId, "window": tick.payload.get("window")},
        )


def on_admitted(rt: Runtime, tx: Tx, event: EventRecord, envelope: Envelope, at: str) -> None:
    """Fire the `on-event` loops an admitted event matches (a loop's tick fires none)."""
    for firing in fired_by(rt.rules, envelope, is_tick=event.loop is not None):
        if firing.error is not None or firing.window is None:
            rt.journal(
                tx,
                "event",
                event.event_id,
                "trigger_failed",
                ACTOR,
                at=at,
                note=f"loop '{firing.loop.name}' not fired: {firing.error}",
            )
            continue
        tick = event_tick(firing.loop, envelope, firing.window)
        _admit(rt, tx, tick, "event", event.event_id, at)


def on_concluded(rt: Runtime, tx: Tx, occ: OccurrenceRecord, at: str) -> None:
    """Fire the `after` loops waiting for this concluded occurrence: one tick each,
    carrying the upstream's state, its run's outcome and ids."""
    if occ.loop is None or not any(
        loop.trigger.upstream == occ.loop for loop in rt.rules.loops.values()
    ):
        return
    event = tx.get_event(occ.event_id)
    if event is None:
        return
    fresh = tx.get_occurrence(occ.event_id) or occ
    settled = int((fresh.used or {}).get("runs", 0))
    key = idempotency_key(event)
    run = tx.get_run_by_key(key + (f"#{settled - 1}" if settled > 1 else ""))
    done = Conclusion(
        loop=occ.loop,
        occurrence=occ.event_id,
        state=occ.state,
        outcome=run.outcome if run is not None else None,
        run=run.run_id if run is not None else None,
        window=fresh.window,
        repo=fresh.repo,
        correlation=event.correlation_id or event.event_id,
        at=parse_iso(at),
    )
    for loop in dependents(rt.rules, done):
        _admit(rt, tx, after_tick(loop, done), "occurrence", occ.event_id, at)
