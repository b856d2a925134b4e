"""The wire shapes of the HTTP API as pydantic models, for the OpenAPI document
(engine/api/openapi.py, docs/api.md#the-openapi-document). A stored record's model is
derived from its dataclass (engine/core/records.py) with the camelCase names `document`
gives it, so the two cannot drift; the documents built around them are written here.
Shapes a route assembles from many parts (status, explain, review, schedules, shadow
reports) are documented as objects with their main keys, open to more."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from engine.core.records import (
    DecisionRecord,
    EventRecord,
    FindingRecord,
    JournalEntry,
    NotificationRecord,
    ProposalRecord,
    RunRecord,
    SinkDelivery,
    camel,
)

_CLOSED = ConfigDict(frozen=True, extra="forbid")
_OPEN = ConfigDict(frozen=True, extra="allow")


def _record_model(name: str, record: type[Any]) -> type[BaseModel]:
    """A closed model of a record's `document`: every field, camelCase, always present."""
    hints = typing.get_type_hints(record)
    fields: dict[str, Any] = {
        camel(f.name): (hints[f.name], ...) for f in dataclasses.fields(record)
    }
    return create_model(name, __config__=_CLOSED, __doc__=record.__doc__, **fields)


# Models made at run time: mypy cannot use them as types, so each annotation that names
# one carries `# type: ignore[valid-type]`; pydantic reads them as the models they are.
Event = _record_model("Event", EventRecord)
Decision = _record_model("Decision", DecisionRecord)
Proposal = _record_model("Proposal", ProposalRecord)
Run = _record_model("Run", RunRecord)
Entry = _record_model("JournalEntry", JournalEntry)
Finding = _record_model("Finding", FindingRecord)
SinkDeliveryModel = _record_model("SinkDelivery", SinkDelivery)
_Notification = _record_model("NotificationRecord", NotificationRecord)


class Notification(_Notification):  # type: ignore[valid-type,misc]
    """A notification (docs/notifications.md): what it announces (`kind`, `state`,
    `message`, `links`), its delivery across the sinks (`delivery`: pending,
    delivered or failed; `attempts`: the most any sink made) and each sink's row."""

    sinks: list[SinkDeliveryModel]  # type: ignore[valid-type]


class Error(BaseModel):
    """Every refusal (engine/api/errors.py): a stable `error` code, a message a person
    can act on, `details.reason` saying which refusal it is."""

    model_config = _CLOSED
    error: str
    message: str | None = None
    details: dict[str, Any] | None = None
    errors: list[str] | None = Field(default=None, description="422: every reason")


class EventsPage(BaseModel):
    model_config = _CLOSED
    events: list[Event]  # type: ignore[valid-type]
    next: str | None = Field(description="the cursor of the older page; null at the end")


class ProposalsPage(BaseModel):
    model_config = _CLOSED
    proposals: list[Proposal]  # type: ignore[valid-type]
    next: str | None = Field(description="the cursor of the older page; null at the end")


class RunsPage(BaseModel):
    model_config = _CLOSED
    runs: list[Run]  # type: ignore[valid-type]
    next: str | None = Field(description="the cursor of the older page; null at the end")


class NotificationsPage(BaseModel):
    model_config = _CLOSED
    notifications: list[Notification]
    next: str | None = Field(description="the cursor of the older page; null at the end")


class JournalPage(BaseModel):
    model_config = _CLOSED
    entries: list[Entry]  # type: ignore[valid-type]
    next: int = Field(description="the `after` that continues where this page stopped")


class EventDetail(BaseModel):
    model_config = _CLOSED
    event: Event  # type: ignore[valid-type]
    decision: Decision | None  # type: ignore[valid-type]
    occurrence: Any


class OneRun(BaseModel):
    model_config = _CLOSED
    run: Run  # type: ignore[valid-type]


class OneProposal(BaseModel):
    model_config = _CLOSED
    proposal: Proposal  # type: ignore[valid-type]


class Approval(BaseModel):
    model_config = _CLOSED
    proposal: Proposal  # type: ignore[valid-type]
    run: Run  # type: ignore[valid-type]


class Findings(BaseModel):
    model_config = _CLOSED
    findings: list[Finding]  # type: ignore[valid-type]


class OneFinding(BaseModel):
    model_config = _CLOSED
    finding: Finding  # type: ignore[valid-type]


class WorkLease(BaseModel):
    """A work item's controller lease: who holds it, for which session, until when
    (all null when none does)."""

    model_config = _CLOSED
    owner: str | None
    session: str | None
    expiresAt: str | None


