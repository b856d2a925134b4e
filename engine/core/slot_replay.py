"""The scheduler's recorded passes planned again under other rules (docs/replay.md,
"Scheduled slots"), pure. A change of `catch-up`, `every`/`cron` or enablement changes
which slots fire, not only how a tick is decided: each pass the records show (the
instant its ticks were admitted and its skipped slots recorded) is planned again with
`engine.core.slots.plan_pass` under the new loop, from the cursor the new rules would
have left, and each slot's outcome is compared with the recorded one."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.core.ruleset import Loop
from engine.core.slots import (
    Pass,
    Policy,
    SkipRange,
    SkipReason,
    Slots,
    plan_pass,
    skip_all,
    slots_of,
    walk,
)

FIRED = "fired"
NOT_DUE = "not due"


@dataclass(frozen=True, slots=True)
class RecordedPass:
    """One pass of one loop as the records show it."""

    at: datetime  # when its ticks were admitted and its skips recorded
    since: datetime  # the loop's enablement then
    fired: tuple[datetime, ...]
    skips: tuple[SkipRange, ...]

    @property
    def paused(self) -> bool:
        return any(s.reason is SkipReason.PAUSED for s in self.skips)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one slot in one pass: `fired`, `skipped <reason>` or `not due`."""

    slot: datetime
    pass_at: datetime
    old: str
    new: str
    skipped: int = 0  # the new tick's skippedSlots, when the new rules fire it


def replanned(loop: Loop | None, passes: Sequence[RecordedPass]) -> list[Outcome]:
    """Every slot of the recorded passes (and of the passes planned again) whose outcome
    differs, in order; `loop` is the loop under the new rules (None: no longer there)."""
    seq = slots_of(loop.trigger) if loop is not None else None
    cursor: datetime | None = None
    out: list[Outcome] = []
    for recorded in passes:
        old = _old(recorded, seq)
        new, why, cursor = _new(loop, seq, recorded, cursor)
        for slot in sorted(old.keys() | new.keys()):
            before = old.get(slot, NOT_DUE)
            after, skipped = new.get(slot, (f"{NOT_DUE}{why}", 0))
            if before != after and not (before == NOT_DUE and after.startswith(NOT_DUE)):
                out.append(Outcome(slot, recorded.at, before, after, skipped))
    return out


def _old(recorded: RecordedPass, seq: Slots | None) -> dict[datetime, str]:
    found = {slot: FIRED for slot in recorded.fired}
    for skip in recorded.skips:
        for slot in _slots(skip, seq):
            found[slot] = f"skipped {skip.reason.value}"
    return found


def _new(
    loop: Loop | None, seq: Slots | None, recorded: RecordedPass, cursor: datetime | None
) -> tuple[dict[datetime, tuple[str, int]], str, datetime | None]:
    """The pass planned under the new loop: outcome by slot, why a slot is not due at
    all, and the cursor it leaves."""
    if loop is None or seq is None:
        why = " (no such loop)" if loop is None else " (not a scheduled loop)"
        return {}, why, cursor
    if not loop.enabled:
        return {}, " (disabled)", cursor
    if recorded.paused:
        result = skip_all(seq, cursor, recorded.since, recorded.at, SkipReason.PAUSED)
    else:
        result = plan_pass(seq, Policy.of(loop), cursor, recorded.since, recorded.at)
    found: dict[datetime, tuple[str, int]] = {f.slot: (FIRED, f.skipped) for f in result.fires}
    for skip in result.skips:
        for slot in _slots(skip, seq):
            found[slot] = (f"skipped {skip.reason.value}", 0)
    return found, "", _moved(result, cursor)


def _moved(result: Pass, cursor: datetime | None) -> datetime | None:
    if result.cursor is not None and (cursor is None or result.cursor > cursor):
        return result.cursor
    return cursor


def _slots(skip: SkipRange, seq: Slots | None) -> Iterator[datetime]:
    """The slots of a skipped range: those of `seq` when it has exactly `count` of them
    from `first` to `last` (the cadence did not change), else evenly spaced."""
    if seq is not None:
        found = list(_between(seq, skip.first, skip.last, skip.count))
        if len(found) == skip.count and found and found[-1] == skip.last:
            yield from found
            return
    if skip.count <= 1:
        yield skip.first
        return
    step = (skip.last - skip.first) / (skip.count - 1)
    for n in range(skip.count):
        yield skip.first + step * n


def _between(seq: Slots, first: datetime, last: datetime, most: int) -> Iterator[datetime]:
    for n, slot in enumerate(walk(seq, first - timedelta(microseconds=1))):
        if slot > last or n >= most:
            return
        yield slot


@dataclass(frozen=True, slots=True)
class Run:
    """Consecutive slots of one pass with the same change: printed as one range."""

    first: Outcome
    last: Outcome
    count: int


def runs(outcomes: Sequence[Outcome]) -> list[Run]:
    """`outcomes` (in order) grouped into runs of one pass and one change; a newly fired
    slot stays alone (each is decided on its own)."""
    out: list[Run] = []
    for o in outcomes:
        prev = out[-1] if out else None
        if (
            prev is not None
            and o.new != FIRED
            and (prev.last.pass_at, prev.last.old, prev.last.new) == (o.pass_at, o.old, o.new)
        ):
            out[-1] = Run(prev.first, o, prev.count + 1)
        else:
            out.append(Run(o, o, 1))
    return out
