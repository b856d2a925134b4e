"""The lifecycles in the shape `transitions` builds machines from, read from the core
tables (engine.core.machines): one source, so a diagram cannot drift from what runs.

A move becomes an edge; edges of one trigger, destination and guard are grouped by
source in table order. A guard becomes a condition; a guard with an `otherwise` (a
lost lease) becomes two ordered edges, the second `unless` the condition. This module
imports no state-machine library, does no I/O and reads no clock."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from engine.core.machines import RUN_MACHINE, Profile, occurrence_machine, proposal_machine
from engine.core.states import MachineKind
from engine.core.table import Machine


@dataclass(frozen=True, slots=True)
class TransitionSpec:
    """One edge: `trigger` moves any of `sources` to `dest` when every condition holds
    and no `unless` condition does. Edges of one trigger are tried in order."""

    trigger: str
    sources: tuple[str, ...]
    dest: str
    conditions: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MachineSpec:
    """A whole lifecycle: its states in display order, where it starts and ends."""

    name: str
    kind: MachineKind
    states: tuple[str, ...]
    initial: str
    terminal: tuple[str, ...]
    transitions: tuple[TransitionSpec, ...]


Branch = tuple[str, str, tuple[str, ...], tuple[str, ...]]  # trigger, dest, if, unless


def _branches(machine: Machine, state: str, trigger: str) -> list[Branch]:
    dest = machine.moves[(state, trigger)]
    guard = machine.guards.get((state, trigger))
    if guard is None:
        return [(trigger, dest, (), ())]
    condition = (str(guard.condition),)
    found: list[Branch] = [(trigger, dest, condition, ())]
    if guard.otherwise is not None:
        found.append((trigger, guard.otherwise, (), condition))
    return found


def spec_of(machine: Machine) -> MachineSpec:
    """The spec of a core table (plain strings: transitions would treat enum members as
    Enum states)."""
    sources: dict[Branch, list[str]] = {}
    for state, trigger in machine.moves:
        for branch in _branches(machine, state, trigger):
            sources.setdefault(branch, []).append(str(state))
    edges = tuple(
        TransitionSpec(str(t), tuple(s), str(dest), cond, unless)
        for (t, dest, cond, unless), s in sources.items()
    )
    states = tuple(str(s) for s in machine.states)
    terminal = tuple(s for s in states if s in machine.terminal)
    return MachineSpec(machine.name, machine.kind, states, states[0], terminal, edges)


@functools.cache
def occurrence_spec(profile: Profile) -> MachineSpec:
    return spec_of(occurrence_machine(profile))


@functools.cache
def proposal_spec(human_only: bool) -> MachineSpec:
    return spec_of(proposal_machine(human_only))


@functools.cache
def run_spec() -> MachineSpec:
    return spec_of(RUN_MACHINE)
