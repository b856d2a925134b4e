"""Meaning of the settings inside a `loop` block. The grammar reads every setting as
`key arg...`; each handler here checks its arguments and points at the one that is
wrong, so a typo gets `did you mean` and a bad value gets its exact column."""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from functools import cache

from dsl import expr as ex
from dsl import spelling
from dsl.diagnostics import Collector, Span, did_you_mean
from dsl.model import Arg, OnEvent, Setting, TriageDecl, TriageLine
from engine.core.cron import cron_problem
from engine.core.durations import DurationError, parse_duration
from engine.core.machines import OCCURRENCE_TERMINAL
from engine.core.ruleset import (
    Approval,
    Backoff,
    CatchUp,
    OnActive,
    Policy,
    StopCondition,
    Trigger,
    TriggerKind,
    WorkMode,
)
from engine.core.triage import (
    DEFAULT_CATEGORY,
    FINDING_DECISIONS,
    HUMAN_ONLY_DECISIONS,
    NAME_FIELDS,
    OPEN_NAMES,
    SUB_FIELDS,
    TRIAGE_NAMES,
    TriageDecision,
    TriageRule,
)


@dataclass(frozen=True)
class WorkLine:
    """A loop's `work MODE ...` line: the loop is a work-bound shape. Each name keeps
    where it is written, for the registry checks."""

    mode: WorkMode
    controller: Arg | None = None
    probe: Arg | None = None


@dataclass
class Draft:
    """A loop's settings as they are read; `seen` catches a setting given twice."""

    trigger: Trigger | None = None
    trigger_span: Span | None = None
    probe_span: Span | None = None  # a watch's probe name, checked against the registry
    catch_up: CatchUp = CatchUp.NONE
    catch_up_cap: int | None = None
    max_lateness_seconds: int | None = None
    singleton: bool = True
    approval: Approval = Approval.WATCHED
    approval_span: Span | None = None
    enabled: bool = False
    policy: Policy = field(default_factory=Policy)
    on_active: OnActive = OnActive.RETURN
    description: str = ""
    seen: dict[str, Span] = field(default_factory=dict)
    written: dict[str, str] = field(default_factory=dict)  # a key as first written, if old
    on_event: OnEvent | None = None  # the `on_event` line, when it is the trigger
    overlap_span: Span | None = None  # the `overlap` line
    old_overlap: list[tuple[Span, str]] = field(default_factory=list)  # old overlap words
    old: list[tuple[Span, str, str]] = field(default_factory=list)  # W0901: at, old, new
    after_spans: dict[str, Span] = field(default_factory=dict)  # `after`'s loop and outcomes
    work: WorkLine | None = None  # `work MODE ...`: a work-bound loop shape
    cooldown_seconds: int | None = None  # `cooldown DURATION` (shapes only)
    key: Arg | None = None  # `key "TEMPLATE"`: the semantic key an occurrence works on

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
        raise _Bad("E0201", f"bad duration: {err}", arg.span, "e.g. 90s, 60m, 4h, 7d") from None


