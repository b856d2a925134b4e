"""One lifecycle table and how a step is fired on it (engine.core.machines holds the
tables themselves): `Machine.fire(state, trigger, facts)` is one dict lookup, plus the
guard when the move has one. A guard reads a fact its caller cannot make up
(`StepFacts`), so it can refuse; an unknown move raises IllegalTransition, a refused
one ConditionFailed, both a Conflict that changes nothing. Pure: no I/O, no clock."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from engine.core.decisions import is_human
from engine.core.states import Condition, MachineKind
from engine.errors import Conflict, EngineError

Moves = Mapping[tuple[str, str], str]


class Guard(NamedTuple):
    """A condition on a move: when it does not hold the move is refused, or goes to
    `otherwise` when there is one (a run's lost lease: requeued, else failed)."""

    condition: Condition
    otherwise: str | None = None


Guards = Mapping[tuple[str, str], Guard]


# ---- the facts a guard reads ------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StepFacts:
    """What a guard reads, as the caller found it; None when the caller did not look
    (a guarded move fired without its fact is a bug in the caller: MissingFact)."""

    actor: str | None = None  # who takes the step, as authenticated or as the engine
    in_flight: bool | None = None  # a run of the loop is queued, claimed or running
    attempts_left: int | None = None  # attempts a run whose lease expired may still have


NO_FACTS = StepFacts()


def _not_in_flight(facts: StepFacts) -> bool | None:
    return None if facts.in_flight is None else not facts.in_flight


def _human(facts: StepFacts) -> bool | None:
    return None if facts.actor is None else is_human(facts.actor)


def _attempts_remain(facts: StepFacts) -> bool | None:
    return None if facts.attempts_left is None else facts.attempts_left > 0


CONDITIONS: Mapping[Condition, Callable[[StepFacts], bool | None]] = {
    Condition.NO_RUN_IN_FLIGHT: _not_in_flight,
    Condition.ACTOR_IS_HUMAN: _human,
    Condition.ATTEMPTS_REMAIN: _attempts_remain,
}


# ---- errors -------------------------------------------------------------------------------


class IllegalTransition(Conflict):
    """The trigger is not allowed from this state; nothing changed (409)."""

    def __init__(self, machine: str, state: str, trigger: str, allowed: tuple[str, ...]) -> None:
        self.machine, self.state, self.trigger, self.allowed = machine, state, trigger, allowed
        super().__init__(self._message(), state=state, trigger=trigger)

    def _message(self) -> str:
        if not self.allowed:
            return (
                f"{self.machine}: cannot '{self.trigger}' from '{self.state}': "
                "it is a terminal state or not a state of this machine"
            )
        return (
            f"{self.machine}: cannot '{self.trigger}' from '{self.state}'; "
            f"allowed from '{self.state}': {', '.join(self.allowed)}"
        )


class ConditionFailed(IllegalTransition):
    """The move exists but its guard said no; nothing changed (409)."""

    def __init__(self, machine: str, state: str, trigger: str, failed: Condition) -> None:
        self.failed = (str(failed),)
        super().__init__(machine, state, trigger, ())

    def _message(self) -> str:
        return (
            f"{self.machine}: '{self.trigger}' from '{self.state}' refused by its "
            f"guard: {', '.join(self.failed)}"
        )


class MissingFact(EngineError):
    """A guarded move was fired without the fact its guard reads (a bug in the caller,
    500); nothing changed."""

    def __init__(self, machine: str, trigger: str, condition: Condition) -> None:
        self.condition = str(condition)
        super().__init__(
            f"{machine}: '{trigger}' needs the fact behind '{condition}' but the caller gave none",
            trigger=trigger,
        )


# ---- a machine --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Machine:
    """One lifecycle's table: its states in display order, where it starts and ends,
    its moves and the guards on some of them."""

    name: str
    kind: MachineKind
    states: tuple[str, ...]
    terminal: frozenset[str]
    moves: Moves
    guards: Guards

    @property
    def initial(self) -> str:
        return self.states[0]

    def fire(self, state: str, trigger: str, facts: StepFacts = NO_FACTS) -> str:
        """The state `trigger` moves `state` to. Raises IllegalTransition (no such
        move), ConditionFailed (its guard said no) or MissingFact."""
        key = (state, trigger)
        dest = self.moves.get(key)
        if dest is None:
            raise IllegalTransition(self.name, state, trigger, self.allowed(state))
        guard = self.guards.get(key)
        if guard is None:
            return dest
        holds = CONDITIONS[guard.condition](facts)
        if holds is None:
            raise MissingFact(self.name, trigger, guard.condition)
        if holds:
            return dest
        if guard.otherwise is not None:
            return guard.otherwise
        raise ConditionFailed(self.name, state, trigger, guard.condition)

    def allowed(self, state: str) -> tuple[str, ...]:
        """The triggers that have a move from `state` (guards aside), sorted."""
        return tuple(sorted(t for s, t in self.moves if s == state))

    def is_terminal(self, state: str) -> bool:
        return state in self.terminal

    def as_json(self) -> dict[str, Any]:
        """A stable, diff-friendly document of the whole table (golden files, docs): one
        line per branch, `state + trigger -> dest [if c] [unless c]`."""
        order = {s: i for i, s in enumerate(self.states)}
        keys = sorted(self.moves, key=lambda k: (order[k[0]], k[1]))
        return {
            "name": self.name,
            "states": list(self.states),
            "initial": self.initial,
            "terminal": [s for s in self.states if s in self.terminal],
            "transitions": [row for key in keys for row in self._rows(*key)],
        }

    def _rows(self, state: str, trigger: str) -> list[str]:
        move = f"{state} + {trigger} -> "
        guard = self.guards.get((state, trigger))
        if guard is None:
            return [move + self.moves[(state, trigger)]]
        rows = [f"{move}{self.moves[(state, trigger)]} if {guard.condition}"]
        if guard.otherwise is not None:
            rows.append(f"{move}{guard.otherwise} unless {guard.condition}")
        return rows
