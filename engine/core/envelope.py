"""The `factory.event/v1` envelope: the one shape every event has, whatever its source."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.core.nesting import MAX_PAYLOAD_DEPTH, depth

SCHEMA_VERSION: Final = "factory.event/v1"
EVENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,255}$"
# The instants an event may carry (the 422 `invalid_envelope` of docs/api.md#errors):
# every one of them has a UTC form that `iso` writes and `parse_iso` reads back.
EARLIEST: Final = datetime(1900, 1, 1, tzinfo=UTC)
LATEST: Final = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
# A number, as pydantic would read one as unix seconds or milliseconds.
_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")


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

    @field_validator("occurredAt", mode="before")
    @classmethod
    def _not_a_number(cls, value: Any) -> Any:
        """A number (or a text of one) is no instant with an offset: unix seconds or
        milliseconds would be a guess, which pydantic alone makes."""
        if isinstance(value, int | float) or (isinstance(value, str) and _NUMBER.fullmatch(value)):
            raise ValueError("occurredAt must be ISO-8601 with an offset, not a number")
        return value

    @field_validator("occurredAt")
    @classmethod
    def _aware_utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("occurredAt needs a time zone offset, e.g. 2026-12-01T09:00:00Z")
        try:
            moment = value.astimezone(UTC)
        except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00 is before year 1 in UTC
            moment = None
        if moment is None or not EARLIEST <= moment <= LATEST:
            raise ValueError(f"occurredAt must be from {iso(EARLIEST)} to {iso(LATEST)} in UTC")
        return moment

    @field_validator("payload")
    @classmethod
    def _shallow(cls, value: dict[str, Any]) -> dict[str, Any]:
        if depth(value, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH:
            raise ValueError(f"the payload nests deeper than {MAX_PAYLOAD_DEPTH} levels")
        return value

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
