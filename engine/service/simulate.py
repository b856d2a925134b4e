"""`engine simulate` (docs/simulate.md): the engine run over a window of virtual time,
on an in-memory store, to predict what it will decide before it does.

Nothing here decides anything of its own: the virtual clock moves from one instant at
which something is due to the next, and at each one the real runtime loop runs
(`Service.pump`: the scheduler's pass, retries, chained events, the batched writer and
`engine.core.decide`), proposals are approved as the scenario says (as an operator
would, through `Service.approve`), and queued runs are claimed, started and finished
with the scenario's result (as a worker would, through the same service calls). What
the run leaves in the store is then read back as the prediction
(`engine.core.simulation`).

Instants, in order: the next slot the scheduler has due, a retry that falls due, an
approval that falls due (`after=DUR`), a restart, and the end of a sleep. While the
engine is asleep nothing runs; at its end the scheduler's next pass finds what it
missed, and applies the loop's catch-up, as a suspended machine's engine does. A
restart is a new process on the same data: a new scheduler that rebuilds its heap
from the store, and the recovery a start runs."""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from engine.bootstrap import read_only_copy
from engine.core.decisions import Entity, operator_actor
from engine.core.envelope import iso, parse_iso
from engine.core.policy import FailureClass, classify
from engine.core.records import LoopState, RunRecord
from engine.core.registry import Definition
from engine.core.ruleset import RuleSet
from engine.core.simulation import Records, prediction
from engine.core.states import ProposalState, RunState
from engine.core.timefmt import given_instant
from engine.core.validation import Validators
from engine.errors import BadRequest, Conflict, NotFound
from engine.service import Service
from engine.service.context import Runtime
from engine.service.executions import Execution
from engine.store.memory import MemoryDatabase, MemoryStore
from engine.store.ports import Store, Tx

# Who approves and works in a simulation: a named operator (so a human-only proposal
# can be approved, as a person would), and one worker.
OPERATOR = operator_actor("simulate")
WORKER = "simulate"
LEASE_SECONDS = 3600.0
MANY = 1_000_000_000  # every row: a simulation's store holds only what it made
SUCCEED = "succeed"
FAIL = "fail"


@dataclass(frozen=True)
class Scenario:
    """What is simulated: the window, when the engine sleeps and restarts, how
    proposals are answered and how runs end, and which loops run."""

    start: datetime
    end: datetime
    asleep: tuple[tuple[datetime, datetime], ...] = ()
    restarts: tuple[datetime, ...] = ()
    approve_after: timedelta | None = None  # None: never; zero: as soon as proposed
    runs: str = SUCCEED  # succeed, fail, or the outcome every run reports
    loops: frozenset[str] = frozenset()  # only these run (none named: all)

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise BadRequest("--to is before --from", reason="bad_window")
        for first, last in self.asleep:
            if last <= first:
                raise BadRequest(
                    f"--asleep {iso(first)}..{iso(last)}: its end is not after its start",
                    reason="bad_window",
                )

    def awake(self, at: datetime) -> datetime:
        """`at`, or the end of the sleep it falls in (sleeps may touch or overlap)."""
        moved = True
        while moved:
            moved = False
            for first, last in self.asleep:
                if first <= at < last:
                    at, moved = last, True
        return at


class VirtualClock:
    """The runtime's clock: where the simulation has put it."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Simulation:
    """A finished simulation: the store it left, and what was there before it began."""

    runtime: Runtime
    scenario: Scenario
    seeded_events: frozenset[str]

    def records(self) -> Records:
        """What the simulation made, in the store's order (nothing the seed held)."""
        start = iso(self.scenario.start)
        with self.runtime.store.read() as tx:
            events = [e for e in tx.list_events(MANY) if e.event_id not in self.seeded_events]
            events.sort(key=lambda e: (e.admitted_at, e.event_id))
            ids = {e.event_id for e in events}
            decisions = {
                d.event_id: d for e in events if (d := tx.get_decision(e.event_id)) is not None
            }
            proposals = [p for p in tx.list_proposals(MANY, None) if p.event_id in ids]
            runs = [r for r in tx.list_runs(MANY, None) if r.event_id in ids]
            skips = [
                s
                for state in tx.list_loop_states()
                for s in tx.list_skips(state.loop, "")
                if s.recorded_at >= start
            ]
            journal = [e for e in tx.list_journal(MANY, 0, Entity.LOOP, None) if e.at >= start]
        return Records(events, decisions, proposals, runs, skips, journal)

    def prediction(self) -> dict[str, Any]:
        """The document of `engine simulate --json` (engine.core.simulation)."""
        doc = prediction(self.records(), self.runtime.rules, self.scenario.loops)
        doc["window"] = {"from": iso(self.scenario.start), "to": iso(self.scenario.end)}
        return doc


