"""What a run's result does to its occurrence, pure (docs/architecture.md, "Decide
purely, apply once"): `settle(finished, rules, facts, machines, at) -> Plan`, in the
shape of `engine.core.decide.decide`. `facts` is read by
`engine.service.facts.settle_facts` after the run's own row was written and before
anything here is decided; `engine.service.apply` writes the plan.

Settling verifies the result, classifies it (docs/occurrences.md, "Failure classes"),
and so completes or fails the occurrence, or lets it wait for a retry or a conflict;
the use is settled from the run's time and the reservation released. An occurrence
that ends is concluded (`conclude`: counters, notifications, the circuit breaker, a
coalesced follow-up, the loops `after` it), and its run's outcome resolves through the
chain rules into outbox events. A run whose occurrence waits chains nothing yet."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from engine.core import chains
from engine.core.authority import definition_of
from engine.core.decide import conclusion, envelope_of
from engine.core.decisions import Actor
from engine.core.effects import Effect, Journal, Outbox, Plan, Transition
from engine.core.envelope import iso, parse_iso
from engine.core.policy import FailureClass, backoff_delay, classify
from engine.core.records import EventRecord, LoopState, OccurrenceRecord, RunRecord
from engine.core.ruleset import DefinitionRef, Loop, RuleSet
from engine.core.states import OccurrenceState, OccurrenceTrigger
from engine.core.ticks import idempotency_key

# A conflict waits at most this many times before the occurrence times out.
MAX_CONFLICT_WAITS = 20


class Machines(Protocol):
    """The step of an occurrence whose work was dispatched (engine.core.machines.Lifecycle)."""

    def dispatched(self, state: str, trigger: str) -> str: ...


# ---- inputs and facts ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Chain:
    """A recorded result to resolve through the chain rules once the occurrence ends;
    `now` is when its chained events occur."""

    result: dict[str, Any]
    now: datetime


@dataclass(frozen=True, slots=True)
class Finished:
    """What happened to a run, as the caller that wrote its row saw it: its `state`
    now, the outcome, whether the adapter (not the work) failed, and why it ended when
    no result says so: an operator's or the recovery's cancel (`cancelled_by`), the
    dirty-workspace guard (`refused`, with `error`), the authority check
    (`unauthorized`, its reason). `run` is the row as it was before it finished."""

    run: RunRecord
    state: str
    outcome: str | None
    adapter_failed: bool
    cancelled_by: str | None = None
    refused: bool = False
    error: str | None = None
    unauthorized: str | None = None
    chain: Chain | None = None  # resolve the outcome's chains (a recorded result only)


@dataclass(frozen=True, slots=True)
class Ending:
    """What the conclusion of one occurrence reads (engine.core.decide.conclusion)."""

    state: LoopState | None = None  # its loop's durable state; None: nothing is counted
    last_notified: str | None = None  # the state last notified for the loop and repo
    correlation: str = ""  # the correlation of its event
    run: RunRecord | None = None  # its last settled run, for the loops `after` it


@dataclass(frozen=True, slots=True)
class SettleFacts:
    """Everything settling one run reads, as it was when it was read."""

    occurrence: OccurrenceRecord | None = None  # the run's occurrence
    event: EventRecord | None = None  # the run's event (its chains resolve against it)
    ending: Ending = field(default_factory=Ending)  # for an occurrence the run ends


def runs_of(occ: OccurrenceRecord) -> int:
    """How many of the occurrence's runs have settled: the next run's number (its
    idempotency key is the first run's, `#N` from the second on)."""
    return int((occ.used or {}).get("runs", 0))


def run_key(event: EventRecord, number: int) -> str:
    """The idempotency key of the event's run `number` (0: the first)."""
    return idempotency_key(event) + (f"#{number}" if number else "")


def waited_for(rules: RuleSet, loop: str | None) -> bool:
    """Whether a loop runs `after` this one: its conclusion then reads the run's outcome.
    Work outside any loop (`None`) is followed by none, though a loop that runs after no
    other has no upstream either."""
    return loop is not None and any(
        other.trigger.upstream == loop for other in rules.loops.values()
    )


# ---- settling -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ends:
    """The occurrence concludes by `trigger` (through `verifying` when `verified`)."""

    trigger: OccurrenceTrigger
    cls: FailureClass | None
    note: str
    verified: bool = False


@dataclass(frozen=True, slots=True)
class Waits:
    """The occurrence waits `delay` seconds for its `attempt`, journaled `action`."""

    cls: FailureClass
    delay: int
    attempt: int
    action: str
    note: str
    evidence: dict[str, Any] = field(default_factory=dict)


def settle(
    finished: Finished, rules: RuleSet, facts: SettleFacts, machines: Machines, at: str
) -> Plan:
    """The plan for a run that finished, failed, was cancelled or refused: its
    occurrence moved (only one still `work_dispatched`), then its chains, unless the
    occurrence waits for another run."""
    occ = facts.occurrence
    if occ is None or occ.state != OccurrenceState.WORK_DISPATCHED:
        return tuple(chained(rules, finished, facts.event))
    verdict = judged(finished, rules, occ)
    used = used_after(occ, finished.run, at)
    if isinstance(verdict, Waits):
        return tuple(_wait(machines, occ, verdict, used, at))
    steps = _conclude(rules, machines, occ, verdict, used, facts.ending, at)
    return (*steps, *chained(rules, finished, facts.event))


def judged(finished: Finished, rules: RuleSet, occ: OccurrenceRecord) -> Ends | Waits:
    """What the run's end does to its occurrence (docs/occurrences.md): a cancel
    cancels, a refusal waits for a person, else by the failure class of the result."""
    run = finished.run
    if finished.cancelled_by is not None:
        return Ends(OccurrenceTrigger.CANCEL, None, f"cancelled by {finished.cancelled_by}")
    if finished.refused:  # the dirty-workspace guard: a person decides, nothing is retried
        note = f"workspace refused: {finished.error or run.error or 'see the run'}"
        return Ends(OccurrenceTrigger.ESCALATE, None, note)
    if finished.unauthorized is not None:  # the authority check: a person looks
        return Ends(OccurrenceTrigger.ESCALATE, None, finished.unauthorized)
    definition = definition_of(rules, run.definition)
    if definition is None:
        cls = FailureClass.INFRASTRUCTURE_FAILURE
    else:
        cls = classify(definition, finished.outcome, finished.adapter_failed)
    mutating = definition is None or definition.mutating
    if (
        cls is FailureClass.INFRASTRUCTURE_FAILURE
        and mutating
        and "lease expired" in (run.error or "")
    ):
        # a mutating run lost mid-way may have changed things: a person looks first
        note = "a mutating run's lease expired: it may have half-run; look before retrying"
        return Ends(OccurrenceTrigger.ESCALATE, cls, note)
    return _classed(finished, rules.loops.get(run.loop) if run.loop else None, occ, cls)


def _classed(
    finished: Finished, loop: Loop | None, occ: OccurrenceRecord, cls: FailureClass
) -> Ends | Waits:
    outcome = finished.outcome
    if cls in (FailureClass.SUCCESS, FailureClass.NOTHING_TO_DO):
        return Ends(OccurrenceTrigger.COMPLETE, cls, "", verified=True)
    if cls is FailureClass.INFRASTRUCTURE_FAILURE and loop is not None:
        return _retry(loop, occ, cls)
    if cls is FailureClass.CONFLICT and loop is not None:
        return _conflict(loop, occ, cls)
    if cls is FailureClass.EXTERNAL_BLOCKER:
        return Ends(OccurrenceTrigger.BLOCK, cls, f"external blocker ({outcome})")
    return Ends(OccurrenceTrigger.FAIL, cls, f"{cls.value} ({outcome or finished.state})")


def _retry(loop: Loop, occ: OccurrenceRecord, cls: FailureClass) -> Ends | Waits:
    """An infrastructure failure is retried with backoff while the budget allows."""
    retries = loop.policy.budget.retries_per_occurrence
    if occ.attempt < retries:
        delay = backoff_delay(loop.policy.backoff, occ.attempt)
        note = f"infrastructure failure: retry {occ.attempt + 1} of {retries} in {delay}s"
        return Waits(cls, delay, occ.attempt + 1, "retry_scheduled", note)
    note = f"infrastructure failure after {retries} retries: the retry budget is used up"
    return Ends(OccurrenceTrigger.EXHAUST_BUDGET, cls, note)


def _conflict(loop: Loop, occ: OccurrenceRecord, cls: FailureClass) -> Ends | Waits:
    """A conflict waits for the resource, a bounded number of times, using no retry."""
    waits = int((occ.evidence or {}).get("conflict_waits", 0))
    if waits >= MAX_CONFLICT_WAITS:
        return Ends(OccurrenceTrigger.TIME_OUT, cls, "still in conflict after waiting")
    delay = loop.policy.backoff.base_seconds
    note = f"scope or resource conflict: waiting {delay}s (no retry used)"
    return Waits(cls, delay, occ.attempt, "conflict_wait", note, {"conflict_waits": waits + 1})


def used_after(occ: OccurrenceRecord, run: RunRecord, at: str) -> dict[str, int]:
    """The occurrence's use so far plus this run's: a run that never started (cancelled
    in the queue) used nothing, but still takes its number (its key is spent). Time is
    counted exactly, in milliseconds (`wall_clock_ms`), so short runs add up;
    `wall_clock_seconds` is the same total in whole seconds (what older rows hold)."""
    before = occ.used or {}
    ms = 0
    if run.started_at is not None:
        elapsed = parse_iso(at) - parse_iso(run.started_at)
        ms = max(0, round(elapsed.total_seconds() * 1000))
    total = _ms_of(before) + ms
    return {
        "runs": int(before.get("runs", 0)) + 1,
        "wall_clock_seconds": total // 1000,
        "wall_clock_ms": total,
    }


def _ms_of(used: dict[str, Any]) -> int:
    """Milliseconds of wall clock in a `used` record: `wall_clock_ms`, or the whole
    seconds of a record written before it was kept."""
    ms = used.get("wall_clock_ms")
    if isinstance(ms, int) and not isinstance(ms, bool):
        return ms
    return int(used.get("wall_clock_seconds", 0)) * 1000


def _wait(
    machines: Machines, occ: OccurrenceRecord, waits: Waits, used: dict[str, int], at: str
) -> list[Effect]:
    """Through verifying back to waiting: the use settled, the reservation released,
    the retry time set; journaled `retry_scheduled` or `conflict_wait`."""
    verifying = machines.dispatched(occ.state, OccurrenceTrigger.VERIFY)
    state = machines.dispatched(verifying, OccurrenceTrigger.RETRY)
    retry_at = iso(parse_iso(at) + timedelta(seconds=waits.delay))
    changes = {
        "state": state,
        "used": used,
        "reserved": None,
        "attempt": waits.attempt,
        "retry_at": retry_at,
        "failure_class": waits.cls.value,
        "evidence": {**(occ.evidence or {}), **waits.evidence},
    }
    data = {"retryAt": retry_at, "attempt": waits.attempt, "class": waits.cls.value}
    return [
        Transition(occ.event_id, occ.state, changes),
        Journal(
            "occurrence",
            occ.event_id,
            waits.action,
            Actor.SYSTEM,
            from_state=occ.state,
            to_state=state,
            note=waits.note,
            data=data,
        ),
    ]


def _conclude(
    rules: RuleSet,
    machines: Machines,
    occ: OccurrenceRecord,
    ends: Ends,
    used: dict[str, int],
    ending: Ending,
    at: str,
) -> list[Effect]:
    failure = ends.cls.value if ends.cls else None
    via = machines.dispatched(occ.state, OccurrenceTrigger.VERIFY) if ends.verified else None
    return conclude(
        rules,
        machines,
        occ,
        ends.trigger,
        at,
        ends.note,
        ending,
        cls=ends.cls,
        via=via,
        data={"class": failure},
        used=used,
        failure_class=failure,
    )


def conclude(
    rules: RuleSet,
    machines: Machines,
    occ: OccurrenceRecord,
    trigger: OccurrenceTrigger,
    at: str,
    note: str,
    ending: Ending,
    *,
    cls: FailureClass | None = None,
    via: str | None = None,
    data: dict[str, Any] | None = None,
    counts: bool = True,
    **changes: Any,
) -> list[Effect]:
    """End an occurrence by `trigger` (from `via`, when it passed through a state on
    the way): its reservation released, journaled `concluded`, then what its end leads
    to (`ended`; `counts=False`: neither a failure nor a no-op of the loop). `changes`
    are further columns to set."""
    state = machines.dispatched(via or occ.state, trigger)
    columns = {"state": state, "reserved": None, "finished_at": at, **changes}
    journal = Journal(
        "occurrence",
        occ.event_id,
        "concluded",
        Actor.SYSTEM,
        from_state=occ.state,
        to_state=state,
        note=note,
        data=data,
    )
    then = ended(rules, replace(occ, state=state), cls, at, note, ending, counts=counts)
    return [Transition(occ.event_id, occ.state, columns), journal, *then]


def ended(
    rules: RuleSet,
    occ: OccurrenceRecord,
    cls: FailureClass | None,
    at: str,
    note: str,
    ending: Ending,
    *,
    counts: bool = True,
) -> list[Effect]:
    """After an occurrence reached a terminal state, in its loop (none outside one):
    `engine.core.decide.conclusion` over what `ending` read."""
    loop = rules.loops.get(occ.loop) if occ.loop else None
    if loop is None or ending.state is None:
        return []
    return conclusion(
        rules,
        loop,
        occ,
        cls,
        at,
        note,
        ending.state,
        ending.last_notified,
        ending.correlation,
        ending.run,
        counts=counts,
        signals=occ.signals,
    )


# ---- chains -------------------------------------------------------------------------------


def chained(rules: RuleSet, finished: Finished, event: EventRecord | None) -> list[Effect]:
    """A recorded outcome through the chain rules: each chained event into the outbox
    (actor `chain`), journaled on the run with the rule, a `stop` and every failed
    expression too."""
    chain, run, outcome = finished.chain, finished.run, finished.outcome
    definition = definition_of(rules, run.definition)
    if chain is None or outcome is None or definition is None or event is None:
        return []
    ref = DefinitionRef(definition.id, definition.version)
    resolved = chains.resolve(
        rules, ref, outcome, envelope_of(event), dict(chain.result), run.run_id, chain.now
    )
    if not resolved.matched:
        return []
    out: list[Effect] = []
    if resolved.stop:
        note = f"{outcome} stops ({resolved.rule})"
        out.append(Journal("run", run.run_id, "chain_stopped", Actor.CHAIN, note=note))
    for envelope in resolved.envelopes:
        out.append(Outbox(envelope.model_dump(mode="json"), run.run_id, Actor.CHAIN))
        data = {"eventId": envelope.eventId, "rule": resolved.rule}
        note = f"{outcome} -> {envelope.type}"
        out.append(Journal("run", run.run_id, "chained", Actor.CHAIN, note=note, data=data))
    for problem in resolved.errors:
        out.append(Journal("run", run.run_id, "chain_error", Actor.CHAIN, note=problem))
    return out
