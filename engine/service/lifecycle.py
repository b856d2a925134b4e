"""Every lifecycle step goes through the machines compiled from the rules
(engine.machines): a move the rules do not allow raises and changes nothing. The
machines are compiled once per profile; each step is a table lookup."""

from __future__ import annotations

from functools import cache

from engine.core.ruleset import RuleSet
from engine.machines.compiled import CompiledMachine, compile_spec
from engine.machines.profiles import event_type_profile, loop_profile
from engine.machines.specs import occurrence_spec, proposal_spec, run_spec


class Lifecycle:
    """Fires triggers on the machines compiled for a rule set."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self._occurrences: dict[tuple[str | None, str], CompiledMachine] = {}
        self._run = compile_spec(run_spec())

    def occurrence_machine(self, loop: str | None, event_type: str) -> CompiledMachine:
        key = (loop, event_type)
        machine = self._occurrences.get(key)
        if machine is None:
            found = self.rules.loops.get(loop) if loop else None
            profile = (
                loop_profile(self.rules, found)
                if found is not None
                else event_type_profile(self.rules, event_type)
            )
            machine = self._occurrences[key] = compile_spec(occurrence_spec(profile))
        return machine

    def occurrence(
        self, loop: str | None, event_type: str, state: str, trigger: str, **conditions: bool
    ) -> str:
        return self.occurrence_machine(loop, event_type).fire(state, trigger, conditions)

    def proposal(self, human_only: bool, state: str, trigger: str, **conditions: bool) -> str:
        return _proposal_machine(human_only).fire(state, trigger, conditions)

    def run(self, state: str, trigger: str, **conditions: bool) -> str:
        return self._run.fire(state, trigger, conditions)


@cache
def _proposal_machine(human_only: bool) -> CompiledMachine:
    return compile_spec(proposal_spec(human_only))
