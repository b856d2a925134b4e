"""The lifecycle machines: literal tables in engine/core/machines.py fired by a dict
lookup, guards that read facts and refuse, and the `transitions` Machines built from
the same tables for diagrams, held to the same answers."""

from __future__ import annotations

import ast
import copy
import dataclasses
import itertools
import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from transitions import MachineError

from engine.core.decisions import Actor, operator_actor
from engine.core.machines import (
    ALL_PROFILES,
    RUN_MACHINE,
    Lifecycle,
    Profile,
    event_type_profile,
    loop_profile,
    occurrence_machine,
    proposal_machine,
)
from engine.core.ruleset import Approval, RuleSet
from engine.core.states import (
    TRIGGERS,
    Condition,
    OccurrenceState,
    OccurrenceTrigger,
    ProposalState,
    RunState,
    RunTrigger,
)
from engine.core.table import (
    CONDITIONS,
    ConditionFailed,
    IllegalTransition,
    Machine,
    MissingFact,
    StepFacts,
)
from engine.errors import Conflict, EngineError
from engine.loading import Paths, default_paths, load_rules, project_root
from engine.machines.catalog import Machines, lifecycle
from engine.machines.compiled import CompiledMachine, compile_spec
from engine.machines.errors import UnknownMachine
from engine.machines.specs import occurrence_spec, proposal_spec, run_spec

ROOT = project_root()
GOLDEN = Path(__file__).resolve().parents[1] / "data" / "machines"
HUMAN = StepFacts(actor=operator_actor("alice"), in_flight=False, attempts_left=1)
WATCHED = Profile(Approval.WATCHED, singleton=True)
AUTO = Profile(Approval.AUTO, singleton=True)

AUTO_LOOP = """\
loop scan-auto
  every 30m
  emit factory.merge.requested { repo: "x" }
  overlap allow
  approval auto
  shadow true
  enabled true
"""


def every_machine() -> list[tuple[Machine, CompiledMachine]]:
    """Every core table beside the transitions Machine built from it."""
    occurrences = [(occurrence_machine(p), compile_spec(occurrence_spec(p))) for p in ALL_PROFILES]
    proposals = [(proposal_machine(h), compile_spec(proposal_spec(h))) for h in (False, True)]
    return [*occurrences, *proposals, (RUN_MACHINE, compile_spec(run_spec()))]


def shipped_paths(config: Path) -> Paths:
    return replace(default_paths(), config=config)


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> RuleSet:
    """The repository's own loops/ and registry/, without any local config/."""
    return load_rules(shipped_paths(tmp_path_factory.mktemp("config")))


@pytest.fixture(scope="module")
def with_auto_loop(tmp_path_factory: pytest.TempPathFactory) -> RuleSet:
    """The shipped rules plus an enabled, auto-approved, overlapping, shadow loop."""
    base = tmp_path_factory.mktemp("rules")
    rules = base / "loops"
    rules.mkdir()
    for file in (ROOT / "loops").glob("*.rules"):
        (rules / file.name).write_text(file.read_text())
    (rules / "auto.rules").write_text(AUTO_LOOP)
    return load_rules(Paths(rules, ROOT / "registry", base / "config"))


# ---- purity and compilation ------------------------------------------------------------


def _imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def test_pure_modules_import_no_library_io_or_clock() -> None:
    """The tables and the data modules import neither transitions nor asyncio, sqlite3
    or a clock."""
    banned = {"transitions", "asyncio", "sqlite3", "time", "datetime"}
    for name in ("core/states", "core/machines", "core/table", "machines/specs", "machines/errors"):
        roots = {m.split(".")[0] for m in _imports(ROOT / "engine" / f"{name}.py")}
        assert not roots & banned, name


def test_only_compiled_module_imports_transitions() -> None:
    """Exactly one engine module imports `transitions`."""
    found = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "engine").rglob("*.py")
        if any(m.split(".")[0] == "transitions" for m in _imports(path))
    }
    assert found == {"engine/machines/compiled.py"}


