"""Schedules as an operator sees them: the view (`engine schedule`, `GET /schedules`),
pause and resume, run-now, backfill, and the slot history that answers "why didn't
03:00 fire?" (the doctor is `engine.service.doctor`). `now` is an argument; each call
reads or writes in one transaction; the CLI and the HTTP handlers call these same
functions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from dsl.diagnostics import did_you_mean
from engine.core.decisions import Entity, JournalAction
from engine.core.durations import DurationError, parse_duration
from engine.core.envelope import iso, parse_iso
from engine.core.records import EventRecord, LoopState, ObservationRecord, RunRecord
from engine.core.ruleset import Loop, TriggerKind, overlap_line
from engine.core.slots import IntervalSlots, SkipReason, Slots, next_fires, slots_of
from engine.core.ticks import SLOT_SOURCES, manual_tick, slot_text, tick
from engine.core.timefmt import given_instant
from engine.core.triggers import AFTER_SOURCE, EVENT_SOURCE
from engine.errors import BadRequest, Conflict, NotFound
from engine.service.admission import Admission, admit, admit_in
from engine.service.context import Runtime
from engine.service.notifications import notify
from engine.service.watches import observation_view
from engine.store.ports import Tx

NEXT_FIRES = 5
BACKFILL_LIMIT = 10_000
SLOT_LIMIT = 1000  # fired ticks listed by `slots`
COUNT_LIMIT = 10_000  # pending slots counted one by one (cron) before giving up
EPS = timedelta(microseconds=1)


# ---- names and times --------------------------------------------------------------------


def loop_named(rt: Runtime, name: str) -> Loop:
    """The loop called `name`; NotFound with a did-you-mean otherwise."""
    loop = rt.rules.loops.get(name)
    if loop is None:
        hint = did_you_mean(name, rt.rules.loops)
        raise NotFound(f"no loop '{name}'" + (f"; {hint}" if hint else ""), reason="unknown_loop")
    return loop


def parse_when(text: str, now: datetime) -> datetime:
    """ISO-8601 with an offset, `now`, or a time before now as a duration (`24h` or
    `-24h`: 24 hours ago); BadRequest otherwise."""
    value = text.strip()
    if value == "now":
        return now
    moment = given_instant(value)
    if moment is not None:
        return moment
    try:
        return now - timedelta(seconds=parse_duration(value.removeprefix("-")))
    except DurationError:
        pass
    raise BadRequest(
        f"'{text[:60]}' is not a time: write ISO-8601 with an offset "
        "(2026-12-01T03:00:00Z), `now`, or how long ago, such as 24h",
        reason="bad_time",
    )


# ---- the view ---------------------------------------------------------------------------


def schedule_view(rt: Runtime, now: datetime) -> list[dict[str, Any]]:
    """Every loop as `engine schedule` shows it, by name."""
    with rt.store.read() as tx:
        states = {s.loop: s for s in tx.list_loop_states()}
        open_counts = tx.open_proposals_by_loop()
        return [
            _entry(tx, loop, states.get(name), open_counts.get(name, 0), now)
            for name, loop in sorted(rt.rules.loops.items())
        ]


def schedule_of(rt: Runtime, name: str, now: datetime) -> dict[str, Any]:
    loop = loop_named(rt, name)
    with rt.store.read() as tx:
        opened = tx.open_proposals_by_loop().get(name, 0)
        return _entry(tx, loop, tx.get_loop_state(name), opened, now)


def _entry(
    tx: Tx, loop: Loop, state: LoopState | None, opened: int, now: datetime
) -> dict[str, Any]:
    seq = slots_of(loop.trigger)
    event = tx.last_loop_event(loop.name)
    due = next_due(loop, seq, state, now)
    observed = None
    if loop.trigger.kind is TriggerKind.WATCH:
        obs = tx.get_observation(loop.name)
        observed = observation_view(obs, loop)
        due = next_poll(loop, obs, state, now)
    paused = state is not None and state.paused
    return {
        "name": loop.name,
        "description": loop.description,
        "enabled": loop.enabled,
        "pendingRestart": state is not None and state.enabled != loop.enabled,
        "paused": paused,
        "pauseNote": state.pause_note if state is not None and paused else None,
        "pausedBy": state.paused_by if state is not None and paused else None,
        "trigger": {"kind": loop.trigger.kind.value, "describe": loop.trigger.describe()},
        "cadenceSeconds": cadence(loop, seq, now),
        "approval": loop.approval.value,
        "catchUp": {
            "policy": loop.catch_up.value,
            "cap": loop.catch_up_cap,
            "maxLatenessSeconds": loop.max_lateness_seconds,
        },
        "overlap": overlap_view(loop),
        "singleton": loop.singleton,  # the run level of `overlap`, kept for older clients
        "source": loop.source.value,
        "overridden": list(loop.overridden),
        "origin": f"{loop.origin.file}:{loop.origin.line}",
        "overlayOrigin": (
            f"{loop.overlay_origin.file}:{loop.overlay_origin.line}"
            if loop.overlay_origin
            else None
        ),
        "eventType": loop.event_type,
        "enabledSince": state.enabled_since if state is not None else None,
        "lastSlot": _last_slot(state, event),
        "lastEventId": event.event_id if event is not None else None,
        "lastDecision": _decision_text(tx, event),
        "lastCause": last_cause(event),
        "lastOutcome": _outcome(tx.last_loop_run(loop.name)),
        "openProposals": opened,
        "nextDue": slot_text(due) if due is not None else None,
        "nextFires": [slot_text(s) for s in next_fires(seq, now, NEXT_FIRES)] if seq else [],
        "observation": observed,
    }


def overlap_view(loop: Loop) -> dict[str, Any]:
    """`{"value", "max"}` of the loop's `overlap` line (docs/rules.md#overlap): `skip`,
    `buffer_one` or `allow` with its `max N`; a value of None for an old combination no
    overlap value means (its `singleton` still says what runs do)."""
    setting = overlap_line(loop)
    if setting is None:
        return {"value": None, "max": None}
    return {"value": str(setting.value), "max": setting.max_active}


def next_poll(
    loop: Loop, obs: ObservationRecord | None, state: LoopState | None, now: datetime
) -> datetime | None:
    """A watch loop's next poll: the recorded one (in the past while serve is down), or
    now for an enabled loop never polled; None for a disabled one."""
    if not loop.enabled:
        return None
    if obs is None or obs.next_poll_at is None or state is None or not state.enabled:
        return now
    return parse_iso(obs.next_poll_at)


def next_due(
    loop: Loop, seq: Slots | None, state: LoopState | None, now: datetime
) -> datetime | None:
    """The next slot the in-process scheduler will account for: the first after its
    cursor, never before enablement (None for manual, host-clock and disabled loops).
    In the past when the scheduler is behind (serve down)."""
    if seq is None or not loop.enabled:
        return None
    if state is None or not state.enabled or state.enabled_since is None:
        return seq.after(parse_iso(slot_text(now)) - EPS)  # enabled when serve starts
    after = parse_iso(state.enabled_since) - EPS
    if state.cursor is not None:
        after = max(after, parse_iso(state.cursor))
    return seq.after(after)


def cadence(loop: Loop, seq: Slots | None, now: datetime) -> int | None:
    """Seconds between slots: the interval, or for cron the gap around now."""
    if loop.trigger.every_seconds:
        return loop.trigger.every_seconds
    if seq is None:
        return None
    base = seq.floor(now) or seq.after(now)
    following = seq.after(base) if base is not None else None
    if base is None or following is None:
        return None
    return int((following - base).total_seconds())


def last_cause(event: EventRecord | None) -> dict[str, Any] | None:
    """What fired the loop's latest tick, for a trigger that waits: the admitted event
    (`on_event`) or the upstream occurrence that concluded (`after`), with the window."""
    if event is None or event.loop is None:
        return None
    window = event.payload.get("window")
    cause = event.payload.get("trigger") if event.source == EVENT_SOURCE else None
    if isinstance(cause, dict):
        return {
            "kind": "event",
            "eventId": cause.get("eventId"),
            "type": cause.get("type"),
            "window": window,
        }
    upstream = event.payload.get("upstream") if event.source == AFTER_SOURCE else None
    if isinstance(upstream, dict):
        return {
            "kind": "upstream",
            "loop": upstream.get("loop"),
            "occurrence": upstream.get("occurrence"),
            "state": upstream.get("state"),
            "outcome": upstream.get("outcome"),
            "window": window,
        }
    return None


def _last_slot(state: LoopState | None, event: EventRecord | None) -> str | None:
    if state is not None and state.last_slot is not None:
        return state.last_slot
    if event is not None and event.source in SLOT_SOURCES:
        slot = event.payload.get("slot")
        return slot if isinstance(slot, str) else None
    return None


def _decision_text(tx: Tx, event: EventRecord | None) -> str | None:
    decision = tx.get_decision(event.event_id) if event is not None else None
    if decision is None:
        return None
    return decision.kind + (f":{decision.reason}" if decision.reason else "")


def _outcome(run: RunRecord | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "runId": run.run_id,
        "state": run.state,
        "outcome": run.outcome,
        "at": run.finished_at or run.created_at,
    }


# ---- pause, resume, run now, backfill -----------------------------------------------------


def pause(rt: Runtime, name: str, actor: str, note: str) -> dict[str, Any]:
    """Skip the loop's slots (recorded with reason `paused`) until resumed; journaled.
    Conflict when already paused."""
    loop = loop_named(rt, name)
    if not note.strip():
        raise BadRequest("a pause needs a note saying why", reason="missing_note")
    with rt.store.write() as tx:
        state = _state_row(rt, tx, loop)
        if state.paused:
            raise Conflict(
                f"loop '{name}' is already paused by {state.paused_by}: {state.pause_note}",
                reason="already_paused",
            )
        at = rt.now()
        tx.set_paused(name, True, note.strip(), actor, at)
        rt.journal(tx, Entity.LOOP, name, JournalAction.PAUSED, actor, note=note.strip(), at=at)
    return schedule_of(rt, name, rt.clock())


def resume(rt: Runtime, name: str, actor: str, note: str = "") -> dict[str, Any]:
    """Fire the loop's slots again from the next one (paused slots are not replayed).
    Conflict when not paused."""
    loop = loop_named(rt, name)
    with rt.store.write() as tx:
        state = tx.get_loop_state(loop.name)
        if state is None or not state.paused:
            raise Conflict(f"loop '{name}' is not paused", reason="not_paused")
        at = rt.now()
        tx.set_paused(name, False, "", None, at)
        # a person looked: the circuit breaker counts afresh
        # (docs/occurrences.md#the-circuit-breaker)
        tx.set_loop_counters(name, 0, state.nothing_streak, state.quiet_until, at)
        rt.journal(
            tx,
            Entity.LOOP,
            name,
            JournalAction.RESUMED,
            actor,
            note=note.strip(),
            at=at,
            data={"pausedBy": state.paused_by, "pauseNote": state.pause_note},
        )
        # the loop's state changed: a breaker that trips again is news again
        notify(
            rt,
            tx,
            "loop",
            "resumed",
            f"loop '{name}' resumed by {actor}" + (f": {note.strip()}" if note.strip() else ""),
            loop=name,
            links={"loop": name},
            at=at,
        )
    return schedule_of(rt, name, rt.clock())


def _state_row(rt: Runtime, tx: Tx, loop: Loop) -> LoopState:
    """The loop's state, created (as the scheduler would) when serve never recorded it."""
    state = tx.get_loop_state(loop.name)
    if state is None:
        tx.set_loop_enabled(loop.name, loop.enabled, slot_text(rt.clock()), rt.now())
        state = tx.get_loop_state(loop.name)
    assert state is not None
    return state


