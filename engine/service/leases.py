"""Runs whose lease holder is gone: the lease-expiry policy (serve's sweep every 15 s,
`engine reap`), and the results a worker left on disk (engine.service.executions) when
it died, or the database stayed away, before it recorded them. A result on disk is
recorded as the run's finish instead of failing the run; without one, read-only work is
requeued while attempts remain and mutating work fails, never re-executed."""

from __future__ import annotations

from typing import NamedTuple

from engine.core.decisions import Actor, Entity, JournalAction
from engine.core.records import RunRecord
from engine.core.settle import Finished
from engine.core.states import RunState, RunTrigger
from engine.service import executions, occurrences
from engine.service.context import Runtime
from engine.service.executions import Pending
from engine.service.runs import definition_of, judge, record
from engine.store.ports import Tx

# Lease-expiry policy: a read-only run is requeued while attempts remain; a mutating
# run is never re-executed behind an operator's back: it fails with `lease_expired`.
MAX_ATTEMPTS = 3


class Recovery(NamedTuple):
    """What the lease-expiry policy does with one run: the state it goes to, and whether
    that is the record of the result its worker left on disk."""

    run: RunRecord
    to: str
    from_file: bool = False


def recover_expired(rt: Runtime, apply: bool, limit: int = 1000) -> list[Recovery]:
    """Runs whose lease expired, and what the policy does with each: recorded from the
    result its worker left on disk when there is one (the state it ends in), else
    `queued` or `failed`; applied when `apply`."""
    recorded: list[str] = []
    with rt.store.write() as tx:
        expired = tx.expired_leases(rt.now(), limit)
        plan: list[Recovery] = []
        for run in expired:
            pending = executions.read(rt.artifacts / run.run_id)
            if pending is not None and pending.belongs_to(run):
                trigger = judge(definition_of(rt, run.definition), rt, pending.execution)[0]
                plan.append(Recovery(run, rt.lifecycle.run(run.state, trigger), True))
                if apply and _from_file(rt, tx, run, pending) is not None:
                    recorded.append(run.run_id)
                continue
            plan.append(Recovery(run, _expire(rt, tx, run, apply)))
    for run_id in recorded:  # once committed
        executions.drop(rt.artifacts / run_id)
    return plan


def _expire(rt: Runtime, tx: Tx, run: RunRecord, apply: bool) -> str:
    """The lease-expiry policy for a run with no result on disk: requeue read-only work
    while attempts remain, else fail it. The state it goes to."""
    definition = definition_of(rt, run.definition)
    mutating = definition is None or definition.mutating
    target = RunState.QUEUED if not mutating and run.attempts < MAX_ATTEMPTS else RunState.FAILED
    if not apply:
        return target
    left = 0 if mutating else MAX_ATTEMPTS - run.attempts
    state = rt.lifecycle.run(run.state, RunTrigger.EXPIRE_LEASE, attempts_left=left)
    why = "lease expired" + (
        ""
        if target == RunState.QUEUED
        else ("; mutating runs are not re-executed" if mutating else f"; {run.attempts} attempts")
    )
    if tx.recover_run(run, state, rt.now(), why):
        rt.journal(
            tx,
            Entity.RUN,
            run.run_id,
            JournalAction.LEASE_EXPIRED,
            Actor.SYSTEM,
            from_state=run.state,
            to_state=state,
            note=why,
            data={"worker": run.lease_owner},
        )
        if state != RunState.QUEUED:
            lost = tx.get_run(run.run_id)
            assert lost is not None
            occurrences.settle(rt, tx, Finished(lost, state, None, True), rt.now())
    return target


def _from_file(rt: Runtime, tx: Tx, run: RunRecord, pending: Pending) -> RunRecord | None:
    """Record a run from the result its worker left on disk (the worker died, or the
    database stayed away, before it recorded it): journaled `finished` by `system`."""
    note = f"recorded from the result file worker:{pending.worker} left"
    data: dict[str, object] = {"recordedFrom": executions.PENDING, "worker": pending.worker}
    return record(rt, tx, run, pending.execution, pending.ended_at, Actor.SYSTEM, data, note)


def record_pending(rt: Runtime, worker: str, limit: int = 1000) -> list[RunRecord]:
    """Record the results left on disk (in this process's artifact directory) of running
    runs whose worker cannot record them any more: an earlier process of `worker` (a
    restarted worker with the same id), or a worker whose lease expired. The runs
    recorded."""
    with rt.store.read() as tx:
        running = tx.list_runs(limit, RunState.RUNNING)
    recorded = []
    for run in running:
        pending = executions.read(rt.artifacts / run.run_id)
        if pending is None or not pending.belongs_to(run):
            continue
        with rt.store.write() as tx:
            current = tx.get_run(run.run_id)
            if current is None or not pending.belongs_to(current):
                continue
            if current.lease_owner != worker and (current.lease_expires_at or "") >= rt.now():
                continue  # a live worker's: it records its own result
            done = _from_file(rt, tx, current, pending)
        if done is not None:
            executions.drop(rt.artifacts / run.run_id)
            recorded.append(done)
    return recorded
