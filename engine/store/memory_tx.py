"""The transaction of the in-memory store (`engine.store.memory`): `MemoryTx`, every
operation of `engine.store.ports.Tx` over the persistent tables of `memory_tables.py`.
The lifecycle aggregates are in `memory_lifecycle.py` and `memory_runs.py`, the pages
in `memory_pages.py`; here are the journal, the outbox, loops, findings, notifications
and reports. Each operation does what its named query in `sql/queries.sql` does; JSON
columns read back as they do from SQLite and PostgreSQL (`memory_tables.as_json`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from engine.core.paging import NotificationQuery
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
    SinkDelivery,
    SkipRecord,
)
from engine.store.memory_index import EMPTY, in_order
from engine.store.memory_pages import PagesTx
from engine.store.memory_tables import (
    MemoryStoreError,
    Tables,
    as_json,
    read_only,
    stored,
    take,
    writes,
)
from engine.store.memory_work import WorkTx
from engine.store.sqltx import counted

__all__ = ["MemoryStoreError", "MemoryTx", "ReadOnlyMemoryTx", "Tables"]


class MemoryTx(PagesTx, WorkTx):
    """Implements `engine.store.ports.Tx` in memory (see `memory_tables.Transaction`)."""

    # ---- batches: each row as its one-row operation would write it -------------------
    def known_events(self, event_ids: Iterable[str]) -> set[str]:
        return {i for i in event_ids if i in self._tables.events}

    def decided_events(self, event_ids: Iterable[str]) -> set[str]:
        return {i for i in event_ids if i in self._tables.decisions}

    def events_by_ids(self, event_ids: Iterable[str]) -> dict[str, EventRecord]:
        return {i: self._tables.events[i] for i in event_ids if i in self._tables.events}

    def occurrences_by_keys(self, keys: Iterable[str]) -> dict[str, OccurrenceRecord]:
        found = {k: self.get_occurrence_by_key(k) for k in keys}
        return {k: o for k, o in found.items() if o is not None}

    def occurrences_by_ids(self, event_ids: Iterable[str]) -> dict[str, OccurrenceRecord]:
        occurrences = self._tables.occurrences
        return {i: occurrences[i] for i in event_ids if i in occurrences}

    def loop_states_of(self, loops: Iterable[str]) -> dict[str, LoopState]:
        return {n: self._tables.loop_state[n] for n in loops if n in self._tables.loop_state}

    def loops_in_flight(self, loops: Iterable[str]) -> set[str]:
        return {loop for loop in set(loops) if loop is not None and self.loop_in_flight(loop)}

    def open_proposals_of(self, loops: Iterable[str]) -> list[ProposalRecord]:
        found = self._open_proposals(set(loops))
        return sorted(found, key=lambda p: (p.created_at, p.proposal_id))

    def occurrences_of_loops(
        self, loops: Iterable[str], states: tuple[str, ...]
    ) -> list[OccurrenceRecord]:
        found = self._occurrences_in(states, set(loops))
        return sorted(found, key=lambda o: (o.created_at or o.updated_at, o.event_id))

    @writes
    def mark_planned_many(self, event_ids: Sequence[str]) -> None:
        for i in event_ids:
            self.mark_planned(i)

    @writes
    def insert_decisions(self, decisions: Sequence[DecisionRecord]) -> None:
        for d in decisions:
            self.insert_decision(d)

    @writes
    def open_occurrences(self, occurrences: Sequence[OccurrenceRecord]) -> None:
        for o in occurrences:
            self.open_occurrence(o)

    @writes
    def insert_proposals(self, proposals: Sequence[ProposalRecord]) -> None:
        for p in proposals:
            self.insert_proposal(p)

    @writes
    def insert_skips(self, skips: Sequence[SkipRecord]) -> None:
        for s in skips:
            self.insert_skip(s)

    @writes
    def advance_cursors(self, moves: Sequence[tuple[str, str, str | None]], at: str) -> None:
        for loop, cursor, last in moves:
            self.advance_cursor(loop, cursor, last, at)

    # ---- GitHub deliveries ---------------------------------------------------------
    @writes
    def insert_deliveries(self, deliveries: Sequence[DeliveryRecord]) -> None:
        for d in deliveries:
            if d.event_id in self._tables.deliveries:
                continue
            self._event_exists(d.event_id, "deliveries")
            t = self._own()
            t.deliveries = t.deliveries.set(d.event_id, stored(d))

    def get_delivery(self, event_id: str) -> DeliveryRecord | None:
        return self._tables.deliveries.get(event_id)

    def delivered_as(self, delivery_id: str) -> str | None:
        """A scan: `engine explain` asks it once, never a pass of the runtime loop."""
        kept = [d for d in self._tables.deliveries.values() if d.delivery_id == delivery_id]
        first = min(kept, key=lambda d: (d.received_at, d.event_id), default=None)
        return None if first is None else first.event_id

    def list_deliveries(self, limit: int) -> list[DeliveryRecord]:
        found = sorted(self._tables.deliveries.values(), key=lambda d: (d.received_at, d.event_id))
        return take(found, limit)

    # ---- journal and outbox --------------------------------------------------------
    @writes
    def append_journal(self, entry: JournalEntry) -> int:
        t = self._own()
        seq = len(t.journal) + 1
        t.journal = t.journal.set(seq, stored(entry, data=as_json(entry.data), seq=seq))
        key = (entry.entity, entry.entity_id)
        t.journal_of = t.journal_of.set(key, t.journal_of.get(key, EMPTY).set(seq, None))
        loop = self.journal_loop(entry)
        if loop is not None:
            seqs = t.journal_loops.get(loop, EMPTY)
            t.journal_loops = t.journal_loops.set(loop, seqs.set(seq, None))
        return seq

    @writes
    def append_journals(self, entries: Sequence[JournalEntry]) -> None:
        for entry in entries:
            self.append_journal(entry)

    def list_journal(
        self, limit: int, after: int = 0, entity: str | None = None, entity_id: str | None = None
    ) -> list[JournalEntry]:
        journal = self._tables.journal
        if entity is not None and entity_id is not None:
            seqs = sorted(s for s in self._tables.journal_of.get((entity, entity_id), EMPTY))
            return take((journal[s] for s in seqs if s > after), limit)
        found = (
            e
            for e in map(journal.__getitem__, range(max(after, 0) + 1, len(journal) + 1))
            if (entity is None or e.entity == entity)
            and (entity_id is None or e.entity_id == entity_id)
        )
        return take(found, limit)

    def _journal(self) -> Iterator[JournalEntry]:
        """The journal in seq order."""
        journal = self._tables.journal
        return map(journal.__getitem__, range(1, len(journal) + 1))

    def chained_by(self, event_id: str) -> str | None:
        found = (
            e.entity_id
            for e in self._journal()
            if e.entity == "run"
            and e.action == "chained"
            and isinstance(e.data, dict)
            and e.data.get("eventId") == event_id
        )
        return next(found, None)

    @writes
    def enqueue_outbox(
        self, event: dict[str, Any], origin_run: str | None, actor: str, at: str
    ) -> None:
        t = self._own()
        seq = len(t.outbox) + 1
        t.outbox = t.outbox.set(
            seq, (stored(OutboxItem(seq, as_json(event), origin_run, actor, at)), None)
        )
        t.unpublished = t.unpublished.set(seq, None)

    def pending_outbox(self, limit: int) -> list[OutboxItem]:
        outbox = self._tables.outbox
        return take((outbox[seq][0] for seq in sorted(self._tables.unpublished)), limit)

    @writes
    def mark_published(self, seq: int, at: str) -> bool:
        found = self._tables.outbox.get(seq)
        if found is None or found[1] is not None:
            return False
        t = self._own()
        t.outbox = t.outbox.set(seq, (found[0], at))
        t.unpublished = t.unpublished.delete(seq)
        return True

    # ---- the scheduler -------------------------------------------------------------
    def _put_loop(self, row: LoopState) -> None:
        t = self._own()
        t.loop_state = t.loop_state.set(row.loop, row)

    def get_loop_state(self, loop: str) -> LoopState | None:
        return self._tables.loop_state.get(loop)

    def list_loop_states(self) -> list[LoopState]:
        return sorted(self._tables.loop_state.values(), key=lambda s: s.loop)

    @writes
    def set_loop_enabled(self, loop: str, enabled: bool, since: str, at: str) -> None:
        found = self._tables.loop_state.get(loop)
        if found is None:
            row = LoopState(loop, bool(enabled), since, None, None, False, "", None, at)
        else:
            kept = since if enabled and not found.enabled else found.enabled_since
            row = replace(found, enabled=bool(enabled), enabled_since=kept, updated_at=at)
        self._put_loop(stored(row))

    @writes
    def advance_cursor(self, loop: str, cursor: str, last_slot: str | None, at: str) -> None:
        found = self._tables.loop_state.get(loop)
        if found is None:
            return
        changes: dict[str, Any] = {"updated_at": at}
        if found.cursor is None or found.cursor < cursor:
            changes["cursor"] = cursor
        if last_slot is not None and (found.last_slot is None or found.last_slot < last_slot):
            changes["last_slot"] = last_slot
        self._put_loop(stored(found, **changes))

    def _set_loop(self, loop: str, **changes: Any) -> bool:
        found = self._tables.loop_state.get(loop)
        if found is None:
            return False
        self._put_loop(stored(found, **changes))
        return True

    @writes
    def set_paused(self, loop: str, paused: bool, note: str, by: str | None, at: str) -> bool:
        return self._set_loop(
            loop, paused=bool(paused), pause_note=note, paused_by=by, updated_at=at
        )

    @writes
    def insert_skip(self, skip: SkipRecord) -> bool:
        key = (skip.loop, skip.first_slot, skip.reason)
        if key in self._tables.slot_skips:
            return False
        t = self._own()
        t.skip_order = t.skip_order.set(key, len(t.slot_skips))
        t.slot_skips = t.slot_skips.set(key, stored(skip))
        return True

    def list_skips(self, loop: str, since: str) -> list[SkipRecord]:
        order = self._tables.skip_order
        found = [
            s for s in self._tables.slot_skips.values() if s.loop == loop and s.last_slot >= since
        ]
        # Equal first slots in SQLite's order: it reads a loop's skips by last slot
        # through its index and sorts them by first slot, keeping that order.
        return sorted(
            found,
            key=lambda s: (s.first_slot, s.last_slot, order[(s.loop, s.first_slot, s.reason)]),
        )

    def get_observation(self, loop: str) -> ObservationRecord | None:
        return self._tables.observations.get(loop)

    def list_observations(self) -> list[ObservationRecord]:
        return [self._tables.observations[k] for k in sorted(self._tables.observations)]

    @writes
    def insert_observation(self, obs: ObservationRecord) -> bool:
        if obs.loop in self._tables.observations:
            return False
        t = self._own()
        t.observations = t.observations.set(obs.loop, stored(obs))
        return True

    @writes
    def update_observation(self, obs: ObservationRecord, expect: ObservationRecord) -> bool:
        found = self._tables.observations.get(obs.loop)
        if found is None or found.polls != expect.polls:
            return False
        if found.fingerprint != expect.fingerprint:  # NULL matches NULL, as the SQL's
            return False
        t = self._own()
        t.observations = t.observations.set(obs.loop, stored(obs))
        return True

    @writes
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
    @writes
    def upsert_finding(self, f: FindingRecord) -> tuple[FindingRecord, bool]:
        known = self.get_finding_by_key(f.semantic_key)
        if known is not None:
            row = replace(
                known,
                occurrence_count=known.occurrence_count + 1,
                last_seen_at=f.last_seen_at,
                last_occurrence=f.last_occurrence,
                evidence=as_json(f.evidence),
            )
            t = self._own()
            t.findings = t.findings.set(row.finding_id, stored(row))
            return t.findings[row.finding_id], False
        if f.finding_id in self._tables.findings:
            raise MemoryStoreError("UNIQUE constraint failed: findings.finding_id")
        confidence = None if f.confidence is None else float(f.confidence)
        row = stored(f, evidence=as_json(f.evidence), confidence=confidence)
        t = self._own()
        t.findings = t.findings.set(row.finding_id, row)
        t.finding_keys = t.finding_keys.set(row.semantic_key, row.finding_id)
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
        return take(
            sorted(found, key=lambda f: (f.last_seen_at, f.finding_id), reverse=True), limit
        )

    @writes
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
        t = self._own()
        t.findings = t.findings.set(finding_id, stored(row))
        return True

    # ---- notifications -------------------------------------------------------------
    def last_notification_state(self, dedup_key: str) -> str | None:
        seq = self._tables.last_notified.get(dedup_key)
        return None if seq is None else self._tables.notifications[seq].state

    @writes
    def enqueue_notification(self, n: NotificationRecord) -> int | None:
        if self.last_notification_state(n.dedup_key) == n.state:
            return None
        t = self._own()
        seq = len(t.notifications) + 1
        row = stored(n, links=as_json(n.links), seq=seq)
        t.notifications = t.notifications.set(seq, row)
        t.last_notified = t.last_notified.set(row.dedup_key, seq)
        if row.delivery == "pending":
            t.undelivered = t.undelivered.set(seq, None)
        return seq

    def pending_notifications(self, now: str, limit: int) -> list[NotificationRecord]:
        notifications = self._tables.notifications
        found = (
            n
            for n in map(notifications.__getitem__, sorted(self._tables.undelivered))
            if n.next_attempt_at is None or n.next_attempt_at <= now
        )
        return take(found, limit)

    def _pending(self, seq: int) -> NotificationRecord | None:
        found = self._tables.notifications.get(seq)
        return None if found is None or found.delivery != "pending" else found

    @writes
    def claim_notification(self, seq: int, seen: str | None, until: str) -> bool:
        found = self._pending(seq)
        if found is None or (found.next_attempt_at or "") != (seen or ""):
            return False
        t = self._own()
        t.notifications = t.notifications.set(seq, replace(found, next_attempt_at=until))
        return True

    @writes
    def settle_notification(self, n: NotificationRecord) -> bool:
        found = self._pending(n.seq)
        if found is None:
            return False
        row = stored(
            replace(
                found,
                delivery=n.delivery,
                delivered_at=n.delivered_at,
                attempts=n.attempts,
                last_error=n.last_error,
                next_attempt_at=n.next_attempt_at,
            )
        )
        t = self._own()
        t.notifications = t.notifications.set(n.seq, row)
        if row.delivery != "pending":
            t.undelivered = t.undelivered.delete(n.seq)
        return True

    @writes
    def record_sink_deliveries(self, rows: Sequence[SinkDelivery]) -> None:
        checked = [stored(r) for r in rows]
        if any(r.seq not in self._tables.notifications for r in checked):
            raise MemoryStoreError("FOREIGN KEY constraint failed: SinkDelivery.seq")
        t = self._own()
        for row in checked:
            mine = t.sink_deliveries.get(row.seq, EMPTY)
            t.sink_deliveries = t.sink_deliveries.set(row.seq, mine.set(row.sink, row))

    def sink_deliveries(self, seqs: Iterable[int]) -> dict[int, list[SinkDelivery]]:
        found = ((s, self._tables.sink_deliveries.get(s)) for s in sorted(set(seqs)))
        return {s: [rows[k] for k in sorted(rows)] for s, rows in found if rows}

    def list_notifications(self, limit: int) -> list[NotificationRecord]:
        notifications = self._tables.notifications
        return take(map(notifications.__getitem__, range(len(notifications), 0, -1)), limit)

    def page_notifications(self, query: NotificationQuery, limit: int) -> list[NotificationRecord]:
        notifications = self._tables.notifications
        top = len(notifications)
        if query.before is not None:
            top = min(query.before - 1, top)
        found = (
            n
            for n in map(notifications.__getitem__, range(top, 0, -1))
            if (query.loop is None or n.loop == query.loop)
            and (query.delivery is None or n.delivery == query.delivery)
        )
        return take(found, limit)

    # ---- reports -------------------------------------------------------------------
    def counts(self) -> dict[str, dict[str, int]]:
        t = self._tables
        runs = Counter(r.state for r in in_order(t.runs, t.run_order))
        proposals = Counter(p.state for p in in_order(t.proposals, t.proposal_order))
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
        return take(((r.created_at, r.started_at, r.finished_at) for r in reversed(newest)), limit)


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


ReadOnlyMemoryTx = read_only(MemoryTx)