def test_each_spec_compiles_once() -> None:
    """Compiling a spec twice returns the same Machine, so no event builds one."""
    first = lifecycle(WATCHED)
    again = lifecycle(Profile(Approval.WATCHED, singleton=True))
    assert first.occurrence is again.occurrence
    assert first.occurrence.machine is again.occurrence.machine
    assert first.run is lifecycle(AUTO).run


def test_machines_share_compiled_machines_across_rule_loads(shipped: RuleSet) -> None:
    """Two loads of the same rules hand out the very same compiled machines."""
    a, b = Machines.from_rules(shipped), Machines.from_rules(shipped)
    assert a.for_loop("reaper").occurrence is b.for_loop("reaper").occurrence
    assert a.for_loop("reaper").occurrence is a.for_loop("factory-reaper").occurrence


def test_machines_have_no_auto_transitions() -> None:
    """The compiled Machines have only the declared triggers (auto_transitions=False)."""
    for _, compiled in every_machine():
        assert set(compiled.machine.events) <= set(TRIGGERS[compiled.spec.kind])


# ---- the tables ------------------------------------------------------------------------


def _move(profile: Profile, state: str, trigger: str) -> str | None:
    return occurrence_machine(profile).moves.get((state, trigger))


def _guard(profile: Profile, state: str, trigger: str) -> str | None:
    guard = occurrence_machine(profile).guards.get((state, trigger))
    return None if guard is None else str(guard.condition)


def test_occurrence_has_the_seed_states_and_terminals() -> None:
    """Every occurrence machine has the documented states, awaiting_approval and
    shadow_recorded included, and the failure outcomes are terminal."""
    machine = occurrence_machine(WATCHED)
    assert set(machine.states) == {str(s) for s in OccurrenceState}
    assert machine.initial == "created"
    for state in ("failed", "timed_out", "budget_exhausted", "cancelled", "shadow_recorded"):
        assert machine.is_terminal(state)
    assert not machine.is_terminal("awaiting_approval")


def test_watched_profile_has_no_auto_dispatch_edge() -> None:
    """A watched loop can only propose; an auto loop can only dispatch."""
    assert _move(WATCHED, "triaging", "dispatch") is None
    assert _move(WATCHED, "triaging", "propose") == "awaiting_approval"
    assert _move(AUTO, "triaging", "dispatch") == "work_dispatched"
    assert _move(AUTO, "triaging", "propose") is None


def test_singleton_guards_the_decision_edges() -> None:
    """A singleton profile puts no_run_in_flight on propose and dispatch; others don't."""
    assert _guard(WATCHED, "triaging", "propose") == "no_run_in_flight"
    assert _guard(AUTO, "triaging", "dispatch") == "no_run_in_flight"
    loose = Profile(Approval.AUTO, singleton=False)
    assert _guard(loose, "triaging", "dispatch") is None
    assert _move(loose, "triaging", "noop") is not None


def test_human_only_never_dispatches_and_approval_needs_a_human() -> None:
    """Human-only profiles have no auto edge, even with approval auto, and both approve
    edges carry actor_is_human."""
    human = Profile(Approval.AUTO, singleton=False, human_only=True)
    assert _move(human, "triaging", "dispatch") is None
    assert _guard(human, "awaiting_approval", "approve") == "actor_is_human"
    proposal = lifecycle(human).proposal.spec
    assert [t.conditions for t in proposal.transitions if t.trigger == "approve"] == [
        ("actor_is_human",)
    ]


def test_shadow_records_instead_of_proposing_or_dispatching() -> None:
    """A shadow profile ends in shadow_recorded and has no propose or dispatch edge."""
    for approval in Approval:
        shadow = Profile(approval, singleton=True, shadow=True)
        assert _move(shadow, "triaging", "record_shadow") == "shadow_recorded"
        assert _move(shadow, "triaging", "propose") is None
        assert _move(shadow, "triaging", "dispatch") is None