def _refuse_paused(tx: Tx, name: str, what: str) -> None:
    state = tx.get_loop_state(name)
    if state is not None and state.paused:
        raise Conflict(
            f"loop '{name}' is paused ({state.pause_note}); resume it before {what}",
            reason="paused",
        )


def trigger(rt: Runtime, name: str, actor: str) -> Admission:
    """Run now: a `manual:<loop>:<token>` event, never a scheduled slot's identity, so
    it neither takes nor blocks a slot. Conflict when the loop is paused or disabled
    (a disabled loop is off; inject its event type to try the work once)."""
    loop = loop_named(rt, name)
    if not loop.enabled:
        raise Conflict(f"loop '{name}' is disabled: enable it to run it", reason="disabled")
    with rt.store.read() as tx:
        _refuse_paused(tx, name, "triggering it")
    return admit(rt, manual_tick(loop, rt.clock(), uuid.uuid4().hex), actor)


def backfill(
    rt: Runtime, name: str, start: datetime, end: datetime, actor: str, limit: int = BACKFILL_LIMIT
) -> dict[str, Any]:
    """Admit the loop's slots in [start, end] as ordinary ticks (source `schedule`,
    admitted by `actor`) in one transaction. A slot already admitted stays as it is."""
    loop = loop_named(rt, name)
    seq = slots_of(loop.trigger)
    if seq is None:
        raise BadRequest(
            f"loop '{name}' is {loop.trigger.describe()}: the scheduler never fires it, so it "
            "has no slots to backfill (run it now with `engine schedule trigger`)",
            reason="no_slots",
        )
    if end < start:
        raise BadRequest("the range ends before it starts", reason="bad_range")
    if end > rt.clock():
        raise BadRequest("backfill admits past slots only; the range ends in the future")
    if not loop.enabled:
        raise Conflict(f"loop '{name}' is disabled: its ticks would be no-ops", reason="disabled")
    wanted = list(slots_between(seq, start, end, limit + 1))
    if len(wanted) > limit:
        raise BadRequest(
            f"{slot_text(start)}..{slot_text(end)} holds more than {limit} slots of '{name}'; "
            "narrow the range",
            reason="too_many_slots",
        )
    at = rt.now()
    with rt.store.write() as tx:
        _refuse_paused(tx, name, "backfilling it")
        admitted = sum(admit_in(rt, tx, tick(loop, s, 0), actor, at).admitted for s in wanted)
    return {
        "loop": name,
        "from": slot_text(start),
        "to": slot_text(end),
        "slots": len(wanted),
        "admitted": admitted,
        "alreadyAdmitted": len(wanted) - admitted,
        "first": slot_text(wanted[0]) if wanted else None,
        "last": slot_text(wanted[-1]) if wanted else None,
    }


