"""Every lifecycle step goes through the machines compiled from the rules
(engine.machines): a move the rules do not allow raises Conflict and changes nothing.
The machines are compiled once per rule set; each step is a table lookup.

Planning fires on the machine the current rules give the loop or event type. Steps
after the decision (approval, rejection, expiry, supersede; verifying a finished run)
follow the path the occurrence already took, whatever the rules say now: an
occurrence proposed under watched rules is still approvable after the loop earns
`approval auto` and the runtime restarts."""

from __future__ import annotations

from collections.abc import Mapping

from engine.core.ruleset import Approval, RuleSet
from engine.errors import Conflict
from engine.machines.catalog import Machines
from engine.machines.compiled import CompiledMachine, compile_spec
from engine.machines.errors import LifecycleError
from engine.machines.profiles import event_type_profile
from engine.machines.specs import Profile, occurrence_spec, proposal_spec, run_spec


def _fire(machine: CompiledMachine, state: str, trigger: str, context: Mapping[str, bool]) -> str:
    try:
        return machine.fire(state, trigger, context)
    except LifecycleError as err:
        raise Conflict(str(err), state=state, trigger=trigger) from None


class Lifecycle:
    """Fires triggers on the machines compiled for a rule set."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self.machines = Machines.from_rules(rules)
        self._proposal = {flag: compile_spec(proposal_spec(flag)) for flag in (False, True)}
        self._run = compile_spec(run_spec())
        # The paths an occurrence takes after its decision: proposed (guarded when
        # human-only) and dispatched.
        self._proposed = {
            flag: compile_spec(occurrence_spec(Profile(Approval.WATCHED, False, flag)))
            for flag in (False, True)
        }
        self._dispatched = compile_spec(occurrence_spec(Profile(Approval.AUTO, False, False)))

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
        """A planning step, on the machine the current rules give."""
        return _fire(self.occurrence_machine(loop, event_type), state, trigger, conditions)

    def proposed(self, human_only: bool, state: str, trigger: str, **conditions: bool) -> str:
        """A step of an occurrence that was proposed: approve, reject, expire, supersede."""
        return _fire(self._proposed[human_only], state, trigger, conditions)

    def dispatched(self, state: str, trigger: str, **conditions: bool) -> str:
        """A step of an occurrence whose work was dispatched: verify, complete, fail."""
        return _fire(self._dispatched, state, trigger, conditions)

    def proposal(self, human_only: bool, state: str, trigger: str, **conditions: bool) -> str:
        return _fire(self._proposal[human_only], state, trigger, conditions)

    def run(self, state: str, trigger: str, **conditions: bool) -> str:
        return _fire(self._run, state, trigger, conditions)
