"""Slot arithmetic and catch-up: properties over arbitrary clocks, plus the daylight
saving table of docs/scheduling.md."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.ruleset import CatchUp, Loop, Trigger, TriggerKind
from engine.core.slots import (
    CronSlots,
    IntervalSlots,
    OneShot,
    Pass,
    Policy,
    SkipRange,
    SkipReason,
    Slots,
    _decide,
    cadence_seconds,
    next_fires,
    pending,
    plan_pass,
    skip_all,
    slots_of,
)

BASE = datetime(2026, 1, 1, tzinfo=UTC)
moments = st.integers(min_value=0, max_value=400 * 86400).map(lambda s: BASE + timedelta(seconds=s))
cadences = st.sampled_from([60, 300, 900, 1800, 3600, 4 * 3600, 86400, 7 * 86400])
policies = st.builds(
    Policy,
    st.sampled_from(list(CatchUp)),
    st.none() | st.integers(min_value=1, max_value=50),
    st.none() | st.integers(min_value=1, max_value=48).map(lambda h: timedelta(hours=h)),
)


@given(cadences, moments)
def test_interval_slot_is_the_epoch_floor(every: int, moment: datetime) -> None:
    """An interval slot is the cadence floor of the instant, aligned to the Unix epoch."""
    slot = IntervalSlots(every).floor(moment)
    assert slot <= moment < slot + timedelta(seconds=every)
    assert int(slot.timestamp()) % every == 0


@settings(max_examples=300)
@given(
    cadences.filter(lambda e: e <= 86400),
    policies,
    moments,
    st.integers(0, 200),
    st.integers(0, 200),
)
def test_interval_arithmetic_matches_the_enumerated_rules(
    every: int, policy: Policy, since: datetime, gap: int, late: int
) -> None:
    """The O(1) interval pass decides exactly what the general rules decide over the
    enumerated list of due slots."""
    seq = IntervalSlots(every)
    cursor = seq.floor(since + timedelta(seconds=every * gap // 7))
    now = cursor + timedelta(seconds=every * late // 3 + 17)
    fast = plan_pass(seq, policy, cursor, since, now)
    slow = _decide(list(pending(seq, cursor, since, now)), policy, now, cursor)
    assert fast == slow


@settings(max_examples=150, deadline=None)
@given(
    cadences.filter(lambda e: e <= 4 * 3600),
    policies,
    moments,
    st.lists(st.integers(min_value=1, max_value=30 * 3600), min_size=1, max_size=25),
)
def test_a_clock_with_restarts_fires_each_slot_at_most_once(
    every: int, policy: Policy, since: datetime, steps: list[int]
) -> None:
    """Passes at arbitrary moments (sleeps, restarts) fire every slot at most once, never
    a slot before enablement, in increasing order; every due slot is fired or skipped."""
    seq = IntervalSlots(every)
    cursor: datetime | None = None
    now = since
    fired: list[datetime] = []
    skipped = 0
    for step in steps:
        now += timedelta(seconds=step)
        result = plan_pass(seq, policy, cursor, since, now)
        fired += [f.slot for f in result.fires]
        skipped += sum(s.count for s in result.skips)
        cursor = result.cursor
    assert fired == sorted(set(fired))
    assert all(slot >= since for slot in fired)
    accounted = list(pending(seq, None, since, cursor)) if cursor else []
    assert len(fired) + skipped == len(accounted)


def _hourly_since_20h() -> tuple[IntervalSlots, datetime, datetime]:
    seq = IntervalSlots(3600)
    return seq, datetime(2026, 11, 29, 20, 30, tzinfo=UTC), datetime(2026, 11, 29, 21, tzinfo=UTC)


def test_six_missed_slots_under_none_fire_one_with_five_skipped() -> None:
    """Asleep over six hourly slots: `none` fires the newest with skippedSlots 5."""
    seq, since, cursor = _hourly_since_20h()
    result = plan_pass(
        seq, Policy(CatchUp.NONE), cursor, since, datetime(2026, 11, 30, 3, 5, tzinfo=UTC)
    )
    assert [(f.slot.hour, f.skipped) for f in result.fires] == [(3, 5)]
    assert [(s.count, s.reason) for s in result.skips] == [(5, SkipReason.CATCHUP_NONE)]


def test_last_fires_newest_missed_then_current_next_pass() -> None:
    """`last` fires the slot before the current one now, and the current one next pass."""
    seq, since, cursor = _hourly_since_20h()
    now = datetime(2026, 11, 30, 3, 5, tzinfo=UTC)
    first = plan_pass(seq, Policy(CatchUp.LAST), cursor, since, now)
    assert [(f.slot.hour, f.skipped) for f in first.fires] == [(2, 4)]
    second = plan_pass(seq, Policy(CatchUp.LAST), first.cursor, since, now + timedelta(seconds=1))
    assert [(f.slot.hour, f.skipped) for f in second.fires] == [(3, 0)]


def test_all_replays_in_order_up_to_the_cap() -> None:
    """`all` fires every due slot in order; beyond the cap the oldest are skipped."""
    seq, since, cursor = _hourly_since_20h()
    now = datetime(2026, 11, 30, 3, 5, tzinfo=UTC)
    result = plan_pass(seq, Policy(CatchUp.ALL, cap=4), cursor, since, now)
    assert [f.slot.hour for f in result.fires] == [0, 1, 2, 3]
    assert result.fires[0].skipped == 2
    assert [(s.count, s.reason) for s in result.skips] == [(2, SkipReason.CATCHUP_CAP)]


def test_max_lateness_skips_slots_too_old_to_matter() -> None:
    """A due slot older than max-lateness never fires and is recorded as too_late."""
    seq, since, cursor = _hourly_since_20h()
    now = datetime(2026, 11, 30, 3, 5, tzinfo=UTC)
    result = plan_pass(seq, Policy(CatchUp.ALL, None, timedelta(hours=2)), cursor, since, now)
    assert [f.slot.hour for f in result.fires] == [2, 3]
    assert [(s.count, s.reason) for s in result.skips] == [(4, SkipReason.TOO_LATE)]


def test_nothing_before_enablement_is_due() -> None:
    """A loop enabled at 10:30 has no due slot before 11:00."""
    seq = IntervalSlots(3600)
    since = datetime(2026, 11, 30, 10, 30, tzinfo=UTC)
    assert (
        plan_pass(seq, Policy(CatchUp.ALL), None, since, since + timedelta(minutes=20)).fires == ()
    )
    result = plan_pass(seq, Policy(CatchUp.ALL), None, since, since + timedelta(minutes=40))
    assert [f.slot.hour for f in result.fires] == [11]


# ---- daylight saving: the table in docs/scheduling.md -------------------------------------

DST_CASES = [
    # zone, cron, after (UTC), expected next fires (UTC)
    ("Europe/Budapest", "30 2 * * *", "2026-03-28T12:00", ["2026-03-29T01:00", "2026-03-30T00:30"]),
    ("Europe/Budapest", "30 2 * * *", "2026-10-24T12:00", ["2026-10-25T00:30", "2026-10-26T01:30"]),
    (
        "America/New_York",
        "30 2 * * *",
        "2026-03-07T12:00",
        ["2026-03-08T07:00", "2026-03-09T06:30"],
    ),
    (
        "America/New_York",
        "30 1 * * *",
        "2026-10-31T12:00",
        ["2026-11-01T05:30", "2026-11-02T06:30"],
    ),
    ("UTC", "0 9 * * 1-5", "2026-11-27T10:00", ["2026-11-30T09:00", "2026-12-01T09:00"]),
]


@pytest.mark.parametrize(("zone", "expr", "after", "expected"), DST_CASES)
def test_cron_daylight_saving_table(zone: str, expr: str, after: str, expected: list[str]) -> None:
    """A missing wall time fires once at the end of the gap; a repeated one fires once."""
    start = datetime.fromisoformat(after).replace(tzinfo=UTC)
    got = next_fires(CronSlots(expr, zone), start, len(expected))
    assert [g.strftime("%Y-%m-%dT%H:%M") for g in got] == expected


def test_quarter_hourly_cron_fires_once_per_instant_across_the_gap() -> None:
    """Every wall time inside a spring-forward gap maps to one firing at the gap's end."""
    got = next_fires(
        CronSlots("*/15 * * * *", "Europe/Budapest"), datetime(2026, 3, 29, 0, 40, tzinfo=UTC), 3
    )
    assert [g.strftime("%H:%M") for g in got] == ["00:45", "01:00", "01:15"]


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(["Europe/Budapest", "America/New_York", "Australia/Lord_Howe", "UTC"]),
    st.sampled_from(["*/15 * * * *", "30 2 * * *", "0 */3 * * *", "5 1,2,3 * * 0"]),
    st.integers(min_value=0, max_value=365 * 86400),
)
def test_cron_slots_strictly_increase_and_floor_agrees(zone: str, expr: str, offset: int) -> None:
    """Cron slots are strictly increasing, and floor(slot) is the slot itself."""
    seq = CronSlots(expr, zone)
    got = next_fires(seq, BASE + timedelta(seconds=offset), 6)
    assert got == sorted(set(got))
    for slot in got:
        assert seq.floor(slot) == slot


