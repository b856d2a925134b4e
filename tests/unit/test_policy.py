"""The occurrence policy (engine.core.policy): failure classes, backoff and stop
conditions, as pure functions of compiled values and a snapshot."""

from __future__ import annotations

import typing
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.policy import FailureClass, backoff_delay, classify, stop_condition
from engine.core.registry import Definition, FailureClassName
from engine.core.ruleset import Backoff, Loop, Policy, StopCondition, Trigger, TriggerKind
from engine.core.triage import TriageSnapshot

DEFINITION = Definition(
    id="dispatch",
    version=1,
    adapter="agent",
    output_contract="test.result/v1",
    mutating=True,
    outcomes=("PR_OPEN", "FAILED", "BLOCKED", "NOTHING_TO_DO", "CONFLICT", "FLAKY", "STUCK"),
    classify={"FLAKY": "infrastructure_failure", "FAILED": "external_blocker"},
)


# ---- failure classes -------------------------------------------------------------------------


def test_the_classes_are_the_registrys() -> None:
    """FailureClass and the registry's `classify:` values are the same six words."""
    assert {c.value for c in FailureClass} == set(typing.get_args(FailureClassName))
    assert len(FailureClass) == 6


@pytest.mark.parametrize(
    ("outcome", "adapter_failed", "expected"),
    [
        ("PR_OPEN", True, FailureClass.INFRASTRUCTURE_FAILURE),  # adapter failure wins
        (None, False, FailureClass.INFRASTRUCTURE_FAILURE),  # no outcome: no result
        ("FLAKY", False, FailureClass.INFRASTRUCTURE_FAILURE),  # declared
        ("FAILED", False, FailureClass.EXTERNAL_BLOCKER),  # declared over the default
        ("BLOCKED", False, FailureClass.EXTERNAL_BLOCKER),
        ("NOTHING_TO_DO", False, FailureClass.NOTHING_TO_DO),
        ("CONFLICT", False, FailureClass.CONFLICT),
        ("STUCK", False, FailureClass.SUCCESS),  # anything else
        ("PR_OPEN", False, FailureClass.SUCCESS),
    ],
)
def test_classify(outcome: str | None, adapter_failed: bool, expected: FailureClass) -> None:
    assert classify(DEFINITION, outcome, adapter_failed) is expected


def test_default_classes_without_a_map() -> None:
    plain = DEFINITION.model_copy(update={"classify": {}})
    assert classify(plain, "FAILED", False) is FailureClass.IMPLEMENTATION_FAILURE


# ---- backoff ---------------------------------------------------------------------------------


def test_backoff_examples() -> None:
    backoff = Backoff(60, 3600)
    assert [backoff_delay(backoff, n) for n in range(8)] == [
        60,
        120,
        240,
        480,
        960,
        1920,
        3600,
        3600,
    ]
    assert backoff_delay(backoff, 10**9) == 3600  # no huge powers of two
    assert backoff_delay(backoff, -1) == 60


def test_an_absurd_attempt_number_waits_the_max_at_once() -> None:
    """However many attempts a run has had, even from the shortest base (1s), the delay
    is the max, answered without computing a power of two that would not fit in memory."""
    assert backoff_delay(Backoff(1, 60), 10**12) == 60
    assert backoff_delay(Backoff(1, 1), 10**12) == 1


BACKOFFS = st.tuples(st.integers(1, 10**6), st.integers(0, 10**7)).map(
    lambda t: Backoff(t[0], t[0] + t[1])
)


@given(backoff=BACKOFFS, attempt=st.integers(0, 200))
def test_backoff_is_monotone_and_capped(backoff: Backoff, attempt: int) -> None:
    """Never above max, never shorter than the attempt before, base at attempt 0."""
    delay = backoff_delay(backoff, attempt)
    assert backoff.base_seconds <= delay <= backoff.max_seconds
    assert delay >= backoff_delay(backoff, max(attempt - 1, 0))
    assert delay == min(backoff.base_seconds * 2**attempt, backoff.max_seconds)
    assert backoff_delay(backoff, 0) == backoff.base_seconds


# ---- stop conditions -------------------------------------------------------------------------


def loop_with(*conditions: StopCondition, **policy: Any) -> Loop:
    return Loop(
        name="repair",
        trigger=Trigger(TriggerKind.INTERVAL, every_seconds=3600),
        event_type="factory.work.requested",
        payload={"repo": "alpha"},
        policy=Policy(stop_when=conditions, **policy),
    )


def snap(**values: Any) -> TriageSnapshot:
    repo = {"name": "alpha", "github": "e/alpha", "disabled": False, "frozen": False}
    return TriageSnapshot(**{"loop": "repair", "repo": repo, **values})


def test_nothing_stops_a_quiet_loop() -> None:
    assert stop_condition(loop_with(*StopCondition), snap(), release_freeze=False) is None


