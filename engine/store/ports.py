"""The storage interface, one small protocol per aggregate. The service composes these
operations inside one transaction (`Store.write()`), so a decision, its proposal or
run, and their journal entries commit together or not at all. Implementations:
`sqlite` (the embedded default), `postgres` (several processes and hosts on one
database) and `memory` (a pure-Python fake for unit tests and simulations, never for
serving).

Each aggregate has a read-only view (`EventsView`, `RunsView`, ...: its `get_*`,
`list_*` and query methods) and a writing protocol that extends it (`Events`,
`Runs`, ...). `Tx` composes every writing protocol and `savepoint`; `TxView` composes
every view (what a read transaction answers); `FactsView` composes the views a
decision reads. Invariants every implementation keeps (tests/contract/): every
`insert_*` is idempotent on its key and answers whether it wrote; every state change
is a compare-and-set on the state the caller saw and answers whether it moved; lists
come in the order each method states.

Operations over many rows (`insert_events`, `occurrences_by_keys`, `loop_states_of`,
...) serve the batched writer (engine.service.batch): each does what its one-row
operation does to each row, in one statement. A many-row write answers nothing: its
caller has read, under the writer's lock, that the keys are free."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from engine.core.paging import (
    EventQuery,
    JournalQuery,
    NotificationQuery,
    Page,
    ProposalQuery,
    RunQuery,
    journal_cursor,
    journal_cursor_text,
    run_cursor,
    run_cursor_text,
)
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
from engine.core.work import WorkBinding, WorkItem, WorkQuery
from engine.store.health import Health

# ---- events and their decisions --------------------------------------------------------


class EventsView(Protocol):
    """Admitted events (immutable once admitted but for the planned flag) and the one
    decision per event, read."""

    def known_events(self, event_ids: Iterable[str]) -> set[str]:
        """The ids that are admitted already."""

    def decided_events(self, event_ids: Iterable[str]) -> set[str]:
        """The ids that have their decision already."""

    def events_by_ids(self, event_ids: Iterable[str]) -> dict[str, EventRecord]: ...

    def get_event(self, event_id: str) -> EventRecord | None: ...

    def list_events(self, limit: int, type: str | None = None) -> list[EventRecord]:
        """Newest first."""

    def page_events(self, query: EventQuery, limit: int) -> list[EventRecord]:
        """At most `limit` events that hold every filter of `query`, newest first
        (admitted_at, then event_id, descending); with `query.before`, only those
        strictly older than that (admitted_at, event_id), so pages read one after the
        other from the last row of each give every event once."""

    def unplanned_events(self, limit: int) -> list[EventRecord]:
        """Admitted and not yet planned, oldest first."""

    def loop_events(self, loop: str, since: str, limit: int) -> list[EventRecord]:
        """A loop's ticks that occurred since `since`, oldest first."""

    def last_loop_event(self, loop: str) -> EventRecord | None: ...

    def get_decision(self, event_id: str) -> DecisionRecord | None: ...


class Events(EventsView, Protocol):
    """Admission and decisions: idempotent on the event id."""

    def mark_planned_many(self, event_ids: Sequence[str]) -> None: ...

    def insert_decisions(self, decisions: Sequence[DecisionRecord]) -> None: ...

    def insert_event(self, event: EventRecord) -> bool:
        """Admit; False (and nothing written) when the event id exists."""

    def insert_events(self, events: Sequence[EventRecord]) -> set[str]:
        """Admit several at once (one statement per step, not per event): the ids that
        were new. An id already stored is not written; of equal ids among `events`,
        the first is written and the others are not."""

    def mark_planned(self, event_id: str) -> None: ...

    def insert_decision(self, decision: DecisionRecord) -> bool:
        """One decision per event; False when the event was already decided."""


# ---- GitHub deliveries ----------------------------------------------------------------


class DeliveriesView(Protocol):
    """The GitHub deliveries kept beside the events they became (one per event), read."""

    def get_delivery(self, event_id: str) -> DeliveryRecord | None: ...

    def delivered_as(self, delivery_id: str) -> str | None:
        """The id of the event the delivery with this GUID became, if it was kept."""

    def list_deliveries(self, limit: int) -> list[DeliveryRecord]:
        """Oldest first (received_at, then event_id)."""