# ---- which sequence a trigger fires, pausing, and the exact boundaries ----------------------


def test_slots_of_each_trigger_kind() -> None:
    """Interval, cron and one-shot triggers have slots (the one shot's in UTC); manual and
    host-clock triggers have none for the scheduler."""
    at = datetime(2026, 12, 1, 9, tzinfo=timezone(timedelta(hours=1)))
    assert slots_of(Trigger(TriggerKind.INTERVAL, every_seconds=3600)) == IntervalSlots(3600)
    cron = Trigger(TriggerKind.CRON, cron="0 9 * * *", timezone="Europe/Budapest")
    assert slots_of(cron) == CronSlots("0 9 * * *", "Europe/Budapest")
    one = slots_of(Trigger(TriggerKind.AT, at=at))
    assert one == OneShot(datetime(2026, 12, 1, 8, tzinfo=UTC))
    assert one is not None and one.at.tzinfo is UTC
    assert slots_of(Trigger(TriggerKind.MANUAL)) is None
    assert slots_of(Trigger(TriggerKind.HOST, every_seconds=3600)) is None


def test_pausing_a_cron_loop_skips_each_due_slot_and_moves_the_cursor() -> None:
    """A paused cron loop fires nothing: its due slots are one paused range, cursor at the last."""
    seq = CronSlots("0 9 * * 1-5", "Europe/Budapest")
    since = datetime(2026, 11, 27, 7, tzinfo=UTC)  # Friday 08:00 local
    result = skip_all(seq, None, since, datetime(2026, 12, 1, 12, tzinfo=UTC), SkipReason.PAUSED)
    fri, tue = datetime(2026, 11, 27, 8, tzinfo=UTC), datetime(2026, 12, 1, 8, tzinfo=UTC)
    assert result.fires == ()
    assert result.skips == (SkipRange(fri, tue, 3, SkipReason.PAUSED),)  # Fri, Mon, Tue
    assert result.cursor == tue
    later = skip_all(seq, tue, since, tue + timedelta(hours=1), SkipReason.PAUSED)
    assert later == Pass((), (), tue)


