"""Runs: claimed under a lease, checked for authority and started, heartbeated,
finished by the lease holder only (a lost lease is engine.service.leases'), cancelled by
an operator. An outcome resolves through the chain rules into outbox events, in the
same transaction as the finish."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

from engine.core import authority
from engine.core.decisions import Actor, Entity, JournalAction, is_human
from engine.core.envelope import Envelope, iso
from engine.core.instances import is_wake
from engine.core.records import LEASED, RunRecord
from engine.core.registry import Definition
from engine.core.settle import Chain, Finished
from engine.core.states import RunState, RunTrigger
from engine.errors import Conflict, Forbidden, NotFound, Unprocessable
from engine.service import occurrences, wakes
from engine.service.admission import admit_in, check
from engine.service.context import Runtime
from engine.service.executions import Execution
from engine.store.ports import Tx

__all__ = ["Execution", "Start"]


class Start(StrEnum):
    """What `start` did with a claimed run."""

    STARTED = "started"  # running: the worker executes it
    LOST = "lost"  # the worker no longer holds it (cancelled, recovered)
    REFUSED = "refused"  # the authority check refused it: failed, never executed

    def __bool__(self) -> bool:
        """True only when the run started (as `start` answered before it could refuse)."""
        return self is Start.STARTED


def definition_of(rt: Runtime, ref_text: str) -> Definition | None:
    return authority.definition_of(rt.rules, ref_text)


def lease_until(rt: Runtime, seconds: float) -> str:
    return iso(rt.clock() + timedelta(seconds=seconds))


def claim(rt: Runtime, worker: str, lease_seconds: float) -> RunRecord | None:
    """Claim the oldest queued run; None when there is none."""
    with rt.store.write(exclusive=False) as tx:
        run = tx.claim_next_run(worker, lease_until(rt, lease_seconds))
        if run is not None:
            rt.journal(
                tx,
                Entity.RUN,
                run.run_id,
                JournalAction.CLAIMED,
                f"worker:{worker}",
                from_state=RunState.QUEUED,
                to_state=run.state,
                data={"attempt": run.attempts, "lease": run.lease_expires_at},
            )
        return run


def start(rt: Runtime, run: RunRecord, worker: str) -> Start:
    """Start a claimed run once the authority check allows it under the worker's rules
    (engine.core.authority); a refused run is failed and journaled, never executed."""
    held: str | None = None
    with rt.store.write(exclusive=False) as tx:
        current = tx.get_run(run.run_id)
        if current is None or not _holds(current, worker, RunState.CLAIMED):
            return Start.LOST
        if authority.check(authority_facts(tx, current), rt.rules).allowed:
            held = wakes.reserve_for(rt, tx, current, worker)
            if held is None:
                return _start(rt, tx, current, worker)
    if held is not None:
        return _withdraw(rt, current, worker, held)
    return _refuse(rt, run, worker)


def _withdraw(rt: Runtime, run: RunRecord, worker: str, why: str) -> Start:
    """A wake that may not launch (its work ended, a controller holds it, another wake
    is pending since it was decided) is cancelled by the engine, nothing launched: its
    occurrence ends `cancelled`, which is no failure of the loop."""
    note = f"nothing was launched: {why}"
    with rt.store.write() as tx:
        current = tx.get_run(run.run_id)
        if current is None or not _holds(current, worker, RunState.CLAIMED):
            return Start.LOST
        state = rt.lifecycle.run(current.state, RunTrigger.CANCEL)
        at = rt.now()
        if not tx.cancel_run(current.run_id, current.state, at, note):
            return Start.LOST
        rt.journal(
            tx,
            Entity.RUN,
            current.run_id,
            JournalAction.CANCELLED,
            Actor.SYSTEM,
            from_state=current.state,
            to_state=state,
            note=note,
            at=at,
        )
        occurrences.settle(
            rt, tx, Finished(current, state, None, False, cancelled_by=Actor.SYSTEM), at
        )
    return Start.REFUSED


def _holds(run: RunRecord, worker: str, *states: str) -> bool:
    return run.lease_owner == worker and run.state in (states or LEASED)


def authority_facts(tx: Tx, run: RunRecord) -> authority.RunFacts:
    """What the authority check reads: the run's event, its proposal and the actors of
    that proposal's `approved` journal entries."""
    proposal = tx.get_proposal(run.proposal_id) if run.proposal_id else None
    approvers: tuple[str, ...] = ()
    if proposal is not None:
        entries = tx.list_journal(1000, 0, "proposal", proposal.proposal_id)
        approvers = tuple(e.actor for e in entries if e.action == JournalAction.APPROVED)
    return authority.RunFacts(run, tx.get_event(run.event_id), proposal, approvers)


