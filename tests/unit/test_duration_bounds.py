"""A duration longer than 100 years is refused where it is written, as a located load
error in the rules' style (docs/rules.md, E0201), never an OverflowError later."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsl.diagnostics import RulesError
from engine.core.durations import MAX_SECONDS, DurationError, parse_duration
from engine.core.slots import IntervalSlots, Policy, next_fires, plan_pass
from engine.loading import Paths, load_rules

VALID = Path(__file__).resolve().parents[1] / "data" / "rules" / "valid" / "triggers"
HUGE = "99999999999d"


def tree(root: Path, rules: str, schedule: str = "schedules: {}\n") -> Paths:
    """The golden trigger registry and routes, `rules` as loops/t.rules, `schedule`."""
    shutil.copytree(VALID / "registry", root / "registry")
    (root / "loops").mkdir()
    shutil.copy(VALID / "loops" / "routes.rules", root / "loops" / "routes.rules")
    (root / "loops" / "t.rules").write_text(rules)
    (root / "config").mkdir()
    (root / "config" / "schedule.yaml").write_text(schedule)
    return Paths(root / "loops", root / "registry", root / "config")


def located(paths: Paths) -> list[tuple[str, int, int, str, str]]:
    """(file, line, column, code, message) of every diagnostic of a load that fails."""
    with pytest.raises(RulesError) as caught:
        load_rules(paths)
    return [
        (Path(d.span.file).name, d.span.line, d.span.column, d.code, d.message)
        for d in caught.value.diagnostics
    ]


def too_long(text: str, what: str = "duration") -> str:
    return f"bad {what}: '{text}' is too long; a duration is at most 36500d (100 years)"


def test_a_hundred_years_is_the_longest_duration() -> None:
    """36500d parses; a second more, or 99999999999d, is refused with the limit named."""
    assert parse_duration("36500d") == MAX_SECONDS
    for text in ("36500d1s", "5215w", HUGE):
        with pytest.raises(DurationError, match="at most 36500d"):
            parse_duration(text)


@given(st.integers(1, MAX_SECONDS), st.integers(0, 130 * 365 * 86400))
def test_any_accepted_duration_fits_every_slot_and_lateness_sum(every: int, at: int) -> None:
    """Any accepted duration as a cadence and as max-lateness plans a pass at any instant
    from 1970 to 2100 without leaving the range of a datetime."""
    now = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=at)
    seq = IntervalSlots(every)
    assert next_fires(seq, now, 2)[0] > now
    plan_pass(seq, Policy(max_lateness=timedelta(seconds=every)), None, now - timedelta(1), now)


def test_every_duration_setting_of_a_rule_file_is_a_located_error(tmp_path: Path) -> None:
    """every, host_clock, max_lateness, budget durations and backoff each point at the
    huge value's own line and column."""
    rules = (
        f"loop a\n  every {HUGE}\n  emit clock.tick.reaper\n\n"
        f"loop b\n  host_clock {HUGE}\n  emit clock.tick.reaper\n\n"
        f"loop c\n  every 1h\n  emit clock.tick.reaper\n  max_lateness {HUGE}\n"
        f"  budget daily_runs 5 wall_clock {HUGE}\n"
        f"  backoff base 1m max {HUGE}\n"
    )
    assert located(tree(tmp_path, rules)) == [
        ("t.rules", 2, 9, "E0201", too_long(HUGE)),
        ("t.rules", 6, 14, "E0201", too_long(HUGE)),
        ("t.rules", 12, 16, "E0201", too_long(HUGE)),
        ("t.rules", 13, 34, "E0201", too_long(HUGE)),
        ("t.rules", 14, 23, "E0201", too_long(HUGE)),
    ]


def test_overlay_every_and_max_lateness_are_located_errors(tmp_path: Path) -> None:
    """The overlay's every (a kernel loop's and a new loop's) and max_lateness are refused
    at their keys."""
    rules = "loop kept\n  every 1h\n  emit clock.tick.reaper\n"
    schedule = (
        "schedules:\n"
        f"  kept:\n    every: {HUGE}\n"
        f"  fresh:\n    emit: clock.tick.reaper\n    every: {HUGE}\n"
        f"  late:\n    emit: clock.tick.reaper\n    every: 1h\n    max_lateness: {HUGE}\n"
    )
    assert located(tree(tmp_path, rules, schedule)) == [
        ("schedule.yaml", 3, 5, "E0201", too_long(HUGE)),
        ("schedule.yaml", 6, 5, "E0201", too_long(HUGE)),
        ("schedule.yaml", 10, 5, "E0201", too_long(HUGE)),
    ]


def test_host_clock_cadence_is_a_located_error(tmp_path: Path) -> None:
    """A host clock whose cadence is over 100 years is refused at its cadence key."""
    rules = "loop kept\n  every 1h\n  emit clock.tick.reaper\n"
    schedule = f"host_clocks:\n  nightly:\n    emit: clock.tick.reaper\n    cadence: {HUGE}\n"
    assert located(tree(tmp_path, rules, schedule)) == [
        ("schedule.yaml", 4, 5, "E0201", too_long(HUGE, "cadence")),
    ]


def test_a_definition_timeout_is_a_located_error(tmp_path: Path) -> None:
    """A definition whose timeout is over 100 years is refused at that definition."""
    paths = tree(tmp_path, "loop kept\n  every 1h\n  emit clock.tick.reaper\n")
    definitions = paths.registry / "definitions.yaml"
    text = definitions.read_text().replace(
        "mutating: false\n", f"mutating: false\n    timeout: {HUGE}\n", 1
    )
    definitions.write_text(text)
    (found,) = located(paths)
    assert found[:4] == ("definitions.yaml", 7, 5, "E0902")
    assert found[4] == f"timeout: '{HUGE}' is too long; a duration is at most 36500d (100 years)"
