"""Meaning of the settings inside a `loop` block. The grammar reads every setting as
`key arg...`; each handler here checks its arguments and points at the one that is
wrong, so a typo gets `did you mean` and a bad value gets its exact column."""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cache

from croniter import croniter

from dsl.diagnostics import Collector, Span, did_you_mean
from dsl.model import Arg, Setting
from engine.core.durations import DurationError, parse_duration
from engine.core.ruleset import (
    Approval,
    Backoff,
    CatchUp,
    Policy,
    StopCondition,
    Trigger,
    TriggerKind,
)


@dataclass
class Draft:
    """A loop's settings as they are read; `seen` catches a setting given twice."""

    trigger: Trigger | None = None
    trigger_span: Span | None = None
    catch_up: CatchUp = CatchUp.NONE
    catch_up_cap: int | None = None
    max_lateness_seconds: int | None = None
    singleton: bool = True
    approval: Approval = Approval.WATCHED
    approval_span: Span | None = None
    enabled: bool = False
    policy: Policy = field(default_factory=Policy)
    description: str = ""
    seen: dict[str, Span] = field(default_factory=dict)

    @property
    def trigger_written(self) -> bool:
        """True when a trigger setting was written, even one whose value was bad."""
        return any(key in self.seen for key in _TRIGGERS)


class _Bad(Exception):
    def __init__(self, code: str, message: str, span: Span, hint: str | None = None) -> None:
        self.code, self.message, self.span, self.hint = code, message, span, hint


def _words(setting: Setting, count: int, usage: str) -> tuple[Arg, ...]:
    if len(setting.args) != count:
        at = setting.args[count].span if len(setting.args) > count else setting.span
        if count == 0:
            raise _Bad("E0105", f"'{setting.key}' takes no arguments", at, f"write: {setting.key}")
        raise _Bad("E0105", f"'{setting.key}' takes {usage}", at, f"write: {setting.key} {usage}")
    return setting.args


def _duration(arg: Arg) -> int:
    try:
        return parse_duration(arg.value)
    except DurationError as err:
        raise _Bad(
            "E0201", f"unparseable duration: {err}", arg.span, "e.g. 90s, 60m, 4h, 7d"
        ) from None


def _count(arg: Arg, what: str) -> int:
    if not arg.value.isdigit() or int(arg.value) < 1:
        raise _Bad(
            "E0105", f"{what} must be a whole number of at least 1, not '{arg.value}'", arg.span
        )
    return int(arg.value)


def _choice(arg: Arg, choices: list[str], what: str) -> str:
    if arg.value not in choices:
        hint = did_you_mean(arg.value, choices) or "one of: " + ", ".join(choices)
        raise _Bad("E0105", f"unknown {what} '{arg.value}'", arg.span, hint)
    return arg.value


def _set_trigger(d: Draft, s: Setting, trigger: Trigger) -> None:
    if d.trigger is not None and d.trigger_span is not None:
        raise _Bad(
            "E0102",
            f"a loop has one trigger; '{s.key}' conflicts with the trigger at line "
            f"{d.trigger_span.line}",
            s.span,
        )
    d.trigger, d.trigger_span = trigger, s.span


def _every(d: Draft, s: Setting) -> None:
    (arg,) = _words(s, 1, "DURATION")
    _set_trigger(d, s, Trigger(TriggerKind.INTERVAL, every_seconds=_duration(arg)))


def _host_clock(d: Draft, s: Setting) -> None:
    (arg,) = _words(s, 1, "DURATION")
    _set_trigger(d, s, Trigger(TriggerKind.HOST, every_seconds=_duration(arg)))


@cache
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


Problem = tuple[str, str, str]  # code, message, hint


@cache
def valid_cron(expr: str) -> Problem | None:
    """None when `expr` is a five-field cron expression, else what is wrong."""
    if len(expr.split()) != 5 or not croniter.is_valid(expr):
        return (
            "E0202",
            f"bad cron expression '{expr}'",
            "five fields: minute hour day-of-month month day-of-week",
        )
    return None


def valid_zone(zone: str) -> Problem | None:
    """None when `zone` is an IANA time zone name, else what is wrong."""
    if zone not in _zones():
        hint = did_you_mean(zone, _zones()) or "an IANA name such as Europe/Budapest or UTC"
        return ("E0204", f"unknown time zone '{zone}'", hint)
    return None


def _cron(d: Draft, s: Setting) -> None:
    expr, word_in, zone = _words(s, 3, '"MIN HOUR DOM MON DOW" in ZONE')
    if expr.kind != "string" or word_in.value != "in":
        raise _Bad(
            "E0105",
            "'cron' takes a quoted expression and an explicit time zone",
            s.span,
            'write: cron "0 9 * * *" in Europe/Budapest',
        )
    for arg, problem in ((expr, valid_cron(expr.value)), (zone, valid_zone(zone.value))):
        if problem is not None:
            raise _Bad(problem[0], problem[1], arg.span, problem[2])
    _set_trigger(d, s, Trigger(TriggerKind.CRON, cron=expr.value, timezone=zone.value))


def _at(d: Draft, s: Setting) -> None:
    (arg,) = _words(s, 1, "TIMESTAMP")
    try:
        when = datetime.fromisoformat(arg.value)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise _Bad(
            "E0205",
            f"'{arg.value}' is not an ISO-8601 time with an offset",
            arg.span,
            "e.g. 2026-12-01T09:00:00Z",
        )
    _set_trigger(d, s, Trigger(TriggerKind.AT, at=when))


def _manual(d: Draft, s: Setting) -> None:
    _words(s, 0, "")
    _set_trigger(d, s, Trigger(TriggerKind.MANUAL))


