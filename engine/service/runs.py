"""Runs: claimed under a lease, heartbeated, finished by the lease holder only, and
recovered by the reaper when a lease expires. An outcome resolves through the chain
rules into outbox events, in the same transaction as the finish."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from engine.core import chains
from engine.core.decisions import is_human
from engine.core.envelope import Envelope, iso
from engine.core.records import LEASED, RunRecord
from engine.core.registry import Definition
from engine.core.ruleset import DefinitionRef
from engine.errors import Conflict, Forbidden, NotFound, Unprocessable
from engine.service import occurrences
from engine.service.admission import admit_in, check
from engine.service.context import Runtime
from engine.service.planning import envelope_of
from engine.store.ports import Tx

# Lease-expiry policy: a read-only run is requeued while attempts remain; a mutating
# run is never re-executed behind an operator's back: it fails with `lease_expired`.
MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class Execution:
    """What an adapter reports for one run."""

    result: dict[str, object] | None
    error: str | None = None
    timed_out: bool = False
    artifact: str | None = None
    workspace_refused: bool = False  # the dirty-workspace guard refused to start it


def definition_of(rt: Runtime, ref_text: str) -> Definition | None:
    ident, _, version = ref_text.partition("@")
    return rt.rules.definitions.get(DefinitionRef(ident, int(version or 0)))


def lease_until(rt: Runtime, seconds: float) -> str:
    return iso(rt.clock() + timedelta(seconds=seconds))


def claim(rt: Runtime, worker: str, lease_seconds: float) -> RunRecord | None:
    """Claim the oldest queued run; None when there is none."""
    with rt.store.write(exclusive=False) as tx:
        run = tx.claim_next_run(worker, lease_until(rt, lease_seconds))
        if run is not None:
            rt.journal(
                tx,
                "run",
                run.run_id,
                "claimed",
                f"worker:{worker}",
                from_state="queued",
                to_state=run.state,
                data={"attempt": run.attempts, "lease": run.lease_expires_at},
            )
        return run


def start(rt: Runtime, run: RunRecord, worker: str) -> bool:
    with rt.store.write(exclusive=False) as tx:
        state = rt.lifecycle.run(run.state, "start")
        if not tx.start_run(run.run_id, worker, rt.now()):
            return False
        rt.journal(
            tx,
            "run",
            run.run_id,
            "started",
            f"worker:{worker}",
            from_state=run.state,
            to_state=state,
        )
        return True


def heartbeat(rt: Runtime, run_id: str, worker: str, lease_seconds: float) -> bool:
    """Extend the lease; False when the worker no longer holds it."""
    with rt.store.write(exclusive=False) as tx:
        return tx.heartbeat(run_id, worker, lease_until(rt, lease_seconds))


def _judge(
    definition: Definition | None, rt: Runtime, ex: Execution
) -> tuple[str, str | None, str | None]:
    """(run state trigger, outcome, error) for an execution. An adapter failure (no
    result, a timeout, a result that breaks its contract or names an undeclared
    outcome) is recorded with the definition's FAILED outcome when it declares one (so
    chains on FAILED still see it); `adapter_failed` tells the two apart."""
    if definition is None:
        return "fail", None, "the definition is no longer in the rules"
    failed = "FAILED" if "FAILED" in definition.outcomes else None
    if ex.timed_out:
        return "time_out", None, ex.error or f"timed out after {definition.timeout}"
    if ex.result is None:
        return "fail", failed, ex.error or "the run produced no result"
    problems = rt.validators.contract_errors(definition.output_contract, ex.result)
    if problems:
        return (
            "fail",
            failed,
            f"result does not fit {definition.output_contract}: " + "; ".join(problems),
        )
    outcome = str(ex.result.get("outcome"))
    if outcome not in definition.outcomes:
        return "fail", failed, f"outcome '{outcome}' is not declared by {definition.ref}"
    return ("fail" if outcome == "FAILED" else "succeed"), outcome, ex.error


def finish(rt: Runtime, run: RunRecord, worker: str, ex: Execution) -> RunRecord:
    """Record the result, check it against the output contract, and resolve chains."""
    definition = definition_of(rt, run.definition)
    trigger, outcome, error = _judge(definition, rt, ex)
    adapter_failed = adapter_failure(definition, rt, ex)
    with rt.store.write() as tx:
        current = tx.get_run(run.run_id)
        if current is None:
            raise NotFound(f"no run '{run.run_id}'")
        lost = Conflict(f"worker '{worker}' no longer holds the lease of run '{run.run_id}'")
        if current.lease_owner != worker or current.state not in LEASED:
            raise lost  # recovered by the reaper (requeued, failed) or claimed by another
        state = rt.lifecycle.run(current.state, trigger)
        at = rt.now()
        if not tx.finish_run(run.run_id, worker, state, at, outcome, ex.result, error, ex.artifact):
            raise lost
        rt.journal(
            tx,
            "run",
            run.run_id,
            "finished",
            f"worker:{worker}",
            from_state=current.state,
            to_state=state,
            note=error or "",
            at=at,
            data={"outcome": outcome},
        )
        settled = occurrences.settle(
            rt, tx, current, state, outcome, adapter_failed, at, refused=ex.workspace_refused
        )
        # A run whose occurrence waits for a retry has not ended the occurrence: its
        # outcome resolves through the chains only when the occurrence concludes.
        if settled.concluded and outcome is not None and definition is not None:
            _chain(rt, tx, run, definition, outcome, ex.result or {}, at)
        done = tx.get_run(run.run_id)
        assert done is not None
        return done


def adapter_failure(definition: Definition | None, rt: Runtime, ex: Execution) -> bool:
    """The adapter failed rather than the work: no result, a timeout, a result that
    breaks its contract or names an undeclared outcome."""
    if definition is None or ex.timed_out or ex.result is None:
        return True
    if rt.validators.contract_errors(definition.output_contract, ex.result):
        return True
    return str(ex.result.get("outcome")) not in definition.outcomes


def _chain(
    rt: Runtime,
    tx: Tx,
    run: RunRecord,
    definition: Definition,
    outcome: str,
    result: dict[str, object],
    at: str,
) -> None:
    event = tx.get_event(run.event_id)
    if event is None:
        return
    ref = DefinitionRef(definition.id, definition.version)
    resolved = chains.resolve(
        rt.rules, ref, outcome, envelope_of(event), dict(result), run.run_id, rt.clock()
    )
    if not resolved.matched:
        return
    if resolved.stop:
        rt.journal(
            tx,
            "run",
            run.run_id,
            "chain_stopped",
            "chain",
            note=f"{outcome} stops ({resolved.rule})",
            at=at,
        )
    for envelope in resolved.envelopes:
        tx.enqueue_outbox(envelope.model_dump(mode="json"), run.run_id, "chain", at)
        rt.journal(
            tx,
            "run",
            run.run_id,
            "chained",
            "chain",
            at=at,
            note=f"{outcome} -> {envelope.type}",
            data={"eventId": envelope.eventId, "rule": resolved.rule},
        )
    for problem in resolved.errors:
        rt.journal(tx, "run", run.run_id, "chain_error", "chain", note=problem, at=at)


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
        state = rt.lifecycle.run(run.state, "cancel")
        at = rt.now()
        why = note or f"cancelled by {actor}"
        if not tx.cancel_run(run_id, run.state, at, why):
            raise Conflict(f"run '{run_id}' moved on while cancelling it; try again")
        rt.journal(
            tx,
            "run",
            run_id,
            "cancelled",
            actor,
            from_state=run.state,
            to_state=state,
            note=why,
            at=at,
        )
        occurrences.settle(rt, tx, run, state, None, False, at, cancelled_by=actor)
        done = tx.get_run(run_id)
        assert done is not None
        return done


def recover_expired(rt: Runtime, apply: bool, limit: int = 1000) -> list[tuple[RunRecord, str]]:
    """Runs whose lease expired, and what the policy does with each (`queued` or
    `failed`); applied when `apply`."""
    with rt.store.write() as tx:
        expired = tx.expired_leases(rt.now(), limit)
        plan: list[tuple[RunRecord, str]] = []
        for run in expired:
            definition = definition_of(rt, run.definition)
            mutating = definition is None or definition.mutating
            target = "queued" if not mutating and run.attempts < MAX_ATTEMPTS else "failed"
            plan.append((run, target))
            if not apply:
                continue
            state = rt.lifecycle.run(run.state, "expire_lease", attempts_remain=target == "queued")
            why = "lease expired" + (
                ""
                if target == "queued"
                else (
                    "; mutating runs are not re-executed"
                    if mutating
                    else f"; {run.attempts} attempts"
                )
            )
            if tx.recover_run(run, state, rt.now(), why):
                rt.journal(
                    tx,
                    "run",
                    run.run_id,
                    "lease_expired",
                    "system",
                    from_state=run.state,
                    to_state=state,
                    note=why,
                    data={"worker": run.lease_owner},
                )
                if state != "queued":
                    lost = tx.get_run(run.run_id)
                    assert lost is not None
                    occurrences.settle(rt, tx, lost, state, None, True, rt.now())
        return plan


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
                    "run",
                    item.origin_run or "-",
                    "chain_refused",
                    item.actor,
                    at=at,
                    note=str(err),
                    data={"event": item.event},
                )
            tx.mark_published(item.seq, at)
        return len(items)
