"""The operations of `engine.store.ports.Tx` over plain dictionaries: the transaction
of the in-memory store (`engine.store.memory`). Each method does what its named query
in `sql/queries.sql` does, with SQL's NULL rules (NULL equals nothing, compares with
nothing) and its ORDER BY; JSON columns go through the same compact encoding, so
what reads back is what SQLite and PostgreSQL give back."""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from functools import wraps
from typing import Any, ParamSpec, TypeVar, cast

from engine.core.records import (
    IN_FLIGHT,
    LEASED,
    DecisionRecord,
    EventRecord,
    FindingRecord,
    JournalEntry,
    LoopState,
    NotificationRecord,
    OccurrenceRecord,
    OutboxItem,
    ProposalRecord,
    RunRecord,
    SkipRecord,
)
from engine.store.sqltx import OCCURRENCE_CHANGES, budget_total, counted

P = ParamSpec("P")
R = TypeVar("R")
Record = TypeVar("Record")

_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)
_WAITING = "waiting_for_resource"


class MemoryStoreError(Exception):
    """A statement the memory store refuses as a database would (a constraint, a
    write inside a read, a finished transaction): a bug of the caller, raised as it
    is, as the SQL stores raise their driver's error."""


# The NOT NULL columns of each kind of row (engine/store/sql/*/00*.sql).
NOT_NULL: dict[type, tuple[str, ...]] = {
    EventRecord: (
        "event_id", "type", "source", "subject", "occurred_at", "correlation_id",
        "payload", "admitted_at", "admitted_by", "planned",
    ),
    DecisionRecord: (
        "event_id", "kind", "human_only", "mutating", "note", "rules_digest", "decided_at",
    ),
    OccurrenceRecord: ("event_id", "state", "updated_at", "attempt", "signals"),
    ProposalRecord: (
        "proposal_id", "event_id", "definition", "state", "human_only", "mutating",
        "created_at", "note",
    ),
    RunRecord: (
        "run_id", "idempotency_key", "event_id", "definition", "state", "approved_by",
        "attempts", "created_at",
    ),
    JournalEntry: ("at", "entity", "entity_id", "action", "actor", "note"),
    OutboxItem: ("event", "actor", "created_at"),
    LoopState: (
        "loop", "enabled", "paused", "pause_note", "updated_at", "consecutive_failures",
        "nothing_streak",
    ),
    SkipRecord: ("loop", "first_slot", "last_slot", "count", "reason", "recorded_at"),
    FindingRecord: (
        "finding_id", "semantic_key", "category", "status", "occurrence_count",
        "first_seen_at", "last_seen_at",
    ),
    NotificationRecord: (
        "at", "kind", "state", "links", "message", "dedup_key", "attempts",
    ),
}  # fmt: skip


@dataclass
class Tables:
    """One version of the data: each table by its primary key, beside the indexes of
    its unique columns. A committed version is never changed again."""

    events: dict[str, EventRecord] = field(default_factory=dict)
    decisions: dict[str, DecisionRecord] = field(default_factory=dict)
    occurrences: dict[str, OccurrenceRecord] = field(default_factory=dict)
    occurrence_keys: dict[str, str] = field(default_factory=dict)  # key -> event_id
    proposals: dict[str, ProposalRecord] = field(default_factory=dict)
    proposal_events: dict[str, str] = field(default_factory=dict)  # event_id -> id
    runs: dict[str, RunRecord] = field(default_factory=dict)
    run_keys: dict[str, str] = field(default_factory=dict)  # idempotency key -> run_id
    journal: dict[int, JournalEntry] = field(default_factory=dict)
    outbox: dict[int, tuple[OutboxItem, str | None]] = field(default_factory=dict)
    loop_state: dict[str, LoopState] = field(default_factory=dict)
    slot_skips: dict[tuple[str, str, str], SkipRecord] = field(default_factory=dict)
    findings: dict[str, FindingRecord] = field(default_factory=dict)
    finding_keys: dict[str, str] = field(default_factory=dict)  # semantic key -> id
    notifications: dict[int, NotificationRecord] = field(default_factory=dict)
    seqs: dict[str, int] = field(default_factory=dict)  # the last seq of each table