def only(rules: RuleSet, loops: Iterable[str]) -> RuleSet:
    """The rules with every loop but `loops` switched off (NotFound for a name that
    is not a loop); all of them when none is named."""
    wanted = set(loops)
    if not wanted:
        return rules
    unknown = sorted(wanted - set(rules.loops))
    if unknown:
        raise NotFound(f"no loop {', '.join(repr(n) for n in unknown)} in the rules")
    kept = {
        name: loop if name in wanted else replace(loop, enabled=False)
        for name, loop in rules.loops.items()
    }
    return replace(rules, loops=kept)


def simulate(
    rules: RuleSet,
    scenario: Scenario,
    artifacts: Path,
    database: MemoryDatabase | None = None,
) -> Simulation:
    """Run the engine over the scenario's window on a memory store (on `database`, a
    seed, when given) and return what it left."""
    rules = only(rules, scenario.loops)
    clock = VirtualClock(scenario.start)
    store = MemoryStore(database)
    with store.read() as tx:
        seeded = frozenset(e.event_id for e in tx.list_events(MANY))
    rt = Runtime(store, rules, Validators.build(rules), clock, artifacts)
    driver = _Driver(rt, scenario, clock)
    with _few_collections():
        driver.run()
    return Simulation(rt, scenario, seeded)


@contextmanager
def _few_collections() -> Iterator[None]:
    """The cyclic garbage collector run less often while the simulation makes its
    records (a year is millions of short-lived objects and hardly a cycle: at the
    default threshold collecting costs a fifth of the time, bench/simulate.py), and
    put back as it was."""
    before = gc.get_threshold()
    gc.freeze()  # what exists already (the rules, the modules) is never collected again
    gc.set_threshold(50_000, 20, 100)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


class _Driver:
    def __init__(self, rt: Runtime, scenario: Scenario, clock: VirtualClock) -> None:
        self.rt = rt
        self.scenario = scenario
        self.clock = clock
        self.service = self._process()
        self.restarts = sorted(r for r in scenario.restarts if scenario.start < r <= scenario.end)
        self.results: dict[str, Execution] = {}
        self.pending: dict[str, datetime] = {}  # open proposals by id: when to approve

    def _process(self) -> Service:
        """A new engine process: its scheduler starts from the store, and it notifies
        nobody."""
        return Service(self.rt)  # no sinks: serve's notifier is not simulated

    def run(self) -> None:
        at = self.scenario.awake(self.scenario.start)
        while at <= self.scenario.end:
            self.clock.now = at
            if self.restarts and self.restarts[0] <= at:
                while self.restarts and self.restarts[0] <= at:
                    self.restarts.pop(0)
                self.service = self._process()
            self._step()
            nxt = self._next(at)
            if nxt is None:
                return
            at = self.scenario.awake(nxt)

    def _step(self) -> None:
        """One instant: the runtime loop, then the operator and the worker, until
        neither has anything left to do at this instant."""
        while True:
            self.service.pump()
            approved = self._approve()
            worked = self._work()
            if not approved and not worked:
                return

    def _next(self, at: datetime) -> datetime | None:
        """The next instant after `at` at which something is due."""
        candidates = [
            self.service.scheduler.next_due(),
            self.restarts[0] if self.restarts else None,
            min(self.pending.values(), default=None),
            self._next_retry(),
        ]
        due = [c for c in candidates if c is not None]
        if not due:
            return None
        nxt = min(due)
        return nxt if nxt > at else at + timedelta(microseconds=1)

    def _next_retry(self) -> datetime | None:
        """When the first waiting retry falls due, if it does within the window."""
        with self.rt.store.read() as tx:
            first = tx.due_retries(iso(self.scenario.end), 1)
        return parse_iso(first[0].retry_at) if first and first[0].retry_at else None

    # ---- the operator -------------------------------------------------------------
    def _approve(self) -> int:
        """Approve every open proposal whose time has come; the number approved."""
        after = self.scenario.approve_after
        if after is None:
            return 0
        now = self.clock.now
        for proposal in self.service.proposals(MANY, ProposalState.OPEN):
            if proposal.proposal_id not in self.pending:
                self.pending[proposal.proposal_id] = parse_iso(proposal.created_at) + after
        approved = 0
        for proposal_id, due in sorted(self.pending.items(), key=lambda item: item[1]):
            if due > now:
                continue
            del self.pending[proposal_id]
            try:
                self.service.approve(proposal_id, OPERATOR, "simulated approval")
            except Conflict:  # superseded, expired or answered meanwhile
                continue
            approved += 1
        return approved

    # ---- the worker -----------------------------------------------------------------
    def _work(self) -> int:
        """Claim, start and finish every queued run, at this instant; the number."""
        done = 0
        while (run := self.service.claim(WORKER, LEASE_SECONDS)) is not None:
            done += 1
            self.service.start(run, WORKER)
            current = self.service.run(run.run_id)
            if current.state == RunState.RUNNING:
                self.service.finish(current, WORKER, self._execution(current))
        return done

    def _execution(self, run: RunRecord) -> Execution:
        cached = self.results.get(run.definition)
        if cached is None:
            cached = self.results[run.definition] = self._result_of(run)
        return cached

    def _result_of(self, run: RunRecord) -> Execution:
        answer = self.scenario.runs
        if answer == FAIL:
            return Execution(result=None, error="the simulated run failed")
        definition = next(
            (d for d in self.rt.rules.definitions.values() if d.ref == run.definition), None
        )
        outcome = answer if answer != SUCCEED else _success(self.rt, definition)
        return Execution(result={"outcome": outcome, "summary": "simulated"})


