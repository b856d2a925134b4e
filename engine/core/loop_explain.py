"""Every effective setting of one loop and where it came from: `engine check --explain
LOOP` (docs/rules.md#seeing-a-loops-effective-settings). Pure: a compiled RuleSet and a
loop name in, rows out.

Each row names a setting in the one spelling of the language (docs/rules.md#one-spelling),
whatever spelling the rule file used, its effective value, and its source: the rule line
that set it (`loops/x.rules:12`), `default`, the overlay line that changed it
(`config/schedule.yaml:7`) or the registry entry it follows from
(`registry/definitions.yaml:40`). A note says why, where a reason is not obvious."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, time, timedelta
from typing import Any

from dsl import expr as ex
from dsl.diagnostics import Diagnostic, Span
from engine.core.durations import format_duration
from engine.core.provenance import LoopPlaces
from engine.core.registry import Definition
from engine.core.ruleset import (
    DEFAULT_CATCHUP_CAP,
    DEFAULT_RETRIES,
    Approval,
    CatchUp,
    Loop,
    OnActive,
    Route,
    RuleSet,
    Source,
    StopCondition,
    Trigger,
    TriggerKind,
    max_active,
    overlap_line,
)
from engine.core.triage import TriageRule, default_decision

DEFAULT = "default"
DEFINITIONS_FILE = "registry/definitions.yaml"
# Stop conditions checked for every loop, listed or not (docs/rules.md#occurrence-policy).
ALWAYS_STOP = (StopCondition.RELEASE_FREEZE, StopCondition.REPOSITORY_DISABLED)


@dataclass(frozen=True, slots=True)
class Row:
    """One effective setting: its name, its value as a rule file writes it, where it
    came from, and why (None when the source says it all)."""

    setting: str
    value: str
    source: str
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "setting": self.setting,
            "value": self.value,
            "source": self.source,
            "note": self.note,
        }


class UnknownLoop(LookupError):
    """The rule set has no loop of that name."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def where(span: Span | None) -> str:
    """`file:line`; `default` when nothing was written."""
    return DEFAULT if span is None else f"{span.file}:{span.line}"


def explain_loop(rules: RuleSet, name: str) -> list[Row]:
    """Every effective setting of loop `name`, in the order of docs/rules.md#loop-settings;
    raises UnknownLoop."""
    loop = rules.loops.get(name)
    if loop is None:
        raise UnknownLoop(name)
    return list(LoopExplainer(rules, loop).rows())


def warnings_of(rules: RuleSet, name: str) -> list[Diagnostic]:
    """The load warnings (an old spelling's W0901) written on the lines of loop (or
    work-bound shape) `name`: its `loop` line, its settings, its emit and payload, its
    triage header and its overlay lines. A loop of a `for` block shares its template's
    lines, and so their warnings."""
    places = rules.places.loops.get(name) or rules.places.shapes.get(name)
    if places is None:
        return []
    spans = [places.declared, places.emit, places.payload, places.triage]
    spans += [span for group in places.settings.values() for span in group]
    spans += list(places.overlay.values())
    lines = {(span.file, span.line) for span in spans if span is not None}
    return [w for w in rules.warnings if (w.span.file, w.span.line) in lines]


