"""The fast path: a compiled machine flattened into a plain dict.

`Table.fire(state, trigger, context)` is one dict lookup plus the guard checks; it
returns the new state or raises, and never mutates anything. The tables are derived
from the compiled `transitions` machines (see `engine.machines.compiled`), and a test
holds that both answer the same for every state and trigger."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from engine.machines.errors import ConditionFailed, IllegalTransition, MissingCondition

NO_CONTEXT: Mapping[str, bool] = MappingProxyType({})


class Branch(NamedTuple):
    """One destination of a (state, trigger) pair; branches are tried in order."""

    dest: str
    conditions: tuple[str, ...] = ()  # all must be true
    unless: tuple[str, ...] = ()  # all must be false


Edges = Mapping[tuple[str, str], tuple[Branch, ...]]


def _holds(machine: str, trigger: str, context: Mapping[str, bool], name: str) -> bool:
    try:
        return context[name]
    except KeyError:
        raise MissingCondition(machine, trigger, name) from None


@dataclass(frozen=True, slots=True)
class Table:
    """{(state, trigger): branches} for one machine, with its states in order."""

    name: str
    states: tuple[str, ...]
    initial: str
    terminal: frozenset[str]
    edges: Edges
    # (state, trigger) -> dest for the unguarded single-branch edges: one lookup, no loop
    direct: Mapping[tuple[str, str], str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        direct = {k: bs[0].dest for k, bs in self.edges.items() if bs == (Branch(bs[0].dest),)}
        object.__setattr__(self, "direct", direct)

    def fire(self, state: str, trigger: str, context: Mapping[str, bool] = NO_CONTEXT) -> str:
        """The state `trigger` moves `state` to. Raises IllegalTransition (no such edge),
        ConditionFailed (a guard said no) or MissingCondition (context lacks a guard)."""
        key = (state, trigger)
        dest = self.direct.get(key)
        if dest is not None:
            return dest
        branches = self.edges.get(key)
        if branches is None:
            raise IllegalTransition(self.name, state, trigger, self.allowed(state))
        for branch in branches:
            if self._passes(branch, trigger, context):
                return branch.dest
        raise ConditionFailed(self.name, state, trigger, self._failed(branches, trigger, context))

    def _passes(self, branch: Branch, trigger: str, context: Mapping[str, bool]) -> bool:
        name = self.name
        return all(_holds(name, trigger, context, c) for c in branch.conditions) and not any(
            _holds(name, trigger, context, u) for u in branch.unless
        )

    def _failed(
        self, branches: tuple[Branch, ...], trigger: str, context: Mapping[str, bool]
    ) -> list[str]:
        failed: list[str] = []
        for b in branches:
            failed += [c for c in b.conditions if not _holds(self.name, trigger, context, c)]
            failed += [f"not {u}" for u in b.unless if _holds(self.name, trigger, context, u)]
        return failed

    def allowed(self, state: str) -> tuple[str, ...]:
        """The triggers that have an edge from `state` (guards aside), sorted."""
        return tuple(sorted(t for s, t in self.edges if s == state))

    def is_terminal(self, state: str) -> bool:
        return state in self.terminal

    def as_json(self) -> dict[str, Any]:
        """A stable, diff-friendly document of the whole table (golden files, docs):
        one line per branch, `state + trigger -> dest [if c, ...] [unless u, ...]`."""
        order = {s: i for i, s in enumerate(self.states)}
        rows = sorted(self.edges.items(), key=lambda kv: (order[kv[0][0]], kv[0][1]))
        return {
            "name": self.name,
            "states": list(self.states),
            "initial": self.initial,
            "terminal": [s for s in self.states if s in self.terminal],
            "transitions": [_row(s, t, b) for (s, t), bs in rows for b in bs],
        }


def _row(state: str, trigger: str, branch: Branch) -> str:
    guards = [f"if {', '.join(branch.conditions)}"] if branch.conditions else []
    guards += [f"unless {', '.join(branch.unless)}"] if branch.unless else []
    return " ".join([f"{state} + {trigger} -> {branch.dest}", *guards])