class Deliveries(DeliveriesView, Protocol):
    """Written once, in the transaction that admits the event; never changed."""

    def insert_deliveries(self, deliveries: Sequence[DeliveryRecord]) -> None:
        """Keep several at once (one statement), each beside its event, which must be
        stored; one whose event has a delivery already is not written."""


# ---- occurrences ----------------------------------------------------------------------


class OccurrencesView(Protocol):
    """Occurrences (one per event that opened one, at most one per occurrence key),
    read: by event, by key, the active ones, the due retries, the budget spent."""

    def occurrences_by_keys(self, keys: Iterable[str]) -> dict[str, OccurrenceRecord]:
        """The occurrences that hold these occurrence keys, by key."""

    def occurrences_by_ids(self, event_ids: Iterable[str]) -> dict[str, OccurrenceRecord]: ...

    def occurrences_of_loops(
        self, loops: Iterable[str], states: tuple[str, ...]
    ) -> list[OccurrenceRecord]:
        """The loops' occurrences in any of `states`, oldest first (as
        active_occurrences, for every repo)."""

    def get_occurrence_state(self, event_id: str) -> str | None: ...

    def get_occurrence(self, event_id: str) -> OccurrenceRecord | None: ...

    def get_occurrence_by_key(self, key: str) -> OccurrenceRecord | None: ...

    def active_occurrences(
        self, loop: str, repo: str | None, states: tuple[str, ...]
    ) -> list[OccurrenceRecord]:
        """The loop's occurrences for `repo` (None matches only occurrences without a
        repo) whose state is one of `states`, oldest first (created_at, event_id)."""

    def key_occurrences(
        self, semantic_key: str, states: tuple[str, ...], limit: int
    ) -> list[OccurrenceRecord]:
        """The occurrences working on `semantic_key` (their `semantic_key`) whose state is
        one of `states`, oldest first (created_at, event_id), at most `limit`."""

    def last_attempt(self, semantic_key: str) -> OccurrenceRecord | None:
        """The latest finished occurrence working on `semantic_key` that settled a run
        (its `used` is set): the greatest (finished_at, event_id); None when none did."""

    def due_retries(self, now: str, limit: int) -> list[OccurrenceRecord]:
        """Occurrences in `waiting_for_resource` whose `retry_at` is at or before `now`,
        the soonest retry first."""

    def list_occurrences(
        self, limit: int, loop: str | None = None, state: str | None = None
    ) -> list[OccurrenceRecord]:
        """Newest first (updated_at, then event_id, descending), optionally one loop's
        and/or in one state."""

    def occurrences_of_loop(self, loop: str, since: str, limit: int) -> list[OccurrenceRecord]:
        """The loop's occurrences created at or after `since`, oldest first."""

    def budget_usage(self, loop: str, repo: str | None, since: str) -> dict[str, int]:
        """{"runs", "wall_clock_seconds"} spent by the loop's occurrences for `repo` (None
        matches no repo) created at or after `since`: what a finished one `used`; what
        an unfinished one `reserved`, plus what its earlier attempts `used` (a retry's
        first run stays counted while it waits); 0 when none."""


class Occurrences(OccurrencesView, Protocol):
    """Opening is idempotent on the occurrence key; an update is a compare-and-set on
    the state the caller saw."""

    def open_occurrences(self, occurrences: Sequence[OccurrenceRecord]) -> None: ...

    def set_occurrence(self, event_id: str, loop: str | None, state: str, at: str) -> None: ...

    def open_occurrence(self, occ: OccurrenceRecord) -> tuple[OccurrenceRecord, bool]:
        """Open an occurrence under its event id: (stored, True). When an occurrence with
        the same `occurrence_key` exists, nothing is written: (existing, False). A row
        the event already has without a key (`set_occurrence`) takes every column of
        `occ` instead; one it has with another key is left alone: (that row, False).
        `created_at` defaults to `updated_at`."""

    def update_occurrence(
        self, event_id: str, expect_state: str | None, at: str, **changes: Any
    ) -> bool:
        """Set the `changes` columns and `updated_at = at`; a compare-and-set on `state`
        unless `expect_state` is None. True when the row moved. Only state, decision,
        evidence, attempt, retry_at, signals, reserved, used, finished_at and
        failure_class may change (ValueError for any other name, nothing written);
        evidence, reserved and used are dicts (stored as JSON)."""

    def add_signal(self, event_id: str) -> int:
        """Count one more trigger coalesced into the occurrence; the new count (0, and
        nothing written, when there is no such occurrence)."""


