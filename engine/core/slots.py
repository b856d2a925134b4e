"""Slot arithmetic: when a loop is due, and what a late pass fires or skips.

Pure: `now` is always an argument. A slot is the deterministic identity of one
firing: for an interval loop the epoch floor of its cadence in UTC, for a cron loop
the scheduled instant (local wall time in the loop's zone, mapped to UTC), for a
one-shot its instant.

Daylight saving (cron, `engine.core.cron`): a wall-clock job (minute or hour field
starting with `*`) keeps its real cadence, firing at every instant whose local time
matches, so a repeated wall time fires twice and a skipped one not at all; a
fixed-time job fires each wall time once, at its first occurrence, or at the first
valid minute after a spring-forward gap."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Protocol

from engine.core.cron import CronSlots
from engine.core.ruleset import CatchUp, Loop, Trigger, TriggerKind

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SkipReason(StrEnum):
    """Why a due slot did not fire; persisted with each skipped range."""

    CATCHUP_NONE = "catchup_none"  # older than the newest due slot under `catch-up none`
    CATCHUP_LAST = "catchup_last"  # older than the newest missed slot under `catch-up last`
    CATCHUP_CAP = "catchup_cap"  # beyond the cap of `catch-up all cap N`
    TOO_LATE = "too_late"  # later than the loop's max-lateness
    PAUSED = "paused"  # due while an operator had paused the loop
    DISABLED = "disabled"  # due while the loop was disabled


class Slots(Protocol):
    """The slot sequence of one trigger, in UTC."""

    def floor(self, moment: datetime) -> datetime | None:
        """The latest slot at or before `moment`, or None."""

    def after(self, moment: datetime) -> datetime | None:
        """The earliest slot strictly after `moment`, or None."""


@dataclass(frozen=True, slots=True)
class IntervalSlots:
    every_seconds: int

    def floor(self, moment: datetime) -> datetime:
        seconds = int((moment - EPOCH).total_seconds() // self.every_seconds) * self.every_seconds
        return EPOCH + timedelta(seconds=seconds)

    def after(self, moment: datetime) -> datetime:
        return self.floor(moment) + timedelta(seconds=self.every_seconds)

    def count(self, first: datetime, last: datetime) -> int:
        """Slots in [first, last], both slots of this sequence."""
        return int((last - first).total_seconds()) // self.every_seconds + 1


@dataclass(frozen=True, slots=True)
class OneShot:
    at: datetime

    def floor(self, moment: datetime) -> datetime | None:
        return self.at if self.at <= moment else None

    def after(self, moment: datetime) -> datetime | None:
        return self.at if self.at > moment else None


def slots_of(trigger: Trigger) -> Slots | None:
    """The slot sequence the in-process scheduler fires, or None for triggers it never
    fires (manual, host clocks)."""
    if trigger.kind is TriggerKind.INTERVAL and trigger.every_seconds:
        return IntervalSlots(trigger.every_seconds)
    if trigger.kind is TriggerKind.CRON and trigger.cron and trigger.timezone:
        return CronSlots(trigger.cron, trigger.timezone)
    if trigger.kind is TriggerKind.AT and trigger.at is not None:
        return OneShot(trigger.at.astimezone(UTC))
    return None


def cadence_seconds(trigger: Trigger, slot: datetime) -> int:
    """The tick payload's `cadenceSeconds`: the interval, or the gap to the next slot."""
    if trigger.every_seconds:
        return trigger.every_seconds
    seq = slots_of(trigger)
    nxt = seq.after(slot) if seq is not None else None
    return int((nxt - slot).total_seconds()) if nxt is not None else 0


# ---- a pass -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fire:
    slot: datetime
    skipped: int  # the tick's payload.skippedSlots


@dataclass(frozen=True, slots=True)
class SkipRange:
    """Due slots that did not fire, compactly: first and last slot and how many."""

    first: datetime
    last: datetime
    count: int
    reason: SkipReason


@dataclass(frozen=True, slots=True)
class Pass:
    fires: tuple[Fire, ...]
    skips: tuple[SkipRange, ...]
    cursor: datetime | None  # the newest slot accounted for (fired or skipped)


@dataclass(frozen=True, slots=True)
class Policy:
    catch_up: CatchUp = CatchUp.NONE
    cap: int | None = None
    max_lateness: timedelta | None = None

    @classmethod
    def of(cls, loop: Loop) -> Policy:
        late = timedelta(seconds=loop.max_lateness_seconds) if loop.max_lateness_seconds else None
        return cls(loop.catch_up, loop.catch_up_cap, late)


def pending(
    seq: Slots, cursor: datetime | None, since: datetime, now: datetime
) -> Iterator[datetime]:
    """Due slots in order: after the cursor, not before `since` (enablement), up to now."""
    start = since - timedelta(microseconds=1)
    if cursor is not None and cursor > start:
        start = cursor
    for slot in walk(seq, start):
        if slot > now:
            return
        yield slot


def walk(seq: Slots, moment: datetime) -> Iterator[datetime]:
    """Every slot strictly after `moment`, in order (a cron walk keeps one iterator)."""
    if isinstance(seq, CronSlots):
        yield from seq.walk(moment)
        return
    slot = seq.after(moment)
    while slot is not None:
        yield slot
        slot = seq.after(slot)


