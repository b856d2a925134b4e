"""Compile machine specs into `transitions` machines: the one module that imports it.

Each distinct spec is compiled once and cached for the life of the process (a Machine
costs about 0.7 ms and 14 KB to build; a table lookup costs 0.2 µs), so no hot path
builds a Machine per event. The Machine holds no model (`model=None`): the runtime
fires through the plain `Table` derived from it, and diagrams are drawn from the same
spec by transitions' own GraphMachine, imported only when a diagram is asked for."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from transitions import Machine

from engine.machines.specs import MachineSpec
from engine.machines.table import NO_CONTEXT, Branch, Table

GraphEngine = Literal["graphviz", "mermaid"]


def machine_kwargs(spec: MachineSpec) -> dict[str, Any]:
    """The keyword arguments every machine of `spec` is built with, plain or graph."""
    return {
        "states": [{"name": s, "final": s in spec.terminal} for s in spec.states],
        "initial": spec.initial,
        "transitions": [
            {
                "trigger": t.trigger,
                "source": list(t.sources),
                "dest": t.dest,
                "conditions": list(t.conditions),
                "unless": list(t.unless),
            }
            for t in spec.transitions
        ],
        "auto_transitions": False,
        "ignore_invalid_triggers": False,
    }


def _branch(transition: Any) -> Branch:
    conditions = tuple(c.func for c in transition.conditions if c.target)
    unless = tuple(c.func for c in transition.conditions if not c.target)
    return Branch(transition.dest, conditions, unless)


def derive_table(name: str, machine: Machine) -> Table:
    """Flatten a compiled Machine into {(state, trigger): branches}, read from the
    Machine's own events so the table is what the Machine would do."""
    edges: dict[tuple[str, str], tuple[Branch, ...]] = {}
    for trigger, event in machine.events.items():
        for source, transitions in event.transitions.items():
            edges[(source, trigger)] = tuple(_branch(t) for t in transitions)
    states = tuple(machine.states)
    terminal = frozenset(s for s, state in machine.states.items() if state.final)
    return Table(name, states, str(machine.initial), terminal, edges)


@dataclass(frozen=True, eq=False, slots=True)
class CompiledMachine:
    """A spec, its `transitions` Machine and the table derived from it."""

    spec: MachineSpec
    machine: Machine  # built with model=None; the runtime never adds a model
    table: Table

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def initial(self) -> str:
        return self.spec.initial

    def fire(self, state: str, trigger: str, context: Mapping[str, bool] = NO_CONTEXT) -> str:
        """The fast path: see `Table.fire`."""
        return self.table.fire(state, trigger, context)

    def is_terminal(self, state: str) -> bool:
        return self.table.is_terminal(state)

    def graph(self, engine: GraphEngine, title: str) -> Any:
        """A transitions graph of this machine (`mermaid` or `graphviz` engine), with
        guard conditions on the edges; the initial state is highlighted."""
        from transitions.extensions.diagrams import GraphMachine  # lazy: diagrams only

        drawing = _Drawing()
        GraphMachine(
            model=drawing,
            graph_engine=engine,
            title=title,
            show_conditions=True,
            **machine_kwargs(self.spec),
        )
        return drawing.get_graph()


class _Drawing:
    """A throwaway model for GraphMachine, which draws from a model's point of view."""

    get_graph: Any


@functools.cache
def compile_spec(spec: MachineSpec) -> CompiledMachine:
    """Build the Machine for `spec` once; later calls return the same object."""
    machine = Machine(model=None, name=spec.name, **machine_kwargs(spec))
    return CompiledMachine(spec, machine, derive_table(spec.name, machine))