# ---- proposals ------------------------------------------------------------------------


class ProposalsView(Protocol):
    """Proposals waiting for (or past) a human's decision, read."""

    def open_proposals_of(self, loops: Iterable[str]) -> list[ProposalRecord]:
        """The loops' open proposals, oldest first (as open_loop_proposals)."""

    def get_proposal(self, proposal_id: str) -> ProposalRecord | None: ...

    def list_proposals(self, limit: int, state: str | None = None) -> list[ProposalRecord]: ...

    def page_proposals(self, query: ProposalQuery, limit: int) -> list[ProposalRecord]:
        """At most `limit` proposals that hold every filter of `query`, newest first
        (created_at, then proposal_id, descending); with `query.before`, only those
        strictly older than that (created_at, proposal_id), so pages read one after
        the other from the last row of each give every proposal once."""

    def stale_proposals(self, before: str, limit: int) -> list[ProposalRecord]:
        """Open proposals created before `before`, oldest first (created_at, then
        proposal_id: one order on every store)."""

    def open_loop_proposals(self, loop: str) -> list[ProposalRecord]:
        """Oldest first."""

    def open_proposals_by_loop(self) -> dict[str, int]: ...


class Proposals(ProposalsView, Protocol):
    """One proposal per event; a decision is a compare-and-set on the state seen."""

    def insert_proposals(self, proposals: Sequence[ProposalRecord]) -> None: ...

    def insert_proposal(self, proposal: ProposalRecord) -> bool:
        """One proposal per event."""

    def decide_proposal(
        self, proposal_id: str, from_state: str, to_state: str, at: str, by: str, note: str
    ) -> bool: ...


# ---- runs and their leases ------------------------------------------------------------


class RunsView(Protocol):
    """Runs and their leases, read."""

    def loops_in_flight(self, loops: Iterable[str]) -> set[str]:
        """Those of the loops with a run queued, claimed or running."""

    def get_run(self, run_id: str) -> RunRecord | None: ...

    def get_run_by_key(self, key: str) -> RunRecord | None: ...

    def list_runs(self, limit: int, state: str | None = None) -> list[RunRecord]: ...

    def loop_in_flight(self, loop: str) -> bool:
        """A run of the loop is queued, claimed or running."""

    def expired_leases(self, now: str, limit: int) -> list[RunRecord]: ...

    def last_loop_run(self, loop: str) -> RunRecord | None: ...

    def page_runs(self, query: RunQuery, limit: int) -> list[RunRecord]:
        """At most `limit` runs that hold every filter of `query`, newest first
        (created_at, then run_id, descending); with `query.before`, only those strictly
        older than that (created_at, run_id), so pages read one after the other from
        the last row of each give every run once."""


class Runs(RunsView, Protocol):
    """One run per idempotency key; every lease step is a compare-and-set on the lease
    holder (and the state) the caller saw."""

    def insert_run(self, run: RunRecord) -> bool:
        """One run per idempotency key; False when it exists."""

    def claim_next_run(self, owner: str, lease_until: str) -> RunRecord | None:
        """Claim the oldest queued run for `owner` whose loop is not paused; None when
        there is none. Two claimers never get the same run; a paused loop's runs stay
        queued until it is resumed."""

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

    def cancel_run(self, run_id: str, from_state: str, at: str, note: str) -> bool:
        """queued/claimed/running -> cancelled (compare-and-set on `from_state`); the
        lease is dropped so its worker stops."""

    def recover_run(self, run: RunRecord, state: str, at: str, error: str) -> bool:
        """Move a run whose lease expired (as seen in `run`) to queued or failed."""


# ---- the journal and the outbox --------------------------------------------------------


class JournalView(Protocol):
    """The journal, read in the order it was written (`seq`)."""

    def list_journal(
        self, limit: int, after: int = 0, entity: str | None = None, entity_id: str | None = None
    ) -> list[JournalEntry]: ...

    def chained_by(self, event_id: str) -> str | None:
        """The run whose outcome chained the event (its `chained` entry), if any."""

    def page_journal(self, query: JournalQuery, limit: int) -> list[JournalEntry]:
        """At most `limit` entries that hold every filter of `query`, newest first (seq
        descending); with `query.before`, only those with a lower seq. An entry is about
        loop L when it names L itself, or an event, occurrence, proposal, run or finding
        whose row had loop L when the entry was appended (an occurrence without a loop:
        its event's)."""


