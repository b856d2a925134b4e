"""The in-memory store's pages (`engine.core.paging`: runs, proposals, events and the
journal) and a loop's counts per state, as `sql/queries.sql` has them: newest first,
each filter given held, strictly older than the cursor. A journal entry's loop is taken
when it is written (`journal_loop`), from the row it names as that row is stored then,
as the SQL stores' `append_journal` does."""

from __future__ import annotations

from collections.abc import Iterator

from engine.core.paging import EventQuery, JournalQuery, ProposalQuery, RunQuery
from engine.core.records import EventRecord, JournalEntry, ProposalRecord, RunRecord
from engine.store.memory_index import EMPTY, Grouped
from engine.store.memory_lifecycle import LifecycleTx
from engine.store.memory_tables import take


class PagesTx(LifecycleTx):
    """Pages of runs and of the journal; a loop's counts per state."""

    def journal_loop(self, entry: JournalEntry) -> str | None:
        """The loop an entry is about, from the row it names (None: no loop's)."""
        t, entity, key = self._tables, entry.entity, entry.entity_id
        if entity == "loop":
            return key
        event = t.events.get(key)
        if entity == "event":
            return None if event is None else event.loop
        if entity == "occurrence":
            occ = t.occurrences.get(key)
            found = None if occ is None else occ.loop
            return found if found is not None or event is None else event.loop
        if entity == "proposal":
            proposal = t.proposals.get(key)
            return None if proposal is None else proposal.loop
        if entity == "run":
            run = t.runs.get(key)
            return None if run is None else run.loop
        finding = t.findings.get(key) if entity == "finding" else None
        return None if finding is None else finding.loop

    def page_runs(self, query: RunQuery, limit: int) -> list[RunRecord]:
        t = self._tables
        loops = None if query.loop is None else [query.loop]
        states = t.run_states.keys() if query.state is None else [query.state]
        found = [r for r in self._runs_in(states, loops) if _run_holds(query, r)]
        return take(sorted(found, key=lambda r: (r.created_at, r.run_id), reverse=True), limit)

    def page_proposals(self, query: ProposalQuery, limit: int) -> list[ProposalRecord]:
        found = [p for p in self._tables.proposals.values() if _proposal_holds(query, p)]
        return take(sorted(found, key=lambda p: (p.created_at, p.proposal_id), reverse=True), limit)

    def page_events(self, query: EventQuery, limit: int) -> list[EventRecord]:
        found = [e for e in self._tables.events.values() if _event_holds(query, e)]
        return take(sorted(found, key=lambda e: (e.admitted_at, e.event_id), reverse=True), limit)

    def page_journal(self, query: JournalQuery, limit: int) -> list[JournalEntry]:
        found = (e for e in self._journal_newest(query) if _entry_holds(query, e))
        return take(found, limit)

    def _journal_newest(self, query: JournalQuery) -> Iterator[JournalEntry]:
        """The entries below the cursor (of the loop, when the query names one), the
        newest first."""
        journal = self._tables.journal
        top = len(journal) if query.before is None else min(query.before - 1, len(journal))
        if query.loop is None:
            return map(journal.__getitem__, range(top, 0, -1))
        seqs = self._tables.journal_loops.get(query.loop, EMPTY)
        return (journal[s] for s in sorted(seqs, reverse=True) if s <= top)

    def loop_state_counts(self, loop: str) -> dict[str, dict[str, int]]:
        t = self._tables
        return {
            "occurrence": _counts(t.occurrence_states, loop),
            "proposal": _counts(t.proposal_states, loop),
            "run": _counts(t.run_states, loop),
        }


def _run_holds(q: RunQuery, r: RunRecord) -> bool:
    return (
        (q.actor is None or r.approved_by == q.actor)
        and (q.since is None or r.created_at >= q.since)
        and (q.until is None or r.created_at < q.until)
        and (q.before is None or (r.created_at, r.run_id) < q.before)
    )


def _proposal_holds(q: ProposalQuery, p: ProposalRecord) -> bool:
    return (
        (q.loop is None or p.loop == q.loop)
        and (q.state is None or p.state == q.state)
        and (q.before is None or (p.created_at, p.proposal_id) < q.before)
    )


def _event_holds(q: EventQuery, e: EventRecord) -> bool:
    return (
        (q.loop is None or e.loop == q.loop)
        and (q.type is None or e.type == q.type)
        and (q.before is None or (e.admitted_at, e.event_id) < q.before)
    )


def _entry_holds(q: JournalQuery, e: JournalEntry) -> bool:
    return (
        (q.entity is None or e.entity == q.entity)
        and (q.actor is None or e.actor == q.actor)
        and (q.since is None or e.at >= q.since)
        and (q.until is None or e.at < q.until)
    )


def _counts(index: Grouped, loop: str) -> dict[str, int]:
    """A loop's keys in each state of a (state, loop) index; a state without any is
    absent."""
    found = {state: len(by_loop.get(loop, EMPTY)) for state, by_loop in index.items()}
    return {state: n for state, n in found.items() if n}
