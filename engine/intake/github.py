"""GitHub webhook intake (docs/github.md). Pure: `verify_signature` checks
`X-Hub-Signature-256` over the raw body against every configured secret, and
`translate` runs one delivery through its `webhook github KIND` table of
`loops/github.rules` into one typed result — `Admit(envelope)`, `Ignored(reason)` or
`Rejected(reason, errors)`. The table is data; nothing here knows a GitHub event kind."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final, TypeAlias

from pydantic import ValidationError

from dsl import expr as ex
from dsl.diagnostics import Span
from dsl.model import Guard, Let, Refusal
from engine.core.envelope import Envelope
from engine.core.ruleset import EmitRule, RuleSet, WebhookTable

SOURCE: Final = "github"  # the webhook source in `webhook github KIND` and envelopes
SIGNATURE_PREFIX: Final = "sha256="
# X-GitHub-Delivery: GitHub sends a GUID; replays send their own ids (`replay-<hex>`).
DELIVERY_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")


class Reason(StrEnum):
    """The reasons intake gives by itself; a table's `ignore`/`reject` lines add theirs."""

    UNHANDLED_EVENT = "unhandled_event"  # no table for the kind, or no line matched
    MALFORMED_PAYLOAD = "malformed_payload"  # the table read data the delivery lacks
    MISSING_DELIVERY_ID = "missing_delivery_id"
    BAD_DELIVERY_ID = "bad_delivery_id"  # not GUID-like: letters, digits, '-', at most 64
    INVALID_JSON = "invalid_json"


# ---- signature ---------------------------------------------------------------------


def sign(secret: bytes, body: bytes) -> str:
    """The `X-Hub-Signature-256` value GitHub sends: `sha256=` + hex HMAC-SHA256."""
    return SIGNATURE_PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify_signature(secrets: Sequence[bytes], body: bytes, header: str | None) -> bool:
    """True when `header` signs these exact bytes under one of `secrets` (several while
    a secret is rotated). Every secret is compared in constant time, so the timing
    tells neither whether nor which one matched. No secret or no header: False."""
    if not header:
        return False
    given = header.strip().lower().encode("ascii", "replace")
    matched = False
    for secret in secrets:
        matched |= hmac.compare_digest(sign(secret, body).encode(), given)
    return matched


# ---- translation -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Admit:
    envelope: Envelope
    rule: Span  # the `emit` line


@dataclass(frozen=True, slots=True)
class Ignored:
    """A benign non-event, answered 200 so GitHub never marks the hook failing."""

    reason: str
    rule: Span | None = None  # the `ignore` line; None when no table or line matched


@dataclass(frozen=True, slots=True)
class Rejected:
    """A malformed delivery, answered 422; `errors` say what and where."""

    reason: str
    errors: tuple[str, ...] = ()
    rule: Span | None = None


Translation: TypeAlias = Admit | Ignored | Rejected


def translate(
    rules: RuleSet, kind: str, delivery_id: str, payload: Mapping[str, Any], now: datetime
) -> Translation:
    """Run the delivery through the table for `kind`: lines in order, the first that
    matches wins. Reading data the delivery lacks (or of the wrong type) rejects it as
    `malformed_payload`; a kind with no table, or a table no line of which matched,
    is ignored as `unhandled_event`."""
    table = rules.webhooks.get((SOURCE, kind))
    if table is None:
        return Ignored(Reason.UNHANDLED_EVENT)
    scope = delivery_scope(rules, kind, delivery_id, payload)
    try:
        return _run(table, scope, delivery_id, now)
    except ex.EvalError as err:
        return Rejected(Reason.MALFORMED_PAYLOAD, (f"{_where(err.span)}: {err.message}",), err.span)


def delivery_scope(
    rules: RuleSet, kind: str, delivery_id: str, payload: Mapping[str, Any]
) -> dict[str, Any]:
    """The names a table reads: the payload's top-level fields, `repo` and `delivery`
    (the two win over payload fields of the same name)."""
    return {
        **payload,
        "repo": repo_scope(rules, payload.get("repository")),
        "delivery": {"id": delivery_id, "event": kind},
    }


