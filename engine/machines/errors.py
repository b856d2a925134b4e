"""The machines layer's exceptions. Each class builds its own message and carries the
exit code and HTTP status a caller maps it to (exit codes as in `engine.cli.exits`)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class LifecycleError(Exception):
    """Base of every error this layer raises."""

    exit_code = 1
    http_status = 409


class IllegalTransition(LifecycleError):
    """The trigger is not allowed from this state; nothing changed."""

    def __init__(self, machine: str, state: str, trigger: str, allowed: Iterable[str]) -> None:
        self.machine = machine
        self.state = state
        self.trigger = trigger
        self.allowed = tuple(allowed)
        super().__init__(self._message())

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
    """The edge exists but a guard condition said no; nothing changed."""

    def __init__(self, machine: str, state: str, trigger: str, failed: Iterable[str]) -> None:
        self.failed = tuple(failed)
        super().__init__(machine, state, trigger, ())

    def _message(self) -> str:
        return (
            f"{self.machine}: '{self.trigger}' from '{self.state}' refused by its "
            f"guard: {', '.join(self.failed)}"
        )


class MissingCondition(LifecycleError):
    """The caller's context lacks a condition an edge needs (a bug in the caller)."""

    http_status = 500

    def __init__(self, machine: str, trigger: str, condition: str) -> None:
        self.condition = condition
        super().__init__(
            f"{machine}: '{trigger}' needs condition '{condition}' but the context has none"
        )


class UnknownMachine(LifecycleError):
    """No machine (or diagram target) by that name; suggests the closest one."""

    exit_code = 2
    http_status = 404

    def __init__(self, what: str, name: str, known: Iterable[str]) -> None:
        self.name = name
        close = difflib.get_close_matches(name, list(known), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        super().__init__(f"unknown {what} '{name}'{hint}")


class DiagramUnavailable(LifecycleError):
    """A diagram format needs a tool that is not installed."""

    exit_code = 2
    http_status = 503
