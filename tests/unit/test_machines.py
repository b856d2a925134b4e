"""The lifecycle machines: specs shaped by the rules, compiled once, fired through tables."""

from __future__ import annotations

import ast
import copy
import dataclasses
import itertools
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from transitions import MachineError

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
from engine.loading import Paths, default_paths, load_rules, project_root
from engine.machines.catalog import Machines, lifecycle
from engine.machines.compiled import CompiledMachine, compile_spec
from engine.machines.errors import (
    ConditionFailed,
    IllegalTransition,
    LifecycleError,
    MissingCondition,
    UnknownMachine,
)
from engine.machines.profiles import event_type_profile, loop_profile
from engine.machines.specs import ALL_PROFILES, Profile, occurrence_spec, proposal_spec, run_spec

ROOT = project_root()
GOLDEN = Path(__file__).resolve().parents[1] / "data" / "machines"
ALL_CONDITIONS = tuple(str(c) for c in Condition)
WATCHED = Profile(Approval.WATCHED, singleton=True)
AUTO = Profile(Approval.AUTO, singleton=True)

AUTO_LOOP = """\
loop scan-auto
  every 30m
  emit factory.merge.requested { repo: "x" }
  overlapping
  approval auto
  shadow on
  enabled
"""


def every_machine() -> list[CompiledMachine]:
    occurrences = [compile_spec(occurrence_spec(p)) for p in ALL_PROFILES]
    proposals = [compile_spec(proposal_spec(h)) for h in (False, True)]
    return [*occurrences, *proposals, compile_spec(run_spec())]


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
    """The data modules import neither transitions nor asyncio, sqlite3 or a clock."""
    banned = {"transitions", "asyncio", "sqlite3", "time", "datetime"}
    for name in (
        "core/states",
        "machines/specs",
        "machines/table",
        "machines/profiles",
        "machines/errors",
    ):
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
    for compiled in every_machine():
        assert set(compiled.machine.events) <= set(TRIGGERS[compiled.spec.kind])


# ---- the tables ------------------------------------------------------------------------


def _edge(profile: Profile, state: str, trigger: str) -> Any:
    return compile_spec(occurrence_spec(profile)).table.edges.get((state, trigger))


def test_occurrence_has_the_seed_states_and_terminals() -> None:
    """Every occurrence machine has seed 2 §5's states plus awaiting_approval and
    shadow_recorded, and the failure outcomes are terminal."""
    table = lifecycle(WATCHED).occurrence.table
    assert set(table.states) == {str(s) for s in OccurrenceState}
    assert table.initial == "created"
    for state in ("failed", "timed_out", "budget_exhausted", "cancelled", "shadow_recorded"):
        assert table.is_terminal(state)
    assert not table.is_terminal("awaiting_approval")


def test_watched_profile_has_no_auto_dispatch_edge() -> None:
    """A watched loop can only propose; an auto loop can only dispatch."""
    assert _edge(WATCHED, "triaging", "dispatch") is None
    assert _edge(WATCHED, "triaging", "propose") is not None
    assert _edge(AUTO, "triaging", "dispatch") is not None
    assert _edge(AUTO, "triaging", "propose") is None


def test_singleton_guards_the_decision_edges() -> None:
    """A singleton profile puts no_run_in_flight on propose and dispatch; others don't."""
    assert _edge(WATCHED, "triaging", "propose")[0].conditions == ("no_run_in_flight",)
    assert _edge(AUTO, "triaging", "dispatch")[0].conditions == ("no_run_in_flight",)
    loose = Profile(Approval.AUTO, singleton=False)
    assert _edge(loose, "triaging", "dispatch")[0].conditions == ()
    assert _edge(loose, "triaging", "noop") is not None


def test_human_only_never_dispatches_and_approval_needs_a_human() -> None:
    """Human-only profiles have no auto edge, even with approval auto, and both
    approve edges carry actor_is_human."""
    human = Profile(Approval.AUTO, singleton=False, human_only=True)
    assert _edge(human, "triaging", "dispatch") is None
    assert _edge(human, "awaiting_approval", "approve")[0].conditions == ("actor_is_human",)
    proposal = lifecycle(human).proposal
    assert proposal.fire("open", "approve", {"actor_is_human": True}) == "approved"
    with pytest.raises(ConditionFailed, match="actor_is_human"):
        proposal.fire("open", "approve", {"actor_is_human": False})


