"""The parsed form of a rule file: declarations exactly as written, with spans. The
compiler (engine.core.compiler) gives them meaning against the registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from dsl.diagnostics import Span
from dsl.expr import Expr, ObjectExpr


@dataclass(frozen=True, slots=True)
class Old:
    """Where a line used an old spelling of the language (dsl/spelling.py): the old
    word as written and its span. The compiler warns (W0901) at it."""

    word: str
    span: Span


@dataclass(frozen=True, slots=True)
class Arg:
    """One argument of a loop setting: a bare word, a quoted string, or `name=value`
    (kind "assign": `value` is the name, `assigned` the word after `=`)."""

    kind: str  # "word" | "string" | "assign"
    value: str
    span: Span
    assigned: Arg | None = None


@dataclass(frozen=True, slots=True)
class Setting:
    key: str
    args: tuple[Arg, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Guard:
    expr: Expr
    negate: bool  # True for `unless`


@dataclass(frozen=True, slots=True)
class Emit:
    event_type: str
    type_span: Span
    subject: Expr | None
    event_id: Expr | None
    payload: ObjectExpr | None
    guard: Guard | None
    span: Span
    old: Old | None = None  # the guard's `if`/`unless` written after the payload


@dataclass(frozen=True, slots=True)
class TriageLine:
    """`DECISION [if|unless EXPR] [note STRING] [key STRING] [category WORD]`."""

    decision: str
    decision_span: Span
    guard: Guard | None
    note: str | None
    key: Expr | None  # a string template (Literal or Template)
    key_span: Span | None
    category: str | None
    category_span: Span | None


@dataclass(frozen=True, slots=True)
class TriageDecl:
    """A loop's `triage` block: its lines in order (the first match wins)."""

    lines: tuple[TriageLine, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class OnEvent:
    """`on_event TYPE [window VALUE] [if|unless EXPR]`: a loop fired by admitted events."""

    event_type: str
    type_span: Span
    window: Expr | None
    guard: Guard | None
    span: Span
    old: Old | None = None  # written `on-event`


@dataclass(frozen=True, slots=True)
class LoopDecl:
    name: str  # may hold `{var.field}` placeholders inside a `for` block
    name_span: Span
    emits: tuple[Emit, ...]
    settings: tuple[Setting, ...]
    span: Span
    triage: tuple[TriageDecl, ...] = ()  # more than one is an error the compiler reports
    on_events: tuple[OnEvent, ...] = ()  # a trigger: more than one is an error, as for others


@dataclass(frozen=True, slots=True)
class ForEach:
    var: str
    collection: str
    collection_span: Span
    where: Expr | None
    loops: tuple[LoopDecl, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class RouteDecl:
    event_type: str
    type_span: Span
    definition: str
    definition_span: Span
    approval: Arg | None
    span: Span


@dataclass(frozen=True, slots=True)
class Outcome:
    name: str
    span: Span


@dataclass(frozen=True, slots=True)
class Stop:
    span: Span


@dataclass(frozen=True, slots=True)
class ChainDecl:
    definition: str
    definition_span: Span
    outcomes: tuple[Outcome, ...]
    emits: tuple[Emit, ...]
    stop: Stop | None
    span: Span


@dataclass(frozen=True, slots=True)
class Let:
    name: str
    expr: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Refusal:
    """`ignore REASON` (answered 200) or `reject REASON` (answered 422)."""

    kind: str  # "ignore" | "reject"
    reason: str
    guard: Guard | None
    span: Span


WebhookLine: TypeAlias = Let | Refusal | Emit


@dataclass(frozen=True, slots=True)
class WebhookDecl:
    source: str
    source_span: Span
    kind: str
    lines: tuple[WebhookLine, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class HumanOnlyDecl:
    """`human_only WORD`: a definition when WORD has an `@`, else an event type."""

    target_kind: str  # "event" | "definition"
    target: str
    target_span: Span
    span: Span
    old: Old | None = None  # written `human-only`, or with the word `definition`


Decl: TypeAlias = LoopDecl | ForEach | RouteDecl | ChainDecl | WebhookDecl | HumanOnlyDecl


@dataclass(frozen=True, slots=True)
class RuleFile:
    path: str
    decls: tuple[Decl, ...]
