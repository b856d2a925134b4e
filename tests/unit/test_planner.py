"""The planner is pure: an event, the compiled rules and a snapshot give one Decision."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.core.decisions import Decision, DecisionKind, NoopReason
from engine.core.envelope import Envelope
from engine.core.planner import Snapshot, loop_of, plan
from engine.core.ruleset import Approval, Policy, RuleSet
from engine.loading import Paths, load_rules

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rules() -> RuleSet:
    return load_rules(Paths(ROOT / "loops", ROOT / "registry", ROOT / "tests" / "no-config"))


def tick(loop: str, event_type: str = "clock.tick.reaper", source: str = "schedule") -> Envelope:
    slot = "2026-11-30T10:00:00Z"
    return Envelope(
        eventId=f"clock:{loop}:{slot}",
        type=event_type,
        source=source,
        occurredAt=datetime(2026, 11, 30, 10, tzinfo=UTC),
        payload={"loop": loop, "slot": slot, "cadenceSeconds": 3600, "skippedSlots": 0},
    )


def with_loop(rules: RuleSet, name: str, **changes: object) -> RuleSet:
    loops = dict(rules.loops)
    loops[name] = replace(loops[name], **changes)  # type: ignore[arg-type]
    return replace(rules, loops=loops)


def test_watched_loop_tick_proposes(rules: RuleSet) -> None:
    """An enabled watched loop's tick becomes a proposal, approved by nobody yet."""
    enabled = with_loop(rules, "reaper", enabled=True)
    decision = plan(tick("reaper"), "schedule", enabled, Snapshot())
    assert decision.kind is DecisionKind.PROPOSE
    assert decision.approved_by is None
    assert decision.definition == "reaper@1"
    assert decision.note == "watched: waiting for an operator"
    assert decision.rule is not None and decision.rule.file.endswith("reaper.rules")


def test_auto_loop_tick_runs_as_schedule(rules: RuleSet) -> None:
    """An enabled auto loop's tick runs at once with actor `schedule`, never an operator."""
    auto = with_loop(rules, "reaper", enabled=True, approval=Approval.AUTO)
    decision = plan(tick("reaper"), "schedule", auto, Snapshot())
    assert decision.kind is DecisionKind.RUN
    assert decision.approved_by == "schedule"


def test_singleton_in_flight_is_a_typed_noop(rules: RuleSet) -> None:
    """A singleton loop with a run in flight gets NOOP previous_run_in_flight, not a second run."""
    auto = with_loop(rules, "reaper", enabled=True, approval=Approval.AUTO)
    decision = plan(tick("reaper"), "schedule", auto, Snapshot(loop_in_flight=True))
    assert decision.kind is DecisionKind.NOOP
    assert decision.reason is NoopReason.PREVIOUS_RUN_IN_FLIGHT


def test_overlapping_loop_ignores_in_flight(rules: RuleSet) -> None:
    """A loop declared `overlapping` may run again while a run is in flight."""
    auto = with_loop(rules, "reaper", enabled=True, approval=Approval.AUTO, singleton=False)
    assert (
        plan(tick("reaper"), "schedule", auto, Snapshot(loop_in_flight=True)).kind
        is DecisionKind.RUN
    )


def test_disabled_loop_tick_from_the_clock_is_a_noop(rules: RuleSet) -> None:
    """A tick of a disabled loop (a race with disabling) plans nothing."""
    decision = plan(tick("reaper"), "schedule", rules, Snapshot())
    assert (decision.kind, decision.reason) == (DecisionKind.NOOP, NoopReason.DISABLED)


def test_paused_loop_is_a_noop(rules: RuleSet) -> None:
    """A paused loop's tick is recorded as NOOP paused."""
    enabled = with_loop(rules, "reaper", enabled=True)
    decision = plan(tick("reaper"), "schedule", enabled, Snapshot(loop_paused=True))
    assert decision.reason is NoopReason.PAUSED


def test_shadow_loop_records_instead_of_running(rules: RuleSet) -> None:
    """A loop in shadow mode records a SHADOW decision and dispatches nothing."""
    shadow = with_loop(
        rules, "reaper", enabled=True, approval=Approval.AUTO, policy=Policy(shadow=True)
    )
    assert plan(tick("reaper"), "schedule", shadow, Snapshot()).kind is DecisionKind.SHADOW


def test_human_only_type_always_proposes(rules: RuleSet) -> None:
    """A human-approval-only event type proposes even where a rule would auto-approve."""
    event = Envelope(
        eventId="ship-1",
        type="factory.ship.apply.requested",
        source="chain",
        occurredAt=datetime(2026, 11, 30, tzinfo=UTC),
        payload={"repo": "bj29", "version": "1.2.0"},
    )
    routes = dict(rules.routes)
    routes[event.type] = replace(routes[event.type], approval=Approval.AUTO)
    decision = plan(event, "chain", replace(rules, routes=routes), Snapshot())
    assert decision.kind is DecisionKind.PROPOSE
    assert decision.human_only
    assert decision.note == "human-approval-only"


def test_non_loop_event_follows_its_route(rules: RuleSet) -> None:
    """An injected event is not a tick: its route's approval applies (watched here)."""
    event = Envelope(
        eventId="w-1",
        type="factory.work.requested",
        source="inject",
        occurredAt=datetime(2026, 11, 30, tzinfo=UTC),
        payload={"repo": "bj29", "loop": "reaper"},
    )
    assert loop_of(event, "inject", rules) is None
    decision = plan(event, "inject", rules, Snapshot(loop_in_flight=True))
    assert decision.kind is DecisionKind.PROPOSE
    assert decision.loop is None