def test_shadow_records_instead_of_proposing_or_dispatching() -> None:
    """A shadow profile ends in shadow_recorded and has no propose or dispatch edge."""
    for approval in Approval:
        shadow = Profile(approval, singleton=True, shadow=True)
        assert _edge(shadow, "triaging", "record_shadow")[0].dest == "shadow_recorded"
        assert _edge(shadow, "triaging", "propose") is None
        assert _edge(shadow, "triaging", "dispatch") is None


def test_watched_occurrence_walks_through_approval() -> None:
    """A watched occurrence goes created -> triaging -> awaiting_approval ->
    work_dispatched -> verifying -> completed."""
    machine = lifecycle(WATCHED).occurrence
    state = machine.initial
    context = {"no_run_in_flight": True}
    for trigger in ("triage", "propose", "approve", "verify", "complete"):
        state = machine.fire(state, trigger, context)
    assert state == "completed" and machine.is_terminal(state)


def test_deferred_occurrence_replans() -> None:
    """waiting_for_resource resumes into triaging, so the decision is made afresh."""
    machine = lifecycle(AUTO).occurrence
    assert machine.fire("triaging", "defer") == "waiting_for_resource"
    assert machine.fire("waiting_for_resource", "resume") == "triaging"


def test_proposal_resolves_to_one_terminal() -> None:
    """An open proposal is approved, rejected, expired or superseded, then stays put."""
    machine = lifecycle(WATCHED).proposal
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
    assert set(machine.table.states) == {str(s) for s in ProposalState}


def test_run_lease_expiry_requeues_while_attempts_remain() -> None:
    """A lost lease sends a claimed or running run back to queued while attempts
    remain, and to failed once they are spent."""
    run = lifecycle(WATCHED).run
    for state in ("claimed", "running"):
        assert run.fire(state, RunTrigger.EXPIRE_LEASE, {"attempts_remain": True}) == "queued"
        assert run.fire(state, RunTrigger.EXPIRE_LEASE, {"attempts_remain": False}) == "failed"
    assert run.fire("queued", "claim") == "claimed"
    assert run.fire("claimed", "start") == "running"
    assert run.fire("running", "succeed") == "succeeded"
    assert {s for s in RunState if run.is_terminal(s)} == {
        "succeeded",
        "failed",
        "timed_out",
        "cancelled",
    }


# ---- illegal moves ---------------------------------------------------------------------


def test_illegal_trigger_raises_and_changes_nothing() -> None:
    """Firing a trigger with no edge raises IllegalTransition naming the state, the
    trigger and the allowed triggers, and leaves the table as it was."""
    machine = lifecycle(WATCHED).occurrence
    before = copy.deepcopy(dict(machine.table.edges))
    with pytest.raises(IllegalTransition) as caught:
        machine.fire("triaging", "dispatch", {"no_run_in_flight": True})
    message = str(caught.value)
    assert "'dispatch'" in message and "'triaging'" in message
    assert "propose" in message and "noop" in message
    assert caught.value.allowed == machine.table.allowed("triaging")
    assert dict(machine.table.edges) == before
    assert machine.fire("triaging", "noop") == "nothing_to_do"


def test_terminal_and_unknown_states_refuse_every_trigger() -> None:
    """A terminal or unknown state allows nothing, and the error says so."""
    machine = lifecycle(AUTO).occurrence
    for state in ("completed", "no-such-state"):
        for trigger in OccurrenceTrigger:
            with pytest.raises(IllegalTransition, match="terminal state or not a state"):
                machine.fire(state, trigger, dict.fromkeys(ALL_CONDITIONS, True))


def test_failed_guard_is_an_illegal_transition() -> None:
    """A false guard raises ConditionFailed (an IllegalTransition) naming the guard."""
    machine = lifecycle(AUTO).occurrence
    with pytest.raises(IllegalTransition, match="no_run_in_flight") as caught:
        machine.fire("triaging", "dispatch", {"no_run_in_flight": False})
    assert isinstance(caught.value, ConditionFailed)
    assert caught.value.failed == ("no_run_in_flight",)


def test_missing_condition_is_a_caller_bug() -> None:
    """A guarded edge fired without its condition raises MissingCondition."""
    with pytest.raises(MissingCondition, match="no_run_in_flight"):
        lifecycle(AUTO).occurrence.fire("triaging", "dispatch")


