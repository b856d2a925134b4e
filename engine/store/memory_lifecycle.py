"""The in-memory store's operations on the lifecycle aggregates (`engine.store.ports`):
events and their decisions, occurrences, proposals, runs and their leases. Each does
what its named query in `sql/queries.sql` does, with SQL's NULL rules (NULL equals
nothing, compares with nothing) and its ORDER BY."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from engine.core.records import (
    IN_FLIGHT,
    LEASED,
    DecisionRecord,
    EventRecord,
    OccurrenceRecord,
    ProposalRecord,
    RunRecord,
)
from engine.store.memory_tables import (
    MemoryStoreError,
    Transaction,
    as_json,
    at_or_after,
    at_or_before,
    stored,
    take,
    writes,
)
from engine.store.sqltx import OCCURRENCE_CHANGES, budget_total

_WAITING = "waiting_for_resource"


class LifecycleTx(Transaction):
    """Events, decisions, occurrences, proposals and runs."""

    # ---- events ----------------------------------------------------------------
    @writes
    def insert_event(self, event: EventRecord) -> bool:
        if event.event_id in self._tables.events:
            return False
        row = stored(replace(event, payload=as_json(event.payload), planned=bool(event.planned)))
        self._own("events").events[event.event_id] = row
        return True

    @writes
    def insert_events(self, events: Sequence[EventRecord]) -> set[str]:
        return {e.event_id for e in events if self.insert_event(e)}

    def get_event(self, event_id: str) -> EventRecord | None:
        return self._tables.events.get(event_id)

    def list_events(self, limit: int, type: str | None = None) -> list[EventRecord]:
        found = [e for e in self._tables.events.values() if type is None or e.type == type]
        return take(sorted(found, key=lambda e: (e.admitted_at, e.event_id), reverse=True), limit)

    def unplanned_events(self, limit: int) -> list[EventRecord]:
        found = [e for e in self._tables.events.values() if not e.planned]
        return take(sorted(found, key=lambda e: (e.admitted_at, e.event_id)), limit)

    @writes
    def mark_planned(self, event_id: str) -> None:
        found = self._tables.events.get(event_id)
        if found is not None:
            self._own("events").events[event_id] = replace(found, planned=True)

    def loop_events(self, loop: str, since: str, limit: int) -> list[EventRecord]:
        found = [
            e for e in self._tables.events.values() if e.loop == loop and e.occurred_at >= since
        ]
        return take(sorted(found, key=lambda e: (e.occurred_at, e.event_id)), limit)

    def last_loop_event(self, loop: str) -> EventRecord | None:
        found = [e for e in self._tables.events.values() if e.loop == loop]
        return max(found, key=lambda e: (e.admitted_at, e.event_id), default=None)

    @writes
    def insert_decision(self, decision: DecisionRecord) -> bool:
        if decision.event_id in self._tables.decisions:
            return False
        self._event_exists(decision.event_id, "decisions")
        row = stored(
            replace(
                decision, human_only=bool(decision.human_only), mutating=bool(decision.mutating)
            )
        )
        self._own("decisions").decisions[decision.event_id] = row
        return True

    def get_decision(self, event_id: str) -> DecisionRecord | None:
        return self._tables.decisions.get(event_id)

    # ---- occurrences -------------------------------------------------------------
    @writes
    def set_occurrence(self, event_id: str, loop: str | None, state: str, at: str) -> None:
        found = self._tables.occurrences.get(event_id)
        if found is not None:
            row = stored(replace(found, state=state, updated_at=at))
        else:
            self._event_exists(event_id, "occurrences")
            row = stored(OccurrenceRecord(event_id, loop, state, at))
        self._own("occurrences").occurrences[event_id] = row

    def get_occurrence_state(self, event_id: str) -> str | None:
        found = self._tables.occurrences.get(event_id)
        return None if found is None else found.state

    def get_occurrence(self, event_id: str) -> OccurrenceRecord | None:
        return self._tables.occurrences.get(event_id)

    def get_occurrence_by_key(self, key: str) -> OccurrenceRecord | None:
        event_id = self._tables.occurrence_keys.get(key)
        return None if event_id is None else self._tables.occurrences[event_id]

    @writes
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
        row = stored(
            replace(
                opened,
                evidence=as_json(occ.evidence),
                reserved=as_json(occ.reserved),
                used=as_json(occ.used),
            )
        )
        tables = self._own("occurrences", "occurrence_keys")
        tables.occurrences[occ.event_id] = row
        if row.occurrence_key is not None:
            tables.occurrence_keys[row.occurrence_key] = occ.event_id
        return opened, True

    @writes
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
                changes[name] = as_json(changes[name])
        row = stored(replace(found, updated_at=at, **changes))
        self._own("occurrences").occurrences[event_id] = row
        return True

    @writes
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
            if o.state == _WAITING and at_or_before(o.retry_at, now)
        ]
        return take(sorted(found, key=lambda o: (o.retry_at or "", o.event_id)), limit)

    def list_occurrences(
        self, limit: int, loop: str | None = None, state: str | None = None
    ) -> list[OccurrenceRecord]:
        found = [
            o
            for o in self._tables.occurrences.values()
            if (loop is None or o.loop == loop) and (state is None or o.state == state)
        ]
        return take(sorted(found, key=lambda o: (o.updated_at, o.event_id), reverse=True), limit)

    def occurrences_of_loop(self, loop: str, since: str, limit: int) -> list[OccurrenceRecord]:
        found = [
            o
            for o in self._tables.occurrences.values()
            if o.loop == loop and at_or_after(o.created_at, since)
        ]
        return take(sorted(found, key=lambda o: (o.created_at or "", o.event_id)), limit)

    def budget_usage(self, loop: str, repo: str | None, since: str) -> dict[str, int]:
        return budget_total(
            (o.used, o.reserved, o.finished_at is not None)
            for o in self._tables.occurrences.values()
            if o.loop == loop and o.repo == repo and at_or_after(o.created_at, since)
        )

    # ---- proposals ---------------------------------------------------------------
    @writes
    def insert_proposal(self, proposal: ProposalRecord) -> bool:
        if proposal.event_id in self._tables.proposal_events:
            return False
        if proposal.proposal_id in self._tables.proposals:
            raise MemoryStoreError("UNIQUE constraint failed: proposals.proposal_id")
        self._event_exists(proposal.event_id, "proposals")
        row = stored(
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
        return take(sorted(found, key=lambda p: (p.created_at, p.proposal_id), reverse=True), limit)

    @writes
    def decide_proposal(
        self, proposal_id: str, from_state: str, to_state: str, at: str, by: str, note: str
    ) -> bool:
        found = self._tables.proposals.get(proposal_id)
        if found is None or found.state != from_state:
            return False
        row = stored(replace(found, state=to_state, decided_at=at, decided_by=by, note=note))
        self._own("proposals").proposals[proposal_id] = row
        return True

    def stale_proposals(self, before: str, limit: int) -> list[ProposalRecord]:
        found = [
            p
            for p in self._tables.proposals.values()
            if p.state == "open" and p.created_at < before
        ]
        return take(sorted(found, key=lambda p: p.created_at), limit)

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
    @writes
    def insert_run(self, run: RunRecord) -> bool:
        if run.idempotency_key in self._tables.run_keys:
            return False
        if run.run_id in self._tables.runs:
            raise MemoryStoreError("UNIQUE constraint failed: runs.run_id")
        self._event_exists(run.event_id, "runs")
        row = stored(
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
        return take(sorted(found, key=lambda r: (r.created_at, r.run_id), reverse=True), limit)

    def loop_in_flight(self, loop: str) -> bool:
        return any(r.loop == loop and r.state in IN_FLIGHT for r in self._tables.runs.values())

    def expired_leases(self, now: str, limit: int) -> list[RunRecord]:
        found = [
            r
            for r in self._tables.runs.values()
            if r.state in LEASED and r.lease_expires_at is not None and r.lease_expires_at < now
        ]
        return take(sorted(found, key=lambda r: r.lease_expires_at or ""), limit)

    def last_loop_run(self, loop: str) -> RunRecord | None:
        found = [r for r in self._tables.runs.values() if r.loop == loop]
        return max(found, key=lambda r: (r.created_at, r.run_id), default=None)

    def _move_run(self, run: RunRecord, **changes: Any) -> bool:
        self._own("runs").runs[run.run_id] = stored(replace(run, **changes))
        return True

    def _paused(self, loop: str | None) -> bool:
        state = None if loop is None else self._tables.loop_state.get(loop)
        return state is not None and state.paused

    @writes
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

    @writes
    def heartbeat(self, run_id: str, owner: str, lease_until: str) -> bool:
        found = self._leased_by(run_id, owner, LEASED)
        return found is not None and self._move_run(found, lease_expires_at=lease_until)

    @writes
    def start_run(self, run_id: str, owner: str, at: str) -> bool:
        found = self._leased_by(run_id, owner, ("claimed",))
        return found is not None and self._move_run(found, state="running", started_at=at)

    @writes
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
            result=as_json(result),
            error=error,
            artifact=artifact,
            lease_owner=None,
            lease_expires_at=None,
        )

    @writes
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

    @writes
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
