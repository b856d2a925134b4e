"""The plumbing of the in-memory store's transactions (`engine.store.memory`): the
tables of one version of the data, the NOT NULL columns, and `Transaction`, which
copies a table the first time a step changes it and undoes a failed savepoint. The
operations are in `memory_lifecycle.py` and `memory_tx.py`."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from functools import wraps
from typing import Any, ParamSpec, TypeVar, cast

from engine.core.records import (
    DecisionRecord,
    DeliveryRecord,
    EventRecord,
    FindingRecord,
    JournalEntry,
    LoopState,
    NotificationRecord,
    ObservationRecord,
    OccurrenceRecord,
    OutboxItem,
    ProposalRecord,
    RunRecord,
    SkipRecord,
)

P = ParamSpec("P")
R = TypeVar("R")
Record = TypeVar("Record")

_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


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
    DeliveryRecord: ("event_id", "delivery_id", "kind", "body", "rule", "received_at"),
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
    ObservationRecord: (
        "loop", "changes", "status", "diagnostic", "consecutive_failures", "polls",
    ),
}  # fmt: skip


@dataclass
class Tables:
    """One version of the data: each table by its primary key, beside the indexes of
    its unique columns. A committed version is never changed again."""

    events: dict[str, EventRecord] = field(default_factory=dict)
    decisions: dict[str, DecisionRecord] = field(default_factory=dict)
    deliveries: dict[str, DeliveryRecord] = field(default_factory=dict)  # by event_id
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
    observations: dict[str, ObservationRecord] = field(default_factory=dict)  # by loop
    findings: dict[str, FindingRecord] = field(default_factory=dict)
    finding_keys: dict[str, str] = field(default_factory=dict)  # semantic key -> id
    notifications: dict[int, NotificationRecord] = field(default_factory=dict)
    seqs: dict[str, int] = field(default_factory=dict)  # the last seq of each table


def as_json(value: Any) -> Any:
    """A JSON column's value as it reads back from the database."""
    return None if value is None else json.loads(_ENCODER.encode(value))


def stored(record: Record) -> Record:
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


def at_or_after(value: str | None, bound: str) -> bool:
    """`value >= bound` as SQL has it: never true for NULL."""
    return value is not None and value >= bound


def at_or_before(value: str | None, bound: str) -> bool:
    return value is not None and value <= bound


def take(rows: Iterable[Record], limit: int) -> list[Record]:
    """LIMIT: a negative one is refused, as PostgreSQL refuses it."""
    if limit < 0:
        raise MemoryStoreError("LIMIT must not be negative")
    return list(rows)[:limit]


def writes(method: Callable[P, R]) -> Callable[P, R]:
    """A writing operation: refused inside a read, as a read-only transaction refuses
    any INSERT or UPDATE (even one that would change nothing)."""

    @wraps(method)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        if not cast(Transaction, args[0])._writable:
            raise MemoryStoreError("attempt to write a readonly database (a read transaction)")
        return method(*args, **kwargs)

    return guarded


class Transaction:
    """One transaction over one version of `Tables`: a read's is the committed version
    itself; a write's starts as the committed one and copies each table the first time
    it changes it."""

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