def test_errors_carry_exit_codes_and_statuses() -> None:
    """Each error class carries its exit code and HTTP status."""
    assert issubclass(IllegalTransition, LifecycleError)
    assert (IllegalTransition.exit_code, IllegalTransition.http_status) == (1, 409)
    assert (UnknownMachine.exit_code, UnknownMachine.http_status) == (2, 404)
    assert MissingCondition.http_status == 500


# ---- profiles from rules -----------------------------------------------------------------


def test_shipped_loops_are_watched_singletons(shipped: RuleSet) -> None:
    """Every shipped loop is watched and singleton, so none can dispatch on its own; the
    one of mutating work that does not say `shadow off` runs in shadow."""
    machines = Machines.from_rules(shipped)
    assert set(machines.loops) == set(shipped.loops)
    for name, loop in shipped.loops.items():
        shadow = name == "factory-dispatch"
        assert loop_profile(shipped, loop) == dataclasses.replace(WATCHED, shadow=shadow)
        with pytest.raises(IllegalTransition):
            machines.for_loop(name).occurrence.fire("triaging", "dispatch", {})


def test_shipped_human_only_event_type(shipped: RuleSet) -> None:
    """The ship-apply event type is human-only: its proposal needs a human approver."""
    profile = event_type_profile(shipped, "factory.ship.apply.requested")
    assert profile == Profile(Approval.WATCHED, singleton=False, human_only=True)
    proposal = Machines.from_rules(shipped).for_event_type("factory.ship.apply.requested").proposal
    with pytest.raises(ConditionFailed):
        proposal.fire("open", "approve", {"actor_is_human": False})
    assert event_type_profile(shipped, "factory.work.requested").human_only is False


def test_auto_loop_profile_from_rules(with_auto_loop: RuleSet) -> None:
    """An `approval auto`, `overlapping`, `shadow on` loop gets exactly that profile."""
    profile = loop_profile(with_auto_loop, with_auto_loop.loops["scan-auto"])
    assert profile == Profile(Approval.AUTO, singleton=False, human_only=False, shadow=True)
    machine = Machines.from_rules(with_auto_loop).for_loop("scan-auto").occurrence
    assert machine.fire("triaging", "record_shadow") == "shadow_recorded"


def test_unknown_loop_suggests_the_closest(shipped: RuleSet) -> None:
    """Asking for a loop that does not exist raises UnknownMachine with a did-you-mean."""
    with pytest.raises(UnknownMachine, match="did you mean 'reaper'"):
        Machines.from_rules(shipped).for_loop("reapr")


# ---- the table agrees with the transitions Machine --------------------------------------


class _Model:
    """A transitions model whose guard attributes come from a context."""

    def __init__(self, context: Mapping[str, bool]) -> None:
        for name, value in context.items():
            setattr(self, name, value)


def _via_table(compiled: CompiledMachine, state: str, trigger: str, ctx: Any) -> str:
    try:
        return compiled.fire(state, trigger, ctx)
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


@pytest.mark.parametrize("compiled", every_machine(), ids=lambda c: c.name)
def test_table_agrees_with_transitions_machine(compiled: CompiledMachine) -> None:
    """For every state, trigger and guard outcome, the fast table and the real
    transitions Machine reach the same state or both refuse."""
    triggers = (*TRIGGERS[compiled.spec.kind], "no_such_trigger")
    for values in itertools.product((True, False), repeat=len(ALL_CONDITIONS)):
        context = dict(zip(ALL_CONDITIONS, values, strict=True))
        model = _Model(context)
        compiled.machine.add_model(model, initial=compiled.initial)
        try:
            for state, trigger in itertools.product(compiled.spec.states, triggers):
                expected = _via_machine(compiled, model, state, trigger)
                assert _via_table(compiled, state, trigger, context) == expected, (state, trigger)
        finally:
            compiled.machine.remove_model(model)


# ---- golden tables -----------------------------------------------------------------------


def _golden_documents() -> dict[str, dict[str, Any]]:
    docs: dict[str, dict[str, Any]] = {"occurrence": {}, "proposal": {}, "run": {}}
    for compiled in every_machine():
        docs[compiled.spec.kind][compiled.name] = compiled.table.as_json()
    return docs


def test_compiled_tables_match_golden_files() -> None:
    """The compiled tables equal tests/data/machines/*.json (UPDATE_GOLDEN=1 rewrites)."""
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
