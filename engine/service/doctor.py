"""The doctor (`engine doctor`, `GET /status`): anomalies an operator must act on.

- A stopped clock: an enabled loop that admitted no tick for two of its slots (interval
  or cron: the gap between its slots; a host-clock loop: two of its intervals), counted
  from its last tick, its enablement, or the last slot an operator's pause skipped; a
  watch loop whose next poll is overdue by more than its cadence.
- A proposal pile-up: a watched loop with more than N open proposals (default 3).
- A failing probe: an enabled watch loop whose last 3 (or more) polls failed, with the
  diagnostic of the last one.

Paused loops and superseded proposals are information, not anomalies."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from engine.core.envelope import iso, parse_iso
from engine.core.probes import FAILING
from engine.core.records import LoopState, ObservationRecord
from engine.core.ruleset import Approval, Loop, TriggerKind
from engine.core.slots import SkipReason, slots_of
from engine.core.states import ProposalState
from engine.core.ticks import slot_text
from engine.service.context import Runtime
from engine.service.schedules import COUNT_LIMIT, EPS, SLOT_LIMIT, count_slots
from engine.store.ports import Tx

PILEUP = 3  # a watched loop with more open proposals than this is piling up
GRACE = timedelta(seconds=60)  # the scheduler pass that is about to fire a due slot


def doctor(rt: Runtime, now: datetime, pileup: int = PILEUP) -> dict[str, Any]:
    """Anomalies: an enabled loop whose clock stopped (no tick for two of its slots, or
    two host-clock intervals), and a watched loop with more than `pileup` open
    proposals. Paused loops and superseded proposals are reported as information."""
    stopped: list[dict[str, Any]] = []
    pileups: list[dict[str, Any]] = []
    paused: list[dict[str, Any]] = []
    with rt.store.read() as tx:
        states = {s.loop: s for s in tx.list_loop_states()}
        failing = _failing_probes(rt, tx.list_observations())
        opened = tx.open_proposals_by_loop()
        for name, loop in sorted(rt.rules.loops.items()):
            state = states.get(name)
            if loop.enabled and state is not None and state.paused:
                paused.append({"loop": name, "by": state.paused_by})
            elif loop.enabled and (found := _stopped(tx, loop, state, now)) is not None:
                stopped.append(found)
            watched = loop.approval is Approval.WATCHED or rt.rules.is_human_only(loop.event_type)
            if watched and opened.get(name, 0) > pileup:
                pileups.append(_pileup(tx, loop, opened[name], pileup))
        superseded = tx.list_proposals(COUNT_LIMIT, ProposalState.SUPERSEDED.value)
    anomalies = [_anomaly("stopped_schedule", s) for s in stopped]
    anomalies += [_anomaly("proposal_pileup", p) for p in pileups]
    anomalies += [_anomaly("failing_probe", f) for f in failing]
    return {
        "ok": not anomalies,
        "checkedAt": iso(now),
        "pileupLimit": pileup,
        "anomalies": anomalies,
        "stoppedSchedules": stopped,
        "proposalPileups": pileups,
        "failingProbes": failing,
        "pausedSchedules": paused,
        "supersededProposals": dict(sorted(Counter(p.loop for p in superseded if p.loop).items())),
    }


def _stopped(tx: Tx, loop: Loop, state: LoopState | None, now: datetime) -> dict[str, Any] | None:
    """The stopped-clock finding for one enabled loop, or None while it turns."""
    seq = slots_of(loop.trigger)
    host = loop.trigger.kind is TriggerKind.HOST and bool(loop.trigger.every_seconds)
    watch = loop.trigger.kind is TriggerKind.WATCH
    if seq is None and not host and not watch:
        return None  # manual: nothing is expected of it
    if state is None or not state.enabled or state.enabled_since is None:
        message = (
            f"loop '{loop.name}' is enabled in the rules but `engine serve` never started it"
            if state is None
            else f"loop '{loop.name}' is enabled in the rules but not in the running serve "
            "(restart `engine serve` to apply the change)"
        )
        return _finding(loop, None, None, None, message)
    since = parse_iso(state.enabled_since)
    if watch:
        return _watch_stopped(tx, loop, since, now)
    if seq is None:
        return _host_stopped(tx, loop, since, now)
    baseline, start = since, since - EPS
    last = _latest_accounted(tx, loop.name, state)
    if last is not None and last >= since:
        baseline = start = last
    first = seq.after(start)
    second = seq.after(first) if first is not None else None
    if second is None or now <= second + GRACE:
        return None
    assert first is not None
    missed = count_slots(seq, first, seq.floor(now) or first)
    message = (
        f"loop '{loop.name}' ({loop.trigger.describe()}) has admitted no tick since "
        f"{slot_text(baseline)}: {missed} slots missed; is `engine serve` running?"
    )
    return _finding(loop, state.last_slot, slot_text(baseline), missed, message)


def _latest_accounted(tx: Tx, name: str, state: LoopState) -> datetime | None:
    """The newest slot that fired, or was skipped because an operator paused the loop."""
    last = parse_iso(state.last_slot) if state.last_slot else None
    floor = state.last_slot or state.enabled_since or ""
    for skip in tx.list_skips(name, floor):
        if skip.reason == SkipReason.PAUSED.value:
            moment = parse_iso(skip.last_slot)
            last = moment if last is None or moment > last else last
    return last


def _host_stopped(tx: Tx, loop: Loop, since: datetime, now: datetime) -> dict[str, Any] | None:
    """A host-clock loop is admitted by `engine emit`: stopped when no such event came
    for two of its intervals (since enablement)."""
    window = timedelta(seconds=2 * (loop.trigger.every_seconds or 0)) + GRACE
    if now - since <= window:
        return None
    recent = tx.loop_events(loop.name, iso(now - window), SLOT_LIMIT)
    if any(e.source != "manual" for e in recent):
        return None
    last = tx.last_loop_event(loop.name)
    seen = last.occurred_at if last is not None and last.source != "manual" else None
    message = (
        f"loop '{loop.name}' ({loop.trigger.describe()}) has admitted no event for more than "
        f"two intervals; is its host timer running `engine emit`?"
    )
    return _finding(loop, seen, seen or slot_text(since), None, message)


def _failing_probes(rt: Runtime, observations: list[ObservationRecord]) -> list[dict[str, Any]]:
    """Enabled watch loops whose probe failed FAILING times in a row or more."""
    out = []
    for obs in observations:
        loop = rt.rules.loops.get(obs.loop)
        if loop is None or not loop.enabled or obs.consecutive_failures < FAILING:
            continue
        out.append(
            {
                "loop": loop.name,
                "probe": loop.trigger.probe,
                "consecutiveFailures": obs.consecutive_failures,
                "lastPoll": obs.observed_at,
                "diagnostic": obs.diagnostic,
                "message": (
                    f"watch loop '{loop.name}': probe '{loop.trigger.probe}' failed "
                    f"{obs.consecutive_failures} polls in a row: {obs.diagnostic}"
                ),
            }
        )
    return out


def _watch_stopped(tx: Tx, loop: Loop, since: datetime, now: datetime) -> dict[str, Any] | None:
    """A watch loop is stopped when its next poll (after its backoff, if its probe
    fails) is overdue by more than a cadence: nobody is polling it."""
    obs = tx.get_observation(loop.name)
    due = parse_iso(obs.next_poll_at) if obs is not None and obs.next_poll_at else since
    if now <= due + timedelta(seconds=loop.trigger.every_seconds or 0) + GRACE:
        return None
    last = obs.observed_at if obs is not None else None
    message = (
        f"loop '{loop.name}' ({loop.trigger.describe()}) has not polled its probe since "
        f"{last or slot_text(since)}; is `engine serve` running?"
    )
    return _finding(loop, last, last or slot_text(since), None, message)


def _anomaly(kind: str, finding: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "loop": finding["loop"], "message": finding["message"]}


def _finding(
    loop: Loop, last: str | None, baseline: str | None, missed: int | None, message: str
) -> dict[str, Any]:
    return {
        "loop": loop.name,
        "trigger": loop.trigger.describe(),
        "lastTick": last,
        "silentSince": baseline,
        "missedSlots": missed,
        "message": message,
    }


def _pileup(tx: Tx, loop: Loop, count: int, limit: int) -> dict[str, Any]:
    oldest = tx.open_loop_proposals(loop.name)[:1]
    return {
        "loop": loop.name,
        "open": count,
        "limit": limit,
        "catchUp": loop.catch_up.value,
        "oldest": oldest[0].created_at if oldest else None,
        "message": (
            f"watched loop '{loop.name}' has {count} open proposals (more than {limit}): "
            "approve or reject them, or check its cadence"
        ),
    }
