"""Diagrams of the compiled machines, drawn by transitions' own graph support.

A target is a lifecycle name (`occurrence`, `proposal`, `run`), a loop name (that
loop's occurrence machine with its guards) or an event type (the occurrence machine
of events no loop emitted). Mermaid and dot are text; svg needs Graphviz's `dot`."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from engine.core.machines import DEFAULT_PROFILE, Profile
from engine.core.states import MachineKind
from engine.machines.catalog import Machines, lifecycle
from engine.machines.compiled import CompiledMachine
from engine.machines.errors import DiagramUnavailable, UnknownMachine


class DiagramFormat(StrEnum):
    MERMAID = "mermaid"
    DOT = "dot"
    SVG = "svg"


class TargetKind(StrEnum):
    MACHINE = "machine"
    LOOP = "loop"
    EVENT_TYPE = "event type"


@dataclass(frozen=True, slots=True)
class Target:
    """Something `engine diagram` can draw."""

    name: str
    kind: TargetKind
    machine: CompiledMachine
    profile: Profile | None  # None for the proposal and run machines
    summary: str

    @property
    def title(self) -> str:
        """A diagram title (no colons: mermaid reads it as YAML front matter)."""
        if self.kind is TargetKind.MACHINE:
            return f"{self.name} lifecycle ({self.summary})"
        return f"occurrence of {self.kind} {self.name} ({self.summary})"


def _machine_targets() -> list[Target]:
    base = lifecycle(DEFAULT_PROFILE)
    return [
        Target(
            MachineKind.OCCURRENCE,
            TargetKind.MACHINE,
            base.occurrence,
            DEFAULT_PROFILE,
            "default loop profile, watched and singleton; name a loop for its own guards",
        ),
        Target(
            MachineKind.PROPOSAL,
            TargetKind.MACHINE,
            base.proposal,
            None,
            "a watched decision waiting for an operator",
        ),
        Target(
            MachineKind.RUN,
            TargetKind.MACHINE,
            base.run,
            None,
            "approved work claimed by a worker; a lost lease requeues or fails",
        ),
    ]


def targets(machines: Machines) -> list[Target]:
    """Every target, machines first, then loops, then event types."""
    found = _machine_targets()
    for kind, table in (
        (TargetKind.LOOP, machines.loops),
        (TargetKind.EVENT_TYPE, machines.event_types),
    ):
        for name, lc in table.items():
            summary = lc.profile.name.replace("+", ", ")
            found.append(Target(name, kind, lc.occurrence, lc.profile, summary))
    return found


def resolve_target(machines: Machines, name: str) -> Target:
    """The target called `name` (lifecycle names win). Raises UnknownMachine with a
    did-you-mean."""
    every = targets(machines)
    for target in every:
        if target.name == name:
            return target
    raise UnknownMachine("diagram target", name, [t.name for t in every])


def render(target: Target, fmt: DiagramFormat, counts: Mapping[str, int] | None = None) -> str:
    """The diagram source (mermaid, dot) or the SVG document; terminal states are
    marked (mermaid `--> [*]`, a double border in dot). `counts` (dot and svg): how many
    records are in each state now, written under the state's name and shaded (the web
    loop page's live diagrams). Raises DiagramUnavailable for svg when Graphviz's `dot`
    is not installed."""
    if fmt is DiagramFormat.MERMAID:
        return _mermaid(target)
    if fmt is DiagramFormat.SVG and shutil.which("dot") is None:
        raise DiagramUnavailable(
            "svg needs Graphviz's `dot` program, which is not on PATH; install Graphviz "
            "(e.g. apt-get install graphviz) or use --format dot or mermaid"
        )
    graph = _graphviz(target, counts or {})
    if fmt is DiagramFormat.DOT:
        source: str = graph.source
        return source
    svg: bytes = graph.pipe(format="svg")
    return svg.decode("utf-8")


def _mermaid(target: Target) -> str:
    lines = str(target.machine.graph("mermaid", target.title).draw(None)).splitlines()
    if lines[:1] == ["---"] and len(lines) > 2 and not lines[1].startswith("title:"):
        lines[1] = f"title: {lines[1]}"  # front matter is YAML: mermaid reads `title:`
    lines += [f"  {state} --> [*]" for state in target.machine.spec.terminal]
    return "\n".join(lines) + "\n"


def _graphviz(target: Target, counts: Mapping[str, int]) -> Any:
    graph = target.machine.graph("graphviz", target.title)
    if not hasattr(graph, "node"):  # transitions fell back to mermaid
        raise DiagramUnavailable("dot and svg need the `graphviz` Python package")
    for state in target.machine.spec.terminal:
        graph.node(state, peripheries="2")
    for state in target.machine.spec.states:
        if state in counts:  # a later statement of a node adds to (and overrides) it
            graph.node(
                state,
                label=f"{state}\\n{counts[state]}",
                style="filled",
                fillcolor="#dbeafe" if counts[state] else "#ffffff",
            )
    return graph
