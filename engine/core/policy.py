"""The occurrence policy of docs/occurrences.md#failures-backoff-and-the-circuit-breaker and
docs/occurrences.md#stop-conditions-and-release-freeze, as pure functions over compiled values: how
a finished run's failure counts, how long an infrastructure failure waits before its retry, and
which stop condition (if any) keeps a loop from dispatching mutation work. The runtime applies them;
nothing here reads or writes state."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from engine.core.registry import Definition
from engine.core.ruleset import Backoff, Loop, StopCondition
from engine.core.states import OccurrenceState
from engine.core.triage import TriageDecision, TriageSnapshot


class FailureClass(StrEnum):
    """What a finished run was, for retries, backoff and the breaker
    (docs/occurrences.md#failures-backoff-and-the-circuit-breaker)."""

    SUCCESS = "success"
    NOTHING_TO_DO = "nothing_to_do"
    CONFLICT = "conflict"  # waits for the resource; consumes no retry
    IMPLEMENTATION_FAILURE = "implementation_failure"  # stops for review
    EXTERNAL_BLOCKER = "external_blocker"  # cools down
    INFRASTRUCTURE_FAILURE = "infrastructure_failure"  # retried with backoff


# A declared outcome with no `classify:` entry counts as this; any other as success.
DEFAULT_CLASSES = {
    "FAILED": FailureClass.IMPLEMENTATION_FAILURE,
    "BLOCKED": FailureClass.EXTERNAL_BLOCKER,
    "NOTHING_TO_DO": FailureClass.NOTHING_TO_DO,
    "CONFLICT": FailureClass.CONFLICT,
}

# Classes that count toward the circuit breaker (consecutive failures).
FAILURES = frozenset(
    {
        FailureClass.IMPLEMENTATION_FAILURE,
        FailureClass.EXTERNAL_BLOCKER,
        FailureClass.INFRASTRUCTURE_FAILURE,
    }
)


def classify(definition: Definition, outcome: str | None, adapter_failed: bool) -> FailureClass:
    """The failure class of a finished run. An adapter failure (no result, a timeout, a
    result that breaks its contract, an expired lease) is `infrastructure_failure`, and
    so is a run that reports no outcome at all; a declared outcome is classified by the
    definition's `classify:` map, else by DEFAULT_CLASSES, else `success`."""
    if adapter_failed or outcome is None:
        return FailureClass.INFRASTRUCTURE_FAILURE
    declared = definition.classify.get(outcome)
    if declared is not None:
        return FailureClass(declared)
    return DEFAULT_CLASSES.get(outcome, FailureClass.SUCCESS)


def needs_explicit_retry(state: str, failure_class: str | None) -> bool:
    """Whether an attempt (an occurrence that ran) ended so that nothing retries it by
    itself, and a person retries it explicitly (docs/rules.md#existing-work-first): an
    `implementation_failure` stops for review; `human_attention_required` after a run (a
    mutating run's lease expired, a refused run) waits for a person; an
    `infrastructure_failure` that ended `budget_exhausted` has used its retries."""
    if failure_class == FailureClass.IMPLEMENTATION_FAILURE:
        return True
    if state == OccurrenceState.HUMAN_ATTENTION_REQUIRED:
        return True
    return (
        state == OccurrenceState.BUDGET_EXHAUSTED
        and failure_class == FailureClass.INFRASTRUCTURE_FAILURE
    )


def backoff_delay(backoff: Backoff, attempt: int) -> int:
    """Seconds before retry `attempt` (0-based) of an infrastructure failure:
    `base * 2**attempt`, capped at `max` (attempt 0 waits `base`)."""
    attempt = max(attempt, 0)
    if backoff.base_seconds > 0 and attempt > backoff.max_seconds.bit_length():
        return backoff.max_seconds  # 2**attempt alone exceeds max (no huge powers)
    return min(backoff.base_seconds << attempt, backoff.max_seconds)


# The order conditions are checked in: the two that always apply first, then the
# operator's, then the loop's own bounds, then what the last occurrence ended in.
_ORDER = (
    StopCondition.RELEASE_FREEZE,
    StopCondition.REPOSITORY_DISABLED,
    StopCondition.USER_PAUSED,
    StopCondition.END_DATE,
    StopCondition.OCCURRENCE_COUNT,
    StopCondition.MAXIMUM_FAILURES_REACHED,
    StopCondition.BUDGET_EXHAUSTED,
    StopCondition.HUMAN_REVIEW_REQUIRED,
    StopCondition.EXTERNAL_BLOCKER,
    StopCondition.RELEASE_READY,
)

# Conditions that apply whether or not the loop lists them in `stop-when`.
ALWAYS = frozenset({StopCondition.RELEASE_FREEZE, StopCondition.REPOSITORY_DISABLED})


def stop_condition(
    loop: Loop, snapshot: TriageSnapshot, release_freeze: bool
) -> StopCondition | None:
    """The first stop condition that holds (docs/occurrences.md#stop-conditions-and-release-freeze),
    or None. `release_freeze` (the instance-wide freeze, or a frozen repo: `snapshot.freeze`) and
    `repository_disabled` always apply; the others only when the loop lists them in `stop-when`. The
    runtime applies the answer to mutation work only (read-only checks still run during a
    freeze)."""
    listed = ALWAYS | set(loop.policy.stop_when)
    for condition in _ORDER:
        if condition in listed and _holds(condition, loop, snapshot, release_freeze):
            return condition
    return None


def _holds(
    condition: StopCondition, loop: Loop, snapshot: TriageSnapshot, release_freeze: bool
) -> bool:
    policy = loop.policy
    match condition:
        case StopCondition.RELEASE_FREEZE:
            return release_freeze or snapshot.freeze
        case StopCondition.REPOSITORY_DISABLED:
            return snapshot.repo is not None and snapshot.repo.get("disabled") is True
        case StopCondition.USER_PAUSED:
            return snapshot.paused
        case StopCondition.MAXIMUM_FAILURES_REACHED:
            breaker = policy.circuit_breaker
            return breaker is not None and snapshot.failures >= breaker
        case StopCondition.BUDGET_EXHAUSTED:
            return any(
                key.endswith("_left") and value == 0 and not isinstance(value, bool)
                for key, value in snapshot.budget.items()
            )
        case StopCondition.HUMAN_REVIEW_REQUIRED:
            return snapshot.last_state == OccurrenceState.HUMAN_ATTENTION_REQUIRED.value
        case StopCondition.EXTERNAL_BLOCKER:
            return snapshot.last_state == OccurrenceState.EXTERNAL_BLOCKER.value
        case StopCondition.RELEASE_READY:
            return snapshot.last_decision == TriageDecision.RELEASE_READY.value
        case StopCondition.END_DATE:
            now = _instant(snapshot.now)
            return policy.end_at is not None and now is not None and now >= policy.end_at
        case StopCondition.OCCURRENCE_COUNT:
            limit = policy.max_occurrences
            return limit is not None and snapshot.occurrences >= limit
    return False  # pragma: no cover - every condition is matched above


def _instant(text: str | None) -> datetime | None:
    """An ISO-8601 time with an offset (`Z` allowed), else None."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None
