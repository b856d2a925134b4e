"""The tick envelope of a loop's slot (docs/scheduling.md#slots-the-identity-of-a-firing). Pure: the
same slot always gives the same envelope, so every process that fires it converges on one
admission."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from engine.core.envelope import Envelope, iso
from engine.core.records import EventRecord
from engine.core.ruleset import Loop, TriggerKind
from engine.core.slots import IntervalSlots, Slots, cadence_seconds, slots_of
from engine.core.states import EventSource
from engine.core.triggers import WAITING_SOURCES, WATCH_SOURCE

# Sources whose ticks are a slot's firing: the scheduler's and a host timer's. A run-now
# (source `manual`) is an event of its own, never a slot's identity.
SLOT_SOURCES = frozenset({EventSource.SCHEDULE, EventSource.BRIDGE})
# The source of a watch loop's tick: a change of its probe, never a slot.


@lru_cache(maxsize=4096)  # a wave formats one slot for thousands of loops
def slot_text(slot: datetime) -> str:
    """A slot in the tick's id and payload: ISO-8601 UTC, whole seconds, `Z`."""
    return slot.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def tick_id(loop: str, slot: datetime) -> str:
    return f"clock:{loop}:{slot_text(slot)}"


def bridge_tick_id(loop: str, slot: datetime) -> str:
    """A host timer's tick of `loop`; never `clock:...`, so it cannot take a native slot's."""
    return f"bridge:{loop}:{slot_text(slot)}"


def slot_tick_id(source: str, loop: str, slot: datetime) -> str:
    """The one event id a slot's tick has, by who fires it: the scheduler (and an
    operator's backfill) `clock:<loop>:<slot>`, a host timer `bridge:<loop>:<slot>`. So a
    slot is admitted once: a second tick of it is a duplicate id."""
    return bridge_tick_id(loop, slot) if source == EventSource.BRIDGE else tick_id(loop, slot)


def tick(loop: Loop, slot: datetime, skipped: int, source: str = EventSource.SCHEDULE) -> Envelope:
    """`clock:<loop>:<slot>`, the loop's event type, payload `{loop, slot,
    cadenceSeconds, skippedSlots}` merged over the loop's static payload."""
    event_id = tick_id(loop.name, slot)
    payload = {
        **loop.payload,
        "loop": loop.name,
        "slot": slot_text(slot),
        "cadenceSeconds": cadence_seconds(loop.trigger, slot),
        "skippedSlots": skipped,
    }
    # Built from a compiled, validated loop: nothing to re-validate on the hot path.
    return Envelope.model_construct(
        eventId=event_id,
        type=loop.event_type,
        source=source,
        subject=loop.name,
        occurredAt=slot,
        correlationId=event_id,
        payload=payload,
    )


def watch_window(changes: int, fingerprint: str) -> str:
    """A watch's occurrence window: the change's number and the new fingerprint."""
    return f"watch:{changes}-{fingerprint[:16]}"


def watch_tick(
    loop: Loop, changes: int, fingerprint: str, previous: str, observed: datetime
) -> Envelope:
    """A watch loop's tick for its `changes`-th change: `watch:<loop>:<n>-<fp16>`,
    source `watch`, payload the loop's static payload plus `{loop, window, fingerprint,
    previousFingerprint, observedAt}`. The same change always gives the same envelope,
    so two processes that see it converge on one admission."""
    window = watch_window(changes, fingerprint)
    event_id = f"watch:{loop.name}:{window.removeprefix('watch:')}"
    payload = {
        **loop.payload,
        "loop": loop.name,
        "window": window,
        "fingerprint": fingerprint,
        "previousFingerprint": previous,
        "observedAt": iso(observed),
    }
    return Envelope.model_construct(
        eventId=event_id,
        type=loop.event_type,
        source=WATCH_SOURCE,
        subject=loop.name,
        occurredAt=observed,
        correlationId=event_id,
        payload=payload,
    )


def manual_tick(loop: Loop, now: datetime, token: str) -> Envelope:
    """A run-now trigger: `manual:<loop>:<token>`, never a scheduled slot's identity."""
    event_id = f"manual:{loop.name}:{token}"
    payload = {
        **loop.payload,
        "loop": loop.name,
        "slot": slot_text(now),
        "cadenceSeconds": cadence_seconds(loop.trigger, now),
        "skippedSlots": 0,
    }
    return Envelope(
        eventId=event_id,
        type=loop.event_type,
        source=EventSource.MANUAL,
        subject=loop.name,
        occurredAt=now,
        correlationId=event_id,
        payload=payload,
    )


# How far ahead of the runtime's clock a host timer's slot may be (clock skew between
# hosts); beyond it a post would claim a slot that has not come yet.
BRIDGE_SKEW = timedelta(minutes=5)


def slot_problem(
    loop: Loop, payload: dict[str, Any], now: datetime, skew: timedelta = timedelta(0)
) -> str | None:
    """Why `payload.slot` is not a slot of `loop` that has come (None when it is): it
    must be an instant of the loop's slot sequence (for a host-clock loop, the epoch
    floor of its cadence, as `engine emit` computes it) no later than `now` + `skew`.
    A tick the scheduler did not make — a host timer's post, an operator's backfill —
    can so never take a future slot's identity away from the real one."""
    text = payload.get("slot")
    if not isinstance(text, str):
        return "a loop's tick needs payload.slot, an ISO-8601 UTC instant"
    try:
        slot = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        slot = None
    if slot is None or slot.tzinfo is None or slot_text(slot) != text:
        return f"payload.slot '{text[:40]}' is not a slot (ISO-8601 UTC, whole seconds, Z)"
    every = loop.trigger.every_seconds
    seq: Slots | None = slots_of(loop.trigger)
    if loop.trigger.kind is TriggerKind.HOST and every:  # the cadence `engine emit` floors
        seq = IntervalSlots(every)
    if seq is None or seq.floor(slot) != slot:
        return (
            f"payload.slot {text} is not a slot of loop '{loop.name}' ({loop.trigger.describe()})"
        )
    if slot > now + skew:
        return f"payload.slot {text} has not come yet (the runtime's clock is {slot_text(now)})"
    return None


def tick_problem(
    event_id: str, source: str, loop: Loop, payload: dict[str, Any], now: datetime, skew: timedelta
) -> str | None:
    """Why a tick the scheduler did not make is refused (None when it is fine): its slot
    must be one of the loop's that has come (`slot_problem`) and its id the slot's own
    (`slot_tick_id`), so it is admitted at most once whoever sends it."""
    problem = slot_problem(loop, payload, now, skew)
    if problem is not None:
        return problem
    slot = datetime.fromisoformat(str(payload["slot"]).replace("Z", "+00:00"))
    expected = slot_tick_id(source, loop.name, slot)
    if event_id != expected:
        return f"the tick of loop '{loop.name}' at {payload['slot']} has the id '{expected}'"
    return None


def idempotency_key(event: EventRecord) -> str:
    """The key of an event's first run: loop plus slot (or window) for a tick, so an
    approved tick and a replayed one converge; otherwise the event's own id (already
    scoped, e.g. merge-pr:<repo>:<pr>:<sha>). A retry's run is `<key>#<attempt>`."""
    slot = event.payload.get("slot")
    if event.loop is not None and event.source in SLOT_SOURCES and isinstance(slot, str):
        return f"loop:{event.loop}:{slot}"
    window = event.payload.get("window")
    if event.loop is not None and event.source in WAITING_SOURCES and isinstance(window, str):
        return f"loop:{event.loop}:{window}"
    return f"event:{event.event_id}"