def test_pausing_a_one_shot_loop_skips_its_one_slot_once() -> None:
    """A paused one shot due now is skipped once; a later pass has nothing left."""
    at = datetime(2026, 12, 1, 9, tzinfo=UTC)
    seq, since = OneShot(at), at - timedelta(days=1)
    before = skip_all(seq, None, since, at - timedelta(seconds=1), SkipReason.PAUSED)
    assert before == Pass((), (), None)
    result = skip_all(seq, None, since, at + timedelta(minutes=5), SkipReason.PAUSED)
    assert result == Pass((), (SkipRange(at, at, 1, SkipReason.PAUSED),), at)
    assert skip_all(seq, at, since, at + timedelta(days=1), SkipReason.PAUSED) == Pass((), (), at)


@pytest.mark.parametrize(
    "seq",
    [IntervalSlots(3600), CronSlots("0 * * * *", "Europe/Budapest"), OneShot(BASE)],
    ids=["interval", "cron", "one-shot"],
)
def test_a_loop_enabled_exactly_on_a_slot_fires_that_slot(seq: Slots) -> None:
    """Enablement at the very instant of a slot makes that slot due, and only from then."""
    since = BASE  # a slot of every sequence above
    result = plan_pass(seq, Policy(CatchUp.ALL), None, since, since + timedelta(seconds=1))
    assert [f.slot for f in result.fires] == [since]
    assert (
        plan_pass(seq, Policy(CatchUp.ALL), None, since + timedelta(seconds=1), since).fires == ()
    )


