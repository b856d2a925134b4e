"""The Tx operations written once in SQL over a DB-API cursor; backends supply the
connection, the transaction boundaries and the parameter style."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, TypeVar

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
from engine.store.queries import queries

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
        source=row["source"],
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


def _proposal(row: Row) -> ProposalRecord:
    return _record(ProposalRecord, row, bools=("human_only", "mutating"))


def _run(row: Row) -> RunRecord:
    return _record(RunRecord, row, json=("result",))


def _loop_state(row: Row) -> LoopState:
    return _record(LoopState, row, bools=("enabled", "paused"))


def _journal(row: Row) -> JournalEntry:
    return _record(JournalEntry, row, json=("data",))


def _same(sql: str) -> str:
    return sql


@lru_cache(maxsize=8)
def _adapted(dialect: str, adapt: Callable[[str], str]) -> dict[str, str]:
    """A dialect's named queries in its parameter style, built once per dialect."""
    return {name: adapt(sql) for name, sql in queries(dialect).items()}


class SqlTx:
    """Implements `engine.store.ports.Tx` with the shared named queries. `dialect`
    selects a backend's own versions of some queries; `adapt` rewrites the `:name`
    parameters into the driver's style."""

    def __init__(
        self, cursor: Any, dialect: str = "sqlite", adapt: Callable[[str], str] = _same
    ) -> None:
        self._cur = cursor
        self._sql = _adapted(dialect, adapt)

    # ---- plumbing --------------------------------------------------------------
    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested step: its writes roll back alone when it raises."""
        self._cur.execute("SAVEPOINT step")
        try:
            yield
        except BaseException:
            self._cur.execute("ROLLBACK TO step")
            self._cur.execute("RELEASE step")
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
        return (
            self._exec(
                "insert_event",
                event_id=event.event_id,
                type=event.type,
                source=event.source,
                subject=event.subject,
                occurred_at=event.occurred_at,
                correlation_id=event.correlation_id,
                payload=_dumps(event.payload),
                loop=event.loop,
                admitted_at=event.admitted_at,
                admitted_by=event.admitted_by,
                planned=int(event.planned),
            )
            == 1
        )

    def get_event(self, event_id: str) -> EventRecord | None:
        row = self._one("get_event", event_id=event_id)
        return None if row is None else _event(row)

    def list_events(self, limit: int, type: str | None = None) -> list[EventRecord]:
        return [_event(r) for r in self._all("list_events", limit=limit, type=type)]

    def unplanned_events(self, limit: int) -> list[EventRecord]:
        return [_event(r) for r in self._all("unplanned_events", limit=limit)]

    def mark_planned(self, event_id: str) -> None:
        self._exec("mark_planned", event_id=event_id)

    # ---- decisions and occurrences -------------------------------------------------
    def insert_decision(self, d: DecisionRecord) -> bool:
        return (
            self._exec(
                "insert_decision",
                event_id=d.event_id,
                kind=d.kind,
                reason=d.reason,
                definition=d.definition,
                loop=d.loop,
                approved_by=d.approved_by,
                human_only=int(d.human_only),
                mutating=int(d.mutating),
                rule=d.rule,
                note=d.note,
                rules_digest=d.rules_digest,
                decided_at=d.decided_at,
            )
            == 1
        )

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
    def insert_proposal(self, p: ProposalRecord) -> bool:
        return (
            self._exec(
                "insert_proposal",
                proposal_id=p.proposal_id,
                event_id=p.event_id,
                loop=p.loop,
                definition=p.definition,
                state=p.state,
                human_only=int(p.human_only),
                mutating=int(p.mutating),
                created_at=p.created_at,
                note=p.note,
            )
            == 1
        )

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
    def append_journal(self, e: JournalEntry) -> int:
        row = self._one(
            "append_journal",
            at=e.at,
            entity=e.entity,
            entity_id=e.entity_id,
            action=e.action,
            from_state=e.from_state,
            to_state=e.to_state,
            actor=e.actor,
            rules_digest=e.rules_digest,
            note=e.note,
            data=_dumps(e.data),
        )
        assert row is not None
        return int(row["seq"])

    def list_journal(
        self, limit: int, after: int = 0, entity: str | None = None, entity_id: str | None = None
    ) -> list[JournalEntry]:
        rows = self._all(
            "list_journal", limit=limit, after=after, entity=entity, entity_id=entity_id
        )
        return [_journal(r) for r in rows]

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
        return (
            self._exec(
                "insert_skip",
                loop=skip.loop,
                first_slot=skip.first_slot,
                last_slot=skip.last_slot,
                count=skip.count,
                reason=skip.reason,
                recorded_at=skip.recorded_at,
            )
            == 1
        )

    def list_skips(self, loop: str, since: str) -> list[SkipRecord]:
        return [SkipRecord(**dict(r)) for r in self._all("list_skips", loop=loop, since=since)]

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