def repo_scope(rules: RuleSet, repository: Any) -> dict[str, Any]:
    """The configured repo whose `github` is `repository.full_name` (any case), or an
    unconfigured stand-in carrying the full name."""
    full_name = repository.get("full_name") if isinstance(repository, Mapping) else None
    if not isinstance(full_name, str):
        full_name = None
    for repo in rules.repos.values():
        if full_name is not None and repo.github.lower() == full_name.lower():
            return repo.as_scope()
    return {
        "configured": False,
        "name": None,
        "github": full_name,
        "base": None,
        "report_only": False,
    }


def _run(
    table: WebhookTable, scope: dict[str, Any], delivery_id: str, now: datetime
) -> Translation:
    for step in table.steps:
        if isinstance(step, Let):
            scope[step.name] = ex.evaluate(step.expr, scope)
        elif not _holds(step.guard, scope):
            continue
        elif isinstance(step, Refusal):
            return _refusal(step)
        else:
            return _admit(step, scope, delivery_id, now)
    return Ignored(Reason.UNHANDLED_EVENT)


def _holds(guard: Guard | None, scope: Mapping[str, Any]) -> bool:
    """No guard, `if` with a true expression, or `unless` with a false one."""
    return guard is None or ex.truthy(ex.evaluate(guard.expr, scope)) != guard.negate


def _refusal(step: Refusal) -> Ignored | Rejected:
    if step.kind == "ignore":
        return Ignored(step.reason, step.span)
    return Rejected(step.reason, (f"{_where(step.span)}: reject {step.reason}",), step.span)


def _admit(
    emit: EmitRule, scope: Mapping[str, Any], delivery_id: str, now: datetime
) -> Admit | Rejected:
    """The envelope of an `emit` line: its id defaults to the delivery GUID, and the
    GUID is always the correlation id."""
    payload = ex.evaluate(emit.payload, scope) if emit.payload is not None else {}
    event_id = _text(emit.event_id, scope) if emit.event_id is not None else delivery_id
    subject = _text(emit.subject, scope) if emit.subject is not None else ""
    try:
        envelope = Envelope(
            eventId=event_id,
            type=emit.event_type,
            source=SOURCE,
            subject=subject,
            occurredAt=now,
            correlationId=delivery_id,
            payload=payload,
        )
    except ValidationError as err:
        lines = tuple(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
        return Rejected(Reason.MALFORMED_PAYLOAD, lines, emit.origin)
    return Admit(envelope, emit.origin)


def delivery_problem(delivery: str) -> Rejected | None:
    """A refusal for an X-GitHub-Delivery that is missing or not GUID-like."""
    if not delivery:
        return Rejected(Reason.MISSING_DELIVERY_ID, ("X-GitHub-Delivery is required",))
    if DELIVERY_ID.fullmatch(delivery) is None:
        return Rejected(
            Reason.BAD_DELIVERY_ID,
            ("X-GitHub-Delivery must be 1-64 letters, digits and '-' (a GUID), not a dash first",),
        )
    return None


def _text(expr: ex.Expr, scope: Mapping[str, Any]) -> str:
    """An id or subject as text: strings as they are, numbers printed. A boolean,
    null, list or object (or one in a `{placeholder}`) names no event: EvalError."""
    parts = list(ex.paths(expr)) if isinstance(expr, ex.Template) else [expr]
    for part in parts:
        value = ex.evaluate(part, scope)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            name = f"'{part}'" if isinstance(part, ex.Path) else "the value"
            raise ex.EvalError(
                f"{name} is {_json_kind(value)}; an event id or subject is text or a number",
                part.span,
            )
    return str(ex.evaluate(expr, scope))


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a list" if isinstance(value, list) else "an object"


def _where(span: Span) -> str:
    """`loops/github.rules:12:5`: the rule's place (docs/rules.md#places), which names
    nothing of the host, so the answer may leave it."""
    return str(span)
