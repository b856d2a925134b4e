"""`engine replay` (docs/replay.md): every recorded decision decided again under other
rules, from the facts recorded with it (an event admitted from a GitHub delivery after
the delivery is translated again: engine.intake.retranslation), and the scheduler's
recorded passes planned again; what differs. The database is never written: a SQLite
file is copied to a temporary directory (and migrated there when it is older), a
PostgreSQL database is only read (one this engine would have to migrate is refused)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial

from engine.bootstrap import read_only_copy
from engine.core.codec import decode_facts
from engine.core.decide import Facts, carried, decide
from engine.core.decisions import Actor, DecisionKind, Entity, JournalAction, NoopReason
from engine.core.envelope import iso, parse_iso
from engine.core.ids import stable_id
from engine.core.machines import Lifecycle
from engine.core.planner import admitted_record
from engine.core.records import DecisionRecord, EventRecord, JournalEntry, SkipRecord
from engine.core.replay import Change, Report, SlotChange, Verdict, decided, recorded
from engine.core.ruleset import RuleSet
from engine.core.settle import run_key
from engine.core.slot_replay import FIRED, Outcome, RecordedPass, replanned, runs
from engine.core.slots import SkipRange, SkipReason
from engine.core.states import EventSource
from engine.core.ticks import slot_text, tick
from engine.core.validation import Validators
from engine.errors import BadRequest
from engine.intake.retranslation import Retranslated, retranslated
from engine.loading import Paths, load_rules
from engine.store.ports import TxView

MANY = 1_000_000_000  # every record: a replay reads the whole history


@dataclass(frozen=True, slots=True)
class Window:
    """The decisions replayed: decided at or after `since`, before `until`."""

    since: str | None = None
    until: str | None = None

    @classmethod
    def of(cls, since: str | None, until: str | None) -> Window:
        """BadRequest (exit 2) for a time that is not ISO-8601 or an empty window."""
        start, end = _instant("--since", since), _instant("--until", until)
        if start and end and start >= end:
            raise BadRequest(f"--since {since} is not before --until {until}")
        return cls(start, end)

    def holds(self, at: str) -> bool:
        return (self.since is None or at >= self.since) and (self.until is None or at < self.until)


def _instant(name: str, text: str | None) -> str | None:
    if text is None:
        return None
    try:
        return iso(parse_iso(text))
    except ValueError:
        raise BadRequest(f"{name} {text!r} is not an ISO-8601 time with a zone") from None


def replay(db: str, paths: Paths, window: Window) -> Report:
    """The replay of the database `db` under the rules at `paths`."""
    rules = load_rules(paths)
    with read_only_copy(db) as store, store.read() as tx:
        return _replayed(tx, rules, window)


def _replayed(tx: TxView, rules: RuleSet, window: Window) -> Report:
    machines, validators = Lifecycle(rules), Validators.build(rules)
    events = {e.event_id: e for e in tx.list_events(MANY)}
    deliveries = {d.event_id: d for d in tx.list_deliveries(MANY)}
    recorded_decisions = sorted(
        (d for e in events if (d := tx.get_decision(e)) is not None),
        key=lambda d: (d.decided_at, events[d.event_id].admitted_at, d.event_id),
    )
    changes: list[Change] = []
    missing: list[str] = []
    replayed = 0
    for d in recorded_decisions:
        if not window.holds(d.decided_at):
            continue
        event = events[d.event_id]
        delivery = deliveries.get(d.event_id)
        again = retranslated(rules, validators, delivery, event) if delivery else None
        facts = _facts(d)
        if facts is None and (again is None or again.event is not None):
            missing.append(d.event_id)  # an ignored or rejected delivery needs none
            continue
        replayed += 1
        if change := _change(tx, rules, machines, event, d, facts, again):
            changes.append(change)
    slots = _slot_changes(tx, rules, machines, events, window)
    return Report(replayed, tuple(changes), tuple(missing), tuple(slots))


def _change(
    tx: TxView,
    rules: RuleSet,
    machines: Lifecycle,
    event: EventRecord,
    d: DecisionRecord,
    facts: Facts | None,
    again: Retranslated | None,
) -> Change | None:
    """The recorded decision against the new one: of the same event when the new
    `webhook github` table still admits it (`again` None), else the delivery's refusal
    or the decision of the other event it emits, always a difference."""
    old = _old_verdict(tx, event, d)
    change = partial(Change, d.event_id, event.loop, event.type, d.decided_at, old)
    if again is not None and again.event is None:
        return change(again.what.refusal(), again.what)
    if facts is None:  # counted apart by the caller, never compared
        return None
    if again is not None and again.event is not None:
        return change(_decide(again.event, rules, machines, facts, d.decided_at), again.what)
    new = _decide(event, rules, machines, facts, d.decided_at)
    return None if new == old else change(new)


def _facts(d: DecisionRecord) -> Facts | None:
    if d.facts is None:
        return None
    try:
        return decode_facts(d.facts)
    except ValueError:
        return None  # not replayable, as a decision with none


def _old_verdict(tx: TxView, event: EventRecord, d: DecisionRecord) -> Verdict:
    proposed = tx.get_proposal(stable_id("prop", event.event_id)) is not None
    run = tx.get_run_by_key(run_key(event, 0))
    return recorded(d, proposed, run is not None and run.proposal_id is None)


def _decide(
    event: EventRecord, rules: RuleSet, machines: Lifecycle, facts: Facts, at: str
) -> Verdict | None:
    """The new rules' verdict; a decision that raises is `planning_error`, as serving
    records it."""
    try:
        return decided(decide(event, rules, facts, machines, at))
    except Exception as err:  # the new rules' fault: shown, as serve would record it
        kind, reason = DecisionKind.NOOP.value, NoopReason.PLANNING_ERROR.value
        return Verdict(kind, reason, None, None, False, False, "nothing", f"error: {err}")


# ---- scheduled slots ----------------------------------------------------------------------


def _slot_changes(
    tx: TxView,
    rules: RuleSet,
    machines: Lifecycle,
    events: dict[str, EventRecord],
    window: Window,
) -> list[SlotChange]:
    """The recorded passes of every loop the records show, planned again."""
    ticks: dict[str, list[EventRecord]] = {}
    for e in events.values():
        if e.loop and e.source == EventSource.SCHEDULE and e.admitted_by == Actor.SCHEDULE:
            ticks.setdefault(e.loop, []).append(e)
    journal = tx.list_journal(MANY)
    out: list[SlotChange] = []
    for state in tx.list_loop_states():
        name = state.loop
        skips = [s for s in tx.list_skips(name, "") if s.reason != SkipReason.DISABLED]
        enabled = _enablements(journal, name, state.enabled_since)
        passes = _passes(ticks.get(name, []), skips, enabled)
        if not passes:
            continue
        outcomes = [
            o for o in replanned(rules.loops.get(name), passes) if window.holds(iso(o.pass_at))
        ]
        out.extend(_described(tx, rules, machines, name, passes, outcomes))
    return out


def _enablements(journal: list[JournalEntry], loop: str, since: str | None) -> list[datetime]:
    """The instants the loop was enabled at, oldest first (its state's when the journal
    has none)."""
    found = [
        parse_iso(slot_text(parse_iso(j.at)))
        for j in journal
        if j.entity == Entity.LOOP and j.entity_id == loop and j.action == JournalAction.ENABLED
    ]
    if not found and since is not None:
        found = [parse_iso(since)]
    return sorted(found)


def _passes(
    ticks: list[EventRecord], skips: list[SkipRecord], enabled: list[datetime]
) -> list[RecordedPass]:
    at_of: dict[str, tuple[list[datetime], list[SkipRange]]] = {}
    for e in ticks:
        at_of.setdefault(e.admitted_at, ([], []))[0].append(parse_iso(e.occurred_at))
    for s in skips:
        skip = SkipRange(
            parse_iso(s.first_slot), parse_iso(s.last_slot), s.count, SkipReason(s.reason)
        )
        at_of.setdefault(s.recorded_at, ([], []))[1].append(skip)
    out = []
    for at in sorted(at_of):
        when = parse_iso(at)
        since = max((e for e in enabled if e <= when), default=None)
        if since is None:
            continue  # a pass before any recorded enablement: nothing to plan it from
        fired, skipped = at_of[at]
        out.append(RecordedPass(when, since, tuple(sorted(fired)), tuple(skipped)))
    return out


def _described(
    tx: TxView,
    rules: RuleSet,
    machines: Lifecycle,
    name: str,
    passes: list[RecordedPass],
    outcomes: list[Outcome],
) -> list[SlotChange]:
    """The changed slots as ranges; each newly fired slot decided with the facts
    recorded for a tick fired in the same pass, carried from one newly fired slot to
    the next as the batch carries them."""
    by_at = {p.at: p for p in passes}
    facts_of: dict[datetime, Facts | str] = {}
    out = []
    for run in runs(outcomes):
        o = run.first
        change = SlotChange(
            name,
            slot_text(o.slot),
            slot_text(run.last.slot),
            run.count,
            iso(o.pass_at),
            o.old,
            o.new,
        )
        if o.new == FIRED and o.old != FIRED:
            if o.pass_at not in facts_of:
                facts_of[o.pass_at] = _pass_facts(tx, name, by_at[o.pass_at])
            change, facts_of[o.pass_at] = _newly_fired(
                rules, machines, change, o, facts_of[o.pass_at]
            )
        out.append(change)
    return out


NO_FACTS = "not decided: no facts were recorded for a tick of this loop fired in that pass"
FRESH_READ = (
    "not decided: the slot fired before it in that pass changed facts only a fresh read shows"
)
DECIDED = "decided with the facts recorded for the tick fired in the same pass"


def _pass_facts(tx: TxView, loop: str, recorded_pass: RecordedPass) -> Facts | str:
    """The facts recorded for the first tick the pass fired, or why there are none."""
    for slot in recorded_pass.fired:
        d = tx.get_decision(f"clock:{loop}:{slot_text(slot)}")
        if d is not None and (facts := _facts(d)) is not None:
            return replace(facts, decided=False, existing=None)
    return NO_FACTS


def _tick_event(rules: RuleSet, name: str, o: Outcome) -> EventRecord:
    """The tick the scheduler would have admitted for the newly fired slot."""
    envelope = tick(rules.loops[name], o.slot, o.skipped)
    return admitted_record(rules, envelope, Actor.SCHEDULE, iso(o.pass_at), planned=True)


def _newly_fired(
    rules: RuleSet, machines: Lifecycle, change: SlotChange, o: Outcome, facts: Facts | str
) -> tuple[SlotChange, Facts | str]:
    """The newly fired slot decided, and the facts for the pass's next one."""
    if isinstance(facts, str):
        return replace(change, note=facts), facts
    event = _tick_event(rules, change.loop, o)
    at = iso(o.pass_at)
    try:
        plan = decide(event, rules, facts, machines, at)
    except Exception:  # shown as serve would record it; nothing carries past it
        return replace(change, decision=_decide(event, rules, machines, facts, at)), FRESH_READ
    after = carried(rules, rules.loops[change.loop], event, facts, plan)
    return replace(change, decision=decided(plan), note=DECIDED), after or FRESH_READ
