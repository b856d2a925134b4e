"""Every lifecycle step goes through the machines compiled from the rules
(engine.machines): a move the rules do not allow raises and changes nothing. The
machines are compiled once per rule set; each step is a table lookup."""

from __future__ import annotations

from engine.core.ruleset import RuleSet
from engine.machines.catalog import Machines
from engine.machines.compiled import CompiledMachine, compile_spec
from engine.machines.profiles import event_type_profile
from engine.machines.specs import occurrence_spec, proposal_spec, run_spec


class Lifecycle:
    """Fires triggers on the machines compiled for a rule set."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self.machines = Machines.from_rules(rules)
        self._proposal = {flag: compile_spec(proposal_spec(flag)) for flag in (False, True)}
        self._run = compile_spec(run_spec())

    def occurrence_machine(self, loop: str | None, event_type: str) -> CompiledMachine:
        """A loop's tick uses its loop's machine; any other event its type's."""
        if loop is not None and loop in self.machines.loops:
            return self.machines.loops[loop].occurrence
        found = self.machines.event_types.get(event_type)
        if found is not None:
            return found.occurrence
        return compile_spec(occurrence_spec(event_type_profile(self.rules, event_type)))

    def occurrence(
        self, loop: str | None, event_type: str, state: str, trigger: str, **conditions: bool
    ) -> str:
        return self.occurrence_machine(loop, event_type).fire(state, trigger, conditions)

    def proposal(self, human_only: bool, state: str, trigger: str, **conditions: bool) -> str:
        return self._proposal[human_only].fire(state, trigger, conditions)

    def run(self, state: str, trigger: str, **conditions: bool) -> str:
        return self._run.fire(state, trigger, conditions)
