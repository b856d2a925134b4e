"""Cron slots against cron(5) and the daylight-saving rule of docs/scheduling.md: a
differential test against a brute-force reference written here, the bugs that the
reference found, and what cron text loads."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from engine.core.cron import CronSlots, cron_problem, fixed_time, for_cronsim

MINUTE = timedelta(minutes=1)
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
# (low, high, names) per field; a name stands for low + its index.
FIELDS = [(0, 59, None), (0, 23, None), (1, 31, None), (1, 12, MONTHS), (0, 7, DAYS)]
ZONES = [
    "America/New_York",
    "Europe/Budapest",
    "Australia/Lord_Howe",  # a 30-minute daylight-saving shift
    "Pacific/Chatham",  # +12:45, +13:45 in summer
    "Asia/Kolkata",  # +05:30
    "Asia/Kathmandu",  # +05:45
    "Australia/Eucla",  # +08:45
    "UTC",
]


# ---- the reference: cron(5) read literally, walked minute by minute -----------------------


def _number(text: str, low: int, names: list[str] | None) -> int:
    if names is not None and text.lower() in names:
        return low + names.index(text.lower())
    return int(text)


def field_values(text: str, low: int, high: int, names: list[str] | None) -> set[int]:
    """cron(5): a list of `*`, values and ranges, each optionally stepped by `/N`."""
    values: set[int] = set()
    for item in text.split(","):
        body, _, step = item.partition("/")
        if body == "*":
            first, last = low, high
        elif "-" in body:
            a, b = body.split("-")
            first, last = _number(a, low, names), _number(b, low, names)
        else:
            first = last = _number(body, low, names)
        values |= set(range(first, last + 1, int(step) if step else 1))
    return values


class Reference:
    """A job's firings by brute force: every real minute (a wall-clock job), or every
    local wall minute (a fixed-time job), checked against the five fields."""

    def __init__(self, expr: str, zone: str) -> None:
        fields = expr.split()
        sets = [field_values(f, *spec) for f, spec in zip(fields, FIELDS, strict=True)]
        self.minutes, self.hours, self.days, self.months, weekdays = sets
        self.weekdays = {d % 7 for d in weekdays}  # 7 is Sunday too
        # cron(5): when both day fields are restricted (neither starts with `*`), a day
        # matches either; otherwise it must match both.
        self.either_day = not fields[2].startswith("*") and not fields[4].startswith("*")
        self.real_cadence = fields[0].startswith("*") or fields[1].startswith("*")
        self.tz = ZoneInfo(zone)

    def matches(self, wall: datetime) -> bool:
        if wall.minute not in self.minutes or wall.hour not in self.hours:
            return False
        if wall.month not in self.months:
            return False
        dom, dow = wall.day in self.days, wall.isoweekday() % 7 in self.weekdays
        return dom or dow if self.either_day else dom and dow

    def wall(self, instant: datetime) -> datetime:
        return instant.astimezone(self.tz).replace(tzinfo=None)

    def first_instant(self, wall: datetime) -> datetime | None:
        """The earliest instant the clock reads `wall`, or None inside a gap."""
        instant = wall.replace(tzinfo=self.tz, fold=0).astimezone(UTC)
        return instant if self.wall(instant) == wall else None

    def slots(self, lo: datetime, hi: datetime) -> list[datetime]:
        """Every firing in [lo, hi], in order."""
        found: set[datetime] = set()
        if self.real_cadence:  # each real minute whose local reading matches
            instant = lo.replace(second=0, microsecond=0)
            while instant <= hi:
                if self.matches(self.wall(instant)):
                    found.add(instant)
                instant += MINUTE
        else:  # each matching wall minute once: its first instant, or after the gap
            wall = self.wall(lo).replace(second=0, microsecond=0) - timedelta(hours=3)
            while wall <= self.wall(hi) + timedelta(hours=3):
                if self.matches(wall):
                    valid = wall
                    while self.first_instant(valid) is None:
                        valid += MINUTE
                    found.add(self.first_instant(valid))  # type: ignore[arg-type]
                wall += MINUTE
        return sorted(s for s in found if lo <= s <= hi)


# ---- generated expressions and instants around transitions ---------------------------------


@st.composite
def cron_item(draw: st.DrawFn, low: int, high: int, names: list[str] | None) -> str:
    def value(number: int) -> str:
        named = names is not None and number - low < len(names) and draw(st.booleans())
        return names[number - low].upper() if named and names else str(number)

    kind = draw(st.sampled_from(["value", "range", "same", "star-step", "range-step"]))
    first = draw(st.integers(low, high))
    if kind == "value":
        return value(first)
    if kind == "same":  # `N-N`: one value, not the whole field
        return f"{value(first)}-{value(first)}"
    step = draw(st.integers(1, high - low + 1))
    if kind == "star-step":
        return f"*/{step}"
    last = draw(st.integers(first, high))
    text = f"{value(first)}-{value(last)}"
    return f"{text}/{step}" if kind == "range-step" else text


@st.composite
def cron_field(draw: st.DrawFn, low: int, high: int, names: list[str] | None, star: float) -> str:
    if draw(st.integers(0, 9)) < star * 10:
        return "*"
    return ",".join(draw(cron_item(low, high, names)) for _ in range(draw(st.integers(1, 3))))


expressions = st.tuples(
    cron_field(*FIELDS[0], star=0.3),
    cron_field(*FIELDS[1], star=0.3),
    cron_field(*FIELDS[2], star=0.7),
    cron_field(*FIELDS[3], star=0.8),
    cron_field(*FIELDS[4], star=0.6),
).map(" ".join)


@cache
def transitions(zone: str) -> tuple[datetime, ...]:
    """The instants the zone's UTC offset changes in 2025-2027, to the minute (it never
    changes twice in a day)."""
    tz = ZoneInfo(zone)
    found: list[datetime] = []
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    while moment.year < 2028:
        nxt = moment + timedelta(days=1)
        if moment.astimezone(tz).utcoffset() != nxt.astimezone(tz).utcoffset():
            low, high = moment, nxt  # bisect to the minute
            while high - low > MINUTE:
                mid = low + (high - low) / 2
                same = mid.astimezone(tz).utcoffset() == low.astimezone(tz).utcoffset()
                low, high = (mid, high) if same else (low, mid)
            found.append(high.replace(second=0, microsecond=0))
        moment = nxt
    return tuple(found)


@st.composite
def zoned_starts(draw: st.DrawFn) -> tuple[str, datetime]:
    """A zone and an instant within three hours of one of its transitions (or, in a zone
    without any and now and then in the others, anywhere in 2026)."""
    zone = draw(st.sampled_from(ZONES))
    near = transitions(zone)
    if near and draw(st.integers(0, 9)) < 8:
        base = draw(st.sampled_from(near))
        return zone, base + timedelta(seconds=draw(st.integers(-3 * 3600, 3 * 3600)))
    offset = timedelta(seconds=draw(st.integers(0, 365 * 86400)))
    return zone, datetime(2026, 1, 1, tzinfo=UTC) + offset


WINDOW_BEFORE, WINDOW_AFTER = timedelta(hours=2), timedelta(hours=5)


def _until(walk: Iterator[datetime], hi: datetime) -> list[datetime]:
    return list(itertools.takewhile(lambda s: s <= hi, walk))


@pytest.mark.slow
@settings(
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(expressions, zoned_starts(), st.lists(st.integers(0, 7 * 60 * 60), max_size=4))
@example("58 * * * *", ("America/New_York", datetime(2026, 11, 1, 4, tzinfo=UTC)), [])
@example("58 * * * *", ("America/New_York", datetime(2026, 3, 8, 5, tzinfo=UTC)), [])
@example("15 */3 * * *", ("Australia/Lord_Howe", datetime(2026, 10, 3, 12, tzinfo=UTC)), [])
@example("0 9-9 * * 1-5", ("UTC", datetime(2026, 11, 27, tzinfo=UTC)), [])
def test_cron_slots_agree_with_the_brute_force_reference(
    expr: str, zoned: tuple[str, datetime], offsets: list[int]
) -> None:
    """Next fire times, `after` and `floor` agree with cron(5) read literally under the
    documented daylight-saving rule, in zones with DST and odd offsets, near transitions."""
    assume(cron_problem(expr) is None)  # e.g. `0 0 31 2 *` never fires: refused at load
    zone, start = zoned
    lo, hi = start - WINDOW_BEFORE, start + WINDOW_AFTER
    expected = Reference(expr, zone).slots(lo, hi)
    seq = CronSlots(expr, zone)
    assert _until(seq.walk(start), hi) == [s for s in expected if s > start]
    queries = [start, *(lo + timedelta(seconds=s) for s in offsets), *expected[:3]]
    for q in queries:
        later = [s for s in expected if s > q]
        after = seq.after(q)
        if later:
            assert after == later[0], q
        else:
            assert after is None or after > hi, q
        earlier = [s for s in expected if s <= q]
        floor = seq.floor(q)
        if earlier:
            assert floor == earlier[-1], q
        else:
            assert floor is None or floor < lo, q


# ---- the bugs the reference found, one by one ---------------------------------------------


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def fires(expr: str, zone: str, start: str, end: str) -> list[datetime]:
    """The slots in (start, end], one `after` at a time."""
    seq = CronSlots(expr, zone)
    out: list[datetime] = []
    slot = seq.after(utc(start))
    while slot is not None and slot <= utc(end):
        out.append(slot)
        slot = seq.after(slot)
    return out


def test_a_one_value_hour_range_fires_once_a_weekday() -> None:
    """`0 9-9 * * 1-5` is 09:00 on weekdays, not every hour of them."""
    got = fires("0 9-9 * * 1-5", "UTC", "2026-11-29T00:00", "2026-12-06T00:00")
    assert [(g.strftime("%a"), g.hour, g.minute) for g in got] == [
        (day, 9, 0) for day in ("Mon", "Tue", "Wed", "Thu", "Fri")
    ]


def test_a_one_value_hour_range_of_every_minute_fires_sixty_times_a_day() -> None:
    """`* 23-23 * * *` fires each minute of 23:00-23:59 and no other minute."""
    got = fires("* 23-23 * * *", "UTC", "2026-11-29T23:59:59", "2026-11-30T23:59:59")
    assert len(got) == 60
    assert {g.hour for g in got} == {23}


def test_a_one_value_range_with_a_step_is_that_value() -> None:
    """`30-30/5 * * * *` is minute 30 only (cronsim alone reads it as 30/5: 30 to 55)."""
    got = fires("30-30/5 * * * *", "UTC", "2026-11-30T00:00", "2026-11-30T03:00")
    assert [g.strftime("%H:%M") for g in got] == ["00:30", "01:30", "02:30"]


def test_an_hourly_job_keeps_its_cadence_the_night_the_clocks_go_back() -> None:
    """`58 * * * *` in New York fires 01:58 EDT and 01:58 EST: one hour apart, no gap."""
    got = fires("58 * * * *", "America/New_York", "2026-11-01T04:00", "2026-11-01T09:00")
    assert [g.strftime("%H:%M") for g in got] == ["04:58", "05:58", "06:58", "07:58", "08:58"]
    local = [g.astimezone(ZoneInfo("America/New_York")).strftime("%H:%M %Z") for g in got]
    assert local[1:3] == ["01:58 EDT", "01:58 EST"]


def test_an_hourly_job_keeps_its_cadence_the_night_the_clocks_go_forward() -> None:
    """`58 * * * *` in New York fires 01:58 EST then 03:58 EDT, never also at 03:00."""
    got = fires("58 * * * *", "America/New_York", "2026-03-08T05:00", "2026-03-08T09:00")
    assert [g.strftime("%H:%M") for g in got] == ["05:58", "06:58", "07:58", "08:58"]
    local = [g.astimezone(ZoneInfo("America/New_York")).strftime("%H:%M") for g in got]
    assert local == ["00:58", "01:58", "03:58", "04:58"]


def test_an_hour_stepped_job_keeps_its_alignment_across_a_half_hour_shift() -> None:
    """`15 */3 * * *` on Lord Howe Island fires 03:15 the morning the clocks go forward
    half an hour (cronsim alone, walking the zone, next fires 06:45)."""
    got = fires("15 */3 * * *", "Australia/Lord_Howe", "2026-10-03T12:00", "2026-10-03T20:00")
    local = [g.astimezone(ZoneInfo("Australia/Lord_Howe")).strftime("%H:%M") for g in got]
    assert local == ["00:15", "03:15", "06:15"]


def test_the_two_kinds_of_job() -> None:
    """A job whose minute or hour starts with `*` keeps real time; any other is a fixed time."""
    assert not fixed_time("*/15 * * * *")
    assert not fixed_time("58 * * * *")
    assert not fixed_time("0 */2 * * *")
    assert fixed_time("30 2 * * *")
    assert fixed_time("0 9-17 * * 1-5")


# ---- what loads ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    ["0 9-9 * * 1-5", "0 6 * * MON-FRI", "*/15 * * jan,jul sun", "0 0 29 2 *", "5 4 * * 7"],
)
def test_cron5_expressions_load(expr: str) -> None:
    """Numbers, names, ranges (one-value ones too), lists and steps load."""
    assert cron_problem(expr) is None


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("0 9 * *", "five fields"),
        ("@daily", "five fields"),
        ("61 9 * * *", "the minute field '61' does not fit: minute runs 0-59"),
        ("0 12-9 * * *", "the hour field '12-9' does not fit"),
        ("*/0 * * * *", "a step is at least 1"),
        ("0 0 31 2 *", "the day must exist in one of the months"),
        ("0 0 0 * *", "the day-of-month field '0' does not fit"),
        ("0 9 L * *", "the day-of-month field 'L' is not cron(5) syntax"),
        ("0 9 * * 1#2", "the day-of-week field '1#2' is not cron(5) syntax"),
        ("0 9 ? * *", "is not cron(5) syntax"),
        ("5/10 * * * *", "the minute field '5/10' is not cron(5) syntax"),
        ("0 9 * * MONDAY", "is not cron(5) syntax"),
        ("0 9 * FOO *", "the month field 'FOO' does not fit"),
    ],
)
def test_what_cron5_does_not_say_is_refused_with_the_field(expr: str, says: str) -> None:
    """Text outside cron(5), or that can never fire, is refused naming the field."""
    problem = cron_problem(expr)
    assert problem is not None and says in problem


@pytest.mark.parametrize(
    ("expr", "read"),
    [
        ("0 9 * JAN-JAN/2 *", "0 9 * JAN *"),  # one month by name
        ("0 9 * 1-JAN/2 *", "0 9 * 1 *"),  # a number and a name of the same month
        ("0 9 * FEB-2/3 *", "0 9 * FEB *"),  # February is 2, not 1 or 0
        ("0 9 * * 0-SUN/2", "0 9 * * 0"),  # Sunday is 0 among the days of the week
        ("0 9 * * MON-1/2", "0 9 * * MON"),
        ("0 9 * JAN-FEB/2 *", "0 9 * JAN-FEB/2 *"),  # two months stay a range
        ("0 9 * * MON-TUE/2", "0 9 * * MON-TUE/2"),
    ],
)
def test_a_stepped_range_of_one_value_is_that_value_whatever_names_it(expr: str, read: str) -> None:
    """cron(5) reads `A-A/N` as the one value A, also when a month or a day is written
    by name on either end (JAN is 1, SUN is 0); cronsim is handed that value, never a
    range that would run to the end of the field."""
    assert cron_problem(expr) is None
    assert for_cronsim(expr) == read
