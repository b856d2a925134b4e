"""The triggers that wait for something (docs/rules.md, "Triggers"): a repository
event (`on_event TYPE`) and a dependency checkpoint (`after LOOP`). Pure: which loops an
admitted event or a concluded occurrence fires, the window of each firing, and the
tick's envelope. The same facts always give the same envelope, so a redelivery, a
second process or a restart converges on one admission."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from dsl import expr as ex
from engine.core.envelope import Envelope
from engine.core.ruleset import Loop, RuleSet, TriggerKind
from engine.core.states import EventSource

# The sources of the ticks of the triggers that wait. Only the runtime admits them
# (actor `schedule`): an envelope from outside that claims one follows its route
# (engine.core.planner.loop_of).
EVENT_SOURCE: Final = EventSource.ON_EVENT
AFTER_SOURCE: Final = EventSource.AFTER
WATCH_SOURCE: Final = EventSource.WATCH  # a condition watch's change (engine.core.ticks.watch_tick)
# The ticks whose occurrence window the runtime computed and put in `payload.window`.
WAITING_SOURCES: Final = frozenset({EVENT_SOURCE, AFTER_SOURCE, WATCH_SOURCE})

# The payload fields the engine fills in these ticks; a loop's static payload may not
# set them (E0208).
EVENT_FIELDS: Final = frozenset({"loop", "window", "trigger"})
AFTER_FIELDS: Final = frozenset({"loop", "window", "upstream"})

# A window longer than this is kept as its digest (it is part of the occurrence key).
MAX_WINDOW: Final = 200
_MAX_ID: Final = 256


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def window_text(value: Any) -> str:
    """A window as text: a string as it is, anything else as canonical JSON; beyond
    MAX_WINDOW characters, `sha256:<digest>` of that text."""
    text = (
        value
        if isinstance(value, str)
        else json.dumps(value, sort_keys=True, separators=(",", ":"))
    )
    return text if len(text) <= MAX_WINDOW else f"sha256:{_digest(text)}"


def _tick_id(prefix: str, loop: str, key: str) -> str:
    """`<prefix>:<loop>:<key>`, or the key's digest when that would be too long."""
    event_id = f"{prefix}:{loop}:{key}"
    return event_id if len(event_id) <= _MAX_ID else f"{prefix}:{loop}:{_digest(key)}"


def event_scope(event: Envelope) -> dict[str, Any]:
    """What an `on_event` guard and window read: `event`, the admitted envelope (as a
    chain's `event`: eventId, type, source, subject, correlationId, payload)."""
    return {"event": event.model_dump(mode="json")}


# ---- on_event ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Firing:
    """One loop an event fires, with its window; or why it could not be told (`error`,
    an expression that failed on this event: the loop is not fired)."""

    loop: Loop
    window: str | None = None
    error: str | None = None


def event_loops(rules: RuleSet, event_type: str) -> Iterator[Loop]:
    """The loops an admitted event of `event_type` may fire, in name order."""
    for name in sorted(rules.loops):
        loop = rules.loops[name]
        if loop.trigger.kind is TriggerKind.EVENT and loop.trigger.event_type == event_type:
            yield loop


def fired_by(rules: RuleSet, event: Envelope, is_tick: bool) -> list[Firing]:
    """The loops `event` fires: every enabled `on_event` loop of its type whose guard
    holds. A loop's own tick (`is_tick`) fires none, so no loop can fire itself or
    another in a circle; `after` says what follows a loop."""
    if is_tick:
        return []
    firings: list[Firing] = []
    for loop in event_loops(rules, event.type):
        if not loop.enabled:
            continue
        trigger = loop.trigger
        scope = event_scope(event)
        try:
            if trigger.guard is not None:
                holds = ex.truthy(ex.evaluate(trigger.guard.expr, scope))
                if holds == trigger.guard.negate:
                    continue
            window = (
                window_text(ex.evaluate(trigger.window, scope))
                if trigger.window is not None
                else event.eventId
            )
        except ex.EvalError as err:
            firings.append(Firing(loop, error=f"{err.span}: {err.message}"))
            continue
        firings.append(Firing(loop, window))
    return firings