def test_freeze_and_disabled_repo_always_apply() -> None:
    """Listed or not: a release freeze (instance-wide or a frozen repo) and a disabled repo."""
    loop = loop_with()
    assert stop_condition(loop, snap(), True) is StopCondition.RELEASE_FREEZE
    assert stop_condition(loop, snap(freeze=True), False) is StopCondition.RELEASE_FREEZE
    disabled = snap(repo={"name": "alpha", "disabled": True})
    assert stop_condition(loop, disabled, False) is StopCondition.REPOSITORY_DISABLED
    assert stop_condition(loop, replace(disabled, freeze=True), False) is (
        StopCondition.RELEASE_FREEZE
    )
    assert stop_condition(loop, snap(repo=None), False) is None


@pytest.mark.parametrize(
    ("condition", "values", "policy"),
    [
        (StopCondition.USER_PAUSED, {"paused": True}, {}),
        (StopCondition.MAXIMUM_FAILURES_REACHED, {"failures": 3}, {"circuit_breaker": 3}),
        (StopCondition.BUDGET_EXHAUSTED, {"budget": {"daily_runs_left": 0}}, {}),
        (StopCondition.HUMAN_REVIEW_REQUIRED, {"last_state": "human_attention_required"}, {}),
        (StopCondition.EXTERNAL_BLOCKER, {"last_state": "external_blocker"}, {}),
        (
            StopCondition.RELEASE_READY,
            {"last_state": "nothing_to_do", "last_decision": "release_ready"},
            {},
        ),
        (
            StopCondition.END_DATE,
            {"now": "2027-01-01T00:00:00Z"},
            {"end_at": datetime(2027, 1, 1, tzinfo=UTC)},
        ),
        (StopCondition.OCCURRENCE_COUNT, {"occurrences": 10}, {"max_occurrences": 10}),
    ],
)
def test_a_listed_condition_stops_only_when_listed(
    condition: StopCondition, values: dict[str, Any], policy: dict[str, Any]
) -> None:
    listed = loop_with(condition, **policy)
    assert stop_condition(listed, snap(**values), False) is condition
    assert stop_condition(loop_with(**policy), snap(**values), False) is None


@pytest.mark.parametrize(
    ("condition", "values", "policy"),
    [
        (StopCondition.MAXIMUM_FAILURES_REACHED, {"failures": 2}, {"circuit_breaker": 3}),
        (StopCondition.MAXIMUM_FAILURES_REACHED, {"failures": 9}, {}),  # no breaker
        (StopCondition.BUDGET_EXHAUSTED, {"budget": {"daily_runs_left": None}}, {}),
        (StopCondition.BUDGET_EXHAUSTED, {"budget": {"daily_runs_used": 0}}, {}),
        (StopCondition.RELEASE_READY, {"last_state": "completed"}, {}),
        (StopCondition.RELEASE_READY, {"last_decision": "run_repair_task"}, {}),
        (
            StopCondition.END_DATE,
            {"now": "2026-12-31T23:59:59+00:00"},
            {"end_at": datetime(2027, 1, 1, tzinfo=UTC)},
        ),
        (StopCondition.END_DATE, {"now": None}, {"end_at": datetime(2027, 1, 1, tzinfo=UTC)}),
        (StopCondition.END_DATE, {"now": "not a time"}, {"end_at": datetime(2027, 1, 1)}),
        (StopCondition.OCCURRENCE_COUNT, {"occurrences": 9}, {"max_occurrences": 10}),
    ],
)
def test_a_listed_condition_that_does_not_hold(
    condition: StopCondition, values: dict[str, Any], policy: dict[str, Any]
) -> None:
    assert stop_condition(loop_with(condition, **policy), snap(**values), False) is None


def test_the_first_condition_in_a_fixed_order_is_named() -> None:
    """Several hold: the operator's pause before the loop's own bounds."""
    loop = loop_with(StopCondition.BUDGET_EXHAUSTED, StopCondition.USER_PAUSED, circuit_breaker=1)
    both = snap(paused=True, budget={"daily_runs_left": 0}, failures=4)
    assert stop_condition(loop, both, False) is StopCondition.USER_PAUSED


def test_end_date_is_inclusive_of_its_instant() -> None:
    """The loop stops from `end_at` on (a date's end_at is the next midnight, UTC)."""
    loop = loop_with(StopCondition.END_DATE, end_at=datetime(2027, 1, 1, tzinfo=UTC))
    last = snap(now="2026-12-31T23:59:59Z")
    assert stop_condition(loop, last, False) is None
    stopped = replace(last, now="2027-01-01T01:00:00+01:00")  # the same instant
    assert stop_condition(loop, stopped, False) is StopCondition.END_DATE
