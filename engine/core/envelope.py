"""The `factory.event/v1` envelope: the one shape every event has, whatever its source."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SCHEMA_VERSION: Final = "factory.event/v1"
EVENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,255}$"


class Envelope(BaseModel):
    """An event as admitted. `eventId` is its idempotency key: a second admission with
    the same id is a duplicate and writes nothing."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schemaVersion: Literal["factory.event/v1"] = SCHEMA_VERSION
    eventId: str = Field(pattern=EVENT_ID_PATTERN)
    type: str = Field(min_length=1, max_length=200)
    source: str = Field(pattern=r"^[a-z][a-z0-9_.-]{0,63}$")
    subject: str = Field(default="", max_length=500)
    occurredAt: datetime
    correlationId: str = Field(default="", max_length=256)
    payload: dict[str, Any] = Field(default_factory=dict)

    @field_validator("occurredAt")
    @classmethod
    def _aware_utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("occurredAt needs a time zone offset, e.g. 2026-12-01T09:00:00Z")
        return value.astimezone(UTC)

    def with_defaults(self) -> Envelope:
        """The correlation id defaults to the event's own id."""
        if self.correlationId:
            return self
        return self.model_copy(update={"correlationId": self.eventId})


def iso(moment: datetime) -> str:
    """The one text form of an instant in storage and on the wire: UTC, microseconds, Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