@pytest.mark.parametrize(
    "seq",
    [IntervalSlots(3600), CronSlots("0 * * * *", "UTC")],
    ids=["interval", "cron"],
)
def test_max_lateness_ending_exactly_on_a_slot_lets_it_fire(seq: Slots) -> None:
    """A slot exactly max-lateness old still fires; the one before it is too late, and the
    tick counts it in skippedSlots."""
    now = BASE + timedelta(hours=5)
    policy = Policy(CatchUp.ALL, None, timedelta(hours=2))
    result = plan_pass(seq, policy, BASE, BASE - timedelta(days=1), now)
    assert [f.slot.hour for f in result.fires] == [3, 4, 5]
    assert [(s.count, s.reason) for s in result.skips] == [(2, SkipReason.TOO_LATE)]
    assert result.fires[0].skipped == 2


@pytest.mark.parametrize("catch_up", list(CatchUp))
def test_too_late_slots_count_in_the_fired_ticks_skipped_slots(catch_up: CatchUp) -> None:
    """Slots skipped as too late did not fire before the tick that fires: under every
    policy its skippedSlots counts them with the catch-up skips."""
    seq, since, cursor = _hourly_since_20h()
    now = datetime(2026, 11, 30, 3, 5, tzinfo=UTC)  # 22:00..03:00 due; 22..00 over 2h late
    result = plan_pass(
        seq, Policy(catch_up, None, timedelta(hours=2, minutes=30)), cursor, since, now
    )
    assert result.fires[0].skipped == sum(s.count for s in result.skips) >= 3
    assert result.skips[0] == SkipRange(
        datetime(2026, 11, 29, 22, tzinfo=UTC),
        datetime(2026, 11, 30, 0, tzinfo=UTC),
        3,
        SkipReason.TOO_LATE,
    )


@settings(max_examples=300)
@given(
    cadences.filter(lambda e: e <= 86400),
    st.sampled_from(list(CatchUp)),
    st.none() | st.integers(1, 20),
    st.integers(0, 400 * 24),  # since: a slot, counted in cadences from BASE
    st.integers(0, 60),  # slots from since to the cursor (0: no cursor)
    st.integers(0, 60),  # slots from the cursor (or since) to now
    st.sampled_from([0, 1, 17]),  # now: on a slot, or just past it
    st.none() | st.integers(0, 40),  # max-lateness in whole cadences, ending on a slot
)
def test_slot_boundaries_plan_as_the_general_rules_do(
    every: int,
    catch_up: CatchUp,
    cap: int | None,
    start: int,
    ahead: int,
    behind: int,
    past: int,
    late: int | None,
) -> None:
    """Enablement on a slot, now on a slot and max-lateness ending on a slot: the interval
    arithmetic decides what the general rules decide, and the first fire counts every
    skipped slot of the pass."""
    step = timedelta(seconds=every)
    seq = IntervalSlots(every)
    since = seq.floor(BASE) + step * start
    cursor = since + step * (ahead - 1) if ahead else None
    now = (cursor or since) + step * behind + timedelta(seconds=past)
    lateness = None if late is None else step * late + timedelta(seconds=past)
    policy = Policy(catch_up, cap, lateness)
    fast = plan_pass(seq, policy, cursor, since, now)
    assert fast == _decide(list(pending(seq, cursor, since, now)), policy, now, cursor)
    if fast.fires:
        assert fast.fires[0].skipped == sum(s.count for s in fast.skips)
        assert all(f.skipped == 0 for f in fast.fires[1:])


# ---- a one shot's floor, a tick's cadence, a loop's policy ---------------------------------


def test_a_one_shot_has_its_instant_as_the_only_slot() -> None:
    """A one shot's latest slot is its instant from that instant on, and none before it
    (so a backfill of it names exactly that instant)."""
    at = datetime(2026, 12, 1, 9, tzinfo=UTC)
    seq = OneShot(at)
    assert seq.floor(at - timedelta(microseconds=1)) is None
    assert seq.floor(at) == at
    assert seq.floor(at + timedelta(days=400)) == at
    assert (seq.after(at - timedelta(seconds=1)), seq.after(at)) == (at, None)


