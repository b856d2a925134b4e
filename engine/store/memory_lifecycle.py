"""The in-memory store's operations on the lifecycle aggregates (`engine.store.ports`):
events and their decisions, occurrences, proposals, runs and their leases. Each does
what its named query in `sql/queries.sql` does, with SQL's NULL rules (NULL equals
nothing, compares with nothing) and its ORDER BY."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from engine.core.records import (
    DecisionRecord,
    EventRecord,
    OccurrenceRecord,
    ProposalRecord,
    current_source,
)
from engine.store.memory_index import EMPTY, grouped, regroup
from engine.store.memory_runs import RunsTx
from engine.store.memory_tables import (
    MemoryStoreError,
    as_json,
    at_or_after,
    at_or_before,
    stored,
    take,
    writes,
)
from engine.store.sqltx import OCCURRENCE_CHANGES, budget_total

_WAITING = "waiting_for_resource"
_OPEN = "open"


class LifecycleTx(RunsTx):
    """Events, decisions, occurrences and proposals (runs: `memory_runs.py`). Each
    table has one writer of its rows (`_put_*`), which keeps the table's indexes with
    it."""

    # ---- the writers of rows and their indexes ----------------------------------
    def _put_event(self, row: EventRecord) -> None:
        t = self._own()
        if row.event_id not in t.events:
            newest = t.last_events.get(row.loop)
            seen = None if newest is None else t.events[newest]
            if seen is None or (seen.admitted_at, seen.event_id) < (row.admitted_at, row.event_id):
                t.last_events = t.last_events.set(row.loop, row.event_id)
        t.events = t.events.set(row.event_id, row)
        if row.planned:
            if row.event_id in t.unplanned:
                t.unplanned = t.unplanned.delete(row.event_id)
        else:
            t.unplanned = t.unplanned.set(row.event_id, None)

    def _put_occurrence(self, row: OccurrenceRecord) -> None:
        t = self._own()
        old = t.occurrences.get(row.event_id)
        t.occurrences = t.occurrences.set(row.event_id, row)
        key, loop = row.event_id, row.loop
        was = None if old is None else (old.state, old.loop)
        made = None if old is None else (old.loop, old.created_at)
        changed = None if old is None else (old.loop, old.updated_at)
        t.occurrence_states = regroup(t.occurrence_states, key, was, (row.state, loop))
        t.occurrence_created = t.occurrence_created.moved(key, made, (loop, row.created_at))
        t.occurrence_updated = t.occurrence_updated.moved(key, changed, (loop, row.updated_at))
        was_key = None if old is None else old.semantic_key
        if was_key != row.semantic_key:
            if was_key is not None:
                held = t.occurrence_semantic[was_key].delete(key)
                t.occurrence_semantic = (
                    t.occurrence_semantic.set(was_key, held)
                    if held
                    else t.occurrence_semantic.delete(was_key)
                )
            if row.semantic_key is not None:
                held = t.occurrence_semantic.get(row.semantic_key, EMPTY)
                t.occurrence_semantic = t.occurrence_semantic.set(
                    row.semantic_key, held.set(key, None)
                )

    def _put_proposal(self, row: ProposalRecord) -> None:
        t = self._own()
        old = t.proposals.get(row.proposal_id)
        if old is None:
            t.proposal_order = t.proposal_order.set(row.proposal_id, len(t.proposals))
        t.proposals = t.proposals.set(row.proposal_id, row)
        was = None if old is None else (old.state, old.loop)
        t.proposal_states = regroup(t.proposal_states, row.proposal_id, was, (row.state, row.loop))

    # ---- events ----------------------------------------------------------------
    @writes
    def insert_event(self, event: EventRecord) -> bool:
        if event.event_id in self._tables.events:
            return False
        source = current_source(event.source, event.admitted_by)
        payload, planned = as_json(event.payload), bool(event.planned)
        self._put_event(stored(event, source=source, payload=payload, planned=planned))
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
        events = self._tables.events
        found = [events[i] for i in self._tables.unplanned]
        return take(sorted(found, key=lambda e: (e.admitted_at, e.event_id)), limit)

    @writes
    def mark_planned(self, event_id: str) -> None:
        found = self._tables.events.get(event_id)
        if found is not None:
            self._put_event(replace(found, planned=True))

    def loop_events(self, loop: str, since: str, limit: int) -> list[EventRecord]:
        found = [
            e for e in self._tables.events.values() if e.loop == loop and e.occurred_at >= since
        ]
        return take(sorted(found, key=lambda e: (e.occurred_at, e.event_id)), limit)

    def last_loop_event(self, loop: str) -> EventRecord | None:
        newest = self._tables.last_events.get(loop)
        return None if newest is None else self._tables.events[newest]

    @writes
    def insert_decision(self, decision: DecisionRecord) -> bool:
        if decision.event_id in self._tables.decisions:
            return False
        self._event_exists(decision.event_id, "decisions")
        row = stored(
            decision, human_only=bool(decision.human_only), mutating=bool(decision.mutating)
        )
        t = self._own()
        t.decisions = t.decisions.set(decision.event_id, row)
        return True

    def get_decision(self, event_id: str) -> DecisionRecord | None:
        return self._tables.decisions.get(event_id)

    # ---- occurrences -------------------------------------------------------------
    @writes
    def set_occurrence(self, event_id: str, loop: str | None, state: str, at: str) -> None:
        found = self._tables.occurrences.get(event_id)
        if found is not None:
            row = stored(found, state=state, updated_at=at)
        else:
            self._event_exists(event_id, "occurrences")
            row = stored(OccurrenceRecord(event_id, loop, state, at))
        self._put_occurrence(row)

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
            opened,
            evidence=as_json(occ.evidence),
            reserved=as_json(occ.reserved),
            used=as_json(occ.used),
        )
        self._put_occurrence(row)
        if row.occurrence_key is not None:
            t = self._tables
            t.occurrence_keys = t.occurrence_keys.set(row.occurrence_key, occ.event_id)
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
        self._put_occurrence(stored(found, updated_at=at, **changes))
        return True

    @writes
    def add_signal(self, event_id: str) -> int:
        found = self._tables.occurrences.get(event_id)
        if found is None:
            return 0
        self._put_occurrence(replace(found, signals=found.signals + 1))
        return found.signals + 1

    def active_occurrences(
        self, loop: str, repo: str | None, states: tuple[str, ...]
    ) -> list[OccurrenceRecord]:
        wanted = list(dict.fromkeys(states))
        if not wanted:
            return []
        if len(wanted) > 26:
            raise ValueError("active_occurrences takes at most 26 states")
        occurrences = self._tables.occurrences
        found = [
            o
            for o in map(
                occurrences.__getitem__, grouped(self._tables.occurrence_states, wanted, [loop])
            )
            if o.repo == repo
        ]
        return sorted(found, key=lambda o: (o.created_at or o.updated_at, o.event_id))

    def _of_key(self, semantic_key: str) -> list[OccurrenceRecord]:
        held = self._tables.occurrence_semantic.get(semantic_key, EMPTY)
        return [self._tables.occurrences[event_id] for event_id in held]

    def key_occurrences(
        self, semantic_key: str, states: tuple[str, ...], limit: int
    ) -> list[OccurrenceRecord]:
        if len(set(states)) > 26:
            raise ValueError("key_occurrences takes at most 26 states")
        found = [o for o in self._of_key(semantic_key) if o.state in states]
        return take(sorted(found, key=lambda o: (o.created_at or o.updated_at, o.event_id)), limit)

    def last_attempt(self, semantic_key: str) -> OccurrenceRecord | None:
        found = [
            o
            for o in self._of_key(semantic_key)
            if o.finished_at is not None and o.used is not None
        ]
        return max(found, key=lambda o: (o.finished_at or "", o.event_id), default=None)

    def due_retries(self, now: str, limit: int) -> list[OccurrenceRecord]:
        occurrences = self._tables.occurrences
        found = [
            o
            for o in map(
                occurrences.__getitem__, grouped(self._tables.occurrence_states, [_WAITING])
            )
            if at_or_before(o.retry_at, now)
        ]
        return take(sorted(found, key=lambda o: (o.retry_at or "", o.event_id)), limit)

    def list_occurrences(
        self, limit: int, loop: str | None = None, state: str | None = None
    ) -> list[OccurrenceRecord]:
        if loop is not None and limit >= 0:  # the newest hours of the loop that hold them
            found: list[OccurrenceRecord] = []
            occurrences = self._tables.occurrences
            for keys in self._tables.occurrence_updated.newest(loop):
                if len(found) >= limit:
                    break
                found += (o for o in map(occurrences.__getitem__, keys) if state in (None, o.state))
        else:
            found = self._occurrences_in(None if state is None else [state], None)
        return take(sorted(found, key=_changed, reverse=True), limit)

    def occurrences_of_loop(self, loop: str, since: str, limit: int) -> list[OccurrenceRecord]:
        found = list(self._made_since(loop, since))
        return take(sorted(found, key=lambda o: (o.created_at or "", o.event_id)), limit)

    def budget_usage(self, loop: str, repo: str | None, since: str) -> dict[str, int]:
        return budget_total(
            (o.used, o.reserved, o.finished_at is not None)
            for o in self._made_since(loop, since)
            if o.repo == repo
        )

    def _made_since(self, loop: str, since: str) -> Iterator[OccurrenceRecord]:
        """The loop's occurrences created at or after `since`."""
        occurrences = self._tables.occurrences
        for o in map(occurrences.__getitem__, self._tables.occurrence_created.since(loop, since)):
            if at_or_after(o.created_at, since):
                yield o

    def _occurrences_in(
        self, states: Iterable[str] | None, loops: Iterable[str | None] | None
    ) -> list[OccurrenceRecord]:
        """The occurrences in any of `states`, of any of `loops` (None: in any)."""
        index, occurrences = self._tables.occurrence_states, self._tables.occurrences
        keys = grouped(index, index.keys() if states is None else states, loops)
        return [occurrences[i] for i in keys]

    # ---- proposals ---------------------------------------------------------------
    @writes
    def insert_proposal(self, proposal: ProposalRecord) -> bool:
        if proposal.event_id in self._tables.proposal_events:
            return False
        if proposal.proposal_id in self._tables.proposals:
            raise MemoryStoreError("UNIQUE constraint failed: proposals.proposal_id")
        self._event_exists(proposal.event_id, "proposals")
        row = stored(
            proposal,
            human_only=bool(proposal.human_only),
            mutating=bool(proposal.mutating),
            decided_at=None,
            decided_by=None,
        )
        self._put_proposal(row)
        t = self._tables
        t.proposal_events = t.proposal_events.set(row.event_id, row.proposal_id)
        return True

    def get_proposal(self, proposal_id: str) -> ProposalRecord | None:
        return self._tables.proposals.get(proposal_id)

    def list_proposals(self, limit: int, state: str | None = None) -> list[ProposalRecord]:
        index, proposals = self._tables.proposal_states, self._tables.proposals
        found = [proposals[i] for i in grouped(index, index.keys() if state is None else [state])]
        return take(sorted(found, key=lambda p: (p.created_at, p.proposal_id), reverse=True), limit)

    @writes
    def decide_proposal(
        self, proposal_id: str, from_state: str, to_state: str, at: str, by: str, note: str
    ) -> bool:
        found = self._tables.proposals.get(proposal_id)
        if found is None or found.state != from_state:
            return False
        self._put_proposal(stored(found, state=to_state, decided_at=at, decided_by=by, note=note))
        return True

    def _open_proposals(self, loops: Iterable[str | None] | None = None) -> list[ProposalRecord]:
        proposals = self._tables.proposals
        return [proposals[i] for i in grouped(self._tables.proposal_states, [_OPEN], loops)]

    def stale_proposals(self, before: str, limit: int) -> list[ProposalRecord]:
        found = [p for p in self._open_proposals() if p.created_at < before]
        return take(sorted(found, key=lambda p: (p.created_at, p.proposal_id)), limit)

    def open_loop_proposals(self, loop: str) -> list[ProposalRecord]:
        found = self._open_proposals([loop])
        return sorted(found, key=lambda p: (p.created_at, p.proposal_id))

    def open_proposals_by_loop(self) -> dict[str, int]:
        order = self._tables.proposal_order
        found = sorted(self._open_proposals(), key=lambda p: order[p.proposal_id])
        return dict(Counter(p.loop for p in found if p.loop is not None))


def _changed(o: OccurrenceRecord) -> tuple[str, str]:
    """The order of `list_occurrences` (newest first)."""
    return (o.updated_at, o.event_id)