def test_watched_occurrence_walks_through_approval() -> None:
    """A watched occurrence goes created -> triaging -> awaiting_approval ->
    work_dispatched -> verifying -> completed."""
    machine = occurrence_machine(WATCHED)
    state = machine.initial
    for trigger in ("triage", "propose", "approve", "verify", "complete"):
        state = machine.fire(state, trigger, HUMAN)
    assert state == "completed" and machine.is_terminal(state)


def test_deferred_occurrence_replans() -> None:
    """waiting_for_resource resumes into triaging, so the decision is made afresh."""
    machine = occurrence_machine(AUTO)
    assert machine.fire("triaging", "defer") == "waiting_for_resource"
    assert machine.fire("waiting_for_resource", "resume") == "triaging"


def test_proposal_resolves_to_one_terminal() -> None:
    """An open proposal is approved, rejected, expired or superseded, then stays put."""
    machine = proposal_machine(False)
    for trigger, dest in (
        ("approve", "approved"),
        ("reject", "rejected"),
        ("expire", "expired"),
        ("supersede", "superseded"),
    ):
        assert machine.fire("open", trigger) == dest
        assert machine.is_terminal(dest)
        with pytest.raises(IllegalTransition):
            machine.fire(dest, "approve")
    assert set(machine.states) == {str(s) for s in ProposalState}


def test_run_lease_expiry_requeues_while_attempts_remain() -> None:
    """A lost lease sends a claimed or running run back to queued while attempts remain,
    and to failed once they are spent."""
    run = RUN_MACHINE
    for state in ("claimed", "running"):
        assert run.fire(state, RunTrigger.EXPIRE_LEASE, StepFacts(attempts_left=2)) == "queued"
        assert run.fire(state, RunTrigger.EXPIRE_LEASE, StepFacts(attempts_left=0)) == "failed"
    assert run.fire("queued", "claim") == "claimed"
    assert run.fire("claimed", "start") == "running"
    assert run.fire("running", "succeed") == "succeeded"
    assert {s for s in RunState if run.is_terminal(s)} == {
        "succeeded",
        "failed",
        "timed_out",
        "cancelled",
    }


# ---- guards read facts and refuse ---------------------------------------------------------


def test_singleton_decision_is_refused_while_a_run_is_in_flight() -> None:
    """A singleton loop's propose or dispatch is refused while a run of the loop is in
    flight, and allowed once none is."""
    for profile, trigger in ((WATCHED, "propose"), (AUTO, "dispatch")):
        machine = occurrence_machine(profile)
        with pytest.raises(ConditionFailed, match="no_run_in_flight") as caught:
            machine.fire("triaging", trigger, StepFacts(in_flight=True))
        assert isinstance(caught.value, Conflict) and caught.value.status == 409
        assert machine.fire("triaging", trigger, StepFacts(in_flight=False)) != "triaging"


@pytest.mark.parametrize(
    "actor",
    [
        Actor.SCHEDULE,
        Actor.SYSTEM,
        Actor.BRIDGE,
        Actor.WORKER,
        Actor.GITHUB,
        Actor.CHAIN,
        "worker:w1",
        "operator:schedule",
        "operator:",
        "alice",
    ],
)
def test_human_only_approval_is_refused_for_any_actor_but_an_operator(actor: str) -> None:
    """Only `operator:<name>` approves a human-only proposal or its occurrence: the
    schedule, the engine, a bridge, a worker (or a reserved name posing as an operator)
    is refused and nothing moves."""
    for machine, state in (
        (proposal_machine(True), "open"),
        (occurrence_machine(Profile(human_only=True)), "awaiting_approval"),
    ):
        with pytest.raises(ConditionFailed, match="actor_is_human"):
            machine.fire(state, "approve", StepFacts(actor=actor))
        assert machine.fire(state, "approve", StepFacts(actor=operator_actor("alice")))


def test_approval_of_an_ordinary_proposal_needs_no_human() -> None:
    """An ordinary proposal's approve move has no guard: an earned auto-approval (actor
    `schedule`) takes it."""
    assert proposal_machine(False).fire("open", "approve", StepFacts(actor=Actor.SCHEDULE))


