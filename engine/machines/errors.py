"""The diagram layer's exceptions. Each class builds its own message and carries the
exit code and HTTP status a caller maps it to (exit codes as in `engine.cli.exits`).
An illegal move is the core's IllegalTransition (engine.core.machines), a Conflict."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class LifecycleError(Exception):
    """Base of every error this layer raises."""

    exit_code = 1
    http_status = 409


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
