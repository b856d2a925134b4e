"""When to come back: the `Retry-After` every 503 carries (docs/api.md#when-to-come-back),
in whole seconds, by the answer's reason (`details.reason` of an error, `reason` of a
`GET /readyz`, `too_many_connections` at the edge). Pure data: the error middleware,
the readiness route and the connection bound read it, so one table says them all;
readiness probes a store that refused a write again once its reason's wait has passed
(engine.service.readiness)."""

from __future__ import annotations

HEADER = "Retry-After"

# A moment: the lock or a connection slot is likely free again soon.
SOON = 1
# The database is unreachable or restarting; a new connection is opened on the next try.
SHORTLY = 5
# A person must act (free the disk, make it writable, put the file back).
AFTER_A_FIX = 30
# Another engine version owns the schema: only a deploy changes it.
AFTER_A_DEPLOY = 60

SECONDS: dict[str, int] = {
    "database_busy": SOON,
    "too_many_connections": SOON,
    "unavailable": SHORTLY,
    "database_unavailable": SHORTLY,
    "store_closed": SHORTLY,
    "disk_full": AFTER_A_FIX,
    "io_error": AFTER_A_FIX,
    "read_only": AFTER_A_FIX,
    "database_missing": AFTER_A_FIX,
    "migrations_behind": AFTER_A_DEPLOY,
    "migrations_ahead": AFTER_A_DEPLOY,
}


def seconds(reason: str | None) -> int:
    """The seconds to wait before sending the request again, for a 503 of `reason`
    (SHORTLY for a reason the table does not name)."""
    return SECONDS.get(reason or "", SHORTLY)


def header(reason: str | None) -> dict[str, str]:
    """`{"Retry-After": "<seconds>"}` for a 503 of `reason`."""
    return {HEADER: str(seconds(reason))}