def test_failed_guard_is_an_illegal_transition() -> None:
    """A false guard raises ConditionFailed (an IllegalTransition) naming the guard."""
    machine = occurrence_machine(AUTO)
    with pytest.raises(IllegalTransition, match="no_run_in_flight") as caught:
        machine.fire("triaging", "dispatch", StepFacts(in_flight=True))
    assert isinstance(caught.value, ConditionFailed)
    assert caught.value.failed == ("no_run_in_flight",)


def test_guarded_move_without_its_fact_is_a_caller_bug() -> None:
    """A guarded move fired without the fact its guard reads raises MissingFact (500),
    never passes."""
    with pytest.raises(MissingFact, match="no_run_in_flight") as caught:
        occurrence_machine(AUTO).fire("triaging", "dispatch")
    assert caught.value.status == 500 and not isinstance(caught.value, Conflict)
    with pytest.raises(MissingFact, match="attempts_remain"):
        RUN_MACHINE.fire("running", "expire_lease")


# ---- illegal moves ---------------------------------------------------------------------


def test_illegal_trigger_raises_and_changes_nothing() -> None:
    """Firing a trigger with no move raises IllegalTransition (a 409 Conflict) naming the
    state, the trigger and the allowed triggers, and leaves the table as it was."""
    machine = occurrence_machine(WATCHED)
    before = copy.deepcopy(dict(machine.moves))
    with pytest.raises(Conflict) as caught:
        machine.fire("triaging", "dispatch", StepFacts(in_flight=False))
    assert isinstance(caught.value, IllegalTransition)
    message = str(caught.value)
    assert "'dispatch'" in message and "'triaging'" in message
    assert "propose" in message and "noop" in message
    assert caught.value.allowed == machine.allowed("triaging")
    assert caught.value.as_dict()["details"] == {"state": "triaging", "trigger": "dispatch"}
    assert dict(machine.moves) == before
    assert machine.fire("triaging", "noop") == "nothing_to_do"


def test_terminal_and_unknown_states_refuse_every_trigger() -> None:
    """A terminal or unknown state allows nothing, and the error says so."""
    machine = occurrence_machine(AUTO)
    for state in ("completed", "no-such-state"):
        for trigger in OccurrenceTrigger:
            with pytest.raises(IllegalTransition, match="terminal state or not a state"):
                machine.fire(state, trigger, HUMAN)


def test_errors_carry_exit_codes_and_statuses() -> None:
    """An illegal move is a Conflict (exit 1, 409); an unknown diagram target exits 2."""
    assert issubclass(IllegalTransition, Conflict)
    assert (IllegalTransition.exit_code, IllegalTransition.status) == (1, 409)
    assert issubclass(MissingFact, EngineError) and MissingFact.status == 500
    assert (UnknownMachine.exit_code, UnknownMachine.http_status) == (2, 404)


# ---- which machine a step uses --------------------------------------------------------------


def test_shipped_loops_are_watched_singletons(shipped: RuleSet) -> None:
    """Every shipped loop is watched and singleton, so none can dispatch on its own; the
    one of mutating work that does not say `shadow off` runs in shadow."""
    machines = Machines.from_rules(shipped)
    steps = Lifecycle(shipped)
    assert set(machines.loops) == set(shipped.loops)
    for name, loop in shipped.loops.items():
        shadow = name == "factory-dispatch"
        assert loop_profile(shipped, loop) == dataclasses.replace(WATCHED, shadow=shadow)
        with pytest.raises(IllegalTransition):
            steps.occurrence(name, loop.event_type, "triaging", "dispatch", in_flight=False)


