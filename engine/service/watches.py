"""Condition watches (docs/scheduling.md, "Condition watches"): which due watch loops
to poll, and what a finished poll records and fires, in one commit.

The probes run outside any transaction, in the probe pool (engine.service.probing),
never in the runtime loop's thread. Once polls have finished, one write transaction
reads each loop's state and observation afresh, decides the poll purely
(`engine.core.probes.next_observation`) and writes it:
a baseline or an unchanged poll is only counted; a change moves the row by a
compare-and-set and admits the loop's tick (`watch:<loop>:<n>-<fp16>`) planned in the
same commit, so two processes polling one database fire a change once; a failure is
recorded with its diagnostic and delays the next poll by the loop's backoff."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from engine.core.decisions import Actor, Entity, JournalAction
from engine.core.envelope import parse_iso
from engine.core.probes import FAILING, Outcome, ProbeRun, Step, next_observation, observe
from engine.core.records import LoopState, ObservationRecord
from engine.core.ruleset import Loop
from engine.core.ticks import watch_tick
from engine.service.admission import admit_record
from engine.service.context import Runtime
from engine.service.planning import plan_safely
from engine.service.probing import Poll
from engine.store.ports import Tx

ACTOR = Actor.SCHEDULE
log = logging.getLogger("engine.watches")


def first_poll(tx: Tx, loop: Loop, now: datetime) -> datetime:
    """When a watch loop is next polled at start: its recorded next poll (a poll after
    downtime is just the next one, never a catch-up), or now when it was never polled."""
    obs = tx.get_observation(loop.name)
    return parse_iso(obs.next_poll_at) if obs and obs.next_poll_at else now


@dataclass(frozen=True, slots=True)
class Polled:
    """What a pass's polls did: the ticks admitted, and each loop's next poll (a loop
    disabled in the store has none)."""

    fired: int
    next: dict[str, datetime]


def due(rt: Runtime, loops: list[Loop], now: datetime) -> tuple[list[Loop], dict[str, datetime]]:
    """Which of the due `loops` to poll at `now`, and the next poll of the others: a
    loop that is disabled in the store is dropped (no next poll); a paused one is not
    polled and comes back after its cadence."""
    with rt.store.read() as tx:
        states = {loop.name: tx.get_loop_state(loop.name) for loop in loops}
    polled = [loop for loop in loops if _active(states[loop.name])]
    nxt: dict[str, datetime] = {
        loop.name: now + _cadence(loop)
        for loop in loops
        if states[loop.name] is not None and loop not in polled and _enabled(states[loop.name])
    }
    return polled, nxt


def record(rt: Runtime, polls: list[Poll]) -> Polled:
    """Record finished polls in one commit, each at the instant it is of; each loop's
    next poll."""
    fired = 0
    nxt: dict[str, datetime] = {}
    with rt.store.write() as tx:
        for poll in polls:
            step = _record(rt, tx, poll.loop, poll.run, poll.at)
            fired += step is not None and step.outcome is Outcome.CHANGED
            nxt[poll.loop.name] = _next_poll(tx, poll.loop, poll.at)
    return Polled(fired, nxt)


def _enabled(state: LoopState | None) -> bool:
    return state is not None and state.enabled and state.enabled_since is not None


def _active(state: LoopState | None) -> bool:
    return _enabled(state) and state is not None and not state.paused


def _cadence(loop: Loop) -> timedelta:
    return timedelta(seconds=loop.trigger.every_seconds or 0)


def _record(rt: Runtime, tx: Tx, loop: Loop, run: ProbeRun, now: datetime) -> Step | None:
    """Write one poll; the step taken, or None when another process observed the loop
    after this poll began (its reading is then the newer one and wins)."""
    state = tx.get_loop_state(loop.name)
    if not _active(state):
        return None
    previous = tx.get_observation(loop.name)
    if previous is not None and previous.observed_at and parse_iso(previous.observed_at) > now:
        return None
    probe = rt.rules.probes[loop.trigger.probe or ""]
    step = next_observation(loop, _since_enabled(previous, state), observe(probe, run), now)
    if not _store(tx, step.record, previous):
        return None
    at = rt.now()
    if step.outcome is Outcome.CHANGED:
        _fire(rt, tx, loop, step, state, now, at)
    elif step.outcome is Outcome.FAILED:
        _failed(rt, tx, loop, step.record, at)
    return step


def _since_enabled(
    previous: ObservationRecord | None, state: LoopState | None
) -> ObservationRecord | None:
    """The observation a poll compares with: none of its fingerprint when it was taken
    before the loop was last enabled, so a watch switched on again starts from a fresh
    baseline (as catch-up never reaches before enablement); its change count stays, so
    a later change never reuses an earlier one's event id."""
    if previous is None or state is None or state.enabled_since is None:
        return previous
    seen = previous.observed_at
    if seen is None or parse_iso(seen) >= parse_iso(state.enabled_since):
        return previous
    return replace(previous, fingerprint=None)


def _store(tx: Tx, record: ObservationRecord, previous: ObservationRecord | None) -> bool:
    if previous is None:
        return tx.insert_observation(record)
    return tx.update_observation(record, previous)


def _fire(
    rt: Runtime, tx: Tx, loop: Loop, step: Step, state: LoopState | None, now: datetime, at: str
) -> None:
    record = step.record
    assert record.fingerprint is not None and step.previous is not None
    envelope = watch_tick(loop, record.changes, record.fingerprint, step.previous, now)
    row = admit_record(rt, tx, envelope, ACTOR, at, planned=True)
    if row is not None:  # planned in the same commit: decided before anything runs
        plan_safely(rt, tx, row, at)
    log.info("loop %s: its probe changed (change %d)", loop.name, record.changes)


def _failed(rt: Runtime, tx: Tx, loop: Loop, record: ObservationRecord, at: str) -> None:
    """Log every failed poll; journal the one that makes the probe failing (FAILING in
    a row), so the journal holds when it started without a line per poll."""
    log.warning(
        "loop %s: probe %s failed (%d in a row): %s",
        loop.name,
        loop.trigger.probe,
        record.consecutive_failures,
        record.diagnostic,
    )
    if record.consecutive_failures == FAILING:
        rt.journal(
            tx,
            Entity.LOOP,
            loop.name,
            JournalAction.PROBE_FAILING,
            Actor.SYSTEM,
            at=at,
            note=record.diagnostic,
            data={"probe": loop.trigger.probe, "consecutiveFailures": FAILING},
        )


def _next_poll(tx: Tx, loop: Loop, now: datetime) -> datetime:
    obs = tx.get_observation(loop.name)
    return parse_iso(obs.next_poll_at) if obs and obs.next_poll_at else now + _cadence(loop)


# ---- the view ---------------------------------------------------------------------------


def observation_view(obs: ObservationRecord | None, loop: Loop) -> dict[str, Any]:
    """A watch loop's last observation as `engine schedule` and GET /schedules show it."""
    return {
        "probe": loop.trigger.probe,
        "observedAt": obs.observed_at if obs else None,
        "status": obs.status if obs else None,
        "fingerprint": obs.fingerprint if obs else None,
        "polls": obs.polls if obs else 0,
        "changes": obs.changes if obs else 0,
        "changedAt": obs.changed_at if obs else None,
        "consecutiveFailures": obs.consecutive_failures if obs else 0,
        "diagnostic": (obs.diagnostic or None) if obs else None,
        "nextPoll": obs.next_poll_at if obs else None,
    }