def slots_between(seq: Slots, start: datetime, end: datetime, most: int) -> Iterator[datetime]:
    """Slots in [start, end], at most `most`."""
    slot = seq.after(start - EPS)
    count = 0
    while slot is not None and slot <= end and count < most:
        yield slot
        count += 1
        slot = seq.after(slot)


# ---- slot history -----------------------------------------------------------------------


def slot_history(
    rt: Runtime, name: str, since: datetime, now: datetime, limit: int = SLOT_LIMIT
) -> list[dict[str, Any]]:
    """Every slot since `since` that was due, and what happened to it, by slot: fired
    ticks (with their decision), manual runs, skipped ranges with their reason, and
    due slots not yet accounted for."""
    loop = loop_named(rt, name)
    with rt.store.read() as tx:
        rows = [_fired(tx, e) for e in tx.loop_events(name, iso(since), limit)]
        rows += [
            {
                "slot": s.first_slot,
                "lastSlot": s.last_slot,
                "count": s.count,
                "status": "skipped",
                "reason": s.reason,
                "eventId": None,
                "at": s.recorded_at,
            }
            for s in tx.list_skips(name, slot_text(since))
        ]
        pending = _unaccounted(loop, tx.get_loop_state(name), since, now)
    rows += [pending] if pending else []
    return sorted(rows, key=lambda r: (r["slot"], r["status"]))