def _json(value: Any) -> Any:
    """A JSON column's value as it reads back from the database."""
    return None if value is None else json.loads(_ENCODER.encode(value))


def _stored(record: Record) -> Record:
    """The record as a row keeps it: string enums as their plain values, and refused
    (nothing written) when a NOT NULL column is None."""
    changes: dict[str, Any] = {}
    for f in fields(record):  # type: ignore[arg-type]
        value = getattr(record, f.name)
        if isinstance(value, str) and type(value) is not str:
            changes[f.name] = str(value)
        elif value is None and f.name in NOT_NULL[type(record)]:
            raise MemoryStoreError(f"NOT NULL constraint failed: {type(record).__name__}.{f.name}")
    return replace(record, **changes) if changes else record  # type: ignore[type-var]


def _at_or_after(value: str | None, bound: str) -> bool:
    """`value >= bound` as SQL has it: never true for NULL."""
    return value is not None and value >= bound


def _at_or_before(value: str | None, bound: str) -> bool:
    return value is not None and value <= bound


def _take(rows: Iterable[Record], limit: int) -> list[Record]:
    """LIMIT: a negative one is refused, as PostgreSQL refuses it."""
    if limit < 0:
        raise MemoryStoreError("LIMIT must not be negative")
    return list(rows)[:limit]


def _writes(method: Callable[P, R]) -> Callable[P, R]:
    """A writing operation: refused inside a read, as a read-only transaction refuses
    any INSERT or UPDATE (even one that would change nothing)."""

    @wraps(method)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        if not cast(MemoryTx, args[0])._writable:
            raise MemoryStoreError("attempt to write a readonly database (a read transaction)")
        return method(*args, **kwargs)

    return guarded


