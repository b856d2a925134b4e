"""The tick envelope of a loop's slot (SPEC §3). Pure: the same slot always gives the
same envelope, so every process that fires it converges on one admission."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

from engine.core.envelope import Envelope
from engine.core.ruleset import Loop
from engine.core.slots import cadence_seconds


@lru_cache(maxsize=4096)  # a wave formats one slot for thousands of loops
def slot_text(slot: datetime) -> str:
    """A slot in the tick's id and payload: ISO-8601 UTC, whole seconds, `Z`."""
    return slot.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def tick_id(loop: str, slot: datetime) -> str:
    return f"clock:{loop}:{slot_text(slot)}"


def tick(loop: Loop, slot: datetime, skipped: int, source: str = "schedule") -> Envelope:
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
        source="manual",
        subject=loop.name,
        occurredAt=now,
        correlationId=event_id,
        payload=payload,
    )
