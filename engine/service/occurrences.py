"""The occurrence engine's service half (docs/occurrences.md): settling a finished run
and concluding an occurrence that ended, each as read facts (engine.service.facts),
decide purely (engine.core.settle), apply (engine.service.apply). Every function here
runs inside the caller's write transaction, after the caller wrote the row that moved
(the run, the proposal), so a decision, its evidence and what follows from it commit
together."""

from __future__ import annotations

from engine.core.policy import FailureClass
from engine.core.records import OccurrenceRecord
from engine.core.settle import Chain, Finished, ended, runs_of
from engine.core.settle import settle as settled
from engine.core.states import OccurrenceState
from engine.service.apply import apply
from engine.service.context import Runtime
from engine.service.facts import ending, settle_facts
from engine.store.ports import Tx

__all__ = ["Chain", "Finished", "concluded", "settle"]


def settle(rt: Runtime, tx: Tx, finished: Finished, at: str) -> None:
    """Settle the budget from actual use, move the run's occurrence by the failure
    class of what happened and resolve its outcome's chains (docs/occurrences.md,
    engine.core.settle)."""
    facts = settle_facts(tx, rt.rules, finished.run)
    apply(rt, tx, settled(finished, rt.rules, facts, rt.lifecycle, at), at)


def concluded(
    rt: Runtime,
    tx: Tx,
    occ: OccurrenceRecord,
    cls: FailureClass | None,
    at: str,
    note: str = "",
    *,
    counts: bool = True,
) -> None:
    """After an occurrence reached a terminal state (its row written): read what its
    conclusion reads and apply `engine.core.settle.ended` (counters, notifications, the
    circuit breaker, a coalesced follow-up, the loops `after` it)."""
    event = tx.get_event(occ.event_id)
    completes = occ.state == OccurrenceState.COMPLETED
    done = ending(tx, rt.rules, occ, event, runs_of(occ), completes=completes)
    apply(rt, tx, ended(rt.rules, occ, cls, at, note, done, counts=counts), at)