class Journal(JournalView, Protocol):
    """Append-only: an entry is never updated or deleted; `seq` only grows."""

    def append_journal(self, entry: JournalEntry) -> int:
        """Append; the journal is never updated or deleted."""

    def append_journals(self, entries: Sequence[JournalEntry]) -> None:
        """Append several in their order (their `seq`s grow in that order)."""


class OutboxView(Protocol):
    """Chained events waiting to be published, read."""

    def pending_outbox(self, limit: int) -> list[OutboxItem]: ...


class Outbox(OutboxView, Protocol):
    """Chained events to publish, each marked published once."""

    def enqueue_outbox(
        self, event: dict[str, Any], origin_run: str | None, actor: str, at: str
    ) -> None: ...

    def mark_published(self, seq: int, at: str) -> bool: ...


# ---- loops: the scheduler's state -----------------------------------------------------


class LoopsView(Protocol):
    """Each loop's durable state (enabled, cursor, pause, counters) and its skipped
    ranges, read."""

    def loop_states_of(self, loops: Iterable[str]) -> dict[str, LoopState]: ...

    def get_loop_state(self, loop: str) -> LoopState | None: ...

    def list_loop_states(self) -> list[LoopState]: ...

    def list_skips(self, loop: str, since: str) -> list[SkipRecord]: ...

    def get_observation(self, loop: str) -> ObservationRecord | None:
        """A watch loop's last observation of its probe (metadata only)."""

    def list_observations(self) -> list[ObservationRecord]:
        """By loop name."""


class Loops(LoopsView, Protocol):
    """The cursor only moves forward; a skipped range is recorded once."""

    def insert_skips(self, skips: Sequence[SkipRecord]) -> None: ...

    def advance_cursors(self, moves: Sequence[tuple[str, str, str | None]], at: str) -> None:
        """(loop, cursor, last slot) each, as advance_cursor."""

    def set_loop_enabled(self, loop: str, enabled: bool, since: str, at: str) -> None:
        """Record the rules' enabled flag; `since` is kept only when the loop turns on."""

    def advance_cursor(self, loop: str, cursor: str, last_slot: str | None, at: str) -> None:
        """Move the cursor (and the last fired slot) forward; never backward."""

    def set_paused(self, loop: str, paused: bool, note: str, by: str | None, at: str) -> bool: ...

    def insert_skip(self, skip: SkipRecord) -> bool:
        """Record a skipped range once (idempotent on loop, first slot and reason)."""

    def set_loop_counters(
        self,
        loop: str,
        consecutive_failures: int,
        nothing_streak: int,
        quiet_until: str | None,
        at: str,
    ) -> None:
        """Record the loop's failure and nothing-to-do streaks and its quiet period; a
        loop without a state row is left alone."""

    def insert_observation(self, obs: ObservationRecord) -> bool:
        """A watch loop's first observation; False (nothing written) when it has one."""

    def update_observation(self, obs: ObservationRecord, expect: ObservationRecord) -> bool:
        """Replace the loop's observation with `obs`: a compare-and-set on the
        fingerprint and poll count of `expect`, the row the caller read. False (nothing
        written) when another process moved it first, so a change is taken once."""


# ---- findings -------------------------------------------------------------------------


class FindingsView(Protocol):
    """Deduplicated findings (one per semantic key), read."""

    def get_finding(self, finding_id: str) -> FindingRecord | None: ...

    def get_finding_by_key(self, key: str) -> FindingRecord | None: ...

    def list_findings(
        self, limit: int, status: str | None = None, loop: str | None = None
    ) -> list[FindingRecord]:
        """Most recently seen first, optionally in one status and/or of one loop."""


class Findings(FindingsView, Protocol):
    """A finding is stored once per semantic key and counted each time it is seen; a
    decision is a compare-and-set on the status seen."""

    def upsert_finding(self, f: FindingRecord) -> tuple[FindingRecord, bool]:
        """A new `semantic_key` is stored as given: (stored, True). A known one is seen
        again: occurrence_count + 1, and last_seen_at, last_occurrence and evidence from
        `f`; its id, status and first sighting stay: (stored, False)."""

    def decide_finding(
        self,
        finding_id: str,
        from_status: str,
        to_status: str,
        by: str,
        at: str,
        promoted_event: str | None = None,
    ) -> bool:
        """Compare-and-set on the status the caller saw, recording who and when (and the
        promoted event, kept as it was when None)."""


