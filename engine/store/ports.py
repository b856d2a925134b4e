"""The storage interface. The service composes these operations inside one
transaction (`Store.write()`), so a decision, its proposal or run, and their journal
entries commit together or not at all. Implementations: `sqlite` (the embedded
default) and `postgres` (several processes and hosts on one database)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

from engine.core.records import (
    DecisionRecord,
    EventRecord,
    JournalEntry,
    LoopState,
    OutboxItem,
    ProposalRecord,
    RunRecord,
    SkipRecord,
)


class Tx(Protocol):
    """Operations inside one transaction. Every `insert_*` is idempotent on its key and
    answers whether it wrote; every state change is a compare-and-set on the state the
    caller saw and answers whether it moved."""

    def savepoint(self) -> AbstractContextManager[None]:
        """A nested step whose writes roll back alone when it raises."""

    def insert_event(self, event: EventRecord) -> bool:
        """Admit; False (and nothing written) when the event id exists."""

    def get_event(self, event_id: str) -> EventRecord | None: ...

    def list_events(self, limit: int, type: str | None = None) -> list[EventRecord]:
        """Newest first."""

    def unplanned_events(self, limit: int) -> list[EventRecord]:
        """Admitted and not yet planned, oldest first."""

    def mark_planned(self, event_id: str) -> None: ...

    def insert_decision(self, decision: DecisionRecord) -> bool:
        """One decision per event; False when the event was already decided."""

    def get_decision(self, event_id: str) -> DecisionRecord | None: ...

    def set_occurrence(self, event_id: str, loop: str | None, state: str, at: str) -> None: ...

    def get_occurrence_state(self, event_id: str) -> str | None: ...

    def loop_in_flight(self, loop: str) -> bool:
        """A run of the loop is queued, claimed or running."""

    def insert_proposal(self, proposal: ProposalRecord) -> bool:
        """One proposal per event."""

    def get_proposal(self, proposal_id: str) -> ProposalRecord | None: ...

    def list_proposals(self, limit: int, state: str | None = None) -> list[ProposalRecord]: ...

    def decide_proposal(
        self, proposal_id: str, from_state: str, to_state: str, at: str, by: str, note: str
    ) -> bool: ...

    def stale_proposals(self, before: str, limit: int) -> list[ProposalRecord]:
        """Open proposals created before `before`, oldest first."""

    def insert_run(self, run: RunRecord) -> bool:
        """One run per idempotency key; False when it exists."""

    def get_run(self, run_id: str) -> RunRecord | None: ...

    def get_run_by_key(self, key: str) -> RunRecord | None: ...

    def list_runs(self, limit: int, state: str | None = None) -> list[RunRecord]: ...

    def claim_next_run(self, owner: str, lease_until: str) -> RunRecord | None:
        """Claim the oldest queued run for `owner`; None when the queue is empty. Two
        claimers never get the same run."""

    def heartbeat(self, run_id: str, owner: str, lease_until: str) -> bool: ...

    def start_run(self, run_id: str, owner: str, at: str) -> bool: ...

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
        """Only the current lease holder finishes a run."""

    def expired_leases(self, now: str, limit: int) -> list[RunRecord]: ...

    def recover_run(self, run: RunRecord, state: str, at: str, error: str) -> bool:
        """Move a run whose lease expired (as seen in `run`) to queued or failed."""

    def append_journal(self, entry: JournalEntry) -> int:
        """Append; the journal is never updated or deleted."""

    def list_journal(
        self, limit: int, after: int = 0, entity: str | None = None, entity_id: str | None = None
    ) -> list[JournalEntry]: ...

    def enqueue_outbox(
        self, event: dict[str, Any], origin_run: str | None, actor: str, at: str
    ) -> None: ...

    def pending_outbox(self, limit: int) -> list[OutboxItem]: ...

    def mark_published(self, seq: int, at: str) -> bool: ...

    def counts(self) -> dict[str, dict[str, int]]:
        """Runs and proposals by state."""

    # ---- the scheduler ---------------------------------------------------------------
    def get_loop_state(self, loop: str) -> LoopState | None: ...

    def list_loop_states(self) -> list[LoopState]: ...

    def set_loop_enabled(self, loop: str, enabled: bool, since: str, at: str) -> None:
        """Record the rules' enabled flag; `since` is kept only when the loop turns on."""

    def advance_cursor(self, loop: str, cursor: str, last_slot: str | None, at: str) -> None:
        """Move the cursor (and the last fired slot) forward; never backward."""

    def set_paused(self, loop: str, paused: bool, note: str, by: str | None, at: str) -> bool: ...

    def insert_skip(self, skip: SkipRecord) -> bool:
        """Record a skipped range once (idempotent on loop, first slot and reason)."""

    def list_skips(self, loop: str, since: str) -> list[SkipRecord]: ...

    def loop_events(self, loop: str, since: str, limit: int) -> list[EventRecord]:
        """A loop's ticks that occurred since `since`, oldest first."""

    def last_loop_event(self, loop: str) -> EventRecord | None: ...

    def last_loop_run(self, loop: str) -> RunRecord | None: ...

    def open_loop_proposals(self, loop: str) -> list[ProposalRecord]:
        """Oldest first."""

    def open_proposals_by_loop(self) -> dict[str, int]: ...


class Store(Protocol):
    dialect: str  # "sqlite" or "postgresql"

    def write(self, exclusive: bool = True) -> AbstractContextManager[Tx]:
        """A write transaction. Exclusive writers are serialised across every process of
        the database, so what one reads stays true until it commits. A non-exclusive
        write (a worker's claim, start, heartbeat) may run beside them: it may only touch
        one run's lease and append to the journal."""

    def read(self) -> AbstractContextManager[Tx]:
        """A read-only snapshot."""

    def close(self) -> None: ...


__all__ = ["Iterator", "Store", "Tx"]
