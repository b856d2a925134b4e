"""The runtime's safety invariants under random use (a hypothesis state machine): the
real Service on a real SQLite file over tests/data/trust, driven by random admissions
from every kind of caller (forged ones too), approvals and rejections by humans and
by reserved names, runs executed, runs abandoned by a killed worker, restarts and
clock jumps. After every step, from the durable records:

- a watched loop never runs unapproved: every run of it was approved by a person;
- nothing says `operator:` unless a human approved: each operator approval in the
  journal is one this test made, as that operator;
- a human-only type is approved by a named human only;
- each slot is admitted at most once (one tick per loop and slot);
- a loop's `approval auto` runs its real ticks only: a run approved by `schedule` is a
  tick the scheduler, a host timer, a person or a trigger that waits made, never an
  envelope posing as one;
- a trigger that waits (`on_event`, `after`) fires its loop once per cause, and only
  the runtime makes those ticks."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from engine.bootstrap import open_service
from engine.core.decisions import is_human
from engine.core.envelope import Envelope
from engine.errors import EngineError
from engine.loading import Paths
from engine.service import Service
from engine.worker import adapters_for, work_once

ROOT = Path(__file__).resolve().parent.parent.parent
TREE = ROOT / "tests" / "data" / "trust"
PATHS = Paths(TREE / "loops", TREE / "registry", TREE / "config")
START = datetime(2026, 12, 1, 8, 59, 59, tzinfo=UTC)
WATCHED = frozenset({"watched", "on-request"})
HUMAN_ONLY_TYPES = frozenset({"trust.ship.requested"})
LOOPS = ("watched", "auto", "auto-mutating", "host")
TYPES = {
    "watched": "trust.watched.tick",
    "auto": "trust.auto.tick",
    "auto-mutating": "trust.act.tick",
    "host": "trust.host.tick",
    "on-request": "trust.review.tick",
    "after-act": "trust.after.tick",
}
# Who may call `admit`, and with what the HTTP layer would name them.
CALLERS = ("bridge", "inject", "github", "chain", "operator:alice", "operator:bob")
# Who tries to approve: people, and the names nobody may take.
DECIDERS = ("operator:alice", "operator:bob", "schedule", "system", "operator:schedule", "chain")


class Runtime(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="engine-safety-"))
        self.db = str(self.tmp / "engine.db")
        self.now = START
        self.approvals: set[tuple[str, str]] = set()  # (proposal, operator actor) we made
        self.ids = 0
        self.service = self._open()
        self.service.pump()

    def _open(self) -> Service:
        return open_service(self.db, PATHS, clock=lambda: self.now)

    def teardown(self) -> None:
        self.service.rt.store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- what happens ---------------------------------------------------------------

    @rule(minutes=st.integers(min_value=1, max_value=600))
    def time_passes(self, minutes: int) -> None:
        """The clock moves on (minutes to many hours) and serve's loop runs."""
        self.now += timedelta(minutes=minutes)
        self.service.pump()

    @rule(
        caller=st.sampled_from(CALLERS),
        source=st.sampled_from(
            ("schedule", "bridge", "manual", "github", "ci", "on_event", "on-event", "after")
        ),
        loop=st.sampled_from((*LOOPS, "on-request", "after-act", "nope")),
        kind=st.sampled_from(("tick", "plain", "ship")),
        hours=st.integers(min_value=-3, max_value=3),
    )
    def someone_admits(self, caller: str, source: str, loop: str, kind: str, hours: int) -> None:
        """An envelope arrives from any caller, claiming any source, loop and slot."""
        self.ids += 1
        slot = self.now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=hours)
        text = slot.strftime("%Y-%m-%dT%H:%M:%SZ")
        event_type = {"tick": TYPES.get(loop, "trust.plain.requested")}.get(
            kind, f"trust.{kind}.requested"
        )
        envelope = Envelope(
            eventId=f"e-{self.ids}",
            type=event_type,
            source=source,
            occurredAt=self.now,
            payload={"loop": loop, "slot": text, "cadenceSeconds": 3600, "skippedSlots": 0},
        )
        with contextlib.suppress(EngineError):  # refused (a slot not come...): nothing written
            self.service.admit(envelope, caller)
        self.service.pump()

    @rule(decider=st.sampled_from(DECIDERS), data=st.data())
    def someone_approves(self, decider: str, data: Any) -> None:
        """Anyone tries to approve an open proposal; only a person can."""
        open_ = self.service.proposals(100, "open")
        if not open_:
            return
        proposal = data.draw(st.sampled_from(open_))
        try:
            self.service.approve(proposal.proposal_id, decider, "random")
        except EngineError:
            return
        assert is_human(decider), f"{decider} approved {proposal.proposal_id}"
        self.approvals.add((proposal.proposal_id, decider))

    @rule(data=st.data())
    def someone_rejects(self, data: Any) -> None:
        open_ = self.service.proposals(100, "open")
        if open_:
            proposal = data.draw(st.sampled_from(open_))
            with contextlib.suppress(EngineError):
                self.service.reject(proposal.proposal_id, "operator:bob", "no")

    @rule()
    def the_worker_runs_one(self) -> None:
        adapters = adapters_for(self.db, PATHS)
        asyncio.run(work_once(self.service, "w1", 60.0, adapters))

    @rule()
    def a_worker_dies_holding_a_run(self) -> None:
        """A claim whose worker is killed before it starts; its lease expires later."""
        self.service.claim("doomed", 60.0)

    @rule()
    def serve_restarts(self) -> None:
        self.service.rt.store.close()
        self.service = self._open()
        self.service.pump()

    @precondition(lambda self: self.now > START + timedelta(hours=2))
    @rule(minutes=st.integers(min_value=1, max_value=90))
    def the_clock_steps_back(self, minutes: int) -> None:
        """A clock correction backwards (never before the start)."""
        self.now -= timedelta(minutes=minutes)
        self.service.pump()

    # ---- what must always hold --------------------------------------------------------

    @invariant()
    def watched_loops_never_run_unapproved(self) -> None:
        for run in self.service.runs(1000):
            if run.loop in WATCHED:
                assert is_human(run.approved_by), run
                assert (run.proposal_id, run.approved_by) in self.approvals, run

    @invariant()
    def only_a_human_is_an_operator(self) -> None:
        for entry in self.service.journal(10_000):
            if entry.actor.startswith("operator:") and entry.entity == "proposal":
                if entry.action == "approved":
                    assert (entry.entity_id, entry.actor) in self.approvals, entry
                assert is_human(entry.actor), entry
        for run in self.service.runs(1000):
            if run.approved_by.startswith("operator:"):
                assert (run.proposal_id, run.approved_by) in self.approvals, run

    @invariant()
    def human_only_types_are_approved_by_a_named_human(self) -> None:
        for run in self.service.runs(1000):
            event = self.service.event(run.event_id)["event"]
            if event.type in HUMAN_ONLY_TYPES:
                assert is_human(run.approved_by), run
                assert (run.proposal_id, run.approved_by) in self.approvals, run

    @invariant()
    def auto_approval_runs_real_ticks_only(self) -> None:
        for run in self.service.runs(1000):
            if run.approved_by != "schedule":
                continue
            event = self.service.event(run.event_id)["event"]
            by, source = event.admitted_by, event.source
            real = (
                (by == "schedule" and source in ("schedule", "manual"))
                or (by == "schedule" and source == "after" and event.loop == "after-act")
                or (by == "bridge" and source == "bridge" and event.loop == "host")
                or (is_human(by) and source in ("schedule", "manual"))
            )
            assert real and event.loop is not None, (run, event)

    @invariant()
    def each_slot_is_admitted_once(self) -> None:
        seen: set[tuple[str, str]] = set()
        for event in self.service.events(1000):
            if event.loop is None or event.source not in ("schedule", "bridge"):
                continue
            key = (event.loop, str(event.payload.get("slot")))
            assert key not in seen, f"slot {key} admitted twice"
            seen.add(key)

    @invariant()
    def a_waiting_trigger_fires_once_per_cause(self) -> None:
        seen: set[tuple[str, str]] = set()
        for event in self.service.events(1000):
            if event.source not in ("on_event", "after") or event.loop is None:
                continue
            assert event.admitted_by == "schedule", event
            cause = event.payload.get("trigger") or event.payload.get("upstream") or {}
            key = (event.loop, str(cause.get("eventId") or cause.get("occurrence")))
            assert key not in seen, f"{key} fired twice"
            seen.add(key)


Runtime.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_safety_invariants = Runtime.TestCase