# ---- notifications --------------------------------------------------------------------


class NotificationsView(Protocol):
    """Announcements and their delivery state, read."""

    def last_notification_state(self, dedup_key: str) -> str | None:
        """The state of the newest notification with this `dedup_key`, if any."""

    def pending_notifications(self, now: str, limit: int) -> list[NotificationRecord]:
        """Notifications whose `delivery` is pending and which are due for an attempt
        (no next_attempt_at, or at or before `now`), in enqueue order."""

    def list_notifications(self, limit: int) -> list[NotificationRecord]:
        """Newest first."""

    def page_notifications(self, query: NotificationQuery, limit: int) -> list[NotificationRecord]:
        """Newest first (by seq), each filter of `query` held, below its `before`."""

    def sink_deliveries(self, seqs: Iterable[int]) -> dict[int, list[SinkDelivery]]:
        """Each notification's rows per sink (by sink name), for the seqs that have any."""


class Notifications(NotificationsView, Protocol):
    """An outbox of announcements, quiet while the state holds; each delivered to every
    configured sink (docs/notifications.md)."""

    def enqueue_notification(self, n: NotificationRecord) -> int | None:
        """Quiet by default: None (nothing written) when the newest notification with the
        same `dedup_key` has the same `state`; else store it and answer its seq (the
        store's: `n.seq` is ignored)."""

    def claim_notification(self, seq: int, seen: str | None, until: str) -> bool:
        """Compare-and-set: move a pending notification's next_attempt_at from `seen`
        (what the caller read; None for none) to `until`. False, changing nothing, when
        it is no longer pending or another caller moved it first."""

    def settle_notification(self, n: NotificationRecord) -> bool:
        """Write `n`'s delivery fields (delivery, delivered_at, attempts, last_error,
        next_attempt_at) over those of the pending notification `n.seq`; False,
        changing nothing, when it is not pending (or unknown)."""

    def record_sink_deliveries(self, rows: Sequence[SinkDelivery]) -> None:
        """Insert each row, or replace the one of the same (seq, sink)."""


# ---- work items -----------------------------------------------------------------------


class WorkView(Protocol):
    """Work items (docs/work.md), read."""

    def get_work(self, work_id: str) -> WorkItem | None: ...

    def live_work_by_key(self, semantic_key: str) -> WorkItem | None:
        """The one item holding `semantic_key` that is not terminal (open, active or
        blocked), if any."""

    def page_work(self, query: WorkQuery, limit: int) -> list[WorkItem]:
        """At most `limit` items that hold every filter of `query`, newest first
        (created_at, then work_id, descending); with `query.before`, only those
        strictly older than that (created_at, work_id)."""

    def get_binding(self, binding_id: str) -> WorkBinding | None: ...

    def binding_by_request(self, request_id: str) -> WorkBinding | None: ...

    def bindings_of_work(self, work_id: str) -> list[WorkBinding]:
        """The work item's instances, oldest first (created_at, then binding_id)."""

    def live_bindings(self, limit: int) -> list[WorkBinding]:
        """At most `limit` instances that are not disabled, oldest first."""

    def pending_graduations(self, limit: int) -> list[WorkBinding]:
        """At most `limit` instances whose graduation out of shadow waits for the next
        serve start (`graduation_requested_at` set), oldest request first
        (graduation_requested_at, then binding_id)."""


class Work(WorkView, Protocol):
    """At most one non-terminal item per semantic key; every change is a
    compare-and-set on the version the caller read."""

    def insert_work(self, item: WorkItem) -> bool:
        """Store a new item; False (nothing written) when its id exists, or when it is
        not terminal and another non-terminal item holds its semantic key."""

    def update_work(self, item: WorkItem, expect_version: int) -> bool:
        """Write `item`'s state, title, context, lease, updated_at and version over the
        stored item of that id whose version is `expect_version`; False (nothing
        written) when another writer moved it first, or there is no such item."""

    def insert_binding(self, binding: WorkBinding) -> bool:
        """Store a new work-bound loop instance of an existing work item; False
        (nothing written) when its id, its request id or its (work item, shape) is
        taken."""

    def update_binding(self, binding: WorkBinding, expect_version: int) -> bool:
        """Write `binding`'s state, pending graduation (its three `graduation_`
        fields), updated_at and version over the stored instance whose version is
        `expect_version`; False (nothing written) otherwise."""


