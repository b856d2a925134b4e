"""The batched writer (docs/architecture.md, "Decide purely, apply once"): many events
decided in rounds, their plans written with one statement per row kind.

`plan_all` decides a batch of events (a scheduler wave, a catch-up, a planning batch
of admitted events) in rounds. A round takes the next event of every loop, reads all
their facts with one read per kind of fact (`engine.service.facts.read_facts_many`),
decides each purely, and carries a loop's facts on to its following events while the
plans change nothing those facts hold (`engine.core.decide.carried`), so a catch-up of
a thousand slots of one loop is one round. Events of different loops never read what
another writes, which is what lets their decisions share one read.

`Batch` interprets the plans. The rows a plan creates for an event nobody has decided
yet (its decision, its occurrence, its proposal, its journal entries) are buffered and
written per kind with one `executemany` when the batch flushes; any other effect
(a compare-and-set, a run queued under an idempotency key, a finding counted) flushes
the buffer and is written at once by `engine.service.apply`, so every write still sees
every write before it and the journal keeps the order the plans give it.

A round runs in a savepoint: when writing it fails (never the store's fault, which
ends the transaction), it is rolled back and written again one plan at a time, each in
its own savepoint, and a plan that fails alone is decided `planning_error`, as
`engine.service.planning.plan_safely` does for one event."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from engine.core.codec import encode_facts, with_facts
from engine.core.decide import Facts, carried, decide
from engine.core.decisions import Actor, DecisionKind, Entity, JournalAction, NoopReason
from engine.core.effects import Decide, Effect, Journal, MarkPlanned, OpenOccurrence, Plan, Propose
from engine.core.envelope import Envelope
from engine.core.occurrence import Identity, identity
from engine.core.planner import loop_of
from engine.core.records import (
    DecisionRecord,
    EventRecord,
    JournalEntry,
    OccurrenceRecord,
    ProposalRecord,
    SkipRecord,
)
from engine.core.states import OccurrenceState
from engine.errors import Unavailable
from engine.service import apply as applying
from engine.service.admission import admitted_entry, record
from engine.service.context import Runtime
from engine.service.facts import read_facts_many
from engine.store.ports import Tx

log = logging.getLogger("engine.planning")

# Buffered journal entries that make the batch write what it holds: a catch-up of
# 40,000 slots is then some fifty statements per row kind, not one of each in memory.
FLUSH_ROWS = 2000
# Events a caller hands `plan_all` at once (a catch-up of 40,000 slots is 40 calls).
CHUNK = 1000


@dataclass
class Batch:
    """Rows of many plans, written per kind on `flush` (see the module docstring)."""

    rt: Runtime
    tx: Tx
    at: str
    # Events whose decision, occurrence and proposal are known not to be stored: admitted
    # by this batch, or read undecided under the writer's lock.
    undecided: set[str] = field(default_factory=set)
    opened: dict[str, OccurrenceRecord] = field(default_factory=dict)  # by key, this batch's
    events: list[EventRecord] = field(default_factory=list)
    planned: list[str] = field(default_factory=list)
    decisions: list[DecisionRecord] = field(default_factory=list)
    occurrences: list[OccurrenceRecord] = field(default_factory=list)
    proposals: list[ProposalRecord] = field(default_factory=list)
    skips: list[SkipRecord] = field(default_factory=list)
    cursors: list[tuple[str, str, str | None]] = field(default_factory=list)
    journal: list[JournalEntry] = field(default_factory=list)
    # The `admitted` entry of each event this batch admits, journaled just before its
    # decision, as admitting and planning one tick at a time would order them.
    admitted: dict[str, JournalEntry] = field(default_factory=dict)

    # ---- rows the caller adds ------------------------------------------------------
    def admit(self, envelope: Envelope, actor: str) -> EventRecord:
        """Admit an event the caller has read is not stored (under the writer's lock),
        planned in this batch: the scheduler's tick."""
        row = record(self.rt, envelope, actor, self.at, planned=True)
        self.events.append(row)
        self.undecided.add(row.event_id)
        self.admitted[row.event_id] = admitted_entry(self.rt, row)
        return row

    def announce(self, event_id: str) -> None:
        """Journal the admission of an event this batch admitted (before its plan)."""
        entry = self.admitted.get(event_id)
        if entry is not None:
            self.journal.append(entry)

    # ---- plans -----------------------------------------------------------------------
    def apply(self, plan: Iterable[Effect]) -> None:
        for effect in plan:
            self._apply(effect)
        if len(self.journal) >= FLUSH_ROWS:  # bounded memory, whatever the batch's size
            self.flush()

    def _apply(self, effect: Effect) -> None:
        match effect:
            case Journal():
                self.journal.append(applying.entry_of(self.rt, effect, self.at))
            case MarkPlanned(event_id):
                self.planned.append(event_id)
            case Decide(decision) if decision.event_id in self.undecided:
                self.decisions.append(decision)
            case OpenOccurrence(occ) if occ.event_id in self.undecided and self._free(occ):
                self.occurrences.append(occ)
                if occ.occurrence_key is not None:
                    self.opened[occ.occurrence_key] = occ
            case Propose(proposal, _, _, then) if proposal.event_id in self.undecided:
                self.proposals.append(proposal)
                self.undecided.discard(proposal.event_id)  # one proposal per event
                self.apply(then)
            case _:
                self.flush()
                applying.apply(self.rt, self.tx, (effect,), self.at)
                if isinstance(effect, OpenOccurrence) and effect.record.occurrence_key:
                    stored = self.tx.get_occurrence_by_key(effect.record.occurrence_key)
                    if stored is not None:
                        self.opened[effect.record.occurrence_key] = stored

    def _free(self, occ: OccurrenceRecord) -> bool:
        return occ.occurrence_key is None or occ.occurrence_key not in self.opened

    def flush(self, *, last: bool = False) -> None:
        """Write what is buffered, one statement per row kind, rows before the journal
        that tells of them. The scheduler's skipped slots and cursors wait for the
        `last` flush: the loop state a decision reads is the one before its pass."""
        tx = self.tx
        tx.insert_events(self.events)
        tx.mark_planned_many(self.planned)
        tx.insert_decisions(self.decisions)
        tx.open_occurrences(self.occurrences)
        tx.insert_proposals(self.proposals)
        tx.append_journals(self.journal)
        self.events.clear()
        self.discard()
        if last:
            tx.insert_skips(self.skips)
            tx.advance_cursors(self.cursors, self.at)
            self.skips.clear()
            self.cursors.clear()

    def discard(self) -> None:
        """Forget the plans' buffered rows (their round was rolled back)."""
        self.planned.clear()
        self.decisions.clear()
        self.occurrences.clear()
        self.proposals.clear()
        self.journal.clear()


# ---- rounds ----------------------------------------------------------------------------


@dataclass
class _Pending:
    """One loop's events still to decide, in order."""

    events: list[EventRecord]


# What a round decided for an event: its plan, or the error its decision raised.
_Decided = tuple[EventRecord, Plan | Exception]


def plan_all(rt: Runtime, batch: Batch, events: Sequence[EventRecord]) -> None:
    """Decide `events` in order per loop and write their plans through `batch` (the
    caller's last `flush` writes its skipped slots and cursors). Unplanned events are
    taken for planning here. A caller with many events hands them in chunks of about
    `CHUNK`: what a round keeps to write again stays bounded."""
    tx, rules = batch.tx, rt.rules
    unplanned = [e.event_id for e in events if not e.planned]
    taken = tx.decided_events(unplanned) if unplanned else set()
    batch.undecided.update(e.event_id for e in events if e.event_id not in taken)
    idents = {e.event_id: identity(e, loop_of(e, e.admitted_by, rules)) for e in events}
    stored = tx.occurrences_by_keys(i.key for i in idents.values())
    queues: dict[str, _Pending] = {}
    for event in events:
        group = event.loop if event.loop is not None else f"event:{event.event_id}"
        queues.setdefault(group, _Pending([])).events.append(event)
    while queues:
        batch.flush()  # the round's reads see every write before them
        heads = [q.events[0] for q in queues.values()]
        try:
            facts = read_facts_many(tx, rules, heads, batch.at)
        except Unavailable:
            raise
        except Exception:  # one event's facts cannot be read: each head on its own
            log.exception("reading the facts of a planning batch failed; one event at a time")
            for pending in queues.values():
                _alone(rt, batch, pending.events.pop(0))
            queues = {g: q for g, q in queues.items() if q.events}
            continue
        decided: list[_Decided] = []
        opened = dict(batch.opened)
        try:
            with tx.savepoint():
                for pending, first in zip(list(queues.values()), facts, strict=True):
                    _round(rt, batch, pending, first, idents, stored, decided)
                _write(rt, batch, decided)
        except Unavailable:
            raise
        except Exception:
            batch.discard()
            log.exception("writing a planning batch failed; writing its plans one by one")
            _one_by_one(rt, batch, decided)
            # what the round opened is what the one-by-one writes left: read it again
            batch.opened = opened
            stored = tx.occurrences_by_keys(i.key for i in idents.values())
        queues = {g: q for g, q in queues.items() if q.events}
    batch.flush()
    # written: what the batch kept of these events is the store's now
    batch.opened.clear()
    for event in events:
        batch.admitted.pop(event.event_id, None)
        batch.undecided.discard(event.event_id)


def _round(
    rt: Runtime,
    batch: Batch,
    pending: _Pending,
    facts: Facts,
    idents: dict[str, Identity],
    stored: dict[str, OccurrenceRecord],
    decided: list[_Decided],
) -> None:
    """Decide the loop's next events while its facts carry; each decision keeps the facts
    it read, encoded once while they carry unchanged (a catch-up's slots)."""
    rules, at = rt.rules, batch.at
    encoded: tuple[Facts, str] | None = None
    while pending.events:
        event = pending.events.pop(0)
        try:
            plan = decide(event, rules, facts, rt.lifecycle, at)
            if encoded is None or encoded[0] is not facts:
                encoded = (facts, encode_facts(facts))
            plan = with_facts(plan, encoded[1])
        except Exception as err:  # a decision that raises is the event's fault alone
            decided.append((event, err))
            return
        decided.append((event, plan))
        batch.announce(event.event_id)
        batch.apply(plan)
        if not pending.events:
            return
        nxt = pending.events[0]
        loop = rules.loops.get(event.loop) if event.loop is not None else None
        ident, following = idents[event.event_id], idents[nxt.event_id]
        after = carried(rules, loop, event, facts, plan) if loop is not None else None
        if after is None or ident.repo != following.repo:
            return
        held = batch.opened.get(following.key) or stored.get(following.key)
        taken = not nxt.planned and nxt.event_id not in batch.undecided
        if after.decided is taken and after.existing is held:
            facts = after  # a catch-up's next slot: nothing of its own to fill in
        else:
            facts = replace(after, decided=taken, existing=held)


def _write(rt: Runtime, batch: Batch, decided: list[_Decided]) -> None:
    """The round's plans are buffered (or written) already: the decisions that raised
    are recorded, then everything is flushed."""
    for event, plan in decided:
        if isinstance(plan, Exception):
            batch.announce(event.event_id)
            batch.flush()
            _failed(rt, batch.tx, event, batch.at, plan)
    batch.flush()


def _one_by_one(rt: Runtime, batch: Batch, decided: list[_Decided]) -> None:
    """A round whose batched write failed, written again a plan at a time."""
    tx, at = batch.tx, batch.at
    for event, plan in decided:
        admitted = batch.admitted.get(event.event_id)
        if admitted is not None:
            tx.append_journal(admitted)
        if isinstance(plan, Exception):
            _failed(rt, tx, event, at, plan)
            continue
        try:
            with tx.savepoint():
                applying.apply(rt, tx, plan, at)
        except Unavailable:
            raise
        except Exception as err:
            _failed(rt, tx, event, at, err)


def _alone(rt: Runtime, batch: Batch, event: EventRecord) -> None:
    """One event read, decided and written in a savepoint of its own."""
    tx, at = batch.tx, batch.at
    admitted = batch.admitted.get(event.event_id)
    if admitted is not None:
        tx.append_journal(admitted)
    try:
        with tx.savepoint():
            facts = read_facts_many(tx, rt.rules, [event], at)[0]
            plan = decide(event, rt.rules, facts, rt.lifecycle, at)
            applying.apply(rt, tx, with_facts(plan, encode_facts(facts)), at)
    except Unavailable:
        raise
    except Exception as err:
        _failed(rt, tx, event, at, err)


def _failed(rt: Runtime, tx: Tx, event: EventRecord, at: str, err: Exception) -> None:
    log.error(
        "planning event %s failed; recorded as planning_error",
        event.event_id,
        exc_info=(type(err), err, err.__traceback__),
    )
    planning_failed(rt, tx, event, at, err)


def planning_failed(rt: Runtime, tx: Tx, event: EventRecord, at: str, err: Exception) -> None:
    """An event whose planning failed: decided NOOP `planning_error` (visible,
    journaled, nothing runs), its occurrence failed."""
    if not event.planned:
        tx.mark_planned(event.event_id)
    note = f"planning failed: {err}"
    tx.insert_decision(
        DecisionRecord(
            event.event_id,
            DecisionKind.NOOP.value,
            NoopReason.PLANNING_ERROR.value,
            None,
            event.loop,
            None,
            False,
            False,
            None,
            note,
            rt.rules.digest,
            at,
        )
    )
    tx.set_occurrence(event.event_id, event.loop, OccurrenceState.FAILED, at)
    rt.journal(
        tx,
        Entity.OCCURRENCE,
        event.event_id,
        JournalAction.DECIDED_NOOP,
        Actor.SYSTEM,
        from_state=OccurrenceState.CREATED,
        to_state=OccurrenceState.FAILED,
        note=note,
        at=at,
        data={"reason": NoopReason.PLANNING_ERROR.value},
    )
