"""Reading the facts a decision reads, in the deciding transaction, all before the
decision is made: what is read depends only on the decision's input and the rules,
never on a write of the same decision. `read_facts` for planning an event
(engine.core.decide.Facts), `settle_facts` for a run's result
(engine.core.settle.SettleFacts), `resume_facts` for a waiting retry
(engine.core.resume.ResumeFacts), `ending` for what an occurrence's conclusion reads."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from engine.core import occurrence as occ_core
from engine.core.decide import (
    Facts,
    History,
    Superseded,
    counts_active,
    dedup_key,
    history_since,
    may_supersede,
)
from engine.core.decisions import Entity, JournalAction
from engine.core.existing import JOB_STATES, KeyFacts, key_of
from engine.core.occurrence import ACTIVE, TERMINAL, needs_history
from engine.core.planner import loop_of
from engine.core.records import (
    EventRecord,
    LoopState,
    OccurrenceRecord,
    RunRecord,
)
from engine.core.resume import ResumeFacts
from engine.core.ruleset import Loop, RuleSet
from engine.core.settle import Ending, SettleFacts, run_key, runs_of, waited_for
from engine.core.states import FindingStatus, OccurrenceState
from engine.core.ticks import idempotency_key
from engine.core.work import BindingState
from engine.store.ports import FactsView, Tx


def read_facts(tx: Tx, rules: RuleSet, event: EventRecord, at: str) -> Facts:
    """What `decide` reads for `event` (`read_facts_many` of one). The loop's state is
    read afresh for each event: an earlier tick of the same pass may have moved its
    counters (a catch-up of several slots whose occurrences end at triage)."""
    return read_facts_many(tx, rules, [event], at)[0]


def read_facts_many(tx: Tx, rules: RuleSet, events: Sequence[EventRecord], at: str) -> list[Facts]:
    """What `decide` reads for each event, with one read per kind of fact for them all
    (the batched writer's round: engine.service.batch). The events are of different
    loops (or of none), so no decision among them reads what another writes."""
    decided = tx.decided_events(e.event_id for e in events if not e.planned)
    loops = [loop_of(e, e.admitted_by, rules) for e in events]
    idents = [occ_core.identity(e, loop) for e, loop in zip(events, loops, strict=True)]
    existing = tx.occurrences_by_keys(i.key for i in idents)
    named = {loop.name for loop in loops if loop is not None}
    states = tx.loop_states_of(named)
    in_flight = tx.loops_in_flight(named)
    counting = {loop.name for loop in loops if loop is not None and counts_active(loop)}
    active: defaultdict[tuple[str, str | None], list[OccurrenceRecord]] = defaultdict(list)
    for occ in tx.occurrences_of_loops(counting, ACTIVE) if counting else ():
        if occ.loop is not None:
            active[(occ.loop, occ.repo)].append(occ)
    supersede = {
        loop.name
        for event, loop in zip(events, loops, strict=True)
        if loop is not None and may_supersede(rules, loop, event)
    }
    open_proposals = _superseded_of(tx, supersede)
    out: list[Facts] = []
    for event, loop, ident in zip(events, loops, idents, strict=True):
        if event.event_id in decided:
            out.append(Facts(decided=True))
            continue
        held = existing.get(ident.key)
        if loop is None or (held is not None and held.event_id != event.event_id):
            out.append(Facts(existing=held))
            continue
        state = states.get(loop.name)
        paused = state is not None and state.paused
        counted = loop.enabled and not paused and loop.name in counting
        out.append(
            Facts(
                existing=held,
                state=state,
                in_flight=loop.name in in_flight,
                active=tuple(active.get((loop.name, ident.repo), ())) if counted else (),
                history=history(tx, loop, event, ident.repo, state, at)
                if needs_history(loop)
                else None,
                open_proposals=open_proposals.get(loop.name, ()) if loop.name in supersede else (),
                last_notified=None,
                work=tx.get_work(loop.work.work_id) if loop.work is not None else None,
                binding=tx.get_binding(loop.work.binding_id) if loop.work is not None else None,
                keyed=key_facts(tx, loop, event),
            )
        )
    return out


def key_facts(tx: FactsView, loop: Loop, event: EventRecord) -> KeyFacts | None:
    """What is there for the semantic key an occurrence of `loop` for `event` works on
    (docs/rules.md#existing-work-first), the event's own occurrence aside; None for a
    loop without a key (nothing is read) or a key the payload cannot fill. Read one key
    at a time: only loops that declare a key pay for it."""
    key, _ = key_of(loop, event)
    if key is None:
        return None
    work = tx.live_work_by_key(key)
    instance = None
    if work is not None:
        live = (b for b in tx.bindings_of_work(work.work_id) if b.state != BindingState.DISABLED)
        instance = next(live, None)
    jobs = [o for o in tx.key_occurrences(key, JOB_STATES, 2) if o.event_id != event.event_id]
    job = jobs[0] if jobs else None
    run = None
    if job is not None and job.state == OccurrenceState.WORK_DISPATCHED:
        job_event = tx.get_event(job.event_id)
        if job_event is not None:
            run = tx.get_run_by_key(run_key(job_event, runs_of(job)))
    attempt = tx.last_attempt(key)
    if attempt is not None and attempt.event_id == event.event_id:
        attempt = None  # never the event's own occurrence
    return KeyFacts(key, work, instance, job, run, attempt, tx.get_finding_by_key(key))


def _superseded_of(tx: Tx, loops: set[str]) -> dict[str, tuple[Superseded, ...]]:
    """The open proposals of some loops, by loop, each with its occurrence and its
    event's correlation."""
    if not loops:
        return {}
    proposals = tx.open_proposals_of(loops)
    if not proposals:
        return {}
    ids = [p.event_id for p in proposals]
    events = tx.events_by_ids(ids)
    occurrences = tx.occurrences_by_ids(ids)
    found: defaultdict[str, list[Superseded]] = defaultdict(list)
    for proposal in proposals:
        if proposal.loop is None:
            continue
        event = events.get(proposal.event_id)
        correlation = (event.correlation_id or event.event_id) if event else proposal.event_id
        occurrence = occurrences.get(proposal.event_id)
        found[proposal.loop].append(Superseded(proposal, occurrence, correlation))
    return {loop: tuple(items) for loop, items in found.items()}


def counted_active(tx: Tx, loop: Loop, repo: str | None) -> tuple[OccurrenceRecord, ...]:
    """The loop's active occurrences for `repo`, read when they count: the loop has an
    active limit, or its triage may read the number (`active`); else none."""
    if not counts_active(loop):
        return ()
    return tuple(tx.active_occurrences(loop.name, repo, ACTIVE))


def history(
    tx: Tx,
    loop: Loop,
    event: EventRecord,
    repo: str | None,
    state: LoopState | None,
    at: str,
    *,
    moving: bool = False,
) -> History:
    """The loop's last outcome, candidate findings, the day's budget use, its previous
    concluded occurrence (since an operator last resumed it) and its occurrence count.
    `moving`: the event's occurrence is about to be updated (a resumed retry), so it
    counts among the loop's latest 50 occurrences whatever it was before."""
    last_run = tx.last_loop_run(loop.name)
    usage = tx.budget_usage(loop.name, repo, history_since(at))
    resumed = last_resumed(tx, loop.name)
    latest = tx.list_occurrences(50, loop=loop.name)
    if moving and all(o.event_id != event.event_id for o in latest):
        latest = latest[:49]
    previous = next(
        (
            o
            for o in latest
            if o.event_id != event.event_id
            and o.state in TERMINAL
            and o.decision is not None
            # a stop or an operator's cancel concludes nothing
            and o.state != OccurrenceState.CANCELLED
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
        findings=len(tx.list_findings(1000, status=FindingStatus.CANDIDATE, loop=loop.name)),
        usage=usage,
        previous=previous,
        counted=counted,
    )


def last_resumed(tx: Tx, loop: str) -> str | None:
    """When an operator last resumed the loop (its journal), if ever."""
    entries = tx.list_journal(1000, 0, Entity.LOOP, loop)
    return next((e.at for e in reversed(entries) if e.action == JournalAction.RESUMED), None)


def settle_facts(tx: Tx, rules: RuleSet, run: RunRecord) -> SettleFacts:
    """What `engine.core.settle.settle` reads for `run`, read after the run's own row
    was written: its occurrence and event, and for an occurrence the run may end what
    its conclusion reads (the run is its next settled one)."""
    occ = tx.get_occurrence(run.event_id)
    event = tx.get_event(run.event_id)
    if occ is None or occ.state != OccurrenceState.WORK_DISPATCHED:
        return SettleFacts(occ, event)
    return SettleFacts(occ, event, ending(tx, rules, occ, event, runs_of(occ) + 1))


def resume_facts(tx: Tx, rules: RuleSet, occ: OccurrenceRecord, at: str) -> ResumeFacts:
    """What `engine.core.resume.resume` reads for a waiting occurrence: its event and
    first run, the routed definition, and the facts triage reads afresh (the active
    occurrences but itself; the history as it will be once it moved to triage)."""
    event = tx.get_event(occ.event_id)
    first = tx.get_run_by_key(idempotency_key(event)) if event is not None else None
    done = ending(tx, rules, occ, event, runs_of(occ), completes=False)
    if event is None or first is None:
        return ResumeFacts(event, first, ending=done)
    decision = tx.get_decision(event.event_id)
    definition = decision.definition if decision is not None else None
    loop = loop_of(event, event.admitted_by, rules)
    if loop is None:
        return ResumeFacts(event, first, definition, ending=done)
    state = tx.get_loop_state(loop.name)
    return ResumeFacts(
        event,
        first,
        definition,
        state,
        tx.loop_in_flight(loop.name),
        max(0, len(counted_active(tx, loop, occ.repo)) - 1),  # not itself
        history(tx, loop, event, occ.repo, state, at, moving=True) if needs_history(loop) else None,
        done,
        key_facts(tx, loop, event),
    )


def ending(
    tx: Tx,
    rules: RuleSet,
    occ: OccurrenceRecord,
    event: EventRecord | None,
    settled: int,
    *,
    completes: bool = True,
) -> Ending:
    """What the conclusion of `occ` reads once `settled` of its runs have settled: its
    loop's state, the run the loops `after` it filter on (the last settled one), and,
    when it may end `completed`, the state last notified for its loop and repo."""
    loop = rules.loops.get(occ.loop) if occ.loop else None
    state = tx.get_loop_state(loop.name) if loop is not None else None
    if loop is None or state is None:
        return Ending()
    run = None
    if event is not None and waited_for(rules, occ.loop):
        run = tx.get_run_by_key(run_key(event, max(settled - 1, 0)))
    key = dedup_key(Entity.OCCURRENCE, loop.name, occ.repo)
    return Ending(
        state,
        tx.last_notification_state(key) if completes else None,
        (event.correlation_id or event.event_id) if event is not None else occ.event_id,
        run,
    )