def test_shipped_human_only_event_type(shipped: RuleSet) -> None:
    """The ship-apply event type is human-only: its proposal needs a human approver."""
    profile = event_type_profile(shipped, "factory.ship.apply.requested")
    assert profile == Profile(Approval.WATCHED, singleton=False, human_only=True)
    steps = Lifecycle(shipped)
    with pytest.raises(ConditionFailed):
        steps.proposal(True, "open", "approve", actor=Actor.SYSTEM)
    assert steps.proposal(True, "open", "approve", actor="operator:alice") == "approved"
    assert event_type_profile(shipped, "factory.work.requested").human_only is False


def test_auto_loop_profile_from_rules(with_auto_loop: RuleSet) -> None:
    """An `approval auto`, `overlap allow`, `shadow true` loop gets exactly that profile, and
    its ticks are planned on the shadow table."""
    loop = with_auto_loop.loops["scan-auto"]
    profile = loop_profile(with_auto_loop, loop)
    assert profile == Profile(Approval.AUTO, singleton=False, human_only=False, shadow=True)
    steps = Lifecycle(with_auto_loop)
    assert steps.occurrence("scan-auto", loop.event_type, "triaging", "record_shadow") == (
        "shadow_recorded"
    )


def test_steps_after_the_decision_follow_the_path_taken(shipped: RuleSet) -> None:
    """An occurrence proposed under watched rules resolves on the proposing table and a
    dispatched one on the dispatching table, whatever the rules give its loop now."""
    steps = Lifecycle(shipped)
    assert steps.proposed(False, "awaiting_approval", "approve", actor="operator:a") == (
        "work_dispatched"
    )
    assert steps.dispatched("work_dispatched", "verify") == "verifying"
    assert steps.dispatched("triaging", "dispatch") == "work_dispatched"
    with pytest.raises(IllegalTransition):
        steps.dispatched("awaiting_approval", "approve")


def test_unknown_loop_suggests_the_closest(shipped: RuleSet) -> None:
    """Asking for a loop that does not exist raises UnknownMachine with a did-you-mean."""
    with pytest.raises(UnknownMachine, match="did you mean 'reaper'"):
        Machines.from_rules(shipped).for_loop("reapr")


# ---- the tables agree with the transitions Machines ------------------------------------------


class _Model:
    """A transitions model whose guard attributes come from the guard's facts."""

    def __init__(self, facts: StepFacts) -> None:
        self.no_run_in_flight = not facts.in_flight
        self.actor_is_human = facts.actor == "operator:alice"
        self.attempts_remain = bool(facts.attempts_left)


def _via_table(machine: Machine, state: str, trigger: str, facts: StepFacts) -> str:
    try:
        return machine.fire(state, trigger, facts)
    except ConditionFailed:
        return "<refused>"
    except IllegalTransition:
        return "<illegal>"


def _via_machine(compiled: CompiledMachine, model: Any, state: str, trigger: str) -> str:
    compiled.machine.set_state(state, model=model)
    try:
        moved = model.trigger(trigger)
    except (MachineError, AttributeError):
        return "<illegal>"
    assert moved or model.state == state
    return str(model.state) if moved else "<refused>"


def _every_facts() -> Iterator[StepFacts]:
    for in_flight, actor, left in itertools.product(
        (True, False), ("operator:alice", "schedule"), (0, 1)
    ):
        yield StepFacts(actor=actor, in_flight=in_flight, attempts_left=left)


def _structure(compiled: CompiledMachine) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    """What the transitions Machine holds: {(state, trigger): [(dest, if, unless)]}."""
    found: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for trigger, event in compiled.machine.events.items():
        for source, transitions in event.transitions.items():
            found[(source, trigger)] = [
                (
                    t.dest,
                    tuple(c.func for c in t.conditions if c.target),
                    tuple(c.func for c in t.conditions if not c.target),
                )
                for t in transitions
            ]
    return found


def _table_structure(machine: Machine) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    found: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for key, dest in machine.moves.items():
        guard = machine.guards.get(key)
        if guard is None:
            found[key] = [(dest, (), ())]
            continue
        found[key] = [(dest, (guard.condition,), ())]
        if guard.otherwise is not None:
            found[key].append((guard.otherwise, (), (guard.condition,)))
    return found


