"""`engine explain` as text (docs/explain.md): the causal chain of one event, read by
`engine.service.explain` as a document, drawn as a tree for people. Pure: a document
in, lines out."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

INDENT = "  "


def tree(doc: Mapping[str, Any]) -> list[str]:
    """The lines of an explanation: what caused the event, the event and its decision,
    its occurrence's steps, proposals and runs, and the events its runs chained."""
    lines: list[str] = []
    cause = doc.get("cause")
    if cause is not None:
        lines.append("caused by")
        lines.extend(_cause(cause, 1))
    lines.extend(_node(doc, 0))
    return lines


def _cause(cause: Mapping[str, Any], depth: int) -> Iterator[str]:
    pad = INDENT * depth
    kind = cause["kind"]
    if kind == "slot":
        yield f"{pad}slot {cause['slot']} of loop {cause['loop']} ({cause['source']})"
    elif kind == "delivery":
        yield f"{pad}GitHub delivery {cause['delivery']}"
    elif kind == "chain":
        yield (
            f"{pad}run {cause['run']} ended {cause.get('outcome') or '-'}"
            f", chained by {cause.get('rule') or '-'}"
        )
    elif kind == "on_event":
        yield f"{pad}event {cause['event']} fired on_event loop {cause['loop']}"
    elif kind == "after":
        yield f"{pad}occurrence {cause['occurrence']} concluded: after loop {cause['loop']}"
    else:
        yield f"{pad}admitted by {cause.get('actor') or '-'} ({cause.get('source') or '-'})"
    upstream = cause.get("from")
    if upstream is not None:
        if upstream.get("cause") is not None:
            yield from _cause(upstream["cause"], depth + 1)
        yield f"{pad}{INDENT}event {upstream['event']['eventId']} ({upstream['event']['type']})"


def _node(doc: Mapping[str, Any], depth: int) -> Iterator[str]:
    pad = INDENT * depth
    event = doc["event"]
    yield (
        f"{pad}event {event['eventId']} ({event['type']}, source {event['source']}), "
        f"admitted {event['admittedAt']} by {event['admittedBy']}"
    )
    decision = doc.get("decision")
    if decision is None:
        yield f"{pad}{INDENT}not decided yet"
    else:
        why = f" {decision['reason']}" if decision.get("reason") else ""
        yield (
            f"{pad}{INDENT}decided {decision['kind']}{why} by {decision.get('rule') or '-'}"
            f" (rules {str(decision.get('rulesDigest') or '-')[:19]}) at {decision['decidedAt']}"
        )
        if decision.get("note"):
            yield f"{pad}{INDENT}{INDENT}{decision['note']}"
    for step in doc.get("occurrence", {}).get("steps", []):
        moved = f" {step['from'] or '-'} -> {step['to']}" if step.get("to") else ""
        yield f"{pad}{INDENT}occurrence {step['action']}{moved} by {step['actor']} at {step['at']}"
    for proposal in doc.get("proposals", []):
        yield f"{pad}{INDENT}proposal {proposal['proposalId']}: {proposal['state']}"
        for step in proposal.get("steps", []):
            note = f": {step['note']}" if step.get("note") else ""
            yield f"{pad}{INDENT}{INDENT}{step['action']} by {step['actor']} at {step['at']}{note}"
    for run in doc.get("runs", []):
        yield (
            f"{pad}{INDENT}run {run['runId']}: {run['state']}, outcome {run.get('outcome') or '-'}"
            f", {run['attempts']} attempt(s)"
            + (f", artifact {run['artifact']}" if run.get("artifact") else "")
        )
        for chained in run.get("chained", []):
            yield f"{pad}{INDENT}{INDENT}chained by {chained['rule'] or '-'}:"
            yield from _node(chained, depth + 3)
