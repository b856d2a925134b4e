"""Compile machine specs into `transitions` machines: the one module that imports it.

The runtime never fires these: it fires the core tables (engine.core.machines) with a
dict lookup. A Machine is built for `engine diagram` (transitions' own GraphMachine,
imported only when a diagram is asked for) and for the test that holds the tables and
the Machines to the same answers. Each distinct spec is compiled once per process."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal

from transitions import Machine

from engine.machines.specs import MachineSpec

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


@dataclass(frozen=True, eq=False, slots=True)
class CompiledMachine:
    """A spec and its `transitions` Machine."""

    spec: MachineSpec
    machine: Machine  # built with model=None; the runtime never adds a model

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def initial(self) -> str:
        return self.spec.initial

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
    return CompiledMachine(spec, machine)
