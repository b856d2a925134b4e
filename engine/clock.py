"""The one clock: every "now" the engine reads comes from here (docs/cli.md#environment).

It is the system clock, or with ENGINE_NOW=<ISO-8601> (a testing and demo aid) a
clock that starts at that instant and advances in real time, in each process from its
first read: serve's scheduler and its signed-intake window, the worker, `engine emit`'s
slot and signature, `schedule` and `doctor`'s "now", the store's migration stamps. No
other module calls `datetime.now` or `time.time` (a unit test holds them to it);
durations use `time.monotonic`, which is no "now". The one exception is `host_seconds`,
for comparing with the times the file system stamps."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from engine.core.timefmt import given_instant
from engine.errors import BadRequest

Clock = Callable[[], datetime]

NOW_ENV = "ENGINE_NOW"


def system_clock() -> datetime:
    """The host's time, as an aware UTC datetime."""
    return datetime.now(UTC)


def clock_from_env(value: str | None) -> Clock:
    """The system clock, or with ENGINE_NOW's `value` a clock that starts at that instant
    and advances in real time. BadRequest when malformed or outside 1970-9000."""
    if not value:
        return system_clock
    start = given_instant(value, NOW_ENV)
    if start is None:
        raise BadRequest(
            f"{NOW_ENV}={value!r} is not an ISO-8601 time with an offset, e.g. 2026-12-01T09:00:00Z"
        )
    offset = start - system_clock()

    def shifted() -> datetime:
        return system_clock() + offset

    return shifted


_lock = threading.Lock()
_placed: dict[str, Clock] = {}


def process_clock() -> Clock:
    """This process's clock, from ENGINE_NOW as the environment has it now: the same
    clock for every read while the value stays (so a placed clock runs on from the
    process's first read instead of starting again). BadRequest when malformed."""
    value = os.environ.get(NOW_ENV) or ""
    if not value:
        return system_clock
    with _lock:
        found = _placed.get(value)
        if found is None:
            found = _placed[value] = clock_from_env(value)
        return found


def now() -> datetime:
    """This process's "now" (`process_clock`)."""
    return process_clock()()


def unix_seconds(clock: Clock) -> int:
    """`clock`'s now in whole unix seconds (a signed request's timestamp)."""
    return int(clock().timestamp())


def host_seconds() -> float:
    """The host's own time in unix seconds, never placed by ENGINE_NOW: only for
    comparing with the modification times the file system stamps."""
    return time.time()