def _fired(tx: Tx, event: EventRecord) -> dict[str, Any]:
    slot = event.payload.get("slot")
    slot = slot if isinstance(slot, str) else slot_text(parse_iso(event.occurred_at))
    decision = tx.get_decision(event.event_id)
    return {
        "slot": slot,
        "lastSlot": slot,
        "count": 1,
        "status": "fired" if event.source in SLOT_SOURCES else event.source,
        "reason": decision.reason if decision is not None else None,
        "decision": decision.kind if decision is not None else None,
        "eventId": event.event_id,
        "admittedBy": event.admitted_by,
        "at": event.admitted_at,
    }


def _unaccounted(
    loop: Loop, state: LoopState | None, since: datetime, now: datetime
) -> dict[str, Any] | None:
    """Due slots after the scheduler's cursor, with why they have no record yet."""
    seq = slots_of(loop.trigger)
    if seq is None:
        return None
    after = since - EPS
    if state is not None and state.cursor is not None:
        after = max(after, parse_iso(state.cursor))
    if loop.enabled and state is not None and state.enabled and state.enabled_since:
        after = max(after, parse_iso(state.enabled_since) - EPS)
    first, last = seq.after(after), seq.floor(now)
    if first is None or last is None or first > now:
        return None
    if not loop.enabled:
        reason = SkipReason.DISABLED.value
    elif state is None or not state.enabled:
        reason = "not_started"  # serve has not run with this loop enabled
    else:
        reason = SkipReason.PAUSED.value if state.paused else "not_yet_accounted"
    return {
        "slot": slot_text(first),
        "lastSlot": slot_text(last),
        "count": count_slots(seq, first, last),
        "status": "pending",
        "reason": reason,
        "eventId": None,
        "at": None,
    }


def count_slots(seq: Slots, first: datetime, last: datetime) -> int:
    if isinstance(seq, IntervalSlots):
        return seq.count(first, last)
    return sum(1 for _ in slots_between(seq, first, last, COUNT_LIMIT))