class LoopExplainer:
    """The rows of one loop; engine.core.shape_explain builds a shape's on it, from the
    shape's template loop and places."""

    def __init__(self, rules: RuleSet, loop: Loop, places: LoopPlaces | None = None) -> None:
        self.rules, self.loop = rules, loop
        self.places = (
            places or rules.places.loops.get(loop.name) or LoopPlaces(declared=loop.origin)
        )
        self.overlay_loop = loop.source is Source.OVERLAY
        self.route: Route | None = rules.routes.get(loop.event_type)
        self.definition: Definition | None = (
            rules.definitions.get(self.route.definition) if self.route else None
        )
        self.mutating = self.definition is not None and self.definition.mutating

    # ---- sources ---------------------------------------------------------------------
    def written(self, setting: str, *overlay_keys: str) -> str:
        """The overlay line of the first key given there, else the rule line(s)."""
        for key in overlay_keys:
            if key in self.places.overlay:
                return where(self.places.overlay[key])
        spans = self.places.settings.get(setting, ())
        return ", ".join(dict.fromkeys(where(s) for s in spans)) if spans else DEFAULT

    def registry(self) -> str:
        """The `mutating:` line of the routed definition's registry entry."""
        if self.definition is None:
            return DEFINITIONS_FILE
        keys = self.rules.places.definitions.get(self.definition.ref, {})
        span = keys.get("mutating", keys.get(""))
        return where(span) if span is not None else DEFINITIONS_FILE

    def route_words(self) -> str:
        if self.route is None:
            return f"{self.loop.event_type} has no route"
        return f"{self.loop.event_type} -> {self.route.definition}"

    def work_words(self) -> str:
        kind = "mutating" if self.mutating else "read-only"
        return f"route {self.route_words()} is {kind} ({self.registry()})"

    # ---- rows --------------------------------------------------------------------------
    def rows(self) -> Iterator[Row]:
        yield self.declared()
        yield self.description()
        yield self.trigger()
        yield from self.emit()
        yield from self.key()
        yield from self.route_rows()
        yield self.catch_up()
        yield self.max_lateness()
        yield self.overlap()
        yield from self.approval()
        yield self.enabled()
        yield self.shadow()
        yield from self.budget()
        yield self.backoff()
        yield self.circuit_breaker()
        yield self.stop_when()
        yield from self.triage()

    def declared(self) -> Row:
        loop, places = self.loop, self.places
        if self.overlay_loop:
            note = "a loop of the instance overlay, not of a reviewed rule file"
        elif places.in_for_block:
            note = "declared in a for block: its lines are the template's"
        else:
            note = None
        return Row("loop", loop.name, where(places.declared), note)

    def description(self) -> Row:
        text = self.loop.description
        source = self.written("description", "description")
        return Row("description", json.dumps(text), source, "empty" if source == DEFAULT else None)

    def trigger(self) -> Row:
        loop = self.loop
        keys = ("every", "cron", "at", "manual") if self.overlay_loop else ("every",)
        source = self.written("trigger", *keys)
        note = None
        if not self.overlay_loop and "every" in self.places.overlay:
            note = f"the overlay changes the cadence; the rule line is {self.written('trigger')}"
        return Row("trigger", trigger_text(loop.trigger), source, note)

    def emit(self) -> Iterator[Row]:
        loop, places = self.loop, self.places
        emit_at = where(places.emit) if places.emit else self.written("", "emit")
        yield Row("emit", loop.event_type, emit_at)
        if "payload" in places.overlay:
            rule = where(places.payload) if places.payload else None
            note = f"merged over the rule's payload ({rule})" if rule else None
            yield Row("payload", payload_text(loop.payload), where(places.overlay["payload"]), note)
        elif places.payload is not None:
            yield Row("payload", payload_text(loop.payload), where(places.payload))
        else:
            yield Row("payload", payload_text(loop.payload), DEFAULT, "no static payload")

    def key(self) -> Iterator[Row]:
        """The semantic key, for a loop that declares one (docs/rules.md#semantic-keys-key)."""
        key = self.loop.key
        if key is None:
            return
        note = "existing work is checked before new work (docs/rules.md#existing-work-first)"
        yield Row("key", json.dumps(str(key), ensure_ascii=False), where(key.origin), note)

    def route_rows(self) -> Iterator[Row]:
        route, definition = self.route, self.definition
        if route is None:  # pragma: no cover - a loop's type is routed, or it does not load
            yield Row("route", self.route_words(), DEFAULT)
            return
        yield Row(
            "route",
            self.route_words(),
            where(route.origin),
            f"route approval {route.approval}, for events of this type that are not the loop's"
            " ticks",
        )
        if definition is not None:
            kind = "mutating" if definition.mutating else "read-only"
            yield Row("definition", f"{definition.ref} ({kind})", self.registry())

    def catch_up(self) -> Row:
        loop = self.loop
        value = str(loop.catch_up)
        source = self.written("catch_up", "catch_up_cap", "catch_up")
        note = None
        if loop.catch_up is CatchUp.ALL:
            value += f" cap {loop.catch_up_cap}"
            written = (
                "catch_up cap" in self.places.settings or "catch_up_cap" in self.places.overlay
            )
            if not written:
                note = f"the cap is the default: the newest {DEFAULT_CATCHUP_CAP} missed slots"
        elif source == DEFAULT:
            note = "fires the current slot only; the missed ones are counted as skipped"
        return Row("catch_up", value, source, note)

    def max_lateness(self) -> Row:
        seconds = self.loop.max_lateness_seconds
        value = "none" if seconds is None else format_duration(seconds)
        source = self.written("max_lateness", "max_lateness")
        return Row("max_lateness", value, source, "no limit" if source == DEFAULT else None)

    def overlap(self) -> Row:
        loop = self.loop
        active = loop.policy.budget.active_occurrences
        rewrite = overlap_line(loop)
        if rewrite is None:
            old = [
                "singleton" if loop.singleton else "overlapping",
                f"on-active {loop.on_active}",
                *([f"budget active-occurrences {active}"] if active is not None else []),
            ]
            value = "(no overlap value means: " + ", ".join(old) + ")"
        else:
            value = rewrite.line.removeprefix("overlap ")
        words = [overlap_words(loop)]
        if rewrite is not None and rewrite.note:
            words.append(rewrite.note)
        return Row(
            "overlap", value, self.written("overlap", "overlap", "singleton"), "; ".join(words)
        )

    def approval(self) -> Iterator[Row]:
        loop = self.loop
        source = self.written("approval", "approval")
        if self.overlay_loop:
            note: str | None = "an overlay loop is always watched"
        else:
            note = "loops ship watched" if source == DEFAULT else None
        yield Row("approval", str(loop.approval), source, note)
        human = self._human_only()
        if human is not None:
            what, at = human
            yield Row(
                "approval applied",
                "human_only",
                at,
                f"{what} is human-only: every tick is a proposal an operator approves, "
                "whatever the loop says (docs/rules.md#routes-and-approval)",
            )
            return
        if loop.approval is Approval.AUTO:
            words = "a tick runs unattended, approved by actor schedule"
        else:
            words = "each tick is a proposal that waits for an operator"
        yield Row("approval applied", str(loop.approval), source, f"the loop's approval: {words}")

    def _human_only(self) -> tuple[str, str] | None:
        """What makes the loop's ticks human-only, and where that is written."""
        rules, event_type = self.rules, self.loop.event_type
        places = rules.places
        if event_type in rules.human_only_types:
            span = places.human_only.get(event_type)
            if span is None:
                span = places.event_types.get(event_type, {}).get("human_only")
            return f"event type {event_type}", where(span) if span else "registry"
        if self.route is not None and self.route.definition in rules.human_only_definitions:
            ref = str(self.route.definition)
            return f"definition {ref}", where(places.human_only.get(ref))
        return None

    def enabled(self) -> Row:
        loop = self.loop
        value = "true" if loop.enabled else "false"
        if "enabled" in self.places.overlay:
            rule = self.written("enabled")
            said = "the rule file" if rule != DEFAULT else "the default"
            at = f" ({rule})" if rule != DEFAULT else " (false)"
            note = None if self.overlay_loop else f"the overlay overrides {said}{at}"
            return Row("enabled", value, where(self.places.overlay["enabled"]), note)
        source = self.written("enabled")
        return Row("enabled", value, source, "loops ship disabled" if source == DEFAULT else None)

    def shadow(self) -> Row:
        policy = self.loop.policy
        value = "true" if policy.shadow else "false"
        if policy.shadow_declared and not self.overlay_loop:
            return Row("shadow", value, self.written("shadow"))
        note = self.work_words()
        if self.overlay_loop:
            note += "; the overlay cannot change shadow"
        return Row("shadow", value, DEFAULT, note)

    def budget(self) -> Iterator[Row]:
        budget = self.loop.policy.budget
        values: list[tuple[str, int | None, bool, int | None]] = [
            ("jobs_per_occurrence", budget.jobs_per_occurrence, False, 1),
            ("retries_per_occurrence", budget.retries_per_occurrence, False, DEFAULT_RETRIES),
            ("wall_clock", budget.wall_clock_seconds, True, None),
            ("daily_wall_clock", budget.daily_wall_clock_seconds, True, None),
            ("daily_runs", budget.daily_runs, False, None),
        ]
        for key, value, duration, default in values:
            if value is None:
                text = "unlimited"
            else:
                text = format_duration(value) if duration else str(value)
            setting = f"budget {key}"
            source = self.written(setting)
            note = None
            if source == DEFAULT and default is None:
                note = "unlimited"
            yield Row(setting, text, source, note)

    def backoff(self) -> Row:
        b = self.loop.policy.backoff
        value = f"base {format_duration(b.base_seconds)} max {format_duration(b.max_seconds)}"
        return Row("backoff", value, self.written("backoff"))

    def circuit_breaker(self) -> Row:
        n = self.loop.policy.circuit_breaker
        source = self.written("circuit_breaker")
        note = "no breaker" if n is None else f"paused after {n} consecutive failed occurrences"
        return Row("circuit_breaker", "none" if n is None else str(n), source, note)

    def stop_when(self) -> Row:
        policy = self.loop.policy
        words = [_condition(c, self.loop) for c in policy.stop_when]
        words += [str(c) for c in ALWAYS_STOP if c not in policy.stop_when]
        note = "release_freeze and repository_disabled always apply"
        if self.rules.release_freeze:
            note += "; release_freeze is on (config/schedule.yaml): no mutation work is dispatched"
        return Row("stop_when", " ".join(words), self.written("stop_when"), note)

    def triage(self) -> Iterator[Row]:
        lines = self.loop.triage
        for rule in lines:
            yield Row("triage", triage_text(rule), where(rule.origin), rule.note)
        if any(rule.guard is None for rule in lines):
            return  # a line without a guard always matches: the default is never reached
        decision = default_decision(self.mutating)
        why = "when no line matches" if lines else "no triage block"
        kind = "mutating" if self.mutating else "read-only"
        ref = self.route.definition if self.route else self.loop.event_type
        yield Row(
            "triage" if not lines else "triage default",
            str(decision),
            DEFAULT,
            f"{why}: the default for {kind} work, {ref} ({self.registry()})",
        )


