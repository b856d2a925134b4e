"""`Machines`: the compiled lifecycles of one rule set, built once per load.

`engine diagram` asks for the machines of a loop's tick (`for_loop`) or of an event no
loop emitted (`for_event_type`); the runtime fires the core tables they are built from
(engine.core.machines). Machines are compiled once per distinct profile and shared."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engine.core.machines import Profile, event_type_profile, loop_profile
from engine.core.ruleset import RuleSet
from engine.machines.compiled import CompiledMachine, compile_spec
from engine.machines.errors import UnknownMachine
from engine.machines.specs import occurrence_spec, proposal_spec, run_spec


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """The three machines one profile uses."""

    profile: Profile
    occurrence: CompiledMachine
    proposal: CompiledMachine
    run: CompiledMachine


def lifecycle(profile: Profile) -> Lifecycle:
    """The compiled machines of `profile` (each compiled once per process)."""
    return Lifecycle(
        profile,
        compile_spec(occurrence_spec(profile)),
        compile_spec(proposal_spec(profile.human_only)),
        compile_spec(run_spec()),
    )


@dataclass(frozen=True, slots=True)
class Machines:
    """Lifecycles by loop name and by event type, for one rule set."""

    loops: Mapping[str, Lifecycle]
    event_types: Mapping[str, Lifecycle]

    @classmethod
    def from_rules(cls, rules: RuleSet) -> Machines:
        """Compile every profile the rules use, once."""
        cache: dict[Profile, Lifecycle] = {}

        def get(profile: Profile) -> Lifecycle:
            return cache.setdefault(profile, lifecycle(profile))

        loops = {n: get(loop_profile(rules, loop)) for n, loop in sorted(rules.loops.items())}
        types = sorted(set(rules.event_types) | set(rules.routes))
        event_types = {t: get(event_type_profile(rules, t)) for t in types}
        return cls(loops, event_types)

    def for_loop(self, name: str) -> Lifecycle:
        """The machines of a loop's ticks. Raises UnknownMachine."""
        found = self.loops.get(name)
        if found is None:
            raise UnknownMachine("loop", name, self.loops)
        return found

    def for_event_type(self, event_type: str) -> Lifecycle:
        """The machines of an event no loop emitted. Raises UnknownMachine."""
        found = self.event_types.get(event_type)
        if found is None:
            raise UnknownMachine("event type", event_type, self.event_types)
        return found

    @property
    def profiles(self) -> frozenset[Profile]:
        """The distinct profiles in use."""
        return frozenset(lc.profile for lc in (*self.loops.values(), *self.event_types.values()))