def _start(rt: Runtime, tx: Tx, run: RunRecord, worker: str) -> Start:
    state = rt.lifecycle.run(run.state, RunTrigger.START)
    if not tx.start_run(run.run_id, worker, rt.now()):
        return Start.LOST
    rt.journal(
        tx,
        Entity.RUN,
        run.run_id,
        JournalAction.STARTED,
        f"worker:{worker}",
        from_state=run.state,
        to_state=state,
    )
    return Start.STARTED


def _refuse(rt: Runtime, run: RunRecord, worker: str) -> Start:
    """Fail a run the check refused, in an exclusive transaction (its occurrence settles
    too) that reads the facts again: journaled `refused` by the worker with the reason;
    the occurrence waits for a person (`human_attention_required`), never a retry."""
    with rt.store.write() as tx:
        current = tx.get_run(run.run_id)
        if current is None or not _holds(current, worker, RunState.CLAIMED):
            return Start.LOST
        verdict = authority.check(authority_facts(tx, current), rt.rules)
        if verdict.refusal is None:
            return _start(rt, tx, current, worker)
        state = rt.lifecycle.run(current.state, RunTrigger.FAIL)
        at = rt.now()
        error = f"refused by the worker ({verdict.refusal}): {verdict.note}; nothing was run"
        if not tx.finish_run(current.run_id, worker, state, at, None, None, error, None):
            return Start.LOST
        rt.journal(
            tx,
            Entity.RUN,
            current.run_id,
            JournalAction.REFUSED,
            f"worker:{worker}",
            from_state=current.state,
            to_state=state,
            note=error,
            at=at,
            data={"reason": verdict.refusal.value, "approvedBy": current.approved_by},
        )
        occurrences.settle(rt, tx, Finished(current, state, None, False, unauthorized=error), at)
        return Start.REFUSED


def heartbeat(rt: Runtime, run_id: str, worker: str, lease_seconds: float) -> bool:
    """Extend the lease; False when the worker no longer holds it."""
    with rt.store.write(exclusive=False) as tx:
        return tx.heartbeat(run_id, worker, lease_until(rt, lease_seconds))


def judge(
    definition: Definition | None, rt: Runtime, ex: Execution
) -> tuple[str, str | None, str | None]:
    """(run state trigger, outcome, error) for an execution. An adapter failure (no
    result, a timeout, a result that breaks its contract or names an undeclared
    outcome) is recorded with the definition's FAILED outcome when it declares one (so
    chains on FAILED still see it); `adapter_failed` tells the two apart."""
    if definition is None:
        return RunTrigger.FAIL, None, "the definition is no longer in the rules"
    failed = "FAILED" if "FAILED" in definition.outcomes else None
    if ex.timed_out:
        return RunTrigger.TIME_OUT, None, ex.error or f"timed out after {definition.timeout}"
    if ex.result is None:
        return RunTrigger.FAIL, failed, ex.error or "the run produced no result"
    problems = rt.validators.contract_errors(definition.output_contract, ex.result)
    if problems:
        return (
            "fail",
            failed,
            f"result does not fit {definition.output_contract}: " + "; ".join(problems),
        )
    outcome = str(ex.result.get("outcome"))
    if outcome not in definition.outcomes:
        return RunTrigger.FAIL, failed, f"outcome '{outcome}' is not declared by {definition.ref}"
    return (RunTrigger.FAIL if outcome == "FAILED" else RunTrigger.SUCCEED), outcome, ex.error


def finish(
    rt: Runtime, run: RunRecord, worker: str, ex: Execution, at: str | None = None
) -> RunRecord:
    """Record the result (the execution ended `at`, by default now), check it against
    the output contract, and resolve chains. Conflict when `worker` no longer holds the
    lease."""
    lost = Conflict(f"worker '{worker}' no longer holds the lease of run '{run.run_id}'")
    with rt.store.write() as tx:
        current = tx.get_run(run.run_id)
        if current is None:
            raise NotFound(f"no run '{run.run_id}'")
        if not _holds(current, worker):
            raise lost  # recovered by the reaper (requeued, failed) or claimed by another
        done = record(rt, tx, current, ex, at or rt.now(), f"worker:{worker}")
        if done is None:
            raise lost
        return done