class MemoryTx:
    """Implements `engine.store.ports.Tx` over one version of `Tables`: a read's is the
    committed version itself; a write's starts as the committed one and copies each
    table the first time it changes it."""

    def __init__(self, tables: Tables, writable: bool) -> None:
        self._t = copy.copy(tables)  # the same tables, until one is changed
        self._writable = writable
        self._owned: set[str] = set()  # the tables this step has copied
        self._open = True

    # ---- plumbing --------------------------------------------------------------
    @property
    def _tables(self) -> Tables:
        if not self._open:
            raise MemoryStoreError("the transaction is over")
        return self._t

    def end(self) -> Tables:
        """Close the transaction; its version of the data (to commit, or to drop)."""
        self._open = False
        return self._t

    def _own(self, *names: str) -> Tables:
        """The tables, with `names` this step's own copies, safe to change."""
        tables = self._tables
        for name in names:
            if name not in self._owned:
                setattr(tables, name, dict(getattr(tables, name)))
                self._owned.add(name)
        return tables

    def _next_seq(self, table: str) -> int:
        seqs = self._own("seqs").seqs
        seqs[table] = seqs.get(table, 0) + 1
        return seqs[table]

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested step: its writes roll back alone when it raises."""
        saved, saved_owned = copy.copy(self._tables), self._owned
        self._owned = set()  # the saved tables stay as they are: the step copies its own
        try:
            yield
        except BaseException:
            self._t, self._owned = saved, saved_owned
            raise
        self._owned |= saved_owned

    def _event_exists(self, event_id: str, table: str) -> None:
        """The foreign key of decisions, occurrences, proposals and runs."""
        if event_id not in self._tables.events:
            raise MemoryStoreError(f"FOREIGN KEY constraint failed: {table}.event_id")

    # ---- events ----------------------------------------------------------------
    @_writes
    def insert_event(self, event: EventRecord) -> bool:
        if event.event_id in self._tables.events:
            return False
        row = _stored(replace(event, payload=_json(event.payload), planned=bool(event.planned)))
        self._own("events").events[event.event_id] = row
        return True

    def get_event(self, event_id: str) -> EventRecord | None:
        return self._tables.events.get(event_id)

    def list_events(self, limit: int, type: str | None = None) -> list[EventRecord]:
        found = [e for e in self._tables.events.values() if type is None or e.type == type]
        return _take(sorted(found, key=lambda e: (e.admitted_at, e.event_id), reverse=True), limit)

    def unplanned_events(self, limit: int) -> list[EventRecord]:
        found = [e for e in self._tables.events.values() if not e.planned]
        return _take(sorted(found, key=lambda e: (e.admitted_at, e.event_id)), limit)

    @_writes
    def mark_planned(self, event_id: str) -> None:
        found = self._tables.events.get(event_id)
        if found is not None:
            self._own("events").events[event_id] = replace(found, planned=True)

    def loop_events(self, loop: str, since: str, limit: int) -> list[EventRecord]:
        found = [
            e for e in self._tables.events.values() if e.loop == loop and e.occurred_at >= since
        ]
        return _take(sorted(found, key=lambda e: (e.occurred_at, e.event_id)), limit)

    def last_loop_event(self, loop: str) -> EventRecord | None:
        found = [e for e in self._tables.events.values() if e.loop == loop]
        return max(found, key=lambda e: (e.admitted_at, e.event_id), default=None)

    @_writes
    def insert_decision(self, decision: DecisionRecord) -> bool:
        if decision.event_id in self._tables.decisions:
            return False
        self._event_exists(decision.event_id, "decisions")
        row = _stored(
            replace(
                decision, human_only=bool(decision.human_only), mutating=bool(decision.mutating)
            )
        )
        self._own("decisions").decisions[decision.event_id] = row
        return True

    def get_decision(self, event_id: str) -> DecisionRecord | None:
        return self._tables.decisions.get(event_id)

    # ---- occurrences -------------------------------------------------------------
    @_writes
    def set_occurrence(self, event_id: str, loop: str | None, state: str, at: str) -> None:
        found = self._tables.occurrences.get(event_id)
        if found is not None:
            row = _stored(replace(found, state=state, updated_at=at))
        else:
            self._event_exists(event_id, "occurrences")
            row = _stored(OccurrenceRecord(event_id, loop, state, at))
        self._own("occurrences").occurrences[event_id] = row

    def get_occurrence_state(self, event_id: str) -> str | None:
        found = self._tables.occurrences.get(event_id)
        return None if found is None else found.state

    def get_occurrence(self, event_id: str) -> OccurrenceRecord | None:
        return self._tables.occurrences.get(event_id)

    def get_occurrence_by_key(self, key: str) -> OccurrenceRecord | None:
        event_id = self._tables.occurrence_keys.get(key)
        return None if event_id is None else self._tables.occurrences[event_id]

    @_writes
    def open_occurrence(self, occ: OccurrenceRecord) -> tuple[OccurrenceRecord, bool]:
        if occ.occurrence_key is not None:
            existing = self.get_occurrence_by_key(occ.occurrence_key)
            if existing is not None:
                return existing, False
        opened = replace(occ, created_at=occ.created_at or occ.updated_at)
        found = self._tables.occurrences.get(occ.event_id)
        if found is not None and found.occurrence_key is not None:
            return found, False  # a keyed row is left alone
        if found is None:
            self._event_exists(occ.event_id, "occurrences")
        row = _stored(
            replace(
                opened,
                evidence=_json(occ.evidence),
                reserved=_json(occ.reserved),
                used=_json(occ.used),
            )
        )
        tables = self._own("occurrences", "occurrence_keys")
        tables.occurrences[occ.event_id] = row
        if row.occurrence_key is not None:
            tables.occurrence_keys[row.occurrence_key] = occ.event_id
        return opened, True

    @_writes
    def update_occurrence(
        self, event_id: str, expect_state: str | None, at: str, **changes: Any
    ) -> bool:
        unknown = sorted(set(changes) - OCCURRENCE_CHANGES)
        if unknown:
            raise ValueError(f"update_occurrence cannot change {', '.join(unknown)}")
        found = self._tables.occurrences.get(event_id)
        if found is None or (expect_state is not None and found.state != expect_state):
            return False
        for name in ("evidence", "reserved", "used"):
            if name in changes:
                changes[name] = _json(changes[name])
        row = _stored(replace(found, updated_at=at, **changes))
        self._own("occurrences").occurrences[event_id] = row
        return True

    @_writes
    def add_signal(self, event_id: str) -> int:
        found = self._tables.occurrences.get(event_id)
        if found is None:
            return 0
        self._own("occurrences").occurrences[event_id] = replace(found, signals=found.signals + 1)
        return found.signals + 1

    def active_occurrences(
        self, loop: str, repo: str | None, states: tuple[str, ...]
    ) -> list[OccurrenceRecord]:
        wanted = list(dict.fromkeys(states))
        if not wanted:
            return []
        if len(wanted) > 26:
            raise ValueError("active_occurrences takes at most 26 states")
        found = [
            o
            for o in self._tables.occurrences.values()
            if o.loop == loop and o.state in wanted and o.repo == repo
        ]
        return sorted(found, key=lambda o: (o.created_at or o.updated_at, o.event_id))

    def due_retries(self, now: str, limit: int) -> list[OccurrenceRecord]:
        found = [
            o
            for o in self._tables.occurrences.values()
            if o.state == _WAITING and _at_or_before(o.retry_at, now)
        ]
        return _take(sorted(found, key=lambda o: (o.retry_at or "", o.event_id)), limit)

    def list_occurrences(
        self, limit: int, loop: str | None = None, state: str | None = None
    ) -> list[OccurrenceRecord]:
        found = [
            o
            for o in self._tables.occurrences.values()
            if (loop is None or o.loop == loop) and (state is None or o.state == state)
        ]
        return _take(sorted(found, key=lambda o: (o.updated_at, o.event_id), reverse=True), limit)

    def occurrences_of_loop(self, loop: str, since: str, limit: int) -> list[OccurrenceRecord]:
        found = [
            o
            for o in self._tables.occurrences.values()
            if o.loop == loop and _at_or_after(o.created_at, since)
        ]
        return _take(sorted(found, key=lambda o: (o.created_at or "", o.event_id)), limit)

    def budget_usage(self, loop: str, repo: str | None, since: str) -> dict[str, int]:
        return budget_total(
            (o.used, o.reserved, o.finished_at is not None)
            for o in self._tables.occurrences.values()
            if o.loop == loop and o.repo == repo and _at_or_after(o.created_at, since)
        )

    # ---- proposals ---------------------------------------------------------------
    @_writes
    def insert_proposal(self, proposal: ProposalRecord) -> bool:
        if proposal.event_id in self._tables.proposal_events:
            return False
        if proposal.proposal_id in self._tables.proposals:
            raise MemoryStoreError("UNIQUE constraint failed: proposals.proposal_id")
        self._event_exists(proposal.event_id, "proposals")
        row = _stored(
            replace(
                proposal,
                human_only=bool(proposal.human_only),
                mutating=bool(proposal.mutating),
                decided_at=None,
                decided_by=None,
            )
        )
        tables = self._own("proposals", "proposal_events")
        tables.proposals[row.proposal_id] = row
        tables.proposal_events[row.event_id] = row.proposal_id
        return True

    def get_proposal(self, proposal_id: str) -> ProposalRecord | None:
        return self._tables.proposals.get(proposal_id)

    def list_proposals(self, limit: int, state: str | None = None) -> list[ProposalRecord]:
        found = [p for p in self._tables.proposals.values() if state is None or p.state == state]
        return _take(
            sorted(found, key=lambda p: (p.created_at, p.proposal_id), reverse=True), limit
        )

    @_writes
    def decide_proposal(
        self, proposal_id: str, from_state: str, to_state: str, at: str, by: str, note: str
    ) -> bool:
        found = self._tables.proposals.get(proposal_id)
        if found is None or found.state != from_state:
            return False
        row = _stored(replace(found, state=to_state, decided_at=at, decided_by=by, note=note))
        self._own("proposals").proposals[proposal_id] = row
        return True

    def stale_proposals(self, before: str, limit: int) -> list[ProposalRecord]:
        found = [
            p
            for p in self._tables.proposals.values()
            if p.state == "open" and p.created_at < before
        ]
        return _take(sorted(found, key=lambda p: p.created_at), limit)

    def open_loop_proposals(self, loop: str) -> list[ProposalRecord]:
        found = [p for p in self._tables.proposals.values() if p.loop == loop and p.state == "open"]
        return sorted(found, key=lambda p: (p.created_at, p.proposal_id))

    def open_proposals_by_loop(self) -> dict[str, int]:
        return dict(
            Counter(
                p.loop
                for p in self._tables.proposals.values()
                if p.state == "open" and p.loop is not None
            )
        )

    # ---- runs --------------------------------------------------------------------
    @_writes
    def insert_run(self, run: RunRecord) -> bool:
        if run.idempotency_key in self._tables.run_keys:
            return False
        if run.run_id in self._tables.runs:
            raise MemoryStoreError("UNIQUE constraint failed: runs.run_id")
        self._event_exists(run.event_id, "runs")
        row = _stored(
            RunRecord(
                run_id=run.run_id,
                idempotency_key=run.idempotency_key,
                event_id=run.event_id,
                proposal_id=run.proposal_id,
                loop=run.loop,
                definition=run.definition,
                state="queued",
                approved_by=run.approved_by,
                attempts=0,
                lease_owner=None,
                lease_expires_at=None,
                created_at=run.created_at,
            )
        )
        tables = self._own("runs", "run_keys")
        tables.runs[row.run_id] = row
        tables.run_keys[row.idempotency_key] = row.run_id
        return True

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._tables.runs.get(run_id)

    def get_run_by_key(self, key: str) -> RunRecord | None:
        run_id = self._tables.run_keys.get(key)
        return None if run_id is None else self._tables.runs[run_id]

    def list_runs(self, limit: int, state: str | None = None) -> list[RunRecord]:
        found = [r for r in self._tables.runs.values() if state is None or r.state == state]
        return _take(sorted(found, key=lambda r: (r.created_at, r.run_id), reverse=True), limit)

    def loop_in_flight(self, loop: str) -> bool:
        return any(r.loop == loop and r.state in IN_FLIGHT for r in self._tables.runs.values())

    def expired_leases(self, now: str, limit: int) -> list[RunRecord]:
        found = [
            r
            for r in self._tables.runs.values()
            if r.state in LEASED and r.lease_expires_at is not None and r.lease_expires_at < now
        ]
        return _take(sorted(found, key=lambda r: r.lease_expires_at or ""), limit)

    def last_loop_run(self, loop: str) -> RunRecord | None:
        found = [r for r in self._tables.runs.values() if r.loop == loop]
        return max(found, key=lambda r: (r.created_at, r.run_id), default=None)

    def _move_run(self, run: RunRecord, **changes: Any) -> bool:
        self._own("runs").runs[run.run_id] = _stored(replace(run, **changes))
        return True

    def _paused(self, loop: str | None) -> bool:
        state = None if loop is None else self._tables.loop_state.get(loop)
        return state is not None and state.paused

    @_writes
    def claim_next_run(self, owner: str, lease_until: str) -> RunRecord | None:
        queued = [
            r
            for r in self._tables.runs.values()
            if r.state == "queued" and not self._paused(r.loop)
        ]
        if not queued:
            return None
        oldest = min(queued, key=lambda r: (r.created_at, r.run_id))
        self._move_run(
            oldest,
            state="claimed",
            lease_owner=owner,
            lease_expires_at=lease_until,
            attempts=oldest.attempts + 1,
        )
        return self._tables.runs[oldest.run_id]

    def _leased_by(self, run_id: str, owner: str, states: tuple[str, ...]) -> RunRecord | None:
        found = self._tables.runs.get(run_id)
        if found is None or found.lease_owner != owner or found.state not in states:
            return None
        return found

    @_writes
    def heartbeat(self, run_id: str, owner: str, lease_until: str) -> bool:
        found = self._leased_by(run_id, owner, LEASED)
        return found is not None and self._move_run(found, lease_expires_at=lease_until)

    @_writes
    def start_run(self, run_id: str, owner: str, at: str) -> bool:
        found = self._leased_by(run_id, owner, ("claimed",))
        return found is not None and self._move_run(found, state="running", started_at=at)

    @_writes
    def finish_run(
        self,
        run_id: str,
        owner: str,
        state: str,
        at: str,
        outcome: str | None,
        result: dict[str, Any] | None,
        error: str | None,
        artifact: str | None,
    ) -> bool:
        found = self._leased_by(run_id, owner, LEASED)
        return found is not None and self._move_run(
            found,
            state=state,
            finished_at=at,
            outcome=outcome,
            result=_json(result),
            error=error,
            artifact=artifact,
            lease_owner=None,
            lease_expires_at=None,
        )

    @_writes
    def cancel_run(self, run_id: str, from_state: str, at: str, note: str) -> bool:
        found = self._tables.runs.get(run_id)
        if found is None or found.state != from_state:
            return False
        return self._move_run(
            found,
            state="cancelled",
            finished_at=at,
            error=note,
            lease_owner=None,
            lease_expires_at=None,
        )

    @_writes
    def recover_run(self, run: RunRecord, state: str, at: str, error: str) -> bool:
        found = self._tables.runs.get(run.run_id)
        if (
            found is None
            or found.lease_owner is None
            or found.lease_expires_at is None
            or (found.lease_owner, found.lease_expires_at)
            != (run.lease_owner, run.lease_expires_at)
        ):
            return False
        return self._move_run(
            found,
            state=state,
            lease_owner=None,
            lease_expires_at=None,
            finished_at=at if state != "queued" else None,
            error=error,
        )

    # ---- journal and outbox --------------------------------------------------------
    @_writes
    def append_journal(self, entry: JournalEntry) -> int:
        row = _stored(replace(entry, data=_json(entry.data), seq=0))
        seq = self._next_seq("journal")
        self._own("journal").journal[seq] = replace(row, seq=seq)
        return seq

    def list_journal(
        self, limit: int, after: int = 0, entity: str | None = None, entity_id: str | None = None
    ) -> list[JournalEntry]:
        found = (
            e
            for seq, e in self._tables.journal.items()
            if seq > after
            and (entity is None or e.entity == entity)
            and (entity_id is None or e.entity_id == entity_id)
        )
        return _take(found, limit)  # a dict keeps the order of its keys: seq order

    @_writes
    def enqueue_outbox(
        self, event: dict[str, Any], origin_run: str | None, actor: str, at: str
    ) -> None:
        item = _stored(OutboxItem(0, _json(event), origin_run, actor, at))
        seq = self._next_seq("outbox")
        self._own("outbox").outbox[seq] = (replace(item, seq=seq), None)

    def pending_outbox(self, limit: int) -> list[OutboxItem]:
        return _take((item for item, sent in self._tables.outbox.values() if sent is None), limit)

    @_writes
    def mark_published(self, seq: int, at: str) -> bool:
        found = self._tables.outbox.get(seq)
        if found is None or found[1] is not None:
            return False
        self._own("outbox").outbox[seq] = (found[0], at)
        return True

    # ---- the scheduler -------------------------------------------------------------
    def get_loop_state(self, loop: str) -> LoopState | None:
        return self._tables.loop_state.get(loop)

    def list_loop_states(self) -> list[LoopState]:
        return sorted(self._tables.loop_state.values(), key=lambda s: s.loop)

    @_writes
    def set_loop_enabled(self, loop: str, enabled: bool, since: str, at: str) -> None:
        found = self._tables.loop_state.get(loop)
        if found is None:
            row = LoopState(loop, bool(enabled), since, None, None, False, "", None, at)
        else:
            kept = since if enabled and not found.enabled else found.enabled_since
            row = replace(found, enabled=bool(enabled), enabled_since=kept, updated_at=at)
        self._own("loop_state").loop_state[loop] = _stored(row)

    @_writes
    def advance_cursor(self, loop: str, cursor: str, last_slot: str | None, at: str) -> None:
        found = self._tables.loop_state.get(loop)
        if found is None:
            return
        if found.cursor is None or found.cursor < cursor:
            found = replace(found, cursor=cursor)
        if last_slot is not None and (found.last_slot is None or found.last_slot < last_slot):
            found = replace(found, last_slot=last_slot)
        self._own("loop_state").loop_state[loop] = _stored(replace(found, updated_at=at))

    def _set_loop(self, loop: str, **changes: Any) -> bool:
        found = self._tables.loop_state.get(loop)
        if found is None:
            return False
        self._own("loop_state").loop_state[loop] = _stored(replace(found, **changes))
        return True

    @_writes
    def set_paused(self, loop: str, paused: bool, note: str, by: str | None, at: str) -> bool:
        return self._set_loop(
            loop, paused=bool(paused), pause_note=note, paused_by=by, updated_at=at
        )

    @_writes
    def insert_skip(self, skip: SkipRecord) -> bool:
        key = (skip.loop, skip.first_slot, skip.reason)
        if key in self._tables.slot_skips:
            return False
        self._own("slot_skips").slot_skips[key] = _stored(skip)
        return True

    def list_skips(self, loop: str, since: str) -> list[SkipRecord]:
        found = [
            s for s in self._tables.slot_skips.values() if s.loop == loop and s.last_slot >= since
        ]
        return sorted(found, key=lambda s: s.first_slot)

    @_writes
    def set_loop_counters(
        self,
        loop: str,
        consecutive_failures: int,
        nothing_streak: int,
        quiet_until: str | None,
        at: str,
    ) -> None:
        self._set_loop(
            loop,
            consecutive_failures=consecutive_failures,
            nothing_streak=nothing_streak,
            quiet_until=quiet_until,
            updated_at=at,
        )

    # ---- findings ------------------------------------------------------------------
    @_writes
    def upsert_finding(self, f: FindingRecord) -> tuple[FindingRecord, bool]:
        known = self.get_finding_by_key(f.semantic_key)
        if known is not None:
            row = replace(
                known,
                occurrence_count=known.occurrence_count + 1,
                last_seen_at=f.last_seen_at,
                last_occurrence=f.last_occurrence,
                evidence=_json(f.evidence),
            )
            self._own("findings").findings[row.finding_id] = _stored(row)
            return self._tables.findings[row.finding_id], False
        if f.finding_id in self._tables.findings:
            raise MemoryStoreError("UNIQUE constraint failed: findings.finding_id")
        confidence = None if f.confidence is None else float(f.confidence)
        row = _stored(replace(f, evidence=_json(f.evidence), confidence=confidence))
        tables = self._own("findings", "finding_keys")
        tables.findings[row.finding_id] = row
        tables.finding_keys[row.semantic_key] = row.finding_id
        return row, True

    def get_finding(self, finding_id: str) -> FindingRecord | None:
        return self._tables.findings.get(finding_id)

    def get_finding_by_key(self, key: str) -> FindingRecord | None:
        finding_id = self._tables.finding_keys.get(key)
        return None if finding_id is None else self._tables.findings[finding_id]

    def list_findings(
        self, limit: int, status: str | None = None, loop: str | None = None
    ) -> list[FindingRecord]:
        found = [
            f
            for f in self._tables.findings.values()
            if (status is None or f.status == status) and (loop is None or f.loop == loop)
        ]
        return _take(
            sorted(found, key=lambda f: (f.last_seen_at, f.finding_id), reverse=True), limit
        )

    @_writes
    def decide_finding(
        self,
        finding_id: str,
        from_status: str,
        to_status: str,
        by: str,
        at: str,
        promoted_event: str | None = None,
    ) -> bool:
        found = self._tables.findings.get(finding_id)
        if found is None or found.status != from_status:
            return False
        row = replace(
            found,
            status=to_status,
            decided_by=by,
            decided_at=at,
            promoted_event=found.promoted_event if promoted_event is None else promoted_event,
        )
        self._own("findings").findings[finding_id] = _stored(row)
        return True

    # ---- notifications -------------------------------------------------------------
    def last_notification_state(self, dedup_key: str) -> str | None:
        for n in reversed(self._tables.notifications.values()):
            if n.dedup_key == dedup_key:
                return n.state
        return None

    @_writes
    def enqueue_notification(self, n: NotificationRecord) -> int | None:
        if self.last_notification_state(n.dedup_key) == n.state:
            return None
        row = _stored(replace(n, links=_json(n.links)))
        seq = self._next_seq("notifications")
        self._own("notifications").notifications[seq] = replace(row, seq=seq)
        return seq

    def pending_notifications(self, now: str, limit: int) -> list[NotificationRecord]:
        found = (
            n
            for n in self._tables.notifications.values()
            if n.delivered_at is None and (n.next_attempt_at is None or n.next_attempt_at <= now)
        )
        return _take(found, limit)

    def _undelivered(self, seq: int) -> NotificationRecord | None:
        found = self._tables.notifications.get(seq)
        return None if found is None or found.delivered_at is not None else found

    @_writes
    def mark_notification_delivered(self, seq: int, at: str) -> bool:
        found = self._undelivered(seq)
        if found is None:
            return False
        self._own("notifications").notifications[seq] = replace(found, delivered_at=at)
        return True

    @_writes
    def notification_failed(self, seq: int, error: str, next_attempt_at: str | None) -> bool:
        found = self._undelivered(seq)
        if found is None:
            return False
        row = replace(
            found, attempts=found.attempts + 1, last_error=error, next_attempt_at=next_attempt_at
        )
        self._own("notifications").notifications[seq] = _stored(row)
        return True

    def list_notifications(self, limit: int) -> list[NotificationRecord]:
        return _take(reversed(self._tables.notifications.values()), limit)

    # ---- reports -------------------------------------------------------------------
    def counts(self) -> dict[str, dict[str, int]]:
        runs = Counter(r.state for r in self._tables.runs.values())
        proposals = Counter(p.state for p in self._tables.proposals.values())
        return {"runs": dict(runs), "proposals": dict(proposals)}

    def metrics_snapshot(self) -> dict[str, list[dict[str, Any]]]:
        t = self._tables
        runs = [(r.loop, r.state, r.outcome) for r in t.runs.values()]
        attempts = Counter[tuple[Any, ...]]()
        for r in t.runs.values():
            attempts[(r.loop, r.state, r.outcome)] += r.attempts
        sightings = Counter[tuple[Any, ...]]()
        for f in t.findings.values():
            sightings[(f.status,)] += f.occurrence_count
        by_operator = Counter[tuple[Any, ...]]()
        for p in t.proposals.values():
            by_operator[(p.state,)] += (p.decided_by or "").startswith("operator:")
        occurrences = [(o.loop, o.state, o.decision) for o in t.occurrences.values()]
        return {
            "occurrences": _grouped(occurrences, ("loop", "state", "decision")),
            "decisions": _grouped(
                [(d.kind, d.reason) for d in t.decisions.values()], ("kind", "reason")
            ),
            "runs": _grouped(runs, ("loop", "state", "outcome"), attempts=attempts),
            "findings": _grouped(
                [(f.status,) for f in t.findings.values()], ("status",), occurrences=sightings
            ),
            "journal": _grouped([(e.action,) for e in t.journal.values()], ("action",)),
            "dispatched": [{"n": len({r.event_id for r in t.runs.values()})}],
            "proposals": _grouped(
                [(p.state,) for p in t.proposals.values()], ("state",), by_operator=by_operator
            ),
        }

    def run_timings(self, limit: int) -> list[tuple[str, str | None, str | None]]:
        newest = sorted(self._tables.runs.values(), key=lambda r: (r.created_at, r.run_id))
        return _take(((r.created_at, r.started_at, r.finished_at) for r in reversed(newest)), limit)


def _grouped(
    keys: list[tuple[Any, ...]], groups: tuple[str, ...], **sums: Counter[tuple[Any, ...]]
) -> list[dict[str, Any]]:
    """GROUP BY `groups` with COUNT(*) AS n and each SUM in `sums` (per group key), in
    the order the SQL stores give them."""
    rows: list[dict[str, Any]] = [
        {**dict(zip(groups, key, strict=True)), "n": n, **{s: c[key] for s, c in sums.items()}}
        for key, n in Counter(keys).items()
    ]
    return counted(rows, groups, ("n", *sums))
