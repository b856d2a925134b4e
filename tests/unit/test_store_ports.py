"""The store's ports: one protocol per aggregate, each a read-only view and the writing
protocol that extends it, and every store's transaction implementing them all with the
same signatures."""

from __future__ import annotations

import inspect

import pytest

from engine.store import ports
from engine.store.memory import MemoryStore, MemoryStoreError
from engine.store.memory_tx import MemoryTx
from engine.store.sqltx import SqlTx

AGGREGATES = {
    ports.Events: ports.EventsView,
    ports.Deliveries: ports.DeliveriesView,
    ports.Occurrences: ports.OccurrencesView,
    ports.Proposals: ports.ProposalsView,
    ports.Runs: ports.RunsView,
    ports.Journal: ports.JournalView,
    ports.Outbox: ports.OutboxView,
    ports.Loops: ports.LoopsView,
    ports.Findings: ports.FindingsView,
    ports.Notifications: ports.NotificationsView,
    ports.Work: ports.WorkView,
}
VIEWS = (*AGGREGATES.values(), ports.Reports)


def members(protocol: type) -> set[str]:
    """The methods a protocol declares itself (not those it inherits)."""
    return {
        name
        for name, value in vars(protocol).items()
        if inspect.isfunction(value) and not name.startswith("__")
    }


def every_member(protocol: type) -> set[str]:
    found: set[str] = set()
    for cls in protocol.__mro__:
        found |= members(cls)
    return found


def test_each_operation_belongs_to_one_aggregate() -> None:
    """Every operation of `Tx` is declared by exactly one aggregate's view or writing
    protocol (or is `savepoint`), so a caller typed against an aggregate sees all of
    it and nothing of another."""
    declared: list[str] = []
    for protocol in (*AGGREGATES, *VIEWS):
        declared += members(protocol)
    assert len(declared) == len(set(declared))
    assert set(declared) | {"savepoint"} == every_member(ports.Tx)


def test_the_views_compose_into_facts_and_a_read() -> None:
    """`FactsView` offers what a decision reads and no write; `TxView` every read."""
    reads = set().union(*(members(view) for view in VIEWS))
    assert every_member(ports.TxView) == reads
    facts = every_member(ports.FactsView)
    assert facts < reads
    assert {
        "get_loop_state",
        "loop_in_flight",
        "active_occurrences",
        "budget_usage",
        "occurrences_of_loop",
        "get_finding_by_key",
        "get_decision",
        "open_loop_proposals",
    } <= facts
    assert not facts & set().union(*(members(writes) for writes in AGGREGATES))


def _is_write_guarded(name: str) -> bool:
    """Whether the memory store's read refuses the method, whatever its arguments."""
    with MemoryStore().read() as tx:
        try:
            getattr(tx, name)()
        except MemoryStoreError:
            return True
        except TypeError:  # a read that wants its arguments
            return False
    return False


@pytest.mark.parametrize("view", VIEWS, ids=lambda v: v.__name__)
def test_a_view_only_reads(view: type) -> None:
    """Every method of a view is one the memory store answers inside a read, and every
    method a writing protocol adds is one it refuses there: the split follows what
    writes."""
    for name in members(view):
        assert not _is_write_guarded(name), name
    for writes, reads in AGGREGATES.items():
        if reads is view:
            for name in members(writes):
                assert _is_write_guarded(name), name


@pytest.mark.parametrize("implementation", [SqlTx, MemoryTx], ids=lambda c: c.__name__)
def test_every_store_implements_every_operation_with_its_signature(implementation: type) -> None:
    """Each store's transaction has every operation of `Tx`, with the protocol's
    parameter names, kinds and defaults, so a call by keyword works on any store."""
    for name in sorted(every_member(ports.Tx)):
        declared = inspect.signature(getattr(ports.Tx, name))
        given = inspect.signature(inspect.unwrap(getattr(implementation, name)))
        assert [(p.name, p.kind, p.default) for p in given.parameters.values()] == [
            (p.name, p.kind, p.default) for p in declared.parameters.values()
        ], name
