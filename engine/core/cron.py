"""Cron expressions: the text a loop may load, and the slots it fires.

Pure. The expression language is cron(5)'s five fields; cronsim (Debian cron's
semantics) walks them, both to validate the text at load and to fire it, so what loads
is what fires.

Daylight saving, in the loop's zone (docs/scheduling.md#cron-and-daylight-saving):

- a **wall-clock job** (its minute or its hour field starts with `*`, such as
  `*/15 * * * *`, `58 * * * *` or `0 */2 * * *`) fires at every real instant whose
  local time matches: a wall time repeated by fall-back fires at both occurrences, and a
  wall time skipped by spring-forward does not fire, so the job keeps its real cadence;
- a **fixed-time job** (neither field starts with `*`, such as `30 2 * * *`) fires once
  per matching wall time: at its first occurrence when fall-back repeats it, and at the
  first valid minute after the gap when spring-forward skips it; two wall times inside
  one gap make one firing."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),
)
# One list item of cron(5): `*`, a value or a range, a step only after `*` or a range.
# A value is a number or (month and day-of-week only; cronsim checks which) a name.
_VALUE = r"(?:[0-9]+|[A-Za-z]{3})"
_ITEM = re.compile(rf"(?:\*|{_VALUE}-{_VALUE})(?:/[0-9]+)?|{_VALUE}")
_STEPPED_RANGE = re.compile(rf"({_VALUE})-({_VALUE})/[0-9]+")
_NAMES = {3: "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC", 4: "SUN MON TUE WED THU FRI SAT"}
SYNTAX = "numbers, names (JAN, MON), *, ranges A-B, lists A,B and steps */N or A-B/N"


def cron_problem(expr: str) -> str | None:
    """None when `expr` is five cron(5) fields that can fire, else what is wrong."""
    fields = expr.split()
    if len(fields) != len(FIELDS):
        return "five fields: minute hour day-of-month month day-of-week"
    for (name, _, _), text in zip(FIELDS, fields, strict=True):
        if not all(_ITEM.fullmatch(item) for item in text.split(",")):
            return f"the {name} field '{text}' is not cron(5) syntax; write {SYNTAX}"
    try:
        CronSim(for_cronsim(expr), datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as err:
        return _explain(fields, str(err))
    return None


def _explain(fields: list[str], error: str) -> str:
    for index, (name, low, high) in enumerate(FIELDS):
        if name in error.lower():
            extra = ", and the day must exist in one of the months" if index == 2 else ""
            return (
                f"the {name} field '{fields[index]}' does not fit: {name} runs {low}-{high}, "
                f"a range goes low-high and a step is at least 1{extra}"
            )
    return f"not a cron expression ({error})"


def _number(text: str, index: int) -> int | None:
    if text.isdigit():
        return int(text)
    names = _NAMES.get(index, "").split()
    first = FIELDS[index][1]
    return first + names.index(text.upper()) if text.upper() in names else None


def for_cronsim(expr: str) -> str:
    """`expr` as cronsim reads it in cron(5)'s meaning. cronsim takes a stepped range of
    one value (`30-30/5`) for `30/5` (30 to the end of the field); cron(5) means 30."""

    def one_value(index: int, item: str) -> str:
        whole = _STEPPED_RANGE.fullmatch(item)
        if whole is None:
            return item
        first, last = (_number(whole.group(n), index) for n in (1, 2))
        return whole.group(1) if first is not None and first == last else item

    fields = expr.split()
    return " ".join(
        ",".join(one_value(index, item) for item in text.split(","))
        for index, text in enumerate(fields)
    )


def fixed_time(expr: str) -> bool:
    """True for a fixed-time job (neither the minute nor the hour field starts with
    `*`): walked in wall time, each wall time firing once (see the module docs)."""
    minute, hour = expr.split()[:2]
    return not minute.startswith("*") and not hour.startswith("*")


@dataclass(frozen=True, slots=True)
class CronSlots:
    """The slots of a cron expression in an explicit IANA zone, in UTC.

    A fixed-time job is cronsim's walk in the zone's wall time. A wall-clock job fires
    where the local time matches at a real instant; between two offset changes the local
    time is UTC plus a fixed offset, so cronsim walks each stretch in that fixed offset
    (cronsim's own walk of such a job in the zone loses the hour's alignment where an
    offset changes at a half or quarter hour, as on Lord Howe Island and Chatham)."""

    expr: str
    zone: str

    def walk(self, moment: datetime) -> Iterator[datetime]:
        """Every slot strictly after `moment`, in increasing order."""
        if fixed_time(self.expr):
            return self._wall_time_walk(moment)
        return self._real_time_walk(moment)

    def after(self, moment: datetime) -> datetime | None:
        """The earliest slot strictly after `moment`, or None (cronsim gives up after
        50 years without one)."""
        return next(self.walk(moment), None)

    def floor(self, moment: datetime) -> datetime | None:
        """The latest slot at or before `moment`, or None: cronsim walked backwards."""
        if fixed_time(self.expr):
            return self._wall_time_floor(moment)
        return self._real_time_floor(moment)

    # ---- fixed-time jobs: the zone's wall time -----------------------------------------
    def _wall_time_walk(self, moment: datetime) -> Iterator[datetime]:
        last = moment
        for found in CronSim(for_cronsim(self.expr), moment.astimezone(ZoneInfo(self.zone))):
            instant = found.astimezone(UTC)
            # From inside a repeated hour, the wall times still ahead on the clock fired
            # at their first occurrence, before `moment`.
            if instant > last:
                last = instant
                yield instant

    def _wall_time_floor(self, moment: datetime) -> datetime | None:
        tz = ZoneInfo(self.zone)
        start = local = moment.astimezone(tz)
        if local.fold:
            # The second pass through a repeated hour: the wall times up to the end of the
            # repeat fired at their first occurrence, before `moment`; start past them.
            ahead = moment - local.replace(fold=0).astimezone(UTC)
            start = (local.replace(tzinfo=None) + ahead).replace(tzinfo=tz)
        for found in _backwards(self.expr, start):
            instant = found.astimezone(UTC)
            if instant <= moment:
                return instant
        return None

    # ---- wall-clock jobs: real time, one fixed offset per stretch ----------------------
    def _real_time_walk(self, moment: datetime) -> Iterator[datetime]:
        tz = ZoneInfo(self.zone)
        start, stretch, offset = moment, moment, _offset(tz, moment)
        while True:
            last = stretch
            for found in CronSim(for_cronsim(self.expr), start.astimezone(timezone(offset))):
                instant = found.astimezone(UTC)
                change = _change_after(tz, offset, last, instant)
                if change is not None:  # the next stretch, from its first instant
                    start, stretch, offset = change - EPS, change, _offset(tz, change)
                    break
                last = instant
                yield instant
            else:
                return

    def _real_time_floor(self, moment: datetime) -> datetime | None:
        tz = ZoneInfo(self.zone)
        end = moment
        while True:
            offset = _offset(tz, end)
            found = next(_backwards(self.expr, end.astimezone(timezone(offset))), None)
            if found is None:
                return None
            instant = found.astimezone(UTC)
            change = _change_before(tz, offset, instant, end)
            if change is None:
                return instant
            end = change - EPS  # the previous stretch, from its last instant


EPS = timedelta(microseconds=1)
DAY = 86400


def _backwards(expr: str, start: datetime) -> CronSim:
    """cronsim's backward walk from `start`, `start`'s own second included (a nonzero
    microsecond makes cronsim's first step the truncation to that second)."""
    return CronSim(for_cronsim(expr), start.replace(microsecond=1), reverse=True)


def _offset(tz: ZoneInfo, instant: datetime) -> timedelta:
    return instant.astimezone(tz).utcoffset() or timedelta(0)


def _at(tz: ZoneInfo, second: int) -> timedelta:
    return _offset(tz, datetime.fromtimestamp(second, UTC))


def _change_after(
    tz: ZoneInfo, offset: timedelta, low: datetime, high: datetime
) -> datetime | None:
    """The first instant in (low, high] whose offset is not `offset` (the offset at
    `low`), or None. Offsets change at whole seconds and never twice in a day, so a walk
    by days and a bisection find the change."""
    start, stop = math.floor(low.timestamp()), math.floor(high.timestamp())
    while start < stop:
        step = min(start + DAY, stop)
        if _at(tz, step) != offset:
            while step - start > 1:
                mid = (start + step) // 2
                start, step = (start, mid) if _at(tz, mid) != offset else (mid, step)
            return datetime.fromtimestamp(step, UTC)
        start = step
    return None


def _change_before(
    tz: ZoneInfo, offset: timedelta, low: datetime, high: datetime
) -> datetime | None:
    """The instant in (low, high] from which the offset has been `offset` (the offset at
    `high`), when it changed in that range; else None."""
    start, stop = math.floor(low.timestamp()), math.floor(high.timestamp())
    while start < stop:
        step = max(stop - DAY, start)
        if _at(tz, step) != offset:
            while stop - step > 1:
                mid = (step + stop) // 2
                step, stop = (step, mid) if _at(tz, mid) == offset else (mid, stop)
            return datetime.fromtimestamp(stop, UTC)
        stop = step
    return None
