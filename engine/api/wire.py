"""The JSON form of the store's records, shared by the HTTP API and `engine … --json`:
field names in camelCase (like the envelope), values as stored. Payloads, results and
journal data keep their own keys."""

from __future__ import annotations

from importlib import metadata
from typing import Any

from engine.core.paging import Page
from engine.core.records import (
    EventRecord,
    JournalEntry,
    ProposalRecord,
    RunRecord,
    document,
)


def record(value: Any) -> dict[str, Any] | None:
    """A frozen record dataclass as a camelCase dict (None stays None)."""
    return document(value)


def records(values: list[Any]) -> list[dict[str, Any]]:
    return [r for r in (record(v) for v in values) if r is not None]


def event_detail(found: dict[str, Any]) -> dict[str, Any]:
    """`Service.event()` -> {event, decision, occurrence}."""
    return {
        "event": record(found["event"]),
        "decision": record(found["decision"]),
        "occurrence": found["occurrence"],
    }


def events(page: Page[EventRecord]) -> dict[str, Any]:
    """A page of events (docs/api.md#paging): `next` is the cursor of the older ones."""
    return {"events": records(page.items), "next": page.next}


def proposals(page: Page[ProposalRecord]) -> dict[str, Any]:
    return {"proposals": records(page.items), "next": page.next}


def runs(page: Page[RunRecord]) -> dict[str, Any]:
    return {"runs": records(page.items), "next": page.next}


def notifications(page: Page[dict[str, Any]]) -> dict[str, Any]:
    """A page of notifications (docs/api.md#get-notifications), each with `sinks`: its
    delivery at each sink."""
    listed = [
        {**(record(item["notification"]) or {}), "sinks": records(item["sinks"])}
        for item in page.items
    ]
    return {"notifications": listed, "next": page.next}


def journal(entries: list[JournalEntry], after: int) -> dict[str, Any]:
    """`next` is the `after` that continues where this page stopped."""
    last = max((e.seq or 0 for e in entries), default=after)
    return {"entries": records(entries), "next": last}


def approval(proposal: ProposalRecord, run: RunRecord) -> dict[str, Any]:
    return {"proposal": record(proposal), "run": record(run)}


def version() -> str:
    try:
        return metadata.version("engine")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"
