"""Triage (engine.core.triage): the first matching line of a loop's triage table
decides, over the snapshot's names; otherwise the default for the definition."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsl import expr as ex
from dsl.diagnostics import Span
from engine.core.ruleset import Loop, Trigger, TriggerKind
from engine.core.triage import (
    DISPATCHING,
    TRIAGE_NAMES,
    TriageDecision,
    TriageRule,
    TriageSnapshot,
    triage,
)
from engine.loading import Paths, load_rules

AT = Span("loops/t.rules", 1, 1)
DESIGN_NAMES = {
    "existing",
    "payload",
    "loop",
    "repo",
    "in_flight",
    "active",
    "failures",
    "nothing_streak",
    "last_outcome",
    "findings",
    "budget",
    "paused",
    "freeze",
}


def loop_with(*rules: TriageRule) -> Loop:
    return Loop(
        name="repair",
        trigger=Trigger(TriggerKind.INTERVAL, every_seconds=3600),
        event_type="factory.work.requested",
        payload={"repo": "alpha"},
        triage=rules,
    )


def at_least(name: str, value: int) -> ex.Expr:
    """`name >= value`."""
    return ex.Compare(">=", ex.Path(name, (), AT), ex.Literal(value, AT), AT)


def rule(
    decision: TriageDecision,
    guard: ex.Expr | None = None,
    line: int = 1,
    negate: bool = False,
    **extra: Any,
) -> TriageRule:
    return TriageRule(
        decision=decision,
        guard=guard,
        negate=negate,
        note=extra.get("note"),
        key=extra.get("key"),
        category=extra.get("category"),
        origin=Span("loops/t.rules", line, 5),
    )


def snapshot(**values: Any) -> TriageSnapshot:
    return TriageSnapshot(loop="repair", payload={"repo": "alpha"}, **values)


# ---- the vocabulary --------------------------------------------------------------------------


def test_the_decisions_and_names_are_the_design_docs() -> None:
    """Ten decisions, four of which dispatch; rules read exactly the thirteen snapshot names."""
    assert len(TriageDecision) == 10
    assert {d.value for d in DISPATCHING} == {
        "continue_existing_task",
        "retry_infrastructure_failure",
        "run_readonly_check",
        "run_repair_task",
    }
    assert set(TRIAGE_NAMES) == DESIGN_NAMES
    assert set(snapshot().scope()) == DESIGN_NAMES
    extra = {f.name for f in fields(TriageSnapshot)} - DESIGN_NAMES
    assert extra == {"last_state", "last_decision", "now", "occurrences"}


def test_scope_is_a_plain_copy() -> None:
    """The scope holds plain JSON values; changing it never changes the snapshot."""
    snap = snapshot(repo={"name": "alpha", "frozen": False})
    scope = snap.scope()
    scope["payload"]["repo"] = "beta"
    scope["repo"]["frozen"] = True
    assert snap.payload == {"repo": "alpha"} and snap.repo == {"name": "alpha", "frozen": False}
    assert scope["budget"] == {
        "daily_runs_used": 0,
        "daily_runs_left": None,
        "daily_wall_clock_used": 0,
        "daily_wall_clock_left": None,
    }
    json.dumps(snap.as_dict())  # evidence is JSON


# ---- decisions -------------------------------------------------------------------------------


def test_default_decision_depends_on_mutating() -> None:
    """No table: run_repair_task for mutating work, run_readonly_check otherwise."""
    mutating = triage(loop_with(), True, snapshot())
    assert (mutating.decision, mutating.rule) == (TriageDecision.RUN_REPAIR_TASK, None)
    assert mutating.note == "no triage table: the default for a mutating definition"
    readonly = triage(loop_with(), False, snapshot())
    assert readonly.decision is TriageDecision.RUN_READONLY_CHECK and readonly.dispatches
    assert readonly.evidence["rule"] is None


def test_no_matching_line_gives_the_default() -> None:
    loop = loop_with(rule(TriageDecision.NOTHING_TO_DO, at_least("in_flight", 1)))
    result = triage(loop, False, snapshot())
    assert result.decision is TriageDecision.RUN_READONLY_CHECK
    assert result.note == "no triage rule matched: the default for a read-only definition"


def test_first_matching_line_wins_with_its_note_and_evidence() -> None:
    loop = loop_with(
        rule(TriageDecision.NOTHING_TO_DO, at_least("in_flight", 1), 3, note="busy"),
        rule(TriageDecision.HUMAN_ATTENTION_REQUIRED, at_least("failures", 2), 4),
        rule(TriageDecision.RUN_REPAIR_TASK, None, 5),
    )
    result = triage(loop, True, snapshot(failures=2))
    assert result.decision is TriageDecision.HUMAN_ATTENTION_REQUIRED
    assert result.rule == Span("loops/t.rules", 4, 5) and not result.dispatches
    assert result.note == "human_attention_required (triage rule at loops/t.rules:4)"
    assert result.evidence["rule"] == "loops/t.rules:4"
    assert result.evidence["snapshot"]["failures"] == 2
    assert result.evidence["snapshot"]["loop"] == "repair"
    busy = triage(loop, True, snapshot(in_flight=1, failures=5))
    assert (busy.decision, busy.note) == (TriageDecision.NOTHING_TO_DO, "busy")


def test_unless_negates_the_guard() -> None:
    loop = loop_with(rule(TriageDecision.NOTHING_TO_DO, at_least("findings", 1), negate=True))
    assert triage(loop, True, snapshot(findings=0)).decision is TriageDecision.NOTHING_TO_DO
    assert triage(loop, True, snapshot(findings=3)).decision is TriageDecision.RUN_REPAIR_TASK


def test_candidate_finding_fills_its_key_template() -> None:
    key = ex.parse_template("flaky:{payload.repo}:{failures}", AT)
    loop = loop_with(
        rule(TriageDecision.CREATE_CANDIDATE_FINDING, None, key=key, category="flaky"),
    )
    result = triage(loop, True, snapshot(failures=3))
    assert (result.finding_key, result.finding_category) == ("flaky:alpha:3", "flaky")


def test_a_failing_guard_stops_for_a_human() -> None:
    """A guard that reads missing data never dispatches: human_attention_required, naming it."""
    guard = ex.Compare("==", ex.Path("payload", ("pr",), AT), ex.Literal(1, AT), AT)
    loop = loop_with(rule(TriageDecision.RUN_REPAIR_TASK, guard, 7))
    result = triage(loop, True, snapshot())
    assert result.decision is TriageDecision.HUMAN_ATTENTION_REQUIRED
    assert result.rule == Span("loops/t.rules", 7, 5)
    assert "loops/t.rules:7" in result.note and "has no field 'pr'" in result.note
    assert "error" in result.evidence


def test_compiled_rules_decide_over_a_snapshot() -> None:
    """The table of the occurrences golden tree, end to end through the compiler."""
    root = Path(__file__).resolve().parents[1] / "data" / "rules" / "valid" / "occurrences"
    rules = load_rules(Paths(root / "loops", root / "registry", root / "config"))
    loop = rules.loops["repair"]
    repo = rules.repos["alpha"].as_snapshot()
    base = snapshot(repo=repo)
    assert triage(loop, True, replace(base, in_flight=1)).note == "a run is still in flight"
    failed = triage(loop, True, replace(base, last_outcome="FAILED"))
    assert (failed.finding_key, failed.finding_category) == ("flaky:alpha", "flaky")
    seen = triage(loop, True, base)
    assert (seen.finding_key, seen.finding_category) == ("seen:repair", "general")
    frozen = {**repo, "frozen": True}
    assert triage(loop, True, replace(base, repo=frozen)).decision is TriageDecision.RUN_REPAIR_TASK


# ---- first match, as a property ----------------------------------------------------------------

DECISIONS = [d for d in TriageDecision if d is not TriageDecision.CREATE_CANDIDATE_FINDING]
LINES = st.lists(
    st.tuples(
        st.sampled_from(DECISIONS),
        st.one_of(st.none(), st.integers(0, 5)),  # None: no guard, else `failures >= k`
        st.booleans(),  # unless
    ),
    max_size=8,
)


@given(lines=LINES, failures=st.integers(0, 6), mutating=st.booleans())
def test_the_first_line_that_holds_decides(
    lines: list[tuple[TriageDecision, int | None, bool]], failures: int, mutating: bool
) -> None:
    """Whatever the table, the decision is that of the first line whose guard holds (with
    `unless` inverting it), and the default when none does."""
    rules = [
        rule(decision, None if k is None else at_least("failures", k), n + 1, negate=negate)
        for n, (decision, k, negate) in enumerate(lines)
    ]
    result = triage(loop_with(*rules), mutating, snapshot(failures=failures))
    for n, (decision, k, negate) in enumerate(lines):
        if k is None or (failures >= k) != negate:
            assert (result.decision, result.rule) == (decision, Span("loops/t.rules", n + 1, 5))
            return
    default = TriageDecision.RUN_REPAIR_TASK if mutating else TriageDecision.RUN_READONLY_CHECK
    assert (result.decision, result.rule) == (default, None)


@pytest.mark.parametrize("name", sorted(DESIGN_NAMES))
def test_every_name_is_readable_by_a_rule(name: str) -> None:
    """A guard may read each snapshot name: `NAME == NAME` evaluates over the scope."""
    path = ex.Path(name, (), AT)
    assert ex.evaluate(ex.Compare("==", path, path, AT), snapshot().scope()) is True


def test_a_guard_can_test_for_a_repo_first() -> None:
    """`repo and repo.frozen` stops at a null repo instead of failing."""
    repo = ex.Path("repo", (), AT)
    frozen = ex.Path("repo", ("frozen",), AT)
    guard = ex.BoolOp("and", (repo, frozen), AT)
    loop = loop_with(rule(TriageDecision.NOTHING_TO_DO, guard))
    assert triage(loop, True, snapshot()).decision is TriageDecision.RUN_REPAIR_TASK
    frozen_repo = snapshot(repo={"name": "alpha", "frozen": True})
    assert triage(loop, True, frozen_repo).decision is TriageDecision.NOTHING_TO_DO
    bare = loop_with(rule(TriageDecision.NOTHING_TO_DO, frozen))
    assert triage(bare, True, snapshot()).decision is TriageDecision.HUMAN_ATTENTION_REQUIRED