def test_unrouted_type_is_a_noop(rules: RuleSet) -> None:
    """A registered type without a route plans NOOP no_route: no definition, no rule,
    nothing to approve and nothing that mutates."""
    routes = {k: v for k, v in rules.routes.items() if k != "factory.triage.requested"}
    event = Envelope(
        eventId="t-1",
        type="factory.triage.requested",
        source="inject",
        occurredAt=datetime(2026, 11, 30, tzinfo=UTC),
        payload={"repo": "bj29"},
    )
    assert plan(event, "inject", replace(rules, routes=routes), Snapshot()) == Decision(
        DecisionKind.NOOP,
        NoopReason.NO_ROUTE,
        definition=None,
        loop=None,
        approved_by=None,
        human_only=False,
        mutating=False,
        rule=None,
        note="no route handles 'factory.triage.requested'",
    )


def test_a_disabled_loop_plans_nothing_even_run_now(rules: RuleSet) -> None:
    """Off means off: a run-now of a switched-off auto loop is NOOP disabled, never a run
    approved by `schedule` (and never a step its machine does not have)."""
    auto_off = with_loop(rules, "reaper", enabled=False, approval=Approval.AUTO)
    decision = plan(tick("reaper", source="manual"), "operator:alice", auto_off, Snapshot())
    assert (decision.kind, decision.reason) == (DecisionKind.NOOP, NoopReason.DISABLED)
    auto_on = with_loop(rules, "reaper", enabled=True, approval=Approval.AUTO)
    assert (
        plan(tick("reaper", source="manual"), "operator:alice", auto_on, Snapshot()).approved_by
        == "schedule"
    )


def test_a_host_timer_ticks_only_host_clock_loops(rules: RuleSet) -> None:
    """A bridge event naming a native loop is not that loop's tick (it can never take a
    native slot), while one naming a host-clock loop is."""
    native = tick("reaper", source="bridge")
    assert loop_of(native, "bridge", rules) is None
    bridge = tick("factory-reaper", source="bridge")
    found = loop_of(bridge, "bridge", rules)
    assert found is not None and found.name == "factory-reaper"
    assert (
        loop_of(tick("factory-reaper"), "schedule", rules) is None
    )  # the scheduler never fires it


# ---- who may tick a loop ------------------------------------------------------------------

SOURCES = ("schedule", "bridge", "manual", "chain", "github", "inject", "cron")
ACTORS = (
    "schedule",
    "bridge",
    "inject",
    "chain",
    "github",
    "system",
    "worker",
    "operator:alice",
    "operator:schedule",  # a reserved name: never a human
    "operator:",
)


def may_tick(source: str, actor: str, host: bool) -> bool:
    """The authority table of docs/runtime.md, written out independently."""
    human = actor.startswith("operator:") and actor not in ("operator:", "operator:schedule")
    if source == "schedule":  # the scheduler's slot, or an operator's backfill
        return (actor == "schedule" or human) and not host
    if source == "bridge":
        return actor == "bridge" and host
    if source == "manual":
        return actor == "schedule" or human
    return False


@pytest.mark.parametrize("host", [False, True])
@pytest.mark.parametrize("actor", ACTORS)
@pytest.mark.parametrize("source", SOURCES)
def test_only_the_runtime_makes_ticks(rules: RuleSet, source: str, actor: str, host: bool) -> None:
    """An event is a loop's tick only when the actor that admitted it may make one: the
    scheduler its slots, a host timer its host-clock slots, an operator a backfilled
    slot or a run-now, the schedule a follow-up run-now; whatever the envelope's
    `source` claims, nothing else ticks a loop."""
    loop = "factory-reaper" if host else "reaper"
    found = loop_of(tick(loop, source=source), actor, rules)
    assert (found is not None) == may_tick(source, actor, host)
    assert found is None or found.name == loop


def test_a_tick_names_its_loop_and_the_loops_type(rules: RuleSet) -> None:
    """payload.loop must name a loop (as a string) whose event type is the event's."""
    assert loop_of(tick("reaper"), "schedule", rules) is not None
    assert loop_of(tick("reaper", event_type="factory.work.requested"), "schedule", rules) is None
    assert loop_of(tick("no-such-loop"), "schedule", rules) is None
    odd = tick("reaper").model_copy(update={"payload": {"loop": ["reaper"]}})
    assert loop_of(odd, "schedule", rules) is None


def test_a_signed_envelope_posing_as_the_scheduler_is_no_tick(rules: RuleSet) -> None:
    """`source: schedule` on an envelope admitted by `bridge` is planned by its route
    (watched: a proposal), never as the loop's tick with the loop's `approval auto`."""
    auto = with_loop(rules, "reaper", enabled=True, approval=Approval.AUTO)
    real = plan(tick("reaper"), "schedule", auto, Snapshot())
    assert (real.kind, real.approved_by, real.loop) == (DecisionKind.RUN, "schedule", "reaper")
    forged = plan(tick("reaper"), "bridge", auto, Snapshot())
    assert (forged.kind, forged.approved_by, forged.loop) == (DecisionKind.PROPOSE, None, None)
