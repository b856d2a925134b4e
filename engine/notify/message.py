"""What a notification says to a sink (docs/notifications.md#what-a-sink-receives):
the JSON document of the generic webhook and the log file, and the title and text of
a chat or mail message. Pure functions."""

from __future__ import annotations

import json
from typing import Any

from engine.core.records import NotificationRecord


def document(n: NotificationRecord) -> dict[str, Any]:
    """The JSON document (the webhook's body, a line of the log file)."""
    return {
        "seq": n.seq,
        "at": n.at,
        "kind": n.kind,
        "loop": n.loop,
        "repo": n.repo,
        "state": n.state,
        "message": n.message,
        "links": n.links,
    }


def body(n: NotificationRecord) -> bytes:
    """The document as sent: compact, keys sorted, UTF-8."""
    return json.dumps(document(n), separators=(",", ":"), sort_keys=True).encode()


def title(n: NotificationRecord) -> str:
    """`engine: loop breaker breaker_tripped`, `engine: repair (r1) failed`."""
    about = n.loop or n.kind
    where = f" ({n.repo})" if n.repo else ""
    return f"engine: {about}{where} {n.state}"


def text(n: NotificationRecord) -> str:
    """The message, then each durable link on a line, then when it was written."""
    lines = [n.message]
    for name in sorted(n.links):
        value = n.links[name]
        shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        lines.append(f"{name}: {shown}")
    lines.append(f"at {n.at} (notification {n.seq})")
    return "\n".join(lines)