# ---- values as a rule file writes them ----------------------------------------------------


def trigger_text(trigger: Trigger) -> str:
    """A trigger as its rule line says it, in the one spelling: Trigger.describe(), with
    an `on_event` line's window and guard written out rather than `(guarded)`."""
    if trigger.kind is not TriggerKind.EVENT:
        return trigger.describe()
    text = f"on_event {trigger.event_type}"
    if trigger.window is not None:
        text += f" window {expr_text(trigger.window)}"
    if trigger.guard is not None:
        word = "unless" if trigger.guard.negate else "if"
        text += f" {word} {expr_text(trigger.guard.expr)}"
    return text


def payload_text(payload: Mapping[str, Any]) -> str:
    """`{repo: "bj29"}`: a static payload as a rule file writes it."""
    return value_text(dict(payload))


def value_text(value: Any) -> str:
    """A value as a rule file writes it: an object's plain keys bare, the rest JSON."""
    return _value(value)


def _value(value: Any) -> str:
    if isinstance(value, dict):
        pairs = ", ".join(f"{_key(k)}: {_value(v)}" for k, v in value.items())
        return "{" + pairs + "}" if pairs else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return json.dumps(value)


def _key(key: str) -> str:
    return key if key.isidentifier() else json.dumps(key)


def _condition(condition: StopCondition, loop: Loop) -> str:
    policy = loop.policy
    if condition is StopCondition.END_DATE and policy.end_at is not None:
        end = policy.end_at
        if end.tzinfo is not None and end.utcoffset() == timedelta(0) and end.time() == time():
            return f"end_date={(end.astimezone(UTC) - timedelta(days=1)).date().isoformat()}"
        return f"end_date={end.isoformat()}"
    if condition is StopCondition.OCCURRENCE_COUNT and policy.max_occurrences is not None:
        return f"occurrence_count={policy.max_occurrences}"
    return str(condition)