@pytest.mark.parametrize("pair", every_machine(), ids=lambda p: p[0].name)
def test_table_has_the_transitions_machines_states_moves_and_guards(
    pair: tuple[Machine, CompiledMachine],
) -> None:
    """The transitions Machine built for a table (what `engine diagram` draws) has the
    table's states, initial and final states, moves and guards, no more, no fewer."""
    table, compiled = pair
    states = compiled.machine.states
    assert tuple(states) == table.states and compiled.machine.initial == table.initial
    assert {s for s, st in states.items() if st.final} == table.terminal
    assert _structure(compiled) == _table_structure(table)


@pytest.mark.parametrize("pair", every_machine(), ids=lambda p: p[0].name)
def test_table_agrees_with_transitions_machine(pair: tuple[Machine, CompiledMachine]) -> None:
    """For every state, trigger and guard outcome, the table's dict lookup and the real
    transitions Machine reach the same state or both refuse."""
    table, compiled = pair
    triggers = (*TRIGGERS[compiled.spec.kind], "no_such_trigger")
    for facts in _every_facts():
        model = _Model(facts)
        compiled.machine.add_model(model, initial=compiled.initial)
        try:
            for state, trigger in itertools.product(table.states, triggers):
                expected = _via_machine(compiled, model, str(state), trigger)
                assert _via_table(table, state, trigger, facts) == expected, (state, trigger)
        finally:
            compiled.machine.remove_model(model)


def test_guard_conditions_cover_every_condition() -> None:
    """Every guard name reads a fact: none is left for a caller to pass as an answer."""
    assert set(CONDITIONS) == set(Condition)


# ---- golden tables -----------------------------------------------------------------------


def _golden_documents() -> dict[str, dict[str, Any]]:
    docs: dict[str, dict[str, Any]] = {"occurrence": {}, "proposal": {}, "run": {}}
    for table, _ in every_machine():
        docs[table.kind][table.name] = table.as_json()
    return docs


def test_compiled_tables_match_golden_files() -> None:
    """The tables equal tests/data/machines/*.json (UPDATE_GOLDEN=1 rewrites)."""
    documents = _golden_documents()
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for kind, doc in documents.items():
            text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
            (GOLDEN / f"{kind}.json").write_text(text, encoding="utf-8")
        pytest.skip("golden machine tables rewritten; review the diff")
    for kind, doc in documents.items():
        expected = json.loads((GOLDEN / f"{kind}.json").read_text(encoding="utf-8"))
        assert json.loads(json.dumps(doc)) == expected, f"{kind}.json differs"


def test_lifecycle_run_steps_a_run(shipped: RuleSet) -> None:
    """A run steps through the lifecycle: claimed, started, succeeded; a lost lease
    queues it again while attempts remain and fails it when none do."""
    steps = Lifecycle(shipped)
    assert steps.run("queued", "claim") == "claimed"
    assert steps.run("claimed", "start") == "running"
    assert steps.run("running", "succeed") == "succeeded"
    assert steps.run("running", "expire_lease", attempts_left=1) == "queued"
    assert steps.run("running", "expire_lease", attempts_left=0) == "failed"


def test_an_event_of_a_routed_type_takes_its_routes_approval(tmp_path: Path) -> None:
    """An event no loop emitted is planned with its route's approval (the runtime test
    tree routes test.echo.requested `approval auto`, test.spawn.requested `approval
    watched`), and an event type no route names is watched; none is singleton or
    shadow."""
    tree = ROOT / "tests" / "data" / "runtime"
    rules = load_rules(Paths(tree / "loops", tree / "registry", tmp_path / "config"))
    assert event_type_profile(rules, "test.echo.requested") == Profile(
        Approval.AUTO, singleton=False
    )
    assert event_type_profile(rules, "test.spawn.requested") == Profile(
        Approval.WATCHED, singleton=False
    )
    assert "no.such.type" not in rules.routes
    assert event_type_profile(rules, "no.such.type") == Profile(Approval.WATCHED, singleton=False)