def _catch_up(d: Draft, s: Setting) -> None:
    if len(s.args) not in (1, 3):
        _words(s, 1, "none|last|all [cap N]")
    d.catch_up = CatchUp(_choice(s.args[0], [c.value for c in CatchUp], "catch-up policy"))
    if len(s.args) == 3:
        if s.args[1].value != "cap" or d.catch_up is not CatchUp.ALL:
            raise _Bad("E0105", "only 'catch-up all' takes 'cap N'", s.args[1].span)
        d.catch_up_cap = _count(s.args[2], "the catch-up cap")


def _max_lateness(d: Draft, s: Setting) -> None:
    (arg,) = _words(s, 1, "DURATION")
    d.max_lateness_seconds = _duration(arg)


def _flag(attr: str, value: bool, group: str) -> Callable[[Draft, Setting], None]:
    def handler(d: Draft, s: Setting) -> None:
        _words(s, 0, "")
        if group in d.seen and d.seen[group] != s.span:
            raise _Bad(
                "E0102",
                f"'{s.key}' conflicts with the {group} setting at line {d.seen[group].line}",
                s.span,
            )
        d.seen[group] = s.span
        setattr(d, attr, value)

    return handler


def _approval(d: Draft, s: Setting) -> None:
    (arg,) = _words(s, 1, "watched|auto")
    d.approval = Approval(_choice(arg, [a.value for a in Approval], "approval policy"))
    d.approval_span = arg.span


def _description(d: Draft, s: Setting) -> None:
    (arg,) = _words(s, 1, '"TEXT"')
    d.description = arg.value


_BUDGET_KEYS = {
    "active-occurrences": ("active_occurrences", "count"),
    "jobs-per-occurrence": ("jobs_per_occurrence", "count"),
    "retries-per-occurrence": ("retries_per_occurrence", "count"),
    "wall-clock": ("wall_clock_seconds", "duration"),
    "daily-wall-clock": ("daily_wall_clock_seconds", "duration"),
    "daily-runs": ("daily_runs", "count"),
}


def _budget(d: Draft, s: Setting) -> None:
    if not s.args or len(s.args) % 2:
        _words(s, 2, "KEY VALUE [KEY VALUE ...]")
    budget = d.policy.budget
    for key, value in zip(s.args[::2], s.args[1::2], strict=True):
        name = _choice(key, list(_BUDGET_KEYS), "budget key")
        attr, kind = _BUDGET_KEYS[name]
        parsed = _duration(value) if kind == "duration" else _count(value, f"budget {name}")
        budget = replace(budget, **{attr: parsed})
    d.policy = replace(d.policy, budget=budget)


def _backoff(d: Draft, s: Setting) -> None:
    base_kw, base, max_kw, cap = _words(s, 4, "base DURATION max DURATION")
    if base_kw.value != "base" or max_kw.value != "max":
        raise _Bad("E0105", "write: backoff base DURATION max DURATION", s.span)
    backoff = Backoff(_duration(base), _duration(cap))
    if backoff.max_seconds < backoff.base_seconds:
        raise _Bad("E0105", "the backoff max is shorter than its base", cap.span)
    d.policy = replace(d.policy, backoff=backoff)


def _circuit_breaker(d: Draft, s: Setting) -> None:
    (arg,) = _words(s, 1, "N (consecutive failures)")
    d.policy = replace(d.policy, circuit_breaker=_count(arg, "the circuit breaker"))


def _stop_when(d: Draft, s: Setting) -> None:
    if not s.args:
        _words(s, 1, "CONDITION [CONDITION ...]")
    names = [c.value for c in StopCondition]
    conditions = tuple(StopCondition(_choice(a, names, "stop condition")) for a in s.args)
    d.policy = replace(d.policy, stop_when=conditions)


def _shadow(d: Draft, s: Setting) -> None:
    (arg,) = _words(s, 1, "on|off")
    d.policy = replace(d.policy, shadow=_choice(arg, ["on", "off"], "shadow mode") == "on")


HANDLERS: dict[str, Callable[[Draft, Setting], None]] = {
    "every": _every,
    "cron": _cron,
    "at": _at,
    "manual": _manual,
    "host-clock": _host_clock,
    "catch-up": _catch_up,
    "max-lateness": _max_lateness,
    "singleton": _flag("singleton", True, "overlap"),
    "overlapping": _flag("singleton", False, "overlap"),
    "approval": _approval,
    "enabled": _flag("enabled", True, "enablement"),
    "disabled": _flag("enabled", False, "enablement"),
    "description": _description,
    "budget": _budget,
    "backoff": _backoff,
    "circuit-breaker": _circuit_breaker,
    "stop-when": _stop_when,
    "shadow": _shadow,
}

_TRIGGERS = {"every", "cron", "at", "manual", "host-clock"}


def read_settings(settings: tuple[Setting, ...], collector: Collector) -> Draft:
    """Apply every setting to a fresh Draft, reporting each bad one."""
    draft = Draft()
    for s in settings:
        handler = HANDLERS.get(s.key)
        if handler is None:
            hint = did_you_mean(s.key, HANDLERS) or "settings: " + ", ".join(sorted(HANDLERS))
            collector.error("E0101", f"unknown loop setting '{s.key}'", s.span, hint)
            continue
        first = draft.seen.get(s.key)
        if first is not None and s.key not in _TRIGGERS:
            collector.error("E0102", f"'{s.key}' is set twice (first at line {first.line})", s.span)
            continue
        draft.seen.setdefault(s.key, s.span)
        try:
            handler(draft, s)
        except _Bad as bad:
            collector.error(bad.code, bad.message, bad.span, bad.hint)
    return draft