def late_result(rt: Runtime, run: RunRecord, worker: str, ex: Execution, at: str) -> None:
    """Journal what an execution came to when its worker could not record it because
    the lease had moved on (the reaper took the run while the worker was alive but slow:
    frozen, or cut off from the database). The run keeps the state the lease policy gave
    it; the journal says the command ran, so a person looking at a failed mutating run
    knows it did its work (`late_result`, actor `worker:<id>`)."""
    outcome = ex.result.get("outcome") if ex.result is not None else None
    what = f"outcome {outcome}" if outcome is not None else (ex.error or "no result")
    with rt.store.write(exclusive=False) as tx:  # an append to the journal only
        current = tx.get_run(run.run_id)
        state = current.state if current is not None else "gone"
        rt.journal(
            tx,
            Entity.RUN,
            run.run_id,
            JournalAction.LATE_RESULT,
            f"worker:{worker}",
            note=f"the execution ended ({what}) after the lease was lost; the run stays {state}",
            at=at,
            data={"outcome": outcome, "error": ex.error, "attempt": run.attempts},
        )


def record(
    rt: Runtime,
    tx: Tx,
    current: RunRecord,
    ex: Execution,
    at: str,
    actor: str,
    data: dict[str, object] | None = None,
    note: str = "",
) -> RunRecord | None:
    """Finish a leased run with an execution, as its lease holder; None when the lease
    moved on (compare-and-set)."""
    assert current.lease_owner is not None
    definition = definition_of(rt, current.definition)
    trigger, outcome, error = judge(definition, rt, ex)
    state = rt.lifecycle.run(current.state, trigger)
    owner = current.lease_owner
    if not tx.finish_run(current.run_id, owner, state, at, outcome, ex.result, error, ex.artifact):
        return None
    rt.journal(
        tx,
        Entity.RUN,
        current.run_id,
        JournalAction.FINISHED,
        actor,
        from_state=current.state,
        to_state=state,
        note=error or note,
        at=at,
        data={"outcome": outcome, **(data or {})},
    )
    # A run whose occurrence waits for a retry has not ended the occurrence: its
    # outcome resolves through the chains only when the occurrence concludes.
    finished = Finished(
        current,
        state,
        outcome,
        adapter_failure(definition, rt, ex),
        refused=ex.workspace_refused,
        chain=Chain(ex.result or {}, rt.clock()),
    )
    occurrences.settle(rt, tx, finished, at)
    if definition is not None and is_wake(definition):
        wakes.ended(rt, tx, current, outcome, at)
    return tx.get_run(current.run_id)


def adapter_failure(definition: Definition | None, rt: Runtime, ex: Execution) -> bool:
    """The adapter failed rather than the work: no result, a timeout, a result that
    breaks its contract or names an undeclared outcome."""
    if definition is None or ex.timed_out or ex.result is None:
        return True
    if rt.validators.contract_errors(definition.output_contract, ex.result):
        return True
    return str(ex.result.get("outcome")) not in definition.outcomes


def cancel(rt: Runtime, run_id: str, actor: str, note: str = "") -> RunRecord:
    """An operator stops a run that has not ended: queued, claimed or running becomes
    cancelled; its worker's next heartbeat fails and it stops the execution. The run's
    occurrence ends `cancelled`, which never counts toward the circuit breaker."""
    if not is_human(actor):
        raise Forbidden(f"only an operator may cancel a run, not '{actor}'")
    with rt.store.write() as tx:
        run = tx.get_run(run_id)
        if run is None:
            raise NotFound(f"no run '{run_id}'")
        state = rt.lifecycle.run(run.state, RunTrigger.CANCEL)
        at = rt.now()
        why = note or f"cancelled by {actor}"
        if not tx.cancel_run(run_id, run.state, at, why):
            raise Conflict(f"run '{run_id}' moved on while cancelling it; try again")
        rt.journal(
            tx,
            Entity.RUN,
            run_id,
            JournalAction.CANCELLED,
            actor,
            from_state=run.state,
            to_state=state,
            note=why,
            at=at,
        )
        occurrences.settle(rt, tx, Finished(run, state, None, False, cancelled_by=actor), at)
        done = tx.get_run(run_id)
        assert done is not None
        return done


def publish_outbox(rt: Runtime, limit: int = 500) -> int:
    """Admit chained events waiting in the outbox; a refused one is journaled, not retried."""
    with rt.store.write() as tx:
        items = tx.pending_outbox(limit)
        for item in items:
            at = rt.now()
            try:
                envelope = check(rt, Envelope.model_validate(item.event))
                admit_in(rt, tx, envelope, item.actor, at)
            except (Unprocessable, ValueError) as err:
                rt.journal(
                    tx,
                    Entity.RUN,
                    item.origin_run or "-",
                    JournalAction.CHAIN_REFUSED,
                    item.actor,
                    at=at,
                    note=str(err),
                    data={"event": item.event},
                )
            tx.mark_published(item.seq, at)
        return len(items)