def _success(rt: Runtime, definition: Definition | None) -> str:
    """The first of the definition's outcomes that counts as a success
    (engine.core.policy.classify) and that a bare `{"outcome": X}` result fits its
    output contract with; else its first outcome."""
    if definition is None:
        return "OK"
    for outcome in definition.outcomes:
        result = {"outcome": outcome, "summary": "simulated"}
        if classify(definition, outcome, adapter_failed=False) is FailureClass.SUCCESS and (
            not rt.validators.contract_errors(definition.output_contract, result)
        ):
            return outcome
    return definition.outcomes[0]


def parse_span(text: str) -> tuple[datetime, datetime]:
    """`A..B` (`--asleep`) as two times; BadRequest otherwise."""
    first, sep, last = text.partition("..")
    if not sep:
        raise BadRequest(f"--asleep '{text[:60]}' is not a span: write A..B", reason="bad_time")
    return parse_time(first, "--asleep"), parse_time(last, "--asleep")


def parse_time(text: str, option: str) -> datetime:
    """An ISO-8601 time with an offset, in UTC; BadRequest otherwise."""
    moment = given_instant(text, option)
    if moment is None:
        raise BadRequest(
            f"{option} '{text[:60]}' is not a time: write ISO-8601 with an offset, "
            "such as 2026-12-01T03:00:00Z",
            reason="bad_time",
        )
    return moment


def seeded(source: Store) -> MemoryDatabase:
    """A memory database holding the durable records of `source` (read in one
    snapshot, through the store's own reads and writes, never written): events and
    their decisions, occurrences, proposals, runs, the journal, each loop's state and
    skipped slots, findings, and the chained events not published yet. Notifications,
    a watch's observations and the kept GitHub deliveries stay behind: a simulation
    sends none, polls none and translates no delivery again."""
    database = MemoryDatabase()
    with source.read() as old, MemoryStore(database).write() as new:
        events = sorted(old.list_events(MANY), key=lambda e: (e.admitted_at, e.event_id))
        new.insert_events(events)
        new.insert_decisions([d for e in events if (d := old.get_decision(e.event_id)) is not None])
        for occurrence in sorted(old.list_occurrences(MANY), key=lambda o: o.updated_at):
            new.open_occurrence(occurrence)
        new.insert_proposals(old.list_proposals(MANY, None))
        for run in old.list_runs(MANY, None):
            new.insert_run(run)
        new.append_journals(old.list_journal(MANY))
        for state in old.list_loop_states():
            _seed_loop(new, state)
            new.insert_skips(old.list_skips(state.loop, ""))
        for finding in old.list_findings(MANY, None):
            new.upsert_finding(finding)
        for item in old.pending_outbox(MANY):
            new.enqueue_outbox(item.event, item.origin_run, item.actor, item.created_at)
    return database


def _seed_loop(tx: Tx, state: LoopState) -> None:
    at = state.updated_at
    tx.set_loop_enabled(state.loop, state.enabled, state.enabled_since or at, at)
    if state.cursor is not None:
        tx.advance_cursor(state.loop, state.cursor, state.last_slot, at)
    if state.paused:
        tx.set_paused(state.loop, True, state.pause_note, state.paused_by, at)
    tx.set_loop_counters(
        state.loop, state.consecutive_failures, state.nothing_streak, state.quiet_until, at
    )


def seed_from(db: str) -> MemoryDatabase:
    """The records of the database `db` in a memory database; `db` is never written
    (engine.bootstrap.read_only_copy)."""
    with read_only_copy(db) as source:
        return seeded(source)
