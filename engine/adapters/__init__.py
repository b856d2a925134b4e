"""Adapters execute one claimed run and report an `Execution`; they never touch the
store. The worker picks the adapter named by the run's definition (`command`, `fake`,
`agent`) from an `Adapters` registry, whose overrides swap any of them: the demo
answers agent work with `Adapters(overrides={"agent": FakeAdapter(...)})`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from engine.adapters.command import CommandAdapter
from engine.adapters.controller import ControllerAdapter, Wake
from engine.adapters.fake import FakeAdapter
from engine.core.records import EventRecord, RunRecord
from engine.core.registry import Definition
from engine.service.runs import Execution

__all__ = [
    "Adapter",
    "Adapters",
    "AgentAdapter",
    "CommandAdapter",
    "ControllerAdapter",
    "FakeAdapter",
    "Job",
    "Wake",
]

NO_AGENT_RUNNER = "no agent runner is configured for adapter 'agent'"


@dataclass(frozen=True)
class Job:
    """What an adapter may use for one run: the run, the event it handles, its
    definition, and the run's artifact directory (created by the worker; a command's
    working directory)."""

    run: RunRecord
    event: EventRecord
    definition: Definition
    run_dir: Path
    wake: Wake | None = None  # a wake's controller and work (engine.adapters.controller)


class Adapter(Protocol):
    async def execute(self, job: Job) -> Execution:
        """Run the job to completion and report it. A refusal or a failure is an
        Execution with `result=None` and an `error`, not an exception; cancelling the
        call stops the work it started."""
        ...


class AgentAdapter:
    """The engine has no agent runner: agent work fails, visibly, until one is
    configured (or the adapter is overridden)."""

    async def execute(self, job: Job) -> Execution:
        return Execution(result=None, error=NO_AGENT_RUNNER)


class Adapters:
    """Adapter by name; `overrides` replace or add names."""

    def __init__(self, overrides: Mapping[str, Adapter] | None = None) -> None:
        self._by_name: dict[str, Adapter] = {
            "command": CommandAdapter(),
            "fake": FakeAdapter(),
            "agent": AgentAdapter(),
            "controller": ControllerAdapter(),
            **(overrides or {}),
        }

    def get(self, name: str) -> Adapter | None:
        return self._by_name.get(name)

    def for_definition(self, definition: Definition) -> Adapter | None:
        return self.get(definition.adapter)
