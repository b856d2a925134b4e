"""The in-memory store's runs and their leases (`engine.store.ports.Runs`), as
`sql/queries.sql` has them: idempotent on the run's key, compare-and-set on its state
and lease, the oldest queued run of a loop not paused claimed first."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine.core.records import IN_FLIGHT, LEASED, RunRecord
from engine.store.memory_index import grouped, regroup
from engine.store.memory_tables import (
    MemoryStoreError,
    Transaction,
    as_json,
    stored,
    take,
    writes,
)


class RunsTx(Transaction):
    """Runs: one writer of their rows (`_put_run`) keeps their indexes with them."""

    def _put_run(self, row: RunRecord) -> None:
        t = self._own()
        old = t.runs.get(row.run_id)
        if old is None:
            t.run_order = t.run_order.set(row.run_id, len(t.runs))
            newest = t.last_runs.get(row.loop)
            seen = None if newest is None else t.runs[newest]
            if seen is None or (seen.created_at, seen.run_id) < (row.created_at, row.run_id):
                t.last_runs = t.last_runs.set(row.loop, row.run_id)
        t.runs = t.runs.set(row.run_id, row)
        was = None if old is None else (old.state, old.loop)
        t.run_states = regroup(t.run_states, row.run_id, was, (row.state, row.loop))

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
        self._put_run(row)
        t = self._tables
        t.run_keys = t.run_keys.set(row.idempotency_key, row.run_id)
        return True

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._tables.runs.get(run_id)

    def get_run_by_key(self, key: str) -> RunRecord | None:
        run_id = self._tables.run_keys.get(key)
        return None if run_id is None else self._tables.runs[run_id]

    def list_runs(self, limit: int, state: str | None = None) -> list[RunRecord]:
        index = self._tables.run_states
        found = self._runs_in(index.keys() if state is None else [state])
        return take(sorted(found, key=lambda r: (r.created_at, r.run_id), reverse=True), limit)

    def _runs_in(
        self, states: Iterable[str], loops: Iterable[str | None] | None = None
    ) -> list[RunRecord]:
        runs = self._tables.runs
        return [runs[i] for i in grouped(self._tables.run_states, states, loops)]

    def loop_in_flight(self, loop: str) -> bool:
        return next(grouped(self._tables.run_states, IN_FLIGHT, [loop]), None) is not None

    def expired_leases(self, now: str, limit: int) -> list[RunRecord]:
        order = self._tables.run_order
        found = [
            r
            for r in self._runs_in(LEASED)
            if r.lease_expires_at is not None and r.lease_expires_at < now
        ]
        # Equal expiries in SQLite's order: it reads the runs by (state, created_at)
        # through its index and sorts them by expiry, keeping that order.
        found.sort(key=lambda r: (r.lease_expires_at or "", r.state, r.created_at, order[r.run_id]))
        return take(found, limit)

    def last_loop_run(self, loop: str) -> RunRecord | None:
        newest = self._tables.last_runs.get(loop)
        return None if newest is None else self._tables.runs[newest]

    def _move_run(self, run: RunRecord, **changes: Any) -> bool:
        self._put_run(stored(run, **changes))
        return True

    def _paused(self, loop: str | None) -> bool:
        state = None if loop is None else self._tables.loop_state.get(loop)
        return state is not None and state.paused

    @writes
    def claim_next_run(self, owner: str, lease_until: str) -> RunRecord | None:
        queued = [r for r in self._runs_in(["queued"]) if not self._paused(r.loop)]
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