class Work(BaseModel):
    """A work item (docs/work.md): a finite objective, its state and its lease."""

    model_config = _CLOSED
    workId: str
    semanticKey: str
    title: str
    state: Literal["open", "active", "blocked", "completed", "cancelled"]
    repo: str | None
    context: dict[str, Any] = Field(description="{summary, links}: at most 64 KB")
    createdBy: str
    createdAt: str
    updatedAt: str
    version: int
    lease: WorkLease


class BindingGraduation(BaseModel):
    model_config = _CLOSED
    requestedBy: str
    requestedAt: str
    note: str


class WorkBinding(BaseModel):
    """A work-bound loop instance: a reviewed shape bound to one work item."""

    model_config = _CLOSED
    bindingId: str
    workId: str
    shape: str
    loop: str = Field(description="the instance's loop name, SHAPE@WORK-ID")
    requestId: str
    state: Literal["shadow", "live", "paused", "disabled"]
    createdBy: str
    createdAt: str
    updatedAt: str
    version: int
    pendingGraduation: BindingGraduation | None = Field(
        description="its graduation out of shadow deferred to the next serve start; "
        "null when none is pending"
    )


class OneBinding(BaseModel):
    model_config = _CLOSED
    binding: WorkBinding


class Bound(BaseModel):
    """`created`: false when the request id, or the (work, shape), already made it."""

    model_config = _CLOSED
    binding: WorkBinding
    created: bool


class WorkBindings(BaseModel):
    model_config = _CLOSED
    bindings: list[WorkBinding]


class WorkPage(BaseModel):
    model_config = _CLOSED
    work: list[Work]
    next: str | None = Field(description="the cursor of the older page; null at the end")


class OneWork(BaseModel):
    model_config = _CLOSED
    work: Work


class OpenedWork(BaseModel):
    """`created`: false when the key's live item answered (existing work first)."""

    model_config = _CLOSED
    work: Work
    created: bool


class Admission(BaseModel):
    """An envelope's admission: new (`admitted`) or a `duplicate` of one kept."""

    model_config = _CLOSED
    admitted: bool
    duplicate: bool
    eventId: str


class Ignored(BaseModel):
    """A GitHub delivery no rule admits (answered 200)."""

    model_config = _CLOSED
    admitted: Literal[False]
    ignored: Literal[True]
    reason: str


class Health(BaseModel):
    model_config = _CLOSED
    ok: Literal[True]
    version: str


class SchemaVersions(BaseModel):
    model_config = _CLOSED
    applied: int  # the highest migration the database records
    shipped: int  # the highest migration this engine ships


class Ready(BaseModel):
    """Readiness: the database answers, holds exactly this engine's migrations and
    takes writes (200), or why not (503: `database_unavailable`, `migrations_behind`,
    `migrations_ahead`, `read_only`, `disk_full`, `io_error`)."""

    model_config = _CLOSED
    ready: bool
    reason: (
        Literal[
            "database_unavailable",
            "migrations_behind",
            "migrations_ahead",
            "read_only",
            "disk_full",
            "io_error",
        ]
        | None
    ) = None
    message: str | None = None
    schema_: SchemaVersions | None = Field(default=None, alias="schema")
    version: str


class Status(BaseModel):
    """Counts, digests, the version and the doctor's findings; never a secret."""

    model_config = _OPEN
    ok: bool
    version: str
    rulesDigest: str
    database: str
    anomalies: int
    doctor: dict[str, Any]


class PendingGraduation(BaseModel):
    """A work-bound loop instance's graduation out of shadow, deferred to the next
    serve start."""

    model_config = _CLOSED
    loop: str = Field(description="the instance, SHAPE@WORK-ID")
    shape: str
    workId: str
    bindingId: str
    state: Literal["shadow", "live", "paused", "disabled"]
    requestedBy: str
    requestedAt: str
    note: str


class Schedules(BaseModel):
    model_config = _CLOSED
    schedules: list[dict[str, Any]]
    pendingGraduations: list[PendingGraduation] = Field(
        description="graduations deferred to the next serve start, oldest first"
    )


class OneSchedule(BaseModel):
    model_config = _CLOSED
    schedule: dict[str, Any]


class Slots(BaseModel):
    model_config = _CLOSED
    loop: str
    since: str
    enabledSince: str | None
    slots: list[dict[str, Any]]


class Document(BaseModel):
    """A document assembled from many parts (docs/explain.md, docs/runtime.md)."""

    model_config = _OPEN
