"""Filling a closed argv template (pure): a command definition's, or a watch's probe's.

Each argv element is one string; `{name}` placeholders in it are filled by the builtins
({python}, {run_id}, {run_dir}, {event_id}) or by declared params read from the event
payload. A value fills its own element only (never split, never a shell), and must fit
its param type, so a payload can never add an argument or an option; a value that does
not fit refuses the run (ArgumentRefused) before anything executes. The command adapter
fills a template for a run (engine/adapters/command.py); `preview` fills it the same way
before any run exists, for a person deciding a proposal (engine/service/review.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core.registry import (
    BUILTIN_PLACEHOLDERS,
    PLACEHOLDER,
    Definition,
    Param,
    Probe,
    lookup,
    param_problem,
)
from engine.errors import Unprocessable


class ArgumentRefused(Unprocessable):
    """A payload value is missing or does not fit its param type: nothing runs."""


# A closed argv template: a command definition's, or a watch's probe's.
Template = Definition | Probe


def param_value(name: str, param: Param, payload: Mapping[str, Any]) -> str:
    """The text of one param, checked against its type's pattern (ArgumentRefused)."""
    problem = param_problem(name, param, payload)
    if problem is not None:
        raise ArgumentRefused(problem)
    return str(lookup(payload, param.source))


def _values(
    definition: Template, builtins: Mapping[str, str], payload: Mapping[str, Any]
) -> dict[str, str]:
    values = dict(builtins)
    for name, param in definition.params.items():
        values[name] = param_value(name, param, payload)
    return values


def build_argv(
    definition: Template, builtins: Mapping[str, str], payload: Mapping[str, Any]
) -> list[str]:
    """Fill the template element by element; raises ArgumentRefused."""
    values = _values(definition, builtins, payload)
    return [PLACEHOLDER.sub(lambda m: values[m.group(1)], item) for item in definition.argv]


def workspace_path(
    definition: Definition, builtins: Mapping[str, str], payload: Mapping[str, Any]
) -> Path | None:
    """The definition's workspace, its template filled like argv; raises ArgumentRefused."""
    if definition.workspace is None:
        return None
    values = _values(definition, builtins, payload)
    return Path(PLACEHOLDER.sub(lambda m: values[m.group(1)], definition.workspace.path))


# ---- before a run exists -------------------------------------------------------------

# Of the builtins, only the event's id is known before the run: the worker alone knows
# its interpreter, the run's id and the run's artifact directory.
KNOWN_BEFORE_RUN = frozenset({"event_id"})


@dataclass(frozen=True, slots=True)
class Preview:
    """A command template filled before its run: `argv` and `workspace` as the worker
    will fill them, each builtin only the run knows shown as `<name>` and listed in
    `pending` (in the order it first appears); `problem` is the ArgumentRefused text
    when the payload does not fit a param (then `argv` and `workspace` are None: the run
    would be refused and nothing would execute)."""

    argv: tuple[str, ...] | None
    workspace: str | None
    pending: tuple[str, ...]
    problem: str | None = None


def preview(definition: Definition, event_id: str, payload: Mapping[str, Any]) -> Preview:
    """Fill `definition`'s argv (and workspace) from the event's payload as the command
    adapter will, with `event_id` for {event_id} and `<name>` for the other builtins."""
    builtins = {name: f"<{name}>" for name in BUILTIN_PLACEHOLDERS}
    builtins["event_id"] = event_id
    workspace = (definition.workspace.path,) if definition.workspace else ()
    used = (name for item in (*definition.argv, *workspace) for name in PLACEHOLDER.findall(item))
    pending = tuple(
        dict.fromkeys(
            name
            for name in used
            if name in BUILTIN_PLACEHOLDERS
            and name not in KNOWN_BEFORE_RUN
            and name not in definition.params
        )
    )
    try:
        argv = build_argv(definition, builtins, payload)
        place = workspace_path(definition, builtins, payload)
    except ArgumentRefused as err:
        return Preview(None, None, pending, err.message)
    return Preview(tuple(argv), None if place is None else str(place), pending)