def overlap_words(loop: Loop) -> str:
    """What the loop's overlap means at the run and the occurrence level."""
    if loop.singleton:
        runs = "runs one at a time (else no-op previous_run_in_flight)"
    else:
        runs = "runs overlap"
    limit = max_active(loop)
    if limit is None:
        return f"{runs}; no limit on active occurrences per repo"
    beyond = {
        OnActive.RETURN: "no-op occurrence_active, linked to the active one",
        OnActive.COALESCE: "no-op coalesced, one follow-up tick when the active one ends",
        OnActive.SKIP: "no-op skipped_active",
    }[loop.on_active]
    plural = "" if limit == 1 else "s"
    return f"{runs}; {limit} active occurrence{plural} per repo (else {beyond})"


def triage_text(rule: TriageRule) -> str:
    """A triage line as written: `DECISION [if|unless EXPR] [key "T"] [category WORD]`
    (its note is the row's note)."""
    text = str(rule.decision)
    if rule.guard is not None:
        text += f" {'unless' if rule.negate else 'if'} {expr_text(rule.guard)}"
    if rule.key is not None:
        text += f" key {expr_text(rule.key)}"
    if rule.category is not None:
        text += f" category {rule.category}"
    return text


def expr_text(expr: ex.Expr) -> str:
    """An expression as a rule file writes it."""
    match expr:
        case ex.Literal(value=value):
            return json.dumps(value)
        case ex.Path():
            return str(expr)
        case ex.Template(parts=parts):
            inner = "".join(
                f"{{{part}}}" if isinstance(part, ex.Path) else _braces(part) for part in parts
            )
            return json.dumps(inner)
        case ex.ListExpr(items=items):
            return "[" + ", ".join(expr_text(i) for i in items) + "]"
        case ex.ObjectExpr(pairs=pairs):
            body = ", ".join(f"{_key(k)}: {expr_text(v)}" for k, v in pairs)
            return "{" + body + "}"
        case ex.Not(operand=operand):
            return f"not {_grouped(operand)}"
        case ex.BoolOp(op=op, operands=operands):
            return f" {op} ".join(
                _grouped(o) if isinstance(o, ex.BoolOp) and o.op != op else expr_text(o)
                for o in operands
            )
        case ex.Compare(op=op, left=left, right=right):
            return f"{_grouped(left)} {op} {_grouped(right)}"
        case ex.Call(name=name, args=args):
            return f"{name}(" + ", ".join(expr_text(a) for a in args) + ")"
    return "?"  # pragma: no cover - every expression kind is matched above


def _grouped(expr: ex.Expr) -> str:
    text = expr_text(expr)
    return f"({text})" if isinstance(expr, ex.BoolOp | ex.Compare) else text


def _braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


__all__ = [
    "Row",
    "UnknownLoop",
    "explain_loop",
    "expr_text",
    "payload_text",
    "trigger_text",
    "value_text",
    "warnings_of",
]
