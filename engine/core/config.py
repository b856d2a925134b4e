"""Instance configuration values: `config/repos.yaml` and the schedule overlay
`config/schedule.yaml`. Both files are ignored by git; `*.example.yaml` beside them are
committed. Shapes only; the compiler applies the overlay."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

REPO_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
GITHUB_SLUG_PATTERN = r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"


class RepoEntry(BaseModel):
    """One configured repository; the short name is the mapping key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    github: str = Field(pattern=GITHUB_SLUG_PATTERN)
    base: str = Field(default="main", min_length=1)
    report_only: bool = False
    disabled: bool = False  # no mutation work is dispatched for it (stop condition)
    # a release freeze for this repo only (docs/occurrences.md#stop-conditions-and-release-freeze)
    frozen: bool = False


# Fields an overlay may change on a kernel loop (docs/rules.md#the-overlay-configscheduleyaml);
# every other field of a kernel loop is pinned by the reviewed rule file.
OVERLAY_MUTABLE = frozenset({"enabled", "every", "payload"})


class OverlayEntry(BaseModel):
    """One `schedules:` entry. On a kernel loop only `enabled`, `every` and payload keys
    may be given; a new loop must be complete (an `emit` and a trigger)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool | None = None
    every: str | None = None
    payload: dict[str, Any] | None = None
    emit: str | None = None
    cron: str | None = None
    timezone: str | None = None
    at: str | None = None
    manual: bool | None = None
    catch_up: Literal["none", "last", "all"] | None = None
    catch_up_cap: int | None = Field(default=None, ge=1)
    max_lateness: str | None = None
    # One overlap setting, as in a rule file (docs/rules.md#overlap). `singleton` is its
    # old spelling: it loads for one release with a W0901 warning (engine.core.overlay).
    overlap: Literal["skip", "buffer_one", "allow"] | None = None
    singleton: bool | None = None
    approval: Literal["watched", "auto"] | None = None
    # Read only to refuse it with a precise reason: shadow mode, like auto approval, is
    # granted by a reviewed rule file alone (E0304, E0801).
    shadow: Any = None
    description: str | None = None

    def given(self) -> set[str]:
        """The fields the operator wrote."""
        return set(self.model_fields_set)


HOST_CLOCK_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"


class HostClock(BaseModel):
    """One `host_clocks:` entry of `config/schedule.yaml` (docs/deploy.md#2-the-host-clock-bridge):
    a host timer that `engine render` turns into a launchd plist or systemd timer calling `engine
    emit`. Gates are argv lists, never shell text. The name is the mapping key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=HOST_CLOCK_NAME_PATTERN)
    cadence: str
    emit: str
    payload: dict[str, Any] = Field(default_factory=dict)
    enabled: bool = False
    gate_command: list[str] | None = Field(default=None, min_length=1)
    dry_command: list[str] | None = Field(default=None, min_length=1)
    description: str | None = None

    @field_validator("gate_command", "dry_command", mode="before")
    @classmethod
    def _argv(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, list):
            raise ValueError('must be an argv list of strings (no shell), e.g. ["queue", "--gate"]')
        return value


@dataclass(frozen=True)
class HostTimer:
    """A validated host clock. `loop` names the kernel bridge loop (a `host-clock`
    loop of the same name and event type) whose ticks it posts, else None."""

    name: str
    event_type: str
    cadence: str
    every_seconds: int
    payload: dict[str, Any]
    enabled: bool
    gate_command: tuple[str, ...] | None
    dry_command: tuple[str, ...] | None
    loop: str | None
