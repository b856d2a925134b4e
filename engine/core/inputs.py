"""What the compiler takes: parsed rule files and validated registry and configuration
entries, each with the place it was written. Built by `engine.loading`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from dsl.diagnostics import Collector, Span
from dsl.model import RuleFile
from engine.core.config import HostClock, OverlayEntry, RepoEntry
from engine.core.controllers import Controller
from engine.core.registry import Definition, EventType, Probe

T = TypeVar("T")


@dataclass(frozen=True)
class Located(Generic[T]):
    """A validated value and where it was written."""

    value: T
    span: Span
    keys: dict[str, Span] = field(default_factory=dict)  # span of each field written


@dataclass
class Tree:
    """Everything the compiler needs, read from disk. `collector` holds the problems
    found while reading, and the source text for quoting lines."""

    rule_files: list[RuleFile]
    event_types: list[Located[EventType]]
    definitions: list[Located[Definition]]
    contracts: dict[str, dict[str, Any]]
    repos: list[Located[tuple[str, RepoEntry]]]
    overlay: list[Located[tuple[str, OverlayEntry]]]
    digest: str
    collector: Collector
    host_clocks: list[Located[HostClock]] = field(default_factory=list)
    # config/schedule.yaml `release_freeze:`
    # (docs/occurrences.md#stop-conditions-and-release-freeze)
    release_freeze: bool = False
    probes: list[Located[Probe]] = field(default_factory=list)  # registry/probes.yaml
    controllers: list[Located[Controller]] = field(
        default_factory=list
    )  # registry/controllers.yaml
