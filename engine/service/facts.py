"""Reading the facts a decision reads (engine.core.decide.Facts), in the planning
transaction, all before the decision is made: what is read depends only on the event
and the rules, never on a write of the same decision."""

from __future__ import annotations

from engine.core import occurrence as occ_core
from engine.core.decide import Facts, History, Superseded, envelope_of, history_since
from engine.core.occurrence import ACTIVE, TERMINAL, needs_history
from engine.core.planner import loop_of
from engine.core.records import EventRecord, LoopState, OccurrenceRecord
from engine.core.ruleset import Approval, CatchUp, Loop, RuleSet, max_active
from engine.store.ports import Tx


def read_facts(tx: Tx, rules: RuleSet, event: EventRecord, at: str) -> Facts:
    """What `decide` reads for `event`. The loop's state is read afresh for each event:
    an earlier tick of the same pass may have moved its counters (a catch-up of several
    slots whose occurrences end at triage)."""
    decided = not event.planned and tx.get_decision(event.event_id) is not None
    if decided:
        return Facts(decided=True)
    loop = loop_of(envelope_of(event), event.admitted_by, rules)
    ident = occ_core.identity(event, loop)
    existing = tx.get_occurrence_by_key(ident.key)
    if loop is None:
        return Facts(existing=existing)
    if existing is not None and existing.event_id != event.event_id:
        return Facts(existing=existing)  # a fold reads nothing else
    state = tx.get_loop_state(loop.name)
    paused = state is not None and state.paused
    active = counted_active(tx, loop, ident.repo) if loop.enabled and not paused else ()
    return Facts(
        existing=existing,
        state=state,
        in_flight=tx.loop_in_flight(loop.name),
        active=active,
        history=history(tx, loop, event, ident.repo, state, at) if needs_history(loop) else None,
        open_proposals=superseded(tx, loop) if _may_supersede(rules, loop, event) else (),
        last_notified=None,  # a new occurrence never concludes `completed` at planning
    )


def counted_active(tx: Tx, loop: Loop, repo: str | None) -> tuple[OccurrenceRecord, ...]:
    """The loop's active occurrences for `repo`, read when they count: the loop has an
    active limit, or its triage may read the number (`active`); else none."""
    if max_active(loop) is None and not needs_history(loop):
        return ()
    return tuple(tx.active_occurrences(loop.name, repo, ACTIVE))


def _may_supersede(rules: RuleSet, loop: Loop, event: EventRecord) -> bool:
    """Whether the decision may propose and so supersede the loop's older proposals
    (engine.core.decide._supersede_older): a watched (or human-only) loop under
    catch-up none or last."""
    if loop.catch_up is CatchUp.ALL:
        return False
    return loop.approval is Approval.WATCHED or rules.is_human_only(event.type)


def history(
    tx: Tx, loop: Loop, event: EventRecord, repo: str | None, state: LoopState | None, at: str
) -> History:
    """The loop's last outcome, candidate findings, the day's budget use, its previous
    concluded occurrence (since an operator last resumed it) and its occurrence count."""
    last_run = tx.last_loop_run(loop.name)
    usage = tx.budget_usage(loop.name, repo, history_since(at))
    resumed = last_resumed(tx, loop.name)
    previous = next(
        (
            o
            for o in tx.list_occurrences(50, loop=loop.name)
            if o.event_id != event.event_id
            and o.state in TERMINAL
            and o.decision is not None
            and o.state != "cancelled"  # a stop or an operator's cancel concludes nothing
            and (resumed is None or o.updated_at > resumed)  # a resume starts afresh
        ),
        None,
    )
    counted = 0
    if loop.policy.max_occurrences is not None:
        start = state.enabled_since if state and state.enabled_since else ""
        cap = loop.policy.max_occurrences + 2
        found = tx.occurrences_of_loop(loop.name, start, cap)
        counted = sum(1 for o in found if o.event_id != event.event_id)
    return History(
        last_outcome=last_run.outcome if last_run else None,
        findings=len(tx.list_findings(1000, status="candidate", loop=loop.name)),
        usage=usage,
        previous=previous,
        counted=counted,
    )


def last_resumed(tx: Tx, loop: str) -> str | None:
    """When an operator last resumed the loop (its journal), if ever."""
    entries = tx.list_journal(1000, 0, "loop", loop)
    return next((e.at for e in reversed(entries) if e.action == "resumed"), None)


def superseded(tx: Tx, loop: Loop) -> tuple[Superseded, ...]:
    """The loop's open proposals, with their occurrences and events' correlations."""
    found = []
    for proposal in tx.open_loop_proposals(loop.name):
        event = tx.get_event(proposal.event_id)
        correlation = (event.correlation_id or event.event_id) if event else proposal.event_id
        found.append(Superseded(proposal, tx.get_occurrence(proposal.event_id), correlation))
    return tuple(found)