def _count(arg: Arg, what: str, least: int = 1) -> int:
    if not arg.value.isdigit() or int(arg.value) < least:
        raise _Bad(
            "E0105",
            f"{what} must be a whole number of at least {least}, not '{arg.value}'",
            arg.span,
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


def _watch(d: Draft, s: Setting) -> None:
    probe, word_every, cadence = _words(s, 3, "PROBE every DURATION")
    if probe.kind == "string" or word_every.value != "every":
        raise _Bad(
            "E0105",
            "'watch' takes a probe name and its poll cadence",
            s.span,
            "write: watch ci-status every 5m",
        )
    trigger = Trigger(TriggerKind.WATCH, every_seconds=_duration(cadence), probe=probe.value)
    _set_trigger(d, s, trigger)
    d.probe_span = probe.span


def _host_clock(d: Draft, s: Setting) -> None:
    (arg,) = _words(s, 1, "DURATION")
    _set_trigger(d, s, Trigger(TriggerKind.HOST, every_seconds=_duration(arg)))


@cache
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


Problem = tuple[str, str, str]  # code, message, hint


@cache
def valid_cron(expr: str) -> Problem | None:
    """None when `expr` is a five-field cron(5) expression, else what is wrong. The
    check is cronsim's, the library that fires it (engine.core.cron)."""
    problem = cron_problem(expr)
    return None if problem is None else ("E0202", f"bad cron expression '{expr}'", problem)


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


# What `after` filters on: the upstream occurrence's terminal states (engine/core/machines.py).
CONCLUDED = tuple(str(state) for state in OCCURRENCE_TERMINAL)


def _after(d: Draft, s: Setting) -> None:
    """`after LOOP [outcome X ...] [state S ...]`: LOOP a word, or a string template
    inside a `for` block (`"merge-{repo.name}"`), resolved by the compiler."""
    usage = "LOOP [outcome OUTCOME ...] [state STATE ...]"
    if not s.args:
        _words(s, 1, usage)
    upstream, *rest = s.args
    filters: dict[str, list[Arg]] = {"outcome": [], "state": []}
    current: list[Arg] | None = None
    for arg in rest:
        if arg.kind == "word" and arg.value in filters:
            if filters[arg.value] or current is filters[arg.value]:
                raise _Bad("E0102", f"'{arg.value}' is given twice in 'after'", arg.span)
            current = filters[arg.value]
            continue
        if current is None or arg.kind != "word":
            raise _Bad(
                "E0105",
                f"'after' takes {usage}; unexpected '{arg.value}'",
                arg.span,
                "e.g. after nightly-scan outcome MERGE HOLD state completed",
            )
        current.append(arg)
    for word, values in filters.items():
        if current is values and not values:
            raise _Bad("E0105", f"'{word}' needs at least one value", s.args[-1].span)
    for arg in filters["state"]:
        if arg.value not in CONCLUDED:
            hint = did_you_mean(arg.value, CONCLUDED) or "states: " + ", ".join(CONCLUDED)
            raise _Bad(
                "E1003", f"'{arg.value}' is not a state an occurrence concludes in", arg.span, hint
            )
    trigger = Trigger(
        TriggerKind.AFTER,
        upstream=upstream.value,
        outcomes=tuple(a.value for a in filters["outcome"]),
        states=tuple(a.value for a in filters["state"]),
    )
    _set_trigger(d, s, trigger)
    d.after_spans = {"loop": upstream.span, **{a.value: a.span for a in filters["outcome"]}}


def read_on_event(d: Draft, lines: tuple[OnEvent, ...], collector: Collector) -> None:
    """An `on_event` line is the loop's trigger, like a trigger setting."""
    for line in lines:
        if line.old is not None:
            rest = " ..." if line.window is not None or line.guard is not None else ""
            new = f"{spelling.RENAMED_KEYS[line.old.word]} {line.event_type}{rest}"
            d.old.append((line.old.span, line.old.word, new))
        d.seen.setdefault("on_event", line.span)
        trigger = Trigger(
            TriggerKind.EVENT, event_type=line.event_type, guard=line.guard, window=line.window
        )
        try:
            _set_trigger(d, Setting("on_event", (), line.span), trigger)
        except _Bad as bad:
            collector.error(bad.code, bad.message, bad.span, bad.hint)
            continue
        d.on_event = line


def _catch_up(d: Draft, s: Setting) -> None:
    if len(s.args) not in (1, 3):
        _words(s, 1, "none|last|all [cap N]")
    d.catch_up = CatchUp(_choice(s.args[0], [c.value for c in CatchUp], "catch_up policy"))
    if len(s.args) == 3:
        if s.args[1].value != "cap" or d.catch_up is not CatchUp.ALL:
            raise _Bad("E0105", "only 'catch_up all' takes 'cap N'", s.args[1].span)
        d.catch_up_cap = _count(s.args[2], "the catch_up cap")


def _max_lateness(d: Draft, s: Setting) -> None:
    (arg,) = _words(s, 1, "DURATION")
    d.max_lateness_seconds = _duration(arg)


def _group(d: Draft, s: Setting, group: str) -> None:
    """One setting of `group` per loop, however it is spelled (E0102 for a second)."""
    if group in d.seen and d.seen[group] != s.span:
        raise _Bad(
            "E0102",
            f"'{s.key}' conflicts with the {group} setting at line {d.seen[group].line}",
            s.span,
        )
    d.seen[group] = s.span


def _flag(attr: str, value: bool, group: str) -> Callable[[Draft, Setting], None]:
    """An old bare flag (`disabled`, `singleton`, `overlapping`): its old meaning."""

    def handler(d: Draft, s: Setting) -> None:
        _words(s, 0, "")
        _group(d, s, group)
        if s.key in spelling.OLD_FLAGS:
            d.old.append((s.span, s.key, " ".join(spelling.OLD_FLAGS[s.key])))
        else:
            _old_overlap(d, s.span, s.key)
        setattr(d, attr, value)

    return handler


BOOLEANS = ["true", "false"]


def _boolean(arg: Arg, key: str) -> bool:
    if arg.kind != "word" or arg.value not in BOOLEANS:
        hint = did_you_mean(arg.value, BOOLEANS) or f"write: {key} true, or {key} false"
        raise _Bad("E0105", f"'{key}' is true or false, not '{arg.value}'", arg.span, hint)
    return arg.value == "true"


def _enabled(d: Draft, s: Setting) -> None:
    """`enabled true|false`; a bare `enabled` is the old spelling of `enabled true`."""
    if not s.args:
        _flag("enabled", True, "enablement")(d, s)
        return
    (arg,) = _words(s, 1, "true|false")
    value = _boolean(arg, "enabled")
    _group(d, s, "enablement")
    d.enabled = value


def _approval(d: Draft, s: Setting) -> None:
    (arg,) = _words(s, 1, "watched|auto")
    d.approval = Approval(_choice(arg, [a.value for a in Approval], "approval policy"))
    d.approval_span = arg.span


def _description(d: Draft, s: Setting) -> None:
    (arg,) = _words(s, 1, '"TEXT"')
    d.description = arg.value


_BUDGET_KEYS = {
    "jobs_per_occurrence": ("jobs_per_occurrence", "count"),
    "retries_per_occurrence": ("retries_per_occurrence", "count"),
    "wall_clock": ("wall_clock_seconds", "duration"),
    "daily_wall_clock": ("daily_wall_clock_seconds", "duration"),
    "daily_runs": ("daily_runs", "count"),
}
# The old `budget active-occurrences N`, folded into `overlap` (loads with its old meaning).
_OLD_ACTIVE = "active-occurrences"


def _budget(d: Draft, s: Setting) -> None:
    if not s.args or len(s.args) % 2:
        _words(s, 2, "KEY VALUE [KEY VALUE ...]")
    budget = d.policy.budget
    given: set[str] = set()
    for key, value in zip(s.args[::2], s.args[1::2], strict=True):
        name = key.value
        if name == _OLD_ACTIVE:
            parsed = _count(value, f"budget {name}")
            _old_overlap(d, key.span, f"budget {name} {parsed}")
            budget = replace(budget, active_occurrences=parsed)
            continue
        if name in spelling.RENAMED_BUDGET_KEYS:
            name = spelling.RENAMED_BUDGET_KEYS[name]
            d.old.append((key.span, key.value, _new_budget(s)))
        name = _choice(replace(key, value=name), list(_BUDGET_KEYS), "budget key")
        if name in given:
            raise _Bad("E0102", f"budget key '{name}' is given twice in this line", key.span)
        given.add(name)
        attr, kind = _BUDGET_KEYS[name]
        least = 0 if name == "retries_per_occurrence" else 1  # 0: no retry at all
        parsed = _duration(value) if kind == "duration" else _count(value, f"budget {name}", least)
        if name == "jobs_per_occurrence" and parsed != 1:
            raise _Bad(
                "E0105",
                f"budget jobs_per_occurrence {parsed}: an occurrence dispatches exactly one job",
                value.span,
                "a failed job is re-run under `budget retries_per_occurrence N`; "
                "write jobs_per_occurrence 1 or leave it out",
            )
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


# Stop conditions that take a value: `end_date=2026-12-31`, `occurrence_count=10`.
_VALUED = {
    StopCondition.END_DATE: "end_date=DATE",
    StopCondition.OCCURRENCE_COUNT: "occurrence_count=N",
}


def _stop_when(d: Draft, s: Setting) -> None:
    if not s.args:
        _words(s, 1, "CONDITION [CONDITION ...]")
    names = [c.value for c in StopCondition]
    conditions: list[StopCondition] = []
    policy = d.policy
    for a in s.args:
        if a.kind == "string":
            raise _Bad("E0105", "a stop condition is a word, not a string", a.span)
        condition = StopCondition(_choice(a, names, "stop condition"))
        if condition in conditions:
            raise _Bad("E0102", f"stop condition '{condition}' is listed twice", a.span)
        conditions.append(condition)
        usage = _VALUED.get(condition)
        if usage is not None and a.assigned is None:
            raise _Bad("E0105", f"'{condition}' needs a value", a.span, f"write: {usage}")
        if usage is None and a.assigned is not None:
            raise _Bad("E0105", f"'{condition}' takes no value", a.span, f"write: {condition}")
        if a.assigned is not None and condition is StopCondition.END_DATE:
            policy = replace(policy, end_at=_end_at(a.assigned))
        elif a.assigned is not None:
            count = _count(a.assigned, "the occurrence count")
            policy = replace(policy, max_occurrences=count)
    d.policy = replace(policy, stop_when=tuple(conditions))


def _end_at(arg: Arg) -> datetime:
    """The instant a loop stops: after the whole day of a date (UTC), or a time with an
    offset."""
    text = arg.value
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime.combine(day, time(), UTC) + timedelta(days=1)
        when = datetime.fromisoformat(text)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise _Bad(
            "E0205",
            f"'{text}' is not a date or an ISO-8601 time with an offset",
            arg.span,
            "e.g. end_date=2026-12-31 (to the end of that day, UTC) or "
            "end_date=2026-12-31T18:00:00+01:00",
        )
    return when


def _new_budget(s: Setting) -> str:
    """The budget line in the new spelling (an old `active-occurrences` is in `overlap`)."""
    args: list[Arg] = []
    for key, value in zip(s.args[::2], s.args[1::2], strict=True):
        if key.value != _OLD_ACTIVE:
            new = spelling.RENAMED_BUDGET_KEYS.get(key.value, key.value)
            args += [replace(key, value=new), value]
    return written_line(replace(s, args=tuple(args)))


def written_line(s: Setting) -> str:
    """A setting as a line of a rule file (without its indentation or comment)."""
    return " ".join([s.key, *(_written_arg(a) for a in s.args)])


def _written_arg(a: Arg) -> str:
    if a.kind == "string":
        escaped = a.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'.replace("\n", "\\n").replace("\t", "\\t")
    if a.kind == "assign" and a.assigned is not None:
        return f"{a.value}={a.assigned.value}"
    return a.value


def _shadow(d: Draft, s: Setting) -> None:
    """`shadow true|false`; `shadow on|off` is the old spelling."""
    (arg,) = _words(s, 1, "true|false")
    if arg.kind == "word" and arg.value in spelling.OLD_SHADOW:
        new = spelling.OLD_SHADOW[arg.value]
        d.old.append((arg.span, f"shadow {arg.value}", f"shadow {new}"))
        arg = replace(arg, value=new)
    shadow = _boolean(arg, "shadow")
    d.policy = replace(d.policy, shadow=shadow, shadow_declared=True)


OVERLAP_VALUES = [o.value for o in spelling.Overlap]
OVERLAP_USAGE = "skip|buffer_one|allow [max N]"


def _overlap(d: Draft, s: Setting) -> None:
    """`overlap skip|buffer_one|allow [max N]` (docs/rules.md#overlap): the run- and
    occurrence-level settings of dsl.spelling.meaning()."""
    if d.old_overlap:
        at, old = d.old_overlap[0]
        raise _Bad(
            "E0102",
            f"'overlap' conflicts with the old '{old}' at line {at.line}",
            s.span,
            "one overlap line replaces singleton, overlapping, on-active and "
            "budget active-occurrences: keep only the overlap line",
        )
    if len(s.args) not in (1, 3):
        _words(s, 1, OVERLAP_USAGE)
    value = spelling.Overlap(_choice(s.args[0], OVERLAP_VALUES, "overlap value"))
    most: int | None = None
    if len(s.args) == 3:
        if s.args[1].value != "max" or value is not spelling.Overlap.ALLOW:
            raise _Bad(
                "E0105",
                "only 'overlap allow' takes 'max N'",
                s.args[1].span,
                "write: overlap allow max N",
            )
        most = _count(s.args[2], "overlap allow max")
    meant = spelling.meaning(value, most)
    d.singleton, d.on_active = meant.singleton, OnActive(meant.on_active)
    budget = replace(d.policy.budget, active_occurrences=meant.active_occurrences)
    d.policy = replace(d.policy, budget=budget)
    d.overlap_span = s.span


def _old_overlap(d: Draft, at: Span, old: str) -> None:
    """An old overlap setting (singleton, overlapping, on-active, budget
    active-occurrences): E0102 beside an `overlap` line, else its old meaning and W0901."""
    if d.overlap_span is not None:
        raise _Bad(
            "E0102",
            f"the old '{old}' conflicts with the overlap setting at line {d.overlap_span.line}",
            at,
            "one overlap line replaces singleton, overlapping, on-active and "
            "budget active-occurrences: keep only the overlap line",
        )
    d.old_overlap.append((at, old))


def _on_active(d: Draft, s: Setting) -> None:
    (arg,) = _words(s, 1, "return|coalesce|skip")
    d.on_active = OnActive(_choice(arg, [o.value for o in OnActive], "on-active policy"))
    _old_overlap(d, s.span, f"on-active {arg.value}")


WORK_USAGE = {
    WorkMode.CONTINUATION: "continuation controller NAME",
    WorkMode.BROWSER_WATCH: "browser_watch probe NAME [controller NAME]",
    WorkMode.BROWSER_KEEPALIVE: "browser_keepalive probe NAME",
}


def _work(d: Draft, s: Setting) -> None:
    """`work continuation controller NAME`, `work browser_watch probe NAME [controller
    NAME]`, `work browser_keepalive probe NAME` (docs/rules.md#work-bound-loop-shapes)."""
    if not s.args:
        _words(s, 1, "MODE ...")
    mode = WorkMode(_choice(s.args[0], [m.value for m in WorkMode], "work mode"))
    usage = WORK_USAGE[mode]
    wanted = ["controller"] if mode is WorkMode.CONTINUATION else ["probe"]
    allowed = wanted + (["controller"] if mode is WorkMode.BROWSER_WATCH else [])
    names: dict[str, Arg] = {}
    rest = list(s.args[1:])
    while rest:
        word = rest.pop(0)
        if word.kind != "word" or word.value not in allowed or word.value in names:
            raise _Bad("E0105", f"'work {mode}' takes {usage}", word.span, f"write: work {usage}")
        if not rest or rest[0].kind != "word":
            at = rest[0].span if rest else word.span
            raise _Bad("E0105", f"'{word.value}' needs a name", at, f"write: work {usage}")
        names[word.value] = rest.pop(0)
    missing = [word for word in wanted if word not in names]
    if missing or next(iter(names)) != wanted[0]:
        raise _Bad("E0105", f"'work {mode}' takes {usage}", s.span, f"write: work {usage}")
    d.work = WorkLine(mode, names.get("controller"), names.get("probe"))


def _cooldown(d: Draft, s: Setting) -> None:
    (arg,) = _words(s, 1, "DURATION")
    d.cooldown_seconds = _duration(arg)


def _key(d: Draft, s: Setting) -> None:
    """`key "TEMPLATE"` (docs/rules.md#semantic-keys-key): a quoted template, filled by
    the compiler (a `for` block's variable) and the decision (`payload`)."""
    (arg,) = _words(s, 1, '"TEMPLATE"')
    if arg.kind != "string":
        raise _Bad(
            "E0105",
            "'key' takes a quoted template",
            arg.span,
            f'write: key "{arg.value}"',
        )
    if not arg.value.strip():
        raise _Bad("E0105", "a key is not empty", arg.span, 'e.g. key "repair:{repo.name}"')
    d.key = arg


HANDLERS: dict[str, Callable[[Draft, Setting], None]] = {
    "every": _every,
    "cron": _cron,
    "at": _at,
    "manual": _manual,
    "host_clock": _host_clock,
    "after": _after,
    "watch": _watch,
    "catch_up": _catch_up,
    "max_lateness": _max_lateness,
    "overlap": _overlap,
    "approval": _approval,
    "enabled": _enabled,
    "description": _description,
    "budget": _budget,
    "backoff": _backoff,
    "circuit_breaker": _circuit_breaker,
    "stop_when": _stop_when,
    "shadow": _shadow,
    "work": _work,
    "cooldown": _cooldown,
    "key": _key,
}

# The old settings that still load with their old meaning and a W0901 warning
# (docs/rules.md#old-spellings); renamed keys are read under their new name.
OLD_HANDLERS: dict[str, Callable[[Draft, Setting], None]] = {
    "singleton": _flag("singleton", True, "singleton/overlapping"),
    "overlapping": _flag("singleton", False, "singleton/overlapping"),
    "disabled": _flag("enabled", False, "enablement"),
    "on-active": _on_active,
}

_TRIGGERS = {"every", "cron", "at", "manual", "host_clock", "watch", "after", "on_event"}


def read_settings(
    settings: tuple[Setting, ...], collector: Collector, on_events: tuple[OnEvent, ...] = ()
) -> Draft:
    """Apply every setting (and `on_event` line) to a fresh Draft, reporting each bad one."""
    draft = Draft()
    lines: list[Setting | OnEvent] = [*settings, *on_events]
    for s in sorted(lines, key=lambda line: (line.span.line, line.span.column)):
        if isinstance(s, OnEvent):
            read_on_event(draft, (s,), collector)
            continue
        written = s.key
        if written in spelling.RENAMED_KEYS:
            s = replace(s, key=spelling.RENAMED_KEYS[written])
            draft.old.append((s.span, written, written_line(s)))
        handler = HANDLERS.get(s.key) or OLD_HANDLERS.get(s.key)
        if handler is None:
            hint = did_you_mean(s.key, HANDLERS) or "settings: " + ", ".join(sorted(HANDLERS))
            collector.error("E0101", f"unknown loop setting '{s.key}'", s.span, hint)
            continue
        first = draft.seen.get(s.key)
        if first is not None and s.key not in _TRIGGERS:
            before = draft.written.get(s.key, s.key)
            as_written = f", as '{before}'" if before != s.key else ""
            if written != s.key:
                as_written += f"; here as '{written}'"
            collector.error(
                "E0102",
                f"'{s.key}' is set twice (first at line {first.line}{as_written})",
                s.span,
            )
            continue
        draft.seen.setdefault(s.key, s.span)
        draft.written.setdefault(s.key, written)
        assigned = next((a for a in s.args if a.kind == "assign"), None)
        if assigned is not None and s.key != "stop_when":
            collector.error(
                "E0105",
                f"'{written}' takes no NAME=VALUE argument",
                assigned.span,
                "only stop_when takes end_date=DATE and occurrence_count=N",
            )
            continue
        try:
            handler(draft, s)
        except _Bad as bad:
            collector.error(bad.code, bad.message, bad.span, bad.hint)
    _warn_old(draft, collector)
    return draft


def _warn_old(d: Draft, collector: Collector) -> None:
    """One W0901 per old spelling, at the old word, with the new form as its fix-it."""
    for at, old, new in d.old:
        collector.warn(
            spelling.OLD_SPELLING,
            f"old spelling '{old}'",
            at,
            f"write: {new} ({spelling.FIX_IT})",
        )
    if not d.old_overlap or d.overlap_span is not None:
        return
    active = d.policy.budget.active_occurrences
    rewrite = spelling.overlap_of(d.singleton, d.on_active.value, active)
    written = ", ".join(old for _, old in d.old_overlap)
    for at, old in d.old_overlap:
        if rewrite is not None:
            hint = f"write: {rewrite.line} ({spelling.FIX_IT})"
            if rewrite.note:
                hint += f"; {rewrite.note}"
            message = f"old spelling '{old}': one overlap setting replaces it"
        else:
            hint = f"the nearest is: {nearest_overlap(d.on_active, active)}"
            message = (
                f"old spelling '{old}': no one overlap value means this combination "
                f"({written}); it loads with its old meaning"
            )
        collector.warn(spelling.OLD_SPELLING, message, at, hint)


def nearest_overlap(on_active: OnActive, active: int | None) -> str:
    """The overlap line nearest an old combination no overlap value means: it keeps the
    occurrence level (what a trigger does beyond the limit, and the limit)."""
    if on_active is OnActive.COALESCE:
        return "overlap buffer_one"
    return "overlap allow" if active is None else f"overlap allow max {active}"


# ---- triage tables -------------------------------------------------------------------


def read_triage(blocks: tuple[TriageDecl, ...], collector: Collector) -> tuple[TriageRule, ...]:
    """Compile a loop's `triage` block, reporting each bad line. A line without a
    guard always matches, so the lines after it are unreachable (an error)."""
    if not blocks:
        return ()
    first, *again = blocks
    for block in again:
        collector.error(
            "E0102",
            f"'triage' is set twice (first at line {first.span.line})",
            block.span,
            "a loop has one triage table; merge the lines into it",
        )
    rules: list[TriageRule] = []
    catch_all: TriageLine | None = None
    for line in first.lines:
        if catch_all is not None:
            collector.error(
                "E0114",
                f"this line is never reached: line {catch_all.decision_span.line} has no"
                " guard, so it always matches",
                line.decision_span,
                "put the line without a guard last, or give it an 'if'/'unless'",
            )
        elif line.guard is None:
            catch_all = line
        rule = _triage_rule(line, collector)
        if rule is not None:
            rules.append(rule)
    return tuple(rules)


def _triage_rule(line: TriageLine, collector: Collector) -> TriageRule | None:
    decisions = [d.value for d in TriageDecision if d not in HUMAN_ONLY_DECISIONS]
    ok = True
    if line.decision not in {d.value for d in TriageDecision}:
        hint = did_you_mean(line.decision, decisions) or "decisions: " + ", ".join(decisions)
        collector.error(
            "E0110", f"unknown triage decision '{line.decision}'", line.decision_span, hint
        )
        return None
    decision = TriageDecision(line.decision)
    if decision in HUMAN_ONLY_DECISIONS:
        collector.error(
            "E0111",
            f"a rule cannot decide '{decision}': only a human promotes a finding",
            line.decision_span,
            'record a candidate instead (create_candidate_finding ... key "...") and '
            "let an operator promote it",
        )
        ok = False
    if decision in FINDING_DECISIONS and line.key is None:
        collector.error(
            "E0112",
            f"'{decision}' needs a key: the finding's semantic key",
            line.decision_span,
            f'write: {decision} ... key "flaky:{{payload.repo}}" [category WORD]',
        )
        ok = False
    if decision not in FINDING_DECISIONS:
        for word, at in (("key", line.key_span), ("category", line.category_span)):
            if at is not None:
                collector.error(
                    "E0113",
                    f"'{word}' belongs to create_candidate_finding, not to '{decision}'",
                    at,
                    f"remove '{word}', or decide create_candidate_finding",
                )
                ok = False
    for part in (line.guard.expr if line.guard else None, line.key):
        if part is not None and not triage_names_ok(part, collector):
            ok = False
    if not ok:
        return None
    category = (line.category or DEFAULT_CATEGORY) if decision in FINDING_DECISIONS else None
    return TriageRule(
        decision=decision,
        guard=line.guard.expr if line.guard else None,
        negate=line.guard.negate if line.guard else False,
        note=line.note,
        key=line.key,
        category=category,
        origin=line.decision_span,
    )


def triage_names_ok(expr: ex.Expr, collector: Collector) -> bool:
    """Every path of a triage expression starts at a snapshot name; a path into `repo`
    or `budget` names one of their fields; the other names hold plain values."""
    names = sorted(TRIAGE_NAMES)
    ok = True
    for path in ex.paths(expr):
        if path.root not in TRIAGE_NAMES:
            listed = ", ".join(f"'{n}'" for n in names)
            collector.error(
                "E0601",
                f"unknown name '{path.root}' in a triage rule",
                path.span,
                did_you_mean(path.root, names) or f"the snapshot names: {listed}",
            )
            ok = False
            continue
        if not path.steps or path.root in OPEN_NAMES:
            continue
        step = path.steps[0]
        known = NAME_FIELDS.get(path.root, ())
        if isinstance(step, str) and step in known and len(path.steps) == 1:
            continue
        if isinstance(step, str) and step in known and path.root in SUB_FIELDS:
            if not _sub_field_ok(path, step, SUB_FIELDS[path.root][step], collector):
                ok = False
            continue
        if isinstance(step, str) and step in known:  # the fields hold plain values
            collector.error(
                "E0601",
                f"'{path.root}.{step}' has no fields in a triage rule",
                path.span,
                f"'{path.root}' is {TRIAGE_NAMES[path.root]}",
            )
            ok = False
            continue
        if known:
            hint = (did_you_mean(str(step), known) if isinstance(step, str) else None) or (
                "fields: " + ", ".join(known)
            )
            message = f"'{path.root}' has no field '{step}' in a triage rule"
        else:
            hint = f"'{path.root}' is a plain value: {TRIAGE_NAMES[path.root]}"
            message = f"'{path.root}' has no fields in a triage rule"
        collector.error("E0601", message, path.span, hint)
        ok = False
    return ok


def _sub_field_ok(path: ex.Path, step: str, fields: tuple[str, ...], collector: Collector) -> bool:
    """`existing.work.state`: a field of a field, named by the table of its fields."""
    sub = path.steps[1]
    if isinstance(sub, str) and sub in fields and len(path.steps) == 2:
        return True
    where = f"{path.root}.{step}"
    if not fields or (isinstance(sub, str) and sub in fields):
        shown = where if not fields else f"{where}.{sub}"
        collector.error("E0601", f"'{shown}' has no fields in a triage rule", path.span)
        return False
    hint = (did_you_mean(str(sub), fields) if isinstance(sub, str) else None) or (
        "fields: " + ", ".join(fields)
    )
    collector.error("E0601", f"'{where}' has no field '{sub}' in a triage rule", path.span, hint)
    return False
