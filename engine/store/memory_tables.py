"""The plumbing of the in-memory store's transactions (`engine.store.memory`): the
tables of one version of the data and their indexes, the NOT NULL columns, how a
record becomes a row, and `Transaction`, which gives each step its own version of the
tables and undoes a failed savepoint. The operations are in `memory_lifecycle.py`,
`memory_runs.py` and `memory_tx.py`.

Every table and index is a persistent map (`immutables.Map`): changing it makes a new
map that shares all but a few nodes with the old one, in time logarithmic in its size,
and the old one stays as it was. So a version of the data is a handful of references,
a savepoint keeps the version it started from, and a committed version is never
changed again, whatever a later writer does."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import fields
from itertools import islice
from operator import attrgetter, itemgetter
from typing import Any, ParamSpec, TypeVar

import msgspec
from immutables import Map

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
    SinkDelivery,
    SkipRecord,
)
from engine.core.work import WorkBinding, WorkItem
from engine.store.memory_index import EMPTY, Grouped, Timeline

P = ParamSpec("P")
R = TypeVar("R")
Record = TypeVar("Record")

_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)
_FAST_ENCODE = msgspec.json.Encoder(order="sorted").encode
_FAST_DECODE = msgspec.json.Decoder().decode
_FAST_REFUSED = (TypeError, ValueError, OverflowError, RecursionError, msgspec.MsgspecError)


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
        "at", "kind", "state", "links", "message", "dedup_key", "attempts", "delivery",
    ),
    SinkDelivery: ("seq", "sink", "state", "attempts"),
    ObservationRecord: (
        "loop", "changes", "status", "diagnostic", "consecutive_failures", "polls",
    ),
    WorkItem: (
        "work_id", "semantic_key", "title", "state", "context", "created_by", "created_at",
        "updated_at", "version",
    ),
    WorkBinding: (
        "binding_id", "work_id", "shape", "request_id", "state", "created_by", "created_at",
        "updated_at", "version",
    ),
}  # fmt: skip


class Tables:
    """One version of the data: each table by its primary key, and beside it its
    indexes (its unique columns; its keys by state and loop; the insertion order a
    list of equal sort keys comes in, as SQLite gives it). A committed version is
    never changed again; a step changes its own `clone()`."""

    events: Map[str, EventRecord] = EMPTY
    unplanned: Map[str, None] = EMPTY  # the events not yet planned
    last_events: Map[str | None, str] = EMPTY  # loop -> its newest event (admitted_at, id)
    decisions: Map[str, DecisionRecord] = EMPTY
    deliveries: Map[str, DeliveryRecord] = EMPTY  # by event_id
    occurrences: Map[str, OccurrenceRecord] = EMPTY
    occurrence_keys: Map[str, str] = EMPTY  # key -> event_id
    occurrence_semantic: Map[str, Map[str, None]] = EMPTY  # semantic key -> event_ids
    occurrence_states: Grouped = EMPTY
    occurrence_created: Timeline = Timeline()  # by loop and created_at
    occurrence_updated: Timeline = Timeline()  # by loop and updated_at
    proposals: Map[str, ProposalRecord] = EMPTY
    proposal_events: Map[str, str] = EMPTY  # event_id -> proposal_id
    proposal_order: Map[str, int] = EMPTY
    proposal_states: Grouped = EMPTY
    runs: Map[str, RunRecord] = EMPTY
    run_keys: Map[str, str] = EMPTY  # idempotency key -> run_id
    run_order: Map[str, int] = EMPTY
    run_states: Grouped = EMPTY
    last_runs: Map[str | None, str] = EMPTY  # loop -> its newest run (created_at, id)
    journal: Map[int, JournalEntry] = EMPTY  # by seq: 1, 2, ... len(journal)
    journal_of: Map[tuple[str, str], Map[int, None]] = EMPTY  # (entity, id) -> seqs
    journal_loops: Map[str, Map[int, None]] = EMPTY  # the loop an entry is about -> seqs
    outbox: Map[int, tuple[OutboxItem, str | None]] = EMPTY  # seq -> (item, published at)
    unpublished: Map[int, None] = EMPTY
    loop_state: Map[str, LoopState] = EMPTY
    slot_skips: Map[tuple[str, str, str], SkipRecord] = EMPTY
    skip_order: Map[tuple[str, str, str], int] = EMPTY
    observations: Map[str, ObservationRecord] = EMPTY  # by loop
    findings: Map[str, FindingRecord] = EMPTY
    finding_keys: Map[str, str] = EMPTY  # semantic key -> id
    notifications: Map[int, NotificationRecord] = EMPTY  # by seq, as the journal
    undelivered: Map[int, None] = EMPTY  # the pending notifications
    sink_deliveries: Map[int, Map[str, SinkDelivery]] = EMPTY  # seq -> sink -> its row
    last_notified: Map[str, int] = EMPTY  # dedup key -> the seq of its last notification
    work: Map[str, WorkItem] = EMPTY  # by work_id
    live_work: Map[str, str] = EMPTY  # semantic key -> the id of its non-terminal item
    bindings: Map[str, WorkBinding] = EMPTY  # by binding_id
    binding_requests: Map[str, str] = EMPTY  # request_id -> binding_id
    binding_pairs: Map[tuple[str, str], str] = EMPTY  # (work_id, shape) -> binding_id

    def clone(self) -> Tables:
        """A version of its own, the same as this one until it is changed."""
        copied = object.__new__(Tables)
        copied.__dict__.update(self.__dict__)
        return copied


def as_json(value: Any) -> Any:
    """A JSON column's value as it reads back from the database: through msgspec when
    that gives back an equal value (plain JSON data), else through `json`, which also
    refuses what is not JSON."""
    if value is None:
        return None
    try:
        copied = _FAST_DECODE(_FAST_ENCODE(value))
    except _FAST_REFUSED:
        pass
    else:
        if copied == value:
            return copied
    return json.loads(_ENCODER.encode(value))


class _Layout:
    """What `stored` needs of a kind of record, worked out once."""

    def __init__(self, kind: type) -> None:
        names = tuple(f.name for f in fields(kind))
        self.names = names
        self.values = attrgetter(*names)
        self.position = {name: i for i, name in enumerate(names)}
        self.not_null = itemgetter(*(self.position[n] for n in NOT_NULL[kind]))


_LAYOUTS = {kind: _Layout(kind) for kind in NOT_NULL}
# Which values of a row are string enums (a str of another type), by the types of its
# values: rows of a kind come with few patterns of types, each worked out once.
_ENUMS: dict[tuple[type, ...], tuple[int, ...]] = {}


def _enums(types: tuple[type, ...]) -> tuple[int, ...]:
    found = _ENUMS.get(types)
    if found is None:
        found = tuple(i for i, t in enumerate(types) if t is not str and issubclass(t, str))
        if len(_ENUMS) < 4096:  # bounded, whatever the callers send
            _ENUMS[types] = found
    return found


def stored(record: Record, **changes: Any) -> Record:
    """The record (with `changes`) as a row keeps it: string enums as their plain
    values, and refused (nothing written) when a NOT NULL column is None."""
    kind = type(record)
    layout = _LAYOUTS[kind]
    values = list(layout.values(record))
    for name, value in changes.items():
        values[layout.position[name]] = value
    converted = _enums(tuple(map(type, values)))
    for i in converted:
        values[i] = str(values[i])
    if None in layout.not_null(values):
        missing = next(n for n in NOT_NULL[kind] if values[layout.position[n]] is None)
        raise MemoryStoreError(f"NOT NULL constraint failed: {kind.__name__}.{missing}")
    return kind(*values) if changes or converted else record


def at_or_after(value: str | None, bound: str) -> bool:
    """`value >= bound` as SQL has it: never true for NULL."""
    return value is not None and value >= bound


def at_or_before(value: str | None, bound: str) -> bool:
    return value is not None and value <= bound


def take(rows: Iterable[Record], limit: int) -> list[Record]:
    """LIMIT: a negative one is refused, as PostgreSQL refuses it."""
    if limit < 0:
        raise MemoryStoreError("LIMIT must not be negative")
    return list(islice(rows, limit))


def writes(method: Callable[P, R]) -> Callable[P, R]:
    """Marks a writing operation: a read's transaction (`read_only`) refuses it, as a
    read-only transaction refuses any INSERT or UPDATE (even one that would change
    nothing)."""
    method.__memory_writes__ = True  # type: ignore[attr-defined]
    return method


def _refused(*args: Any, **kwargs: Any) -> Any:
    raise MemoryStoreError("attempt to write a readonly database (a read transaction)")


def read_only(kind: type[R]) -> type[R]:
    """The class of a read's transaction: `kind` with each operation marked `writes`
    refused."""
    refused = {
        name: _refused
        for klass in kind.__mro__
        for name, value in vars(klass).items()
        if getattr(value, "__memory_writes__", False)
    }
    return type(f"ReadOnly{kind.__name__}", (kind,), refused)


class _Over:
    """The tables of a finished transaction: every use is refused."""

    def __getattr__(self, name: str) -> Any:
        raise MemoryStoreError("the transaction is over")


class Transaction:
    """One transaction over one version of `Tables`: a read's is the committed version
    itself; a write's starts as the committed one, and each step (the transaction, a
    savepoint) changes a clone of its own the first time it writes."""

    def __init__(self, tables: Tables) -> None:
        self._tables = tables
        self._owned = False  # whether `_tables` is this step's own clone

    # ---- plumbing --------------------------------------------------------------
    def end(self) -> Tables:
        """Close the transaction; its version of the data (to commit, or to drop)."""
        tables, self._tables = self._tables, _Over()  # type: ignore[assignment]
        return tables

    def _own(self) -> Tables:
        """The tables, this step's own, safe to change."""
        if not self._owned:
            self._tables = self._tables.clone()
            self._owned = True
        return self._tables

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested step: its writes roll back alone when it raises."""
        saved, saved_owned = self._tables, self._owned
        self._tables, self._owned = saved.clone(), True  # the saved version stays as it is
        try:
            yield
        except BaseException:
            self._tables, self._owned = saved, saved_owned
            raise

    def _event_exists(self, event_id: str, table: str) -> None:
        """The foreign key of decisions, occurrences, proposals and runs."""
        if event_id not in self._tables.events:
            raise MemoryStoreError(f"FOREIGN KEY constraint failed: {table}.event_id")
