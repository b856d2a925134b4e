"""Operator decisions on proposals. Approval records the human actor; a human-only
proposal is approved by a human operator only, whoever calls."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from engine.core import occurrence as occ_core
from engine.core.decisions import Actor, Entity, JournalAction, is_human
from engine.core.envelope import iso
from engine.core.records import ProposalRecord, RunRecord
from engine.core.states import OccurrenceTrigger, ProposalState, ProposalTrigger
from engine.errors import Conflict, Forbidden, NotFound
from engine.service import occurrences
from engine.service.context import Runtime
from engine.service.planning import queue_run
from engine.store.ports import Tx


def _open(tx: Tx, proposal_id: str) -> ProposalRecord:
    proposal = tx.get_proposal(proposal_id)
    if proposal is None:
        raise NotFound(f"no proposal '{proposal_id}'")
    if proposal.state != ProposalState.OPEN:
        raise Conflict(
            f"proposal '{proposal_id}' is {proposal.state}, not open",
            state=proposal.state,
            decided_by=proposal.decided_by,
        )
    return proposal


def approve(
    rt: Runtime, proposal_id: str, actor: str, note: str = ""
) -> tuple[ProposalRecord, RunRecord]:
    """Approve an open proposal and queue its run. Only a human (`operator:<name>`)
    approves a human-only proposal; anyone else is refused and nothing changes."""
    with rt.store.write() as tx:
        proposal = _open(tx, proposal_id)
        if proposal.human_only and not is_human(actor):
            raise Forbidden(
                f"'{proposal.definition}' is human-approval-only; "
                f"'{actor}' is not a human operator",
                reason="human_only",
            )
        if not is_human(actor):
            raise Forbidden(f"proposals are approved by operators; '{actor}' is not one")
        at = rt.now()
        state = rt.lifecycle.proposal(
            proposal.human_only, ProposalState.OPEN, ProposalTrigger.APPROVE, actor=actor
        )
        tx.decide_proposal(proposal_id, ProposalState.OPEN, state, at, actor, note)
        rt.journal(
            tx,
            Entity.PROPOSAL,
            proposal_id,
            JournalAction.APPROVED,
            actor,
            from_state=ProposalState.OPEN,
            to_state=state,
            note=note,
            at=at,
        )
        event = tx.get_event(proposal.event_id)
        assert event is not None
        _advance_occurrence(rt, tx, proposal, OccurrenceTrigger.APPROVE, at, actor)
        run = queue_run(rt, tx, event, proposal_id, actor, at)
        decided = tx.get_proposal(proposal_id)
        assert decided is not None
        return decided, run


def reject(rt: Runtime, proposal_id: str, actor: str, reason: str) -> ProposalRecord:
    """Reject an open proposal; nothing runs."""
    if not is_human(actor):
        raise Forbidden(f"proposals are rejected by operators; '{actor}' is not one")
    with rt.store.write() as tx:
        proposal = _open(tx, proposal_id)
        at = rt.now()
        state = rt.lifecycle.proposal(
            proposal.human_only, ProposalState.OPEN, ProposalTrigger.REJECT
        )
        tx.decide_proposal(proposal_id, ProposalState.OPEN, state, at, actor, reason)
        rt.journal(
            tx,
            Entity.PROPOSAL,
            proposal_id,
            JournalAction.REJECTED,
            actor,
            from_state=ProposalState.OPEN,
            to_state=state,
            note=reason,
            at=at,
        )
        _advance_occurrence(rt, tx, proposal, OccurrenceTrigger.REJECT, at, actor)
        decided = tx.get_proposal(proposal_id)
        assert decided is not None
        return decided


def _advance_occurrence(
    rt: Runtime, tx: Tx, proposal: ProposalRecord, trigger: str, at: str, actor: str
) -> None:
    advance_proposed(rt, tx, proposal.event_id, proposal.human_only, trigger, at, actor)


def advance_proposed(
    rt: Runtime, tx: Tx, event_id: str, human_only: bool, trigger: str, at: str, actor: str
) -> None:
    """Move a proposed occurrence (approve, reject, expire, supersede) as `actor`. One
    that ends here releases its budget reservation; a rejection is an operator's cancel,
    never a failure of the loop."""
    occ = tx.get_occurrence(event_id)
    if occ is None:
        return
    state = rt.lifecycle.proposed(human_only, occ.state, trigger, actor=actor)
    if state not in occ_core.TERMINAL:
        tx.update_occurrence(event_id, occ.state, at, state=state)
        return
    tx.update_occurrence(event_id, occ.state, at, state=state, reserved=None, finished_at=at)
    occurrences.concluded(
        rt, tx, replace(occ, state=state), None, at, f"proposal {trigger}", counts=False
    )


def expire_stale(
    rt: Runtime, ttl: timedelta, apply: bool, limit: int = 1000
) -> list[ProposalRecord]:
    """Open proposals older than `ttl`; expired (actor `system`) when `apply`."""
    before = iso(rt.clock() - ttl)
    with rt.store.write() as tx:
        stale = tx.stale_proposals(before, limit)
        if not apply:
            return stale
        at = rt.now()
        for proposal in stale:
            state = rt.lifecycle.proposal(
                proposal.human_only, ProposalState.OPEN, ProposalTrigger.EXPIRE
            )
            if tx.decide_proposal(
                proposal.proposal_id, ProposalState.OPEN, state, at, Actor.SYSTEM, "expired"
            ):
                rt.journal(
                    tx,
                    Entity.PROPOSAL,
                    proposal.proposal_id,
                    JournalAction.EXPIRED,
                    Actor.SYSTEM,
                    from_state=ProposalState.OPEN,
                    to_state=state,
                    note=f"open longer than {ttl}",
                    at=at,
                )
                _advance_occurrence(rt, tx, proposal, OccurrenceTrigger.EXPIRE, at, Actor.SYSTEM)
        return stale