def event_tick(loop: Loop, event: Envelope, window: str) -> Envelope:
    """`on:<loop>:<event id>`, the loop's type, payload `{loop, window, trigger}` over
    the loop's static payload, where `trigger` is the event that fired it. `repo`
    comes from the static payload, else from the event's payload."""
    payload: dict[str, Any] = dict(loop.payload)
    repo = event.payload.get("repo")
    if "repo" not in payload and isinstance(repo, str):
        payload["repo"] = repo
    payload.update(
        loop=loop.name,
        window=window,
        trigger={
            "eventId": event.eventId,
            "type": event.type,
            "source": event.source,
            "subject": event.subject,
            "payload": event.payload,
        },
    )
    event_id = _tick_id("on", loop.name, event.eventId)
    return Envelope.model_construct(
        eventId=event_id,
        type=loop.event_type,
        source=EVENT_SOURCE,
        subject=loop.name,
        occurredAt=event.occurredAt,
        correlationId=event.correlationId or event.eventId,
        payload=payload,
    )


# ---- after ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Conclusion:
    """An upstream occurrence that reached a terminal state: what `after` reads."""

    loop: str
    occurrence: str  # the event id that opened it
    state: str
    outcome: str | None  # its run's outcome, when work ran
    run: str | None
    window: str | None
    repo: str | None
    correlation: str
    at: datetime

    def as_payload(self) -> dict[str, Any]:
        return {
            "loop": self.loop,
            "occurrence": self.occurrence,
            "state": self.state,
            "outcome": self.outcome,
            "run": self.run,
            "window": self.window,
        }


def dependents(rules: RuleSet, done: Conclusion) -> list[Loop]:
    """The enabled loops that wait for `done`: `after <its loop>`, with its outcome and
    state among the ones they name (none named: any)."""
    found: list[Loop] = []
    for name in sorted(rules.loops):
        loop = rules.loops[name]
        trigger = loop.trigger
        if trigger.kind is not TriggerKind.AFTER or trigger.upstream != done.loop:
            continue
        if not loop.enabled:
            continue
        if trigger.outcomes and done.outcome not in trigger.outcomes:
            continue
        if trigger.states and done.state not in trigger.states:
            continue
        found.append(loop)
    return found


def after_tick(loop: Loop, done: Conclusion) -> Envelope:
    """`after:<loop>:<upstream occurrence>`, the loop's type, payload `{loop, window,
    upstream}` over the static payload: one tick per concluded upstream occurrence, its
    window the upstream's identity. `repo` as the upstream's when the payload has none."""
    payload: dict[str, Any] = dict(loop.payload)
    if "repo" not in payload and done.repo is not None:
        payload["repo"] = done.repo
    window = window_text(f"after:{done.occurrence}")
    payload.update(loop=loop.name, window=window, upstream=done.as_payload())
    return Envelope.model_construct(
        eventId=_tick_id("after", loop.name, done.occurrence),
        type=loop.event_type,
        source=AFTER_SOURCE,
        subject=loop.name,
        occurredAt=done.at,
        correlationId=done.correlation,
        payload=payload,
    )


def dependency_cycle(loops: Mapping[str, Loop]) -> list[str] | None:
    """A cycle of `after` edges (the loop names around it, first repeated last), or
    None: a loop waiting for itself, directly or through others, would never start."""
    upstream = {
        name: loop.trigger.upstream
        for name, loop in loops.items()
        if loop.trigger.kind is TriggerKind.AFTER and loop.trigger.upstream in loops
    }
    state: dict[str, int] = {}  # 1: on the path being walked, 2: known to end
    for start in sorted(upstream):
        path: list[str] = []
        node: str | None = start
        while node is not None and state.get(node, 0) == 0 and node in upstream:
            state[node] = 1
            path.append(node)
            node = upstream[node]
        if node is not None and state.get(node) == 1:
            return [*path[path.index(node) :], node]
        for name in path:
            state[name] = 2
    return None


SAMPLE_TRIGGER: Final = {
    "eventId": "sample-event",
    "type": "sample.type",
    "source": "github",
    "subject": "",
    "payload": {},
}
SAMPLE_UPSTREAM: Final = {
    "loop": "upstream",
    "occurrence": "clock:upstream:2026-01-01T00:00:00Z",
    "state": "completed",
    "outcome": "OK",
    "run": "run-0000000000000000",
    "window": "2026-01-01T00:00:00Z",
}
