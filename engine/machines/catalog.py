"""`Machines`: the compiled lifecycles of one rule set, built once per load.

The runtime asks for the machines of a loop's tick (`for_loop`) or of an event no loop
emitted (`for_event_type`) and fires triggers through their tables. Machines are
compiled once per distinct profile and shared; looking one up is a dict access."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engine.core.ruleset import RuleSet
from engine.machines.compiled import CompiledMachine, compile_spec
from engine.machines.errors import UnknownMachine
from engine.machines.profiles import event_type_profiles, loop_profiles
from engine.machines.specs import Profile, occurrence_spec, proposal_spec, run_spec


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

        loops = {n: get(p) for n, p in loop_profiles(rules).items()}
        event_types = {t: get(p) for t, p in event_type_profiles(rules).items()}
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
