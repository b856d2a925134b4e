"""The compiled rule set: immutable values the runtime plans with. Built once per load
by `engine.core.compiler`; every value keeps the span of the rule that made it, so a
decision can name its file:line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from dsl import spelling
from dsl.diagnostics import Diagnostic, Span
from dsl.expr import Expr, ObjectExpr
from dsl.model import Guard, Let, Refusal
from engine.core.controllers import Controller
from engine.core.keys import KeyTemplate
from engine.core.provenance import Places
from engine.core.registry import Definition, EventType, Probe
from engine.core.triage import TriageRule


class TriggerKind(StrEnum):
    INTERVAL = "interval"  # `every 60m`: slots are the epoch floor of the cadence, UTC
    CRON = "cron"  # `cron "0 9 * * *" in Europe/Budapest`
    AT = "at"  # `at 2026-12-01T09:00:00Z`: one shot
    MANUAL = "manual"  # fired only by `engine schedule trigger`
    HOST = "host"  # `host_clock 24h`: fired by a host timer through `engine emit`
    WATCH = "watch"  # `watch ci-status every 5m`: polls a probe, fires when it changes
    EVENT = "event"  # `on_event TYPE [window EXPR] [if EXPR]`: fired by an admitted event
    AFTER = "after"  # `after LOOP [outcome X ...] [state S ...]`: fired by a conclusion


class CatchUp(StrEnum):
    NONE = "none"
    LAST = "last"
    ALL = "all"


class Approval(StrEnum):
    WATCHED = "watched"
    AUTO = "auto"


class OnActive(StrEnum):
    """What a trigger does while the loop already has its maximum of active occurrences for
    the repo (docs/occurrences.md#concurrency-overlap)."""

    RETURN = "return"  # NOOP occurrence_active, linked to the active occurrence
    COALESCE = "coalesce"  # NOOP coalesced: one follow-up tick when the active one ends
    SKIP = "skip"  # NOOP skipped_active, nothing else (only an old `on-active skip`)


# `catch-up all` without an explicit cap replays at most this many missed slots.
DEFAULT_CATCHUP_CAP = 100

# Tick payload fields the engine fills; a loop's static payload may not set them.
TICK_FIELDS = frozenset({"loop", "slot", "cadenceSeconds", "skippedSlots"})
# The fields a watch loop's tick carries instead (engine.core.ticks.watch_tick).
WATCH_FIELDS = frozenset({"loop", "window", "fingerprint", "previousFingerprint", "observedAt"})


def default_cap(catch_up: CatchUp, cap: int | None) -> int | None:
    """`catch-up all` always has a cap: the declared one or the default
    (docs/scheduling.md#missed-slots-catch-up)."""
    return cap if cap is not None or catch_up is not CatchUp.ALL else DEFAULT_CATCHUP_CAP


class Source(StrEnum):
    KERNEL = "kernel"
    OVERLAY = "overlay"


class StopCondition(StrEnum):
    """Conditions that stop dispatching mutation work
    (docs/occurrences.md#stop-conditions-and-release-freeze)."""

    RELEASE_READY = "release_ready"
    HUMAN_REVIEW_REQUIRED = "human_review_required"
    EXTERNAL_BLOCKER = "external_blocker"
    BUDGET_EXHAUSTED = "budget_exhausted"
    MAXIMUM_FAILURES_REACHED = "maximum_failures_reached"
    REPOSITORY_DISABLED = "repository_disabled"
    RELEASE_FREEZE = "release_freeze"
    USER_PAUSED = "user_paused"
    END_DATE = "end_date"
    OCCURRENCE_COUNT = "occurrence_count"


@dataclass(frozen=True, slots=True)
class Trigger:
    kind: TriggerKind
    every_seconds: int | None = None  # interval and host clocks; a watch's poll cadence
    cron: str | None = None
    timezone: str | None = None
    at: datetime | None = None
    probe: str | None = None  # a watch's probe (registry/probes.yaml)
    # on_event: the admitted type that fires the loop, the guard it must pass and the
    # window (an expression over `event`; None: the event's own id)
    event_type: str | None = None
    guard: Guard | None = None
    window: Expr | None = None
    # after: the loop whose concluded occurrences fire this one, and the filters
    upstream: str | None = None
    outcomes: tuple[str, ...] = ()
    states: tuple[str, ...] = ()

    def describe(self) -> str:
        """The trigger as its rule line says it, in the one spelling
        (docs/rules.md#one-spelling), a guarded `on_event` shortened to `(guarded)`."""
        from engine.core.durations import format_duration

        match self.kind:
            case TriggerKind.INTERVAL:
                return f"every {format_duration(self.every_seconds or 0)}"
            case TriggerKind.HOST:
                return f"host_clock {format_duration(self.every_seconds or 0)}"
            case TriggerKind.CRON:
                return f'cron "{self.cron}" in {self.timezone}'
            case TriggerKind.AT:
                return f"at {self.at.isoformat() if self.at else '?'}"
            case TriggerKind.WATCH:
                return f"watch {self.probe} every {format_duration(self.every_seconds or 0)}"
            case TriggerKind.EVENT:
                guarded = " (guarded)" if self.guard is not None else ""
                return f"on_event {self.event_type}{guarded}"
            case TriggerKind.AFTER:
                filters = "".join(
                    f" {word} {' '.join(values)}"
                    for word, values in (("outcome", self.outcomes), ("state", self.states))
                    if values
                )
                return f"after {self.upstream}{filters}"
        return "manual"


# `budget retries-per-occurrence` when not written.
DEFAULT_RETRIES = 2


@dataclass(frozen=True, slots=True)
class Budget:
    """A loop's budgets (docs/occurrences.md#budgets). None means the dimension is not limited;
    `active_occurrences` None means the default of the loop's overlap (see `max_active`)."""

    active_occurrences: int | None = None
    jobs_per_occurrence: int = 1
    retries_per_occurrence: int = DEFAULT_RETRIES
    wall_clock_seconds: int | None = None
    daily_wall_clock_seconds: int | None = None
    daily_runs: int | None = None


@dataclass(frozen=True, slots=True)
class Backoff:
    """Infrastructure-failure retry delay: base * 2^attempt, capped at max."""

    base_seconds: int = 60
    max_seconds: int = 3600


@dataclass(frozen=True, slots=True)
class Policy:
    """The occurrence-engine fields of a loop; declared here, enforced by the runtime."""

    budget: Budget = field(default_factory=Budget)
    backoff: Backoff = field(default_factory=Backoff)
    circuit_breaker: int | None = None  # consecutive failures that pause the loop
    stop_when: tuple[StopCondition, ...] = ()
    end_at: datetime | None = None  # `stop-when end_date=...`: stops from this instant
    max_occurrences: int | None = None  # `stop-when occurrence_count=N`
    # Shadow mode (docs/occurrences.md#shadow-mode): records what would run, runs nothing. The
    # compiler turns it on for a loop whose routed definition is mutating unless the loop says
    # `shadow false`; `shadow_declared` keeps whether the rule file wrote `shadow`.
    shadow: bool = False
    shadow_declared: bool = False


@dataclass(frozen=True, slots=True)
class Loop:
    name: str
    trigger: Trigger
    event_type: str
    payload: Mapping[str, Any]  # static; treat as read-only
    catch_up: CatchUp = CatchUp.NONE
    catch_up_cap: int | None = None  # most missed slots `all` replays (default 100)
    max_lateness_seconds: int | None = None  # a missed slot older than this never fires
    singleton: bool = True
    approval: Approval = Approval.WATCHED
    enabled: bool = False
    policy: Policy = field(default_factory=Policy)
    on_active: OnActive = OnActive.RETURN
    triage: tuple[TriageRule, ...] = ()  # the first matching line decides (docs/rules.md#triage)
    description: str = ""
    # The semantic key an occurrence works on (docs/rules.md#semantic-keys-key), its `for`
    # placeholders filled; None: the loop declares none and existing work is not checked.
    key: KeyTemplate | None = None
    source: Source = Source.KERNEL  # where the loop is declared
    origin: Span = field(default_factory=lambda: Span("<unknown>", 1, 1))
    overlay_origin: Span | None = None  # the overlay entry that changed or declared it
    overridden: tuple[str, ...] = ()  # kernel fields the overlay changed
    # A work-bound instance (engine.core.instances): the work item it follows, and the
    # route its firings take (to its controller's wake) instead of its event type's.
    work: WorkBound | None = None
    route: Route | None = None


@dataclass(frozen=True, slots=True)
class WorkBound:
    """What makes a loop an instance of a work-bound shape (docs/work.md): the shape,
    the binding and the work item it follows, and what each firing does."""

    shape: str
    binding_id: str
    work_id: str
    mode: WorkMode
    controller: str | None
    probe: str | None
    cooldown_seconds: int
    live: bool  # graduated out of shadow


def max_active(loop: Loop) -> int | None:
    """The most non-terminal occurrences the loop may have per repo: the declared
    `budget active-occurrences`, else 1 for a singleton loop and no limit (None) for an
    overlapping one."""
    declared = loop.policy.budget.active_occurrences
    if declared is not None:
        return declared
    return 1 if loop.singleton else None


def overlap_line(loop: Loop) -> spelling.Rewrite | None:
    """The loop's one `overlap` line (docs/rules.md#overlap), `overlap allow max 2`, from
    the run- and occurrence-level fields it compiles to; None for an old combination of
    `singleton`/`overlapping`, `on-active` and `budget active-occurrences` that no
    overlap value means (it still loads, with its W0901 warning saying so)."""
    return spelling.overlap_of(
        loop.singleton, str(loop.on_active), loop.policy.budget.active_occurrences
    )


class WorkMode(StrEnum):
    """What each firing of a work-bound loop does (docs/rules.md#work-bound-loop-shapes)."""

    CONTINUATION = "continuation"  # wakes the work's controller
    BROWSER_WATCH = "browser_watch"  # runs a browser probe; a change or a login marker wakes
    BROWSER_KEEPALIVE = "browser_keepalive"  # runs a browser probe; nothing wakes


@dataclass(frozen=True, slots=True)
class WorkShape:
    """A reviewed work-bound loop shape (`work MODE ...` in a loop block): not a loop,
    nothing fires it; an instance binds it to one work item. `loop` holds the compiled
    settings an instance starts from, always in shadow mode; `controller` names an entry
    of registry/controllers.yaml, `probe` a browser probe of registry/probes.yaml."""

    name: str
    mode: WorkMode
    controller: str | None
    probe: str | None
    trigger: Trigger
    cooldown_seconds: int  # the least time between two wakes of one instance
    loop: Loop
    origin: Span
    # The rule file writes `shadow false`: an instance may graduate out of shadow (to
    # what the shape allows, never more); without it every instance stays in shadow.
    graduates: bool = False


@dataclass(frozen=True, slots=True)
class DefinitionRef:
    id: str
    version: int

    def __str__(self) -> str:
        return f"{self.id}@{self.version}"


@dataclass(frozen=True, slots=True)
class Route:
    event_type: str
    definition: DefinitionRef
    approval: Approval  # for events that no loop emitted (webhooks, chains, injections)
    origin: Span


@dataclass(frozen=True, slots=True)
class EmitRule:
    """An event to emit: from a chain edge or a webhook line."""

    event_type: str
    subject: Expr | None
    event_id: Expr | None
    payload: ObjectExpr | None
    guard: Guard | None
    origin: Span


@dataclass(frozen=True, slots=True)
class Chain:
    definition: DefinitionRef
    outcome: str
    emits: tuple[EmitRule, ...]
    stop: bool
    origin: Span


WebhookStep = Let | Refusal | EmitRule


@dataclass(frozen=True, slots=True)
class WebhookTable:
    """One delivery kind's translation lines; the first matching line wins."""

    source: str
    kind: str
    steps: tuple[WebhookStep, ...]
    origin: Span


@dataclass(frozen=True, slots=True)
class Repo:
    name: str
    github: str
    base: str
    report_only: bool
    disabled: bool = False  # no mutation work is dispatched for it (a stop condition)
    frozen: bool = False  # a per-repo release freeze

    def as_scope(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "github": self.github,
            "base": self.base,
            "report_only": self.report_only,
            "disabled": self.disabled,
            "frozen": self.frozen,
            "configured": True,
        }

    def as_snapshot(self) -> dict[str, Any]:
        """The repo as triage sees it (`repo` in a triage expression)."""
        return {
            "name": self.name,
            "github": self.github,
            "disabled": self.disabled,
            "frozen": self.frozen,
            "report_only": self.report_only,
        }


@dataclass(frozen=True, slots=True)
class RuleSet:
    loops: Mapping[str, Loop]
    routes: Mapping[str, Route]
    chains: Mapping[tuple[DefinitionRef, str], Chain]
    webhooks: Mapping[tuple[str, str], WebhookTable]
    event_types: Mapping[str, EventType]
    definitions: Mapping[DefinitionRef, Definition]
    human_only_types: frozenset[str]
    human_only_definitions: frozenset[DefinitionRef]
    repos: Mapping[str, Repo]
    contracts: Mapping[str, Mapping[str, Any]]  # output contracts (JSON Schema) by $id
    digest: str
    # config/schedule.yaml `release_freeze:`
    # (docs/occurrences.md#stop-conditions-and-release-freeze)
    release_freeze: bool = False
    probes: Mapping[str, Probe] = field(default_factory=dict)  # registry/probes.yaml
    controllers: Mapping[str, Controller] = field(default_factory=dict)  # controllers.yaml
    # Work-bound loop shapes (docs/rules.md#work-bound-loop-shapes): never in `loops`.
    work_shapes: Mapping[str, WorkShape] = field(default_factory=dict)
    # What loaded with a warning (an old spelling, W0901), in file order; never in the digest.
    warnings: tuple[Diagnostic, ...] = field(default=(), compare=False)
    # Where each loop setting was written (engine check --explain); never part of the
    # meaning: not in the digest, not compared.
    places: Places = field(default_factory=Places, compare=False, repr=False)

    def is_human_only(self, event_type: str) -> bool:
        """True when no rule, chain or policy may approve this event type but a human:
        the type is declared human-only, or its route's definition is."""
        if event_type in self.human_only_types:
            return True
        route = self.routes.get(event_type)
        return route is not None and route.definition in self.human_only_definitions

    def route_of(self, event_type: str, loop: str | None = None) -> Route | None:
        """The route an event of `loop` takes: a work-bound instance's own (to its
        controller's wake), else its type's."""
        found = self.loops.get(loop) if loop is not None else None
        if found is not None and found.route is not None and found.event_type == event_type:
            return found.route
        return self.routes.get(event_type)

    def definition_for(self, event_type: str) -> Definition | None:
        route = self.routes.get(event_type)
        return self.definitions.get(route.definition) if route else None