def plan_pass(
    seq: Slots, policy: Policy, cursor: datetime | None, since: datetime, now: datetime
) -> Pass:
    """What one scheduler pass fires and skips (docs/scheduling.md#missed-slots-catch-up):

    - `none`: the newest due slot fires, carrying the count of older ones as skipped;
    - `last`: with older due slots, the newest *missed* slot (the one before the
      newest) fires and the newest waits for the next pass; alone, a slot just fires;
    - `all`: every due slot fires in order, the oldest beyond the cap skipped.
    Slots later than max-lateness are skipped first. Nothing before `since` is due."""
    if isinstance(seq, IntervalSlots):
        return _interval_pass(seq, policy, cursor, since, now)
    return _decide(list(pending(seq, cursor, since, now)), policy, now, cursor)


def _interval_pass(
    seq: IntervalSlots, policy: Policy, cursor: datetime | None, since: datetime, now: datetime
) -> Pass:
    """The same rules by arithmetic, so a long outage costs O(fired), not O(missed)."""
    first = seq.after(max(since - timedelta(microseconds=1), cursor or EPOCH))
    newest = seq.floor(now)
    if first > newest:
        return Pass((), (), cursor)
    step = timedelta(seconds=seq.every_seconds)
    skips: list[SkipRange] = []
    if policy.max_lateness is not None:
        oldest_ok = seq.after(now - policy.max_lateness - timedelta(microseconds=1))
        if oldest_ok > first:
            last_late = min(newest, oldest_ok - step)
            skips.append(
                SkipRange(first, last_late, seq.count(first, last_late), SkipReason.TOO_LATE)
            )
            first = last_late + step
            if first > newest:
                return Pass((), tuple(skips), newest)
    total = seq.count(first, newest)
    if policy.catch_up is CatchUp.ALL:
        return _all(seq, policy, first, newest, total, skips)
    fire_at = newest if policy.catch_up is CatchUp.NONE or total == 1 else newest - step
    older = seq.count(first, fire_at) - 1
    if older:
        reason = (
            SkipReason.CATCHUP_NONE if policy.catch_up is CatchUp.NONE else SkipReason.CATCHUP_LAST
        )
        skips.append(SkipRange(first, fire_at - step, older, reason))
    return _firing([fire_at], skips, fire_at)


def _all(
    seq: IntervalSlots,
    policy: Policy,
    first: datetime,
    newest: datetime,
    total: int,
    skips: list[SkipRange],
) -> Pass:
    step = timedelta(seconds=seq.every_seconds)
    if policy.cap is not None and total > policy.cap:
        capped = total - policy.cap
        last_capped = first + step * (capped - 1)
        skips.append(SkipRange(first, last_capped, capped, SkipReason.CATCHUP_CAP))
        first = last_capped + step
    count = seq.count(first, newest)
    return _firing([first + step * i for i in range(count)], skips, newest)


def _decide(due: list[datetime], policy: Policy, now: datetime, cursor: datetime | None) -> Pass:
    """The general rules over an explicit list of due slots (cron, one-shot)."""
    if not due:
        return Pass((), (), cursor)
    skips: list[SkipRange] = []
    if policy.max_lateness is not None:
        late = [s for s in due if now - s > policy.max_lateness]
        if late:
            skips.append(SkipRange(late[0], late[-1], len(late), SkipReason.TOO_LATE))
            due = due[len(late) :]
            if not due:
                return Pass((), tuple(skips), late[-1])
    if policy.catch_up is CatchUp.ALL:
        capped = len(due) - policy.cap if policy.cap is not None and len(due) > policy.cap else 0
        if capped:
            skips.append(SkipRange(due[0], due[capped - 1], capped, SkipReason.CATCHUP_CAP))
        return _firing(due[capped:], skips, due[-1])
    index = len(due) - 1 if policy.catch_up is CatchUp.NONE or len(due) == 1 else len(due) - 2
    if index:
        reason = (
            SkipReason.CATCHUP_NONE if policy.catch_up is CatchUp.NONE else SkipReason.CATCHUP_LAST
        )
        skips.append(SkipRange(due[0], due[index - 1], index, reason))
    return _firing([due[index]], skips, due[index])


def _firing(slots: list[datetime], skips: list[SkipRange], cursor: datetime) -> Pass:
    """A pass that fires `slots` in order. Every slot it skipped (too late, beyond the
    cap, older than the one catch-up fires) is older than its first firing, which counts
    them all in its `skippedSlots`."""
    skipped = sum(s.count for s in skips)
    fires = tuple(Fire(slot, skipped if i == 0 else 0) for i, slot in enumerate(slots))
    return Pass(fires, tuple(skips), cursor)


def skip_all(
    seq: Slots, cursor: datetime | None, since: datetime, now: datetime, reason: SkipReason
) -> Pass:
    """Account for every due slot without firing (a paused loop)."""
    if isinstance(seq, IntervalSlots):
        first = seq.after(max(since - timedelta(microseconds=1), cursor or EPOCH))
        newest = seq.floor(now)
        if first > newest:
            return Pass((), (), cursor)
        return Pass((), (SkipRange(first, newest, seq.count(first, newest), reason),), newest)
    due = list(pending(seq, cursor, since, now))
    if not due:
        return Pass((), (), cursor)
    return Pass((), (SkipRange(due[0], due[-1], len(due), reason),), due[-1])


def next_fires(seq: Slots, after: datetime, count: int = 5) -> list[datetime]:
    """The next `count` slots strictly after `after` (for `engine schedule show`)."""
    return list(itertools.islice(walk(seq, after), count))
