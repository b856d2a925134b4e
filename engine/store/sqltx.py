"""The Tx operations written once in SQL over a DB-API cursor; backends supply the
connection, the transaction boundaries and the parameter style."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import lru_cache
from typing import Any, TypeVar

from engine.core.paging import EventQuery, JournalQuery, NotificationQuery, ProposalQuery, RunQuery
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
    current_source,
)
from engine.errors import Unavailable
from engine.store.queries import queries
from engine.store.sql_work import WorkRows

Row = Mapping[str, Any]
R = TypeVar("R")


_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


def _dumps(value: Any) -> str | None:
    return None if value is None else _ENCODER.encode(value)


def _loads(value: str | None) -> Any:
    return None if value is None else json.loads(value)


def _event(row: Row) -> EventRecord:
    return EventRecord(
        event_id=row["event_id"],
        type=row["type"],
        source=current_source(row["source"], row["admitted_by"]),
        subject=row["subject"],
        occurred_at=row["occurred_at"],
        correlation_id=row["correlation_id"],
        payload=_loads(row["payload"]),
        loop=row["loop"],
        admitted_at=row["admitted_at"],
        admitted_by=row["admitted_by"],
        planned=bool(row["planned"]),
    )


def _record(cls: type[R], row: Row, bools: tuple[str, ...] = (), json: tuple[str, ...] = ()) -> R:
    """A record from a row: integer flags back to bools, JSON text back to values."""
    data = dict(row)
    for name in bools:
        data[name] = bool(data[name])
    for name in json:
        data[name] = _loads(data[name])
    return cls(**data)


def _decision(row: Row) -> DecisionRecord:
    return _record(DecisionRecord, row, bools=("human_only", "mutating"))


def _delivery(row: Row) -> DeliveryRecord:
    return _record(DeliveryRecord, row)


def _proposal(row: Row) -> ProposalRecord:
    return _record(ProposalRecord, row, bools=("human_only", "mutating"))


def _run(row: Row) -> RunRecord:
    return _record(RunRecord, row, json=("result",))


def _loop_state(row: Row) -> LoopState:
    return _record(LoopState, row, bools=("enabled", "paused"))


def _observation(obs: ObservationRecord) -> dict[str, Any]:
    return {name: getattr(obs, name) for name in ObservationRecord.__slots__}


def _journal(row: Row) -> JournalEntry:
    """An entry from its row; its `loop` column is the store's index, not the entry's."""
    data = {k: v for k, v in row.items() if k != "loop"}
    return _record(JournalEntry, data, json=("data",))


_PARAM = re.compile(r":([a-z_]+)")
# The condition of each filter of a page (engine.core.paging), by the query's field:
# page_runs and page_journal AND the conditions of the filters given.
RUN_FILTERS = {
    "loop": "loop = :loop",
    "state": "state = :state",
    "actor": "approved_by = :actor",
    "since": "created_at >= :since",
    "until": "created_at < :until",
    "before": "(created_at, run_id) < (:before_at, :before_id)",
}
PROPOSAL_FILTERS = {
    "loop": "loop = :loop",
    "state": "state = :state",
    "before": "(created_at, proposal_id) < (:before_at, :before_id)",
}
EVENT_FILTERS = {
    "loop": "loop = :loop",
    "type": "type = :type",
    "before": "(admitted_at, event_id) < (:before_at, :before_id)",
}
NOTIFICATION_FILTERS = {
    "loop": "loop = :loop",
    "delivery": "delivery = :delivery",
    "before": "seq < :before",
}
JOURNAL_FILTERS = {
    "loop": "loop = :loop",
    "entity": "entity = :entity",
    "actor": "actor = :actor",
    "since": "at >= :since",
    "until": "at < :until",
    "before": "seq < :before",
}


_OCCURRENCE_JSON = ("evidence", "reserved", "used")
# The columns update_occurrence may change (its SET list is built from these only).
OCCURRENCE_CHANGES = frozenset(
    {
        "state",
        "decision",
        "evidence",
        "attempt",
        "retry_at",
        "signals",
        "reserved",
        "used",
        "finished_at",
        "failure_class",
    }
)
# The budget dimensions budget_usage sums from the `used` and `reserved` JSON.
BUDGET_KEYS = ("runs", "wall_clock_seconds")


def budget_total(rows: Iterable[tuple[Any, Any, bool]]) -> dict[str, int]:
    """The budget spent by occurrences given as (used, reserved, finished): a finished
    occurrence counts what it used; an unfinished one its reservation and what earlier
    attempts already used (one waiting for a retry has used a run and reserves none
    until it is dispatched again). Whole seconds, with the milliseconds that records
    keeping `wall_clock_ms` add up to."""
    total = dict.fromkeys(BUDGET_KEYS, 0)
    exact_ms = 0  # the milliseconds the whole seconds of `used` records leave out
    for used, reserved, finished in rows:
        for spent in [used] if finished else [used, reserved]:
            if not isinstance(spent, dict):
                continue
            for key in BUDGET_KEYS:
                value = spent.get(key)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    total[key] += int(value)
            ms = spent.get("wall_clock_ms")  # exact where kept, so short runs add up
            if isinstance(ms, int) and not isinstance(ms, bool):
                exact_ms += ms - int(spent.get("wall_clock_seconds", 0)) * 1000
    total["wall_clock_seconds"] += exact_ms // 1000
    return total


def _occurrence(row: Row) -> OccurrenceRecord:
    return _record(OccurrenceRecord, row, json=_OCCURRENCE_JSON)


def _occurrence_order(occ: OccurrenceRecord) -> tuple[str, str]:
    """Oldest first: by creation (rows from before keys by their last update)."""
    return (occ.created_at or occ.updated_at, occ.event_id)


def _finding(row: Row) -> FindingRecord:
    data = dict(row)
    if data["confidence"] is not None:
        data["confidence"] = float(data["confidence"])
    return _record(FindingRecord, data, json=("evidence",))


def _notification(row: Row) -> NotificationRecord:
    return _record(NotificationRecord, row, json=("links",))


def counted(
    rows: Sequence[Row], groups: tuple[str, ...], counts: tuple[str, ...]
) -> list[dict[str, Any]]:
    """Grouped counts as plain dicts (counts as ints: PostgreSQL's are bigint or numeric),
    in a stable order (by the group columns, a NULL first)."""
    out = [{**{g: r[g] for g in groups}, **{c: int(r[c] or 0) for c in counts}} for r in rows]
    return sorted(out, key=lambda d: tuple((d[g] is not None, str(d[g] or "")) for g in groups))


def _same(sql: str) -> str:
    return sql


@lru_cache(maxsize=8)
def _adapted(dialect: str, adapt: Callable[[str], str]) -> dict[str, str]:
    """A dialect's named queries in its parameter style, built once per dialect."""
    return {name: adapt(sql) for name, sql in queries(dialect).items()}


# ---- the parameters of one row, shared by an insert and its batch ---------------------


def _event_row(event: EventRecord) -> dict[str, Any]:
    return {
        "event_id": event.event_id,
        "type": event.type,
        "source": event.source,
        "subject": event.subject,
        "occurred_at": event.occurred_at,
        "correlation_id": event.correlation_id,
        "payload": _dumps(event.payload),
        "loop": event.loop,
        "admitted_at": event.admitted_at,
        "admitted_by": event.admitted_by,
        "planned": int(event.planned),
    }


def _delivery_row(delivery: DeliveryRecord) -> dict[str, Any]:
    return {
        "event_id": delivery.event_id,
        "delivery_id": delivery.delivery_id,
        "kind": delivery.kind,
        "body": delivery.body,  # the JSON text as received, never encoded again
        "rule": delivery.rule,
        "received_at": delivery.received_at,
    }


def _decision_row(decision: DecisionRecord) -> dict[str, Any]:
    return {
        "event_id": decision.event_id,
        "kind": decision.kind,
        "reason": decision.reason,
        "definition": decision.definition,
        "loop": decision.loop,
        "approved_by": decision.approved_by,
        "human_only": int(decision.human_only),
        "mutating": int(decision.mutating),
        "rule": decision.rule,
        "note": decision.note,
        "rules_digest": decision.rules_digest,
        "decided_at": decision.decided_at,
        "facts": decision.facts,
    }


def _proposal_row(proposal: ProposalRecord) -> dict[str, Any]:
    return {
        "proposal_id": proposal.proposal_id,
        "event_id": proposal.event_id,
        "loop": proposal.loop,
        "definition": proposal.definition,
        "state": proposal.state,
        "human_only": int(proposal.human_only),
        "mutating": int(proposal.mutating),
        "created_at": proposal.created_at,
        "note": proposal.note,
    }


def _occurrence_row(occ: OccurrenceRecord) -> dict[str, Any]:
    return {
        "event_id": occ.event_id,
        "loop": occ.loop,
        "state": occ.state,
        "updated_at": occ.updated_at,
        "occurrence_key": occ.occurrence_key,
        "repo": occ.repo,
        "window": occ.window,
        "decision": occ.decision,
        "evidence": _dumps(occ.evidence),
        "attempt": occ.attempt,
        "retry_at": occ.retry_at,
        "signals": occ.signals,
        "reserved": _dumps(occ.reserved),
        "used": _dumps(occ.used),
        "created_at": occ.created_at or occ.updated_at,
        "finished_at": occ.finished_at,
        "failure_class": occ.failure_class,
        "semantic_key": occ.semantic_key,
    }


def _journal_row(entry: JournalEntry) -> dict[str, Any]:
    return {
        "at": entry.at,
        "entity": entry.entity,
        "entity_id": entry.entity_id,
        "action": entry.action,
        "from_state": entry.from_state,
        "to_state": entry.to_state,
        "actor": entry.actor,
        "rules_digest": entry.rules_digest,
        "note": entry.note,
        "data": _dumps(entry.data),
    }


def _skip_row(skip: SkipRecord) -> dict[str, Any]:
    return {
        "loop": skip.loop,
        "first_slot": skip.first_slot,
        "last_slot": skip.last_slot,
        "count": skip.count,
        "reason": skip.reason,
        "recorded_at": skip.recorded_at,
    }


def _keys(values: Iterable[str]) -> str:
    """Many keys as the one JSON-array parameter of a batch read."""
    return json.dumps(list(values))


class SqlTx(WorkRows):
    """Implements `engine.store.ports.Tx` with the shared named queries. `dialect`
    selects a backend's own versions of some queries; `adapt` rewrites the `:name`
    parameters into the driver's style."""

    def __init__(
        self, cursor: Any, dialect: str = "sqlite", adapt: Callable[[str], str] = _same
    ) -> None:
        self._cur = cursor
        self._sql = _adapted(dialect, adapt)
        self._adapt = adapt

    # ---- plumbing --------------------------------------------------------------
    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested step: its writes roll back alone when it raises."""
        self._cur.execute("SAVEPOINT step")
        try:
            yield
        except BaseException as err:
            try:
                self._cur.execute("ROLLBACK TO step")
                self._cur.execute("RELEASE step")
            except Exception:
                if not isinstance(err, Unavailable):
                    raise
                # a storage fault may have ended the whole transaction: it is the error
            raise
        self._cur.execute("RELEASE step")

    def _exec(self, name: str, **params: Any) -> int:
        self._cur.execute(self._sql[name], params)
        return int(self._cur.rowcount)

    def _one(self, name: str, **params: Any) -> Row | None:
        self._cur.execute(self._sql[name], params)
        row = self._cur.fetchone()
        return None if row is None else self._row(row)

    def _all(self, name: str, **params: Any) -> list[Row]:
        self._cur.execute(self._sql[name], params)
        return [self._row(r) for r in self._cur.fetchall()]

    def _row(self, row: Any) -> Row:
        return row if isinstance(row, dict) else {k: row[k] for k in row.keys()}  # noqa: SIM118

    # ---- events ----------------------------------------------------------------
    def insert_event(self, event: EventRecord) -> bool:
        return self._exec("insert_event", **_event_row(event)) == 1

    def insert_events(self, events: Sequence[EventRecord]) -> set[str]:
        if not events:
            return set()
        first: dict[str, EventRecord] = {}
        for event in events:
            first.setdefault(event.event_id, event)
        stored = self.known_events(first)
        new = [e for e in first.values() if e.event_id not in stored]
        self._many("insert_event", [_event_row(e) for e in new])
        return {e.event_id for e in new}

    def get_event(self, event_id: str) -> EventRecord | None:
        row = self._one("get_event", event_id=event_id)
        return None if row is None else _event(row)

    def list_events(self, limit: int, type: str | None = None) -> list[EventRecord]:
        return [_event(r) for r in self._all("list_events", limit=limit, type=type)]

    def unplanned_events(self, limit: int) -> list[EventRecord]:
        return [_event(r) for r in self._all("unplanned_events", limit=limit)]

    def mark_planned(self, event_id: str) -> None:
        self._exec("mark_planned", event_id=event_id)

    # ---- GitHub deliveries -------------------------------------------------------
    def insert_deliveries(self, deliveries: Sequence[DeliveryRecord]) -> None:
        self._many("insert_delivery", [_delivery_row(d) for d in deliveries])

    def get_delivery(self, event_id: str) -> DeliveryRecord | None:
        row = self._one("get_delivery", event_id=event_id)
        return None if row is None else _delivery(row)

    def delivered_as(self, delivery_id: str) -> str | None:
        row = self._one("delivered_as", delivery_id=delivery_id)
        return None if row is None else str(row["event_id"])

    def list_deliveries(self, limit: int) -> list[DeliveryRecord]:
        return [_delivery(r) for r in self._all("list_deliveries", limit=limit)]

    # ---- decisions and occurrences -------------------------------------------------
    def insert_decision(self, decision: DecisionRecord) -> bool:
        return self._exec("insert_decision", **_decision_row(decision)) == 1

    def get_decision(self, event_id: str) -> DecisionRecord | None:
        row = self._one("get_decision", event_id=event_id)
        return None if row is None else _decision(row)

    def set_occurrence(self, event_id: str, loop: str | None, state: str, at: str) -> None:
        self._exec("upsert_occurrence", event_id=event_id, loop=loop, state=state, updated_at=at)

    def get_occurrence_state(self, event_id: str) -> str | None:
        row = self._one("get_occurrence", event_id=event_id)
        return None if row is None else str(row["state"])

    def loop_in_flight(self, loop: str) -> bool:
        return self._one("loop_in_flight", loop=loop) is not None

    # ---- proposals -------------------------------------------------------------
    def insert_proposal(self, proposal: ProposalRecord) -> bool:
        return self._exec("insert_proposal", **_proposal_row(proposal)) == 1

    def get_proposal(self, proposal_id: str) -> ProposalRecord | None:
        row = self._one("get_proposal", proposal_id=proposal_id)
        return None if row is None else _proposal(row)

    def list_proposals(self, limit: int, state: str | None = None) -> list[ProposalRecord]:
        return [_proposal(r) for r in self._all("list_proposals", limit=limit, state=state)]

    def decide_proposal(
        self, proposal_id: str, from_state: str, to_state: str, at: str, by: str, note: str
    ) -> bool:
        moved = self._exec(
            "decide_proposal",
            proposal_id=proposal_id,
            from_state=from_state,
            to_state=to_state,
            decided_at=at,
            decided_by=by,
            note=note,
        )
        return moved == 1

    def stale_proposals(self, before: str, limit: int) -> list[ProposalRecord]:
        return [_proposal(r) for r in self._all("stale_proposals", before=before, limit=limit)]

    # ---- runs ------------------------------------------------------------------
    def insert_run(self, run: RunRecord) -> bool:
        return (
            self._exec(
                "insert_run",
                run_id=run.run_id,
                idempotency_key=run.idempotency_key,
                event_id=run.event_id,
                proposal_id=run.proposal_id,
                loop=run.loop,
                definition=run.definition,
                approved_by=run.approved_by,
                created_at=run.created_at,
            )
            == 1
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        row = self._one("get_run", run_id=run_id)
        return None if row is None else _run(row)

    def get_run_by_key(self, key: str) -> RunRecord | None:
        row = self._one("get_run_by_key", idempotency_key=key)
        return None if row is None else _run(row)

    def list_runs(self, limit: int, state: str | None = None) -> list[RunRecord]:
        return [_run(r) for r in self._all("list_runs", limit=limit, state=state)]

    def claim_next_run(self, owner: str, lease_until: str) -> RunRecord | None:
        if "claim_next_run" in self._sql:  # the backend claims in one statement
            row = self._one("claim_next_run", owner=owner, lease_until=lease_until)
            return None if row is None else _run(row)
        while True:
            row = self._one("next_queued_run")
            if row is None:
                return None
            run_id = row["run_id"]
            if self._exec("claim_run", run_id=run_id, owner=owner, lease_until=lease_until) == 1:
                return self.get_run(run_id)

    def heartbeat(self, run_id: str, owner: str, lease_until: str) -> bool:
        return self._exec("heartbeat", run_id=run_id, owner=owner, lease_until=lease_until) == 1

    def start_run(self, run_id: str, owner: str, at: str) -> bool:
        return self._exec("start_run", run_id=run_id, owner=owner, started_at=at) == 1

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
        moved = self._exec(
            "finish_run",
            run_id=run_id,
            owner=owner,
            state=state,
            finished_at=at,
            outcome=outcome,
            result=_dumps(result),
            error=error,
            artifact=artifact,
        )
        return moved == 1

    def cancel_run(self, run_id: str, from_state: str, at: str, note: str) -> bool:
        moved = self._exec(
            "cancel_run", run_id=run_id, from_state=from_state, finished_at=at, error=note
        )
        return moved == 1

    def expired_leases(self, now: str, limit: int) -> list[RunRecord]:
        return [_run(r) for r in self._all("expired_leases", now=now, limit=limit)]

    def recover_run(self, run: RunRecord, state: str, at: str, error: str) -> bool:
        finished = at if state != "queued" else None
        moved = self._exec(
            "recover_run",
            run_id=run.run_id,
            owner=run.lease_owner,
            lease_expires_at=run.lease_expires_at,
            state=state,
            finished_at=finished,
            error=error,
        )
        return moved == 1

    # ---- journal and outbox ------------------------------------------------------
    def append_journal(self, entry: JournalEntry) -> int:
        row = self._one("append_journal", **_journal_row(entry))
        assert row is not None
        return int(row["seq"])

    def append_journals(self, entries: Sequence[JournalEntry]) -> None:
        self._many("insert_journal", [_journal_row(e) for e in entries])

    def list_journal(
        self, limit: int, after: int = 0, entity: str | None = None, entity_id: str | None = None
    ) -> list[JournalEntry]:
        rows = self._all(
            "list_journal", limit=limit, after=after, entity=entity, entity_id=entity_id
        )
        return [_journal(r) for r in rows]

    def chained_by(self, event_id: str) -> str | None:
        row = self._one("chained_by", event_id=event_id)
        return None if row is None else str(row["entity_id"])

    def enqueue_outbox(
        self, event: dict[str, Any], origin_run: str | None, actor: str, at: str
    ) -> None:
        self._exec(
            "enqueue_outbox", event=_dumps(event), origin_run=origin_run, actor=actor, created_at=at
        )

    def pending_outbox(self, limit: int) -> list[OutboxItem]:
        return [
            OutboxItem(r["seq"], _loads(r["event"]), r["origin_run"], r["actor"], r["created_at"])
            for r in self._all("pending_outbox", limit=limit)
        ]

    def mark_published(self, seq: int, at: str) -> bool:
        return self._exec("mark_published", seq=seq, published_at=at) == 1

    def counts(self) -> dict[str, dict[str, int]]:
        runs = {r["state"]: int(r["n"]) for r in self._all("count_by_state")}
        proposals = {r["state"]: int(r["n"]) for r in self._all("count_proposals_by_state")}
        return {"runs": runs, "proposals": proposals}

    # ---- the scheduler -------------------------------------------------------------
    def get_loop_state(self, loop: str) -> LoopState | None:
        row = self._one("get_loop_state", loop=loop)
        return None if row is None else _loop_state(row)

    def list_loop_states(self) -> list[LoopState]:
        return [_loop_state(r) for r in self._all("list_loop_states")]

    def set_loop_enabled(self, loop: str, enabled: bool, since: str, at: str) -> None:
        self._exec(
            "upsert_loop_enabled",
            loop=loop,
            enabled=int(enabled),
            enabled_since=since,
            updated_at=at,
        )

    def advance_cursor(self, loop: str, cursor: str, last_slot: str | None, at: str) -> None:
        self._exec("advance_cursor", loop=loop, cursor=cursor, last_slot=last_slot, updated_at=at)

    def set_paused(self, loop: str, paused: bool, note: str, by: str | None, at: str) -> bool:
        moved = self._exec(
            "set_paused", loop=loop, paused=int(paused), note=note, by=by, updated_at=at
        )
        return moved == 1

    def insert_skip(self, skip: SkipRecord) -> bool:
        return self._exec("insert_skip", **_skip_row(skip)) == 1

    def list_skips(self, loop: str, since: str) -> list[SkipRecord]:
        return [SkipRecord(**dict(r)) for r in self._all("list_skips", loop=loop, since=since)]

    def get_observation(self, loop: str) -> ObservationRecord | None:
        row = self._one("get_observation", loop=loop)
        return None if row is None else ObservationRecord(**dict(row))

    def list_observations(self) -> list[ObservationRecord]:
        return [ObservationRecord(**dict(r)) for r in self._all("list_observations")]

    def insert_observation(self, obs: ObservationRecord) -> bool:
        return self._exec("insert_observation", **_observation(obs)) == 1

    def update_observation(self, obs: ObservationRecord, expect: ObservationRecord) -> bool:
        moved = self._exec(
            "update_observation",
            **_observation(obs),
            expect_fingerprint=expect.fingerprint,
            expect_polls=expect.polls,
        )
        return moved == 1

    def loop_events(self, loop: str, since: str, limit: int) -> list[EventRecord]:
        return [_event(r) for r in self._all("loop_events", loop=loop, since=since, limit=limit)]

    def last_loop_event(self, loop: str) -> EventRecord | None:
        row = self._one("last_loop_event", loop=loop)
        return None if row is None else _event(row)

    def last_loop_run(self, loop: str) -> RunRecord | None:
        row = self._one("last_loop_run", loop=loop)
        return None if row is None else _run(row)

    def open_loop_proposals(self, loop: str) -> list[ProposalRecord]:
        return [_proposal(r) for r in self._all("open_loop_proposals", loop=loop)]

    def open_proposals_by_loop(self) -> dict[str, int]:
        return {str(r["loop"]): int(r["n"]) for r in self._all("count_open_by_loop")}

    # ---- the occurrence engine -------------------------------------------------------
    def open_occurrence(self, occ: OccurrenceRecord) -> tuple[OccurrenceRecord, bool]:
        if occ.occurrence_key is not None:
            existing = self.get_occurrence_by_key(occ.occurrence_key)
            if existing is not None:
                return existing, False
        opened = self._exec("open_occurrence", **_occurrence_row(occ))
        if opened == 1:  # the row holds exactly these columns (inserted, or upserted)
            return replace(occ, created_at=occ.created_at or occ.updated_at), True
        stored = self.get_occurrence(occ.event_id)  # a keyed row left alone
        assert stored is not None
        return stored, False

    def get_occurrence(self, event_id: str) -> OccurrenceRecord | None:
        row = self._one("get_occurrence", event_id=event_id)
        return None if row is None else _occurrence(row)

    def get_occurrence_by_key(self, key: str) -> OccurrenceRecord | None:
        row = self._one("get_occurrence_by_key", occurrence_key=key)
        return None if row is None else _occurrence(row)

    def update_occurrence(
        self, event_id: str, expect_state: str | None, at: str, **changes: Any
    ) -> bool:
        unknown = sorted(set(changes) - OCCURRENCE_CHANGES)
        if unknown:
            raise ValueError(f"update_occurrence cannot change {', '.join(unknown)}")
        names = sorted(changes)
        assignments = self._adapt("".join(f"{name} = :{name}, " for name in names))
        sql = self._sql["update_occurrence"].format(changes=assignments)
        params = {
            name: _dumps(value) if name in _OCCURRENCE_JSON else value
            for name, value in changes.items()
        }
        params.update(event_id=event_id, expect_state=expect_state, updated_at=at)
        self._cur.execute(sql, params)
        return int(self._cur.rowcount) == 1

    def add_signal(self, event_id: str) -> int:
        row = self._one("add_signal", event_id=event_id)
        return 0 if row is None else int(row["signals"])

    def active_occurrences(
        self, loop: str, repo: str | None, states: tuple[str, ...]
    ) -> list[OccurrenceRecord]:
        wanted = list(dict.fromkeys(states))
        if not wanted:
            return []
        if len(wanted) > 26:
            raise ValueError("active_occurrences takes at most 26 states")
        # parameter names are letters only (the drivers' styles take [a-z_] names)
        names = {f"state_{chr(ord('a') + i)}": state for i, state in enumerate(wanted)}
        marks = self._adapt(", ".join(f":{name}" for name in names))
        sql = self._sql["active_occurrences"].format(states=marks)
        self._cur.execute(sql, {"loop": loop, "repo": repo, **names})
        found = [_occurrence(self._row(r)) for r in self._cur.fetchall()]
        return sorted(found, key=_occurrence_order)

    def key_occurrences(
        self, semantic_key: str, states: tuple[str, ...], limit: int
    ) -> list[OccurrenceRecord]:
        wanted = list(dict.fromkeys(states))
        if not wanted:
            return []
        if len(wanted) > 26:
            raise ValueError("key_occurrences takes at most 26 states")
        names = {f"state_{chr(ord('a') + i)}": state for i, state in enumerate(wanted)}
        marks = self._adapt(", ".join(f":{name}" for name in names))
        sql = self._sql["key_occurrences"].format(states=marks)
        self._cur.execute(sql, {"semantic_key": semantic_key, "limit": limit, **names})
        return [_occurrence(self._row(r)) for r in self._cur.fetchall()]

    def last_attempt(self, semantic_key: str) -> OccurrenceRecord | None:
        row = self._one("last_attempt", semantic_key=semantic_key)
        return _occurrence(row) if row is not None else None

    def due_retries(self, now: str, limit: int) -> list[OccurrenceRecord]:
        return [_occurrence(r) for r in self._all("due_retries", now=now, limit=limit)]

    def list_occurrences(
        self, limit: int, loop: str | None = None, state: str | None = None
    ) -> list[OccurrenceRecord]:
        rows = self._all("list_occurrences", limit=limit, loop=loop, state=state)
        return [_occurrence(r) for r in rows]

    def occurrences_of_loop(self, loop: str, since: str, limit: int) -> list[OccurrenceRecord]:
        rows = self._all("occurrences_of_loop", loop=loop, since=since, limit=limit)
        return [_occurrence(r) for r in rows]

    def budget_usage(self, loop: str, repo: str | None, since: str) -> dict[str, int]:
        rows = self._all("budget_rows", loop=loop, repo=repo, since=since)
        return budget_total(
            (_loads(r["used"]), _loads(r["reserved"]), r["finished_at"] is not None) for r in rows
        )

    def set_loop_counters(
        self,
        loop: str,
        consecutive_failures: int,
        nothing_streak: int,
        quiet_until: str | None,
        at: str,
    ) -> None:
        self._exec(
            "set_loop_counters",
            loop=loop,
            consecutive_failures=consecutive_failures,
            nothing_streak=nothing_streak,
            quiet_until=quiet_until,
            updated_at=at,
        )

    # ---- findings --------------------------------------------------------------------
    def upsert_finding(self, f: FindingRecord) -> tuple[FindingRecord, bool]:
        inserted = self._exec(
            "insert_finding",
            finding_id=f.finding_id,
            semantic_key=f.semantic_key,
            loop=f.loop,
            repo=f.repo,
            category=f.category,
            evidence=_dumps(f.evidence),
            confidence=f.confidence,
            recommended_action=f.recommended_action,
            status=f.status,
            occurrence_count=f.occurrence_count,
            first_seen_at=f.first_seen_at,
            last_seen_at=f.last_seen_at,
            last_occurrence=f.last_occurrence,
            decided_by=f.decided_by,
            decided_at=f.decided_at,
            promoted_event=f.promoted_event,
        )
        if inserted != 1:
            self._exec(
                "observe_finding",
                semantic_key=f.semantic_key,
                last_seen_at=f.last_seen_at,
                last_occurrence=f.last_occurrence,
                evidence=_dumps(f.evidence),
            )
        stored = self.get_finding_by_key(f.semantic_key)
        assert stored is not None
        return stored, inserted == 1

    def get_finding(self, finding_id: str) -> FindingRecord | None:
        row = self._one("get_finding", finding_id=finding_id)
        return None if row is None else _finding(row)

    def get_finding_by_key(self, key: str) -> FindingRecord | None:
        row = self._one("get_finding_by_key", semantic_key=key)
        return None if row is None else _finding(row)

    def list_findings(
        self, limit: int, status: str | None = None, loop: str | None = None
    ) -> list[FindingRecord]:
        rows = self._all("list_findings", limit=limit, status=status, loop=loop)
        return [_finding(r) for r in rows]

    def decide_finding(
        self,
        finding_id: str,
        from_status: str,
        to_status: str,
        by: str,
        at: str,
        promoted_event: str | None = None,
    ) -> bool:
        moved = self._exec(
            "decide_finding",
            finding_id=finding_id,
            from_status=from_status,
            to_status=to_status,
            decided_by=by,
            decided_at=at,
            promoted_event=promoted_event,
        )
        return moved == 1

    # ---- notifications ---------------------------------------------------------------
    def last_notification_state(self, dedup_key: str) -> str | None:
        row = self._one("last_notification_state", dedup_key=dedup_key)
        return None if row is None else str(row["state"])

    def enqueue_notification(self, n: NotificationRecord) -> int | None:
        if self.last_notification_state(n.dedup_key) == n.state:
            return None
        row = self._one(
            "insert_notification",
            at=n.at,
            kind=n.kind,
            loop=n.loop,
            repo=n.repo,
            state=n.state,
            links=_dumps(n.links),
            message=n.message,
            dedup_key=n.dedup_key,
            delivered_at=n.delivered_at,
            attempts=n.attempts,
            last_error=n.last_error,
            next_attempt_at=n.next_attempt_at,
            delivery=n.delivery,
        )
        assert row is not None
        return int(row["seq"])

    def pending_notifications(self, now: str, limit: int) -> list[NotificationRecord]:
        rows = self._all("pending_notifications", now=now, limit=limit)
        return [_notification(r) for r in rows]

    def claim_notification(self, seq: int, seen: str | None, until: str) -> bool:
        return self._exec("claim_notification", seq=seq, seen=seen, until=until) == 1

    def settle_notification(self, n: NotificationRecord) -> bool:
        moved = self._exec(
            "settle_notification",
            seq=n.seq,
            delivery=n.delivery,
            delivered_at=n.delivered_at,
            attempts=n.attempts,
            last_error=n.last_error,
            next_attempt_at=n.next_attempt_at,
        )
        return moved == 1

    def record_sink_deliveries(self, rows: Sequence[SinkDelivery]) -> None:
        self._many("upsert_sink_delivery", [dataclasses.asdict(r) for r in rows])

    def sink_deliveries(self, seqs: Iterable[int]) -> dict[int, list[SinkDelivery]]:
        wanted = sorted(set(seqs))
        found: dict[int, list[SinkDelivery]] = {}
        if not wanted:
            return found
        for row in self._all("sink_deliveries", keys=json.dumps(wanted)):
            record = _record(SinkDelivery, row)
            found.setdefault(record.seq, []).append(record)
        return found

    def list_notifications(self, limit: int) -> list[NotificationRecord]:
        return [_notification(r) for r in self._all("list_notifications", limit=limit)]

    def page_notifications(self, query: NotificationQuery, limit: int) -> list[NotificationRecord]:
        rows = self._page(
            "page_notifications",
            NOTIFICATION_FILTERS,
            query,
            loop=query.loop,
            delivery=query.delivery,
            before=query.before,
            limit=limit,
        )
        return [_notification(r) for r in rows]

    # ---- metrics ---------------------------------------------------------------------
    def metrics_snapshot(self) -> dict[str, list[dict[str, Any]]]:
        return {
            "occurrences": counted(
                self._all("metrics_occurrences"), ("loop", "state", "decision"), ("n",)
            ),
            "decisions": counted(self._all("metrics_decisions"), ("kind", "reason"), ("n",)),
            "runs": counted(
                self._all("metrics_runs"), ("loop", "state", "outcome"), ("n", "attempts")
            ),
            "findings": counted(self._all("metrics_findings"), ("status",), ("n", "occurrences")),
            "journal": counted(self._all("metrics_journal"), ("action",), ("n",)),
            "dispatched": counted(self._all("metrics_dispatched"), (), ("n",)),
            "proposals": counted(self._all("metrics_proposals"), ("state",), ("n", "by_operator")),
        }

    def applied_migrations(self) -> list[int]:
        return [int(r["version"]) for r in self._all("applied_migrations")]

    def run_timings(self, limit: int) -> list[tuple[str, str | None, str | None]]:
        return [
            (r["created_at"], r["started_at"], r["finished_at"])
            for r in self._all("run_timings", limit=limit)
        ]

    # ---- pages (engine.core.paging) ----------------------------------------------------
    def _page(self, name: str, filters: dict[str, str], query: Any, **params: Any) -> list[Row]:
        """The named page query with the condition of each filter `query` gives (not
        None), and the parameters of those conditions only."""
        used = [f for f in filters if getattr(query, f) is not None]
        conditions = "".join(f" AND {filters[f]}" for f in used)
        names = set(_PARAM.findall(conditions)) | {"limit"}
        sql = self._sql[name].format(where=self._adapt(conditions))
        self._cur.execute(sql, {k: v for k, v in params.items() if k in names})
        return [self._row(r) for r in self._cur.fetchall()]

    def page_runs(self, query: RunQuery, limit: int) -> list[RunRecord]:
        at, run_id = query.before or (None, None)
        rows = self._page(
            "page_runs",
            RUN_FILTERS,
            query,
            loop=query.loop,
            state=query.state,
            actor=query.actor,
            since=query.since,
            until=query.until,
            before_at=at,
            before_id=run_id,
            limit=limit,
        )
        return [_run(r) for r in rows]

    def page_proposals(self, query: ProposalQuery, limit: int) -> list[ProposalRecord]:
        at, ident = query.before or (None, None)
        rows = self._page(
            "page_proposals",
            PROPOSAL_FILTERS,
            query,
            loop=query.loop,
            state=query.state,
            before_at=at,
            before_id=ident,
            limit=limit,
        )
        return [_proposal(r) for r in rows]

    def page_events(self, query: EventQuery, limit: int) -> list[EventRecord]:
        at, ident = query.before or (None, None)
        rows = self._page(
            "page_events",
            EVENT_FILTERS,
            query,
            loop=query.loop,
            type=query.type,
            before_at=at,
            before_id=ident,
            limit=limit,
        )
        return [_event(r) for r in rows]

    def page_journal(self, query: JournalQuery, limit: int) -> list[JournalEntry]:
        rows = self._page(
            "page_journal",
            JOURNAL_FILTERS,
            query,
            loop=query.loop,
            entity=query.entity,
            actor=query.actor,
            since=query.since,
            until=query.until,
            before=query.before,
            limit=limit,
        )
        return [_journal(r) for r in rows]

    def loop_state_counts(self, loop: str) -> dict[str, dict[str, int]]:
        return {
            kind: {str(r["state"]): int(r["n"]) for r in self._all(name, loop=loop)}
            for kind, name in (
                ("occurrence", "loop_occurrence_states"),
                ("proposal", "loop_proposal_states"),
                ("run", "loop_run_states"),
            )
        }

    # ---- batches: many rows of a kind in one statement (engine.service.batch) ---------
    def _many(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:
            self._cur.executemany(self._sql[name], rows)

    def _keyed(self, name: str, keys: Iterable[str], **params: Any) -> list[Row]:
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return []
        return self._all(name, keys=_keys(wanted), **params)

    def known_events(self, event_ids: Iterable[str]) -> set[str]:
        return {str(r["event_id"]) for r in self._keyed("known_events", event_ids)}

    def decided_events(self, event_ids: Iterable[str]) -> set[str]:
        return {str(r["event_id"]) for r in self._keyed("decided_events", event_ids)}

    def events_by_ids(self, event_ids: Iterable[str]) -> dict[str, EventRecord]:
        found = (_event(r) for r in self._keyed("events_by_ids", event_ids))
        return {e.event_id: e for e in found}

    def occurrences_by_keys(self, keys: Iterable[str]) -> dict[str, OccurrenceRecord]:
        found = (_occurrence(r) for r in self._keyed("occurrences_by_keys", keys))
        return {o.occurrence_key: o for o in found if o.occurrence_key is not None}

    def occurrences_by_ids(self, event_ids: Iterable[str]) -> dict[str, OccurrenceRecord]:
        found = (_occurrence(r) for r in self._keyed("occurrences_by_ids", event_ids))
        return {o.event_id: o for o in found}

    def loop_states_of(self, loops: Iterable[str]) -> dict[str, LoopState]:
        found = (_loop_state(r) for r in self._keyed("loop_states_of", loops))
        return {s.loop: s for s in found}

    def loops_in_flight(self, loops: Iterable[str]) -> set[str]:
        return {str(r["loop"]) for r in self._keyed("loops_in_flight", loops)}

    def open_proposals_of(self, loops: Iterable[str]) -> list[ProposalRecord]:
        return [_proposal(r) for r in self._keyed("open_proposals_of", loops)]

    def occurrences_of_loops(
        self, loops: Iterable[str], states: tuple[str, ...]
    ) -> list[OccurrenceRecord]:
        rows = self._keyed("occurrences_of_loops", loops, states=_keys(states))
        return sorted((_occurrence(r) for r in rows), key=_occurrence_order)

    def mark_planned_many(self, event_ids: Sequence[str]) -> None:
        self._many("mark_planned", [{"event_id": i} for i in event_ids])

    def insert_decisions(self, decisions: Sequence[DecisionRecord]) -> None:
        self._many("insert_decision", [_decision_row(d) for d in decisions])

    def open_occurrences(self, occurrences: Sequence[OccurrenceRecord]) -> None:
        self._many("open_occurrence", [_occurrence_row(o) for o in occurrences])

    def insert_proposals(self, proposals: Sequence[ProposalRecord]) -> None:
        self._many("insert_proposal", [_proposal_row(p) for p in proposals])

    def insert_skips(self, skips: Sequence[SkipRecord]) -> None:
        self._many("insert_skip", [_skip_row(s) for s in skips])

    def advance_cursors(self, moves: Sequence[tuple[str, str, str | None]], at: str) -> None:
        rows = [
            {"loop": loop, "cursor": cursor, "last_slot": last, "updated_at": at}
            for loop, cursor, last in moves
        ]
        self._many("advance_cursor", rows)
