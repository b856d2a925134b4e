"""What the type checker proves on every build (`mypy --strict`): each store's
transaction satisfies every port of `engine.store.ports`, and each store the `Store`
protocol. A port that gains a method fails the build until every store has it."""

from __future__ import annotations

from engine.store.memory import MemoryStore, MemoryTx
from engine.store.ports import (
    Deliveries,
    DeliveriesView,
    Events,
    EventsView,
    FactsView,
    Findings,
    FindingsView,
    Journal,
    JournalView,
    Loops,
    LoopsView,
    Notifications,
    NotificationsView,
    Occurrences,
    OccurrencesView,
    Outbox,
    OutboxView,
    Proposals,
    ProposalsView,
    Reports,
    Runs,
    RunsView,
    Store,
    Tx,
    TxView,
    Work,
    WorkView,
)
from engine.store.postgres import PostgresStore
from engine.store.sqlite import SqliteStore
from engine.store.sqltx import SqlTx

Ports = tuple[
    Events,
    EventsView,
    Deliveries,
    DeliveriesView,
    Occurrences,
    OccurrencesView,
    Proposals,
    ProposalsView,
    Runs,
    RunsView,
    Journal,
    JournalView,
    Outbox,
    OutboxView,
    Loops,
    LoopsView,
    Findings,
    FindingsView,
    Notifications,
    NotificationsView,
    Work,
    WorkView,
    Reports,
    FactsView,
    TxView,
    Tx,
]


def as_ports(tx: SqlTx | MemoryTx) -> Ports:
    """`tx` as every port (the same object, typed as each: spelt out, so that the
    type checker checks each one)."""
    return (
        tx, tx, tx, tx, tx, tx, tx, tx, tx, tx, tx, tx,
        tx, tx, tx, tx, tx, tx, tx, tx, tx, tx, tx, tx, tx, tx,
    )  # fmt: skip


def as_store(store: SqliteStore | PostgresStore | MemoryStore) -> Store:
    return store