# ---- reports (read only) --------------------------------------------------------------


class Reports(Protocol):
    """Counts across aggregates for status and metrics; read only."""

    def counts(self) -> dict[str, dict[str, int]]:
        """Runs and proposals by state."""

    def metrics_snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """Grouped counts (ints) for the audit metrics: "occurrences" {loop, state,
        decision, n}, "decisions" {kind, reason, n}, "runs" {loop, state, outcome, n,
        attempts (their sum)}, "findings" {status, n, occurrences (the sum of
        occurrence_count)}, "journal" {action, n}, "dispatched" {n: the events with a
        run}, "proposals" {state, n, by_operator (decided by an "operator:" actor)};
        each list ordered by its group columns."""

    def run_timings(self, limit: int) -> list[tuple[str, str | None, str | None]]:
        """(created_at, started_at, finished_at) of the newest `limit` runs, newest
        first."""

    def loop_state_counts(self, loop: str) -> dict[str, dict[str, int]]:
        """{"occurrence", "proposal", "run"}: each {state: n} of the loop's rows of that
        kind; a state without any is absent."""


# ---- compositions ----------------------------------------------------------------------


class FactsView(
    EventsView,
    OccurrencesView,
    ProposalsView,
    RunsView,
    LoopsView,
    FindingsView,
    NotificationsView,
    WorkView,
    Protocol,
):
    """What a decision reads, and nothing it could write: loop state, runs in flight,
    active and previous occurrences, budget used, open proposals, findings by key,
    decisions, the last notification of a subject, work items."""


class TxView(FactsView, DeliveriesView, JournalView, OutboxView, Reports, Protocol):
    """Every read-only view: what a read transaction answers."""


class Tx(
    Events,
    Deliveries,
    Occurrences,
    Proposals,
    Runs,
    Journal,
    Outbox,
    Loops,
    Findings,
    Notifications,
    Work,
    TxView,
    Protocol,
):
    """Operations inside one transaction: every aggregate's, plus savepoints. Every
    `insert_*` is idempotent on its key and answers whether it wrote; every state
    change is a compare-and-set on the state the caller saw and answers whether it
    moved."""

    def savepoint(self) -> AbstractContextManager[None]:
        """A nested step whose writes roll back alone when it raises."""


class Store(Protocol):
    """Every wait is bounded (`engine.store.limits`), and a storage fault is a typed
    error (`engine.errors`), never the driver's: `Busy` when the writer lock is not
    free in time, `StoreUnwritable` when the database refuses writes (read-only, full,
    I/O errors), `Unavailable` when it cannot be reached. Anything else a driver raises
    (a constraint, a bad statement) is a bug and passes unchanged."""

    dialect: str  # "sqlite", "postgresql" or "memory" (tests and simulations only)
    health: Health  # writable or not, and the last storage error (GET /status)

    def write(self, exclusive: bool = True) -> AbstractContextManager[Tx]:
        """A write transaction. Exclusive writers are serialised across every process of
        the database, so what one reads stays true until it commits. A non-exclusive
        write (a worker's claim, start, heartbeat) may run beside them: it may only touch
        one run's lease and append to the journal."""

    def read(self) -> AbstractContextManager[Tx]:
        """A read-only snapshot. It never waits for a writer, of this process or
        another: reads have their own connection."""

    def applied_migrations(self) -> list[int]:
        """The schema versions the database records as applied, ascending: one small
        read, for readiness (GET /readyz). `Unavailable` when the database cannot be
        reached (a SQLite file no longer at its path, a lost server, a closed store)."""

    def close(self) -> None: ...


__all__ = [
    "Deliveries",
    "DeliveriesView",
    "Events",
    "EventsView",
    "FactsView",
    "Findings",
    "FindingsView",
    "Iterator",
    "Journal",
    "JournalQuery",
    "JournalView",
    "Loops",
    "LoopsView",
    "Notifications",
    "NotificationsView",
    "Occurrences",
    "OccurrencesView",
    "Outbox",
    "OutboxView",
    "Page",
    "Proposals",
    "ProposalsView",
    "Reports",
    "RunQuery",
    "Runs",
    "RunsView",
    "Store",
    "Tx",
    "TxView",
    "Work",
    "WorkView",
    "journal_cursor",
    "journal_cursor_text",
    "run_cursor",
    "run_cursor_text",
]
