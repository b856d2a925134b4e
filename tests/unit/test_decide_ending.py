"""What an occurrence's end leads to, decided purely (`conclusion` of
engine/core/decide.py, which settling, resuming and deciding all end in): the loop's
counters (failures for the circuit breaker, the quiet streak and its backoff), the
notifications a person may act on, the breaker's pause, one follow-up for coalesced
triggers, and the keys that say which notifications are "the same thing". The rules
of tests/data/decide, records built here; no store."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from engine.core.decide import conclusion, dedup_key, history_since, notice
from engine.core.effects import Counters, Effect, Journal, Notify, Outbox, PauseLoop
from engine.core.envelope import iso, parse_iso
from engine.core.policy import FailureClass
from engine.core.records import LoopState, OccurrenceRecord
from tests.unit.test_decide_paths import AT, RULES, SLOT, event, loop_state, occurrence


def ended(
    loop: str,
    state: str,
    cls: FailureClass | None = None,
    *,
    before: LoopState | None = None,
    note: str = "",
    last_notified: str | None = None,
    signals: int = 0,
) -> list[Effect]:
    """What the end in `state` of an occurrence of `loop` leads to."""
    occ: OccurrenceRecord = occurrence(event(loop), state, signals=signals)
    known = before if before is not None else loop_state(loop)
    return conclusion(
        RULES,
        RULES.loops[loop],
        occ,
        cls,
        AT,
        note,
        known,
        last_notified,
        "corr",
        None,
        signals=signals,
    )


def counters(effects: list[Effect]) -> tuple[int, int, str | None]:
    (found,) = [e for e in effects if isinstance(e, Counters)]
    return found.failures, found.streak, found.quiet_until


def notified(effects: list[Effect]) -> list[tuple[str, str]]:
    return [(e.record.state, e.record.message) for e in effects if isinstance(e, Notify)]


def later(hours: int) -> str:
    return iso(parse_iso(AT) + timedelta(hours=hours))


# ---- the loop's counters ------------------------------------------------------------------


def test_a_success_resets_the_failures_and_the_quiet_streak() -> None:
    """A completed occurrence clears the failure count and the quiet backoff; its quiet
    streak starts again from 0, unless the run answered NOTHING_TO_DO, which extends
    it without backing off."""
    before = loop_state("idle", consecutive_failures=1, nothing_streak=2, quiet_until=later(1))
    assert counters(ended("idle", "completed", FailureClass.SUCCESS, before=before)) == (
        0,
        0,
        None,
    )
    nothing = ended("idle", "completed", FailureClass.NOTHING_TO_DO, before=before)
    assert counters(nothing) == (0, 3, None)


def test_nothing_to_do_in_a_row_backs_off_quietly_from_the_third() -> None:
    """Each nothing_to_do extends the quiet streak; from the third in a row the loop is
    quiet for its backoff (base 2h, doubling, at most 8h) from the end."""
    streaks = []
    for streak in (0, 1, 2, 3, 4, 5):
        before = loop_state("idle", nothing_streak=streak)
        streaks.append(counters(ended("idle", "nothing_to_do", before=before))[1:])
    assert streaks == [
        (1, None),
        (2, None),
        (3, later(2)),
        (4, later(4)),
        (5, later(8)),
        (6, later(8)),
    ]


def test_a_failed_occurrence_counts_toward_the_breaker_and_ends_the_streak() -> None:
    """A failure counts one more consecutive failure and ends the quiet streak; a
    budget used up before anything ran is no failure of the loop."""
    before = loop_state("idle", consecutive_failures=1, nothing_streak=2, quiet_until=later(1))
    failed = ended("idle", "failed", FailureClass.IMPLEMENTATION_FAILURE, before=before)
    assert counters(failed) == (2, 0, later(1))
    assert counters(ended("idle", "failed", before=before)) == (2, 0, later(1))
    assert counters(ended("idle", "budget_exhausted", before=before)) == (1, 2, later(1))


# ---- notifications ------------------------------------------------------------------------


def test_an_end_a_person_may_act_on_is_notified_with_its_note() -> None:
    """A failure is notified for the loop and repo, its message the note (else the
    loop and state), linked to the occurrence and the loop; a success is not."""
    effects = ended("single", "failed", FailureClass.IMPLEMENTATION_FAILURE, note="exit 3")
    (found,) = [e.record for e in effects if isinstance(e, Notify)]
    assert (found.kind, found.loop, found.repo, found.state, found.message) == (
        "occurrence",
        "single",
        "r1",
        "failed",
        "exit 3",
    )
    occ = occurrence(event("single"), "failed")
    assert found.links == {"occurrence": occ.event_id, "loop": "single"}
    assert found.dedup_key == "occurrence|single|r1"
    assert notified(ended("single", "timed_out")) == [("timed_out", "loop 'single' timed_out")]
    assert notified(ended("single", "completed", FailureClass.SUCCESS)) == []


def test_a_success_after_a_notified_failure_is_announced_as_recovered() -> None:
    """A success is news only when what was last announced for the loop and repo was a
    failure; a failure after a failure is the failure, not a recovery."""
    ok = FailureClass.SUCCESS
    again = ended("single", "completed", ok, last_notified="failed")
    assert notified(again) == [("recovered", "loop 'single' succeeded again")]
    assert notified(ended("single", "completed", ok, last_notified="recovered")) == []
    assert notified(ended("single", "completed", ok, last_notified=None)) == []
    failing = ended("single", "failed", FailureClass.IMPLEMENTATION_FAILURE, last_notified="failed")
    assert notified(failing) == [("failed", "loop 'single' failed")]


def test_the_breaker_pauses_the_loop_once_at_its_limit() -> None:
    """The failure that reaches the breaker's limit (2) pauses the loop, journaled with
    actor `schedule` and notified once per loop as `breaker_tripped`; a loop already
    paused is not paused again."""
    cls = FailureClass.IMPLEMENTATION_FAILURE
    effects = ended("single", "failed", cls, before=loop_state("single", consecutive_failures=1))
    (paused,) = [e for e in effects if isinstance(e, PauseLoop)]
    why = "circuit breaker: 2 consecutive failures (limit 2)"
    assert (paused.loop, paused.why) == ("single", why)
    journal, told = paused.then
    assert isinstance(journal, Journal) and (journal.action, journal.actor) == (
        "paused",
        "schedule",
    )
    assert isinstance(told, Notify)
    assert (told.record.state, told.record.repo, told.record.dedup_key) == (
        "breaker_tripped",
        None,
        "loop|single|-",
    )
    first = ended("single", "failed", cls)
    assert not [e for e in first if isinstance(e, PauseLoop)]
    held = loop_state("single", consecutive_failures=1, paused=True)
    assert not [e for e in ended("single", "failed", cls, before=held) if isinstance(e, PauseLoop)]


# ---- coalesced triggers -------------------------------------------------------------------


def test_coalesced_triggers_become_one_follow_up_tick() -> None:
    """When an occurrence that coalesced triggers ends, one run-now tick of the loop is
    admitted through the outbox (actor `schedule`), correlated with the occurrence and
    journaled on it; none without coalesced triggers, nor for a loop that does not
    coalesce."""
    occ = occurrence(event("coalescer"))
    for signals in (1, 2):
        effects = ended("coalescer", "completed", FailureClass.SUCCESS, signals=signals)
        (outbox,) = [e for e in effects if isinstance(e, Outbox)]
        tick: dict[str, Any] = outbox.event
        assert (outbox.actor, outbox.origin_run) == ("schedule", None)
        assert (tick["source"], tick["correlationId"]) == ("manual", occ.event_id)
        assert tick["eventId"].startswith("manual:coalescer:coalesced-")
        (journal,) = [e for e in effects if isinstance(e, Journal)]
        assert (journal.entity_id, journal.action) == (occ.event_id, "follow_up")
        assert journal.note == f"{signals} coalesced triggers: one follow-up tick {tick['eventId']}"
    assert not [e for e in ended("coalescer", "completed") if isinstance(e, Outbox)]
    single = ended("single", "completed", FailureClass.SUCCESS, signals=1)
    assert not [e for e in single if isinstance(e, Outbox)]


# ---- what "the same thing" means ----------------------------------------------------------


def test_a_notifications_key_names_its_kind_loop_repo_and_subject() -> None:
    """Notifications of one kind, loop and repository (and subject, where a loop has
    several) are one thing, announced once per change of state; a missing loop or
    repository is `-`."""
    assert dedup_key("occurrence", "single", "r1") == "occurrence|single|r1"
    assert dedup_key("loop", "single", None) == "loop|single|-"
    assert dedup_key("occurrence", None, "r1") == "occurrence|-|r1"
    assert dedup_key("finding", "finder", "r1", "lint:r1") == "finding|finder|r1|lint:r1"
    made = notice("loop", "breaker_tripped", "why", AT, loop="single").record
    assert (made.links, made.dedup_key, made.at) == ({}, "loop|single|-", AT)


def test_the_budget_a_snapshot_counts_is_the_last_day() -> None:
    """Daily budgets count use since exactly one day before the decision."""
    assert history_since(iso(SLOT)) == iso(SLOT - timedelta(days=1))