@pytest.mark.parametrize(
    ("trigger", "slot", "expected"),
    [
        (Trigger(TriggerKind.INTERVAL, every_seconds=3600), BASE, 3600),
        (Trigger(TriggerKind.HOST, every_seconds=600), BASE, 600),
        # Friday 09:00 to Monday 09:00
        (
            Trigger(TriggerKind.CRON, cron="0 9 * * 1-5", timezone="UTC"),
            datetime(2026, 11, 27, 9, tzinfo=UTC),
            3 * 86400,
        ),
        (Trigger(TriggerKind.AT, at=BASE), BASE, 0),  # no slot after it
        (Trigger(TriggerKind.MANUAL), BASE, 0),  # no slots at all
    ],
    ids=["interval", "host-clock", "cron", "one-shot", "manual"],
)
def test_a_ticks_cadence_is_the_interval_or_the_gap_to_the_next_slot(
    trigger: Trigger, slot: datetime, expected: int
) -> None:
    """A tick's `cadenceSeconds` is its loop's interval, for a cron loop the gap to its
    next slot, and 0 when no slot follows."""
    assert cadence_seconds(trigger, slot) == expected


def loop_with(**fields: object) -> Loop:
    return Loop(
        name="nightly",
        trigger=Trigger(TriggerKind.INTERVAL, every_seconds=3600),
        event_type="clock.tick.reaper",
        payload={},
        **fields,  # type: ignore[arg-type]
    )


def test_a_loops_policy_is_its_catch_up_cap_and_max_lateness() -> None:
    """A loop's `catch-up` and `max-lateness` are what a pass plans by; without
    max-lateness no slot is ever too late."""
    late = loop_with(catch_up=CatchUp.ALL, catch_up_cap=3, max_lateness_seconds=7200)
    assert Policy.of(late) == Policy(CatchUp.ALL, 3, timedelta(hours=2))
    assert Policy.of(loop_with(catch_up=CatchUp.LAST)) == Policy(CatchUp.LAST, None, None)


# ---- the microsecond boundaries of enablement and max-lateness ------------------------------

SEQUENCES = [IntervalSlots(3600), CronSlots("0 * * * *", "UTC"), OneShot(BASE)]


@pytest.mark.parametrize("seq", SEQUENCES, ids=["interval", "cron", "one-shot"])
def test_a_loop_enabled_just_after_a_slot_does_not_fire_it(seq: Slots) -> None:
    """Enablement one microsecond after a slot leaves that slot out, whether the pass
    fires or the loop is paused."""
    since = BASE + timedelta(microseconds=1)
    now = BASE + timedelta(minutes=30)
    assert plan_pass(seq, Policy(CatchUp.ALL), None, since, now) == Pass((), (), None)
    assert skip_all(seq, None, since, now, SkipReason.PAUSED) == Pass((), (), None)


@pytest.mark.parametrize("seq", SEQUENCES[:2], ids=["interval", "cron"])
def test_a_slot_one_microsecond_past_max_lateness_is_too_late(seq: Slots) -> None:
    """max-lateness is exact: a slot older than it by a microsecond is skipped as too
    late, the next one fires."""
    slot = BASE + timedelta(hours=3)
    now = slot + timedelta(hours=2, microseconds=1)
    result = plan_pass(seq, Policy(CatchUp.ALL, None, timedelta(hours=2)), BASE, BASE, now)
    assert [f.slot.hour for f in result.fires] == [4, 5]
    first = BASE + timedelta(hours=1)
    assert result.skips == (SkipRange(first, slot, 3, SkipReason.TOO_LATE),)  # 01:00-03:00


def test_pausing_an_interval_loop_skips_each_due_slot_and_moves_the_cursor() -> None:
    """A paused interval loop fires nothing: its due slots since enablement (the slot it
    was enabled on included) or since the cursor are one paused range, cursor at the
    newest; a pass before the next slot has nothing to add, one on it skips just it."""
    seq = IntervalSlots(3600)
    now = BASE + timedelta(hours=5, minutes=10)
    result = skip_all(seq, None, BASE, now, SkipReason.PAUSED)
    newest = BASE + timedelta(hours=5)
    assert result == Pass((), (SkipRange(BASE, newest, 6, SkipReason.PAUSED),), newest)
    cursor = BASE + timedelta(hours=2)
    resumed = skip_all(seq, cursor, BASE, now, SkipReason.DISABLED)
    assert resumed == Pass(
        (), (SkipRange(cursor + timedelta(hours=1), newest, 3, SkipReason.DISABLED),), newest
    )
    assert skip_all(seq, newest, BASE, now + timedelta(minutes=5), SkipReason.PAUSED) == Pass(
        (), (), newest
    )
    one = newest + timedelta(hours=1)
    assert skip_all(seq, newest, BASE, one, SkipReason.PAUSED) == Pass(
        (), (SkipRange(one, one, 1, SkipReason.PAUSED),), one
    )
