"""The worker's authority check is pure: a run's facts and the rules give one verdict,
and every way a run can lack authority is refused with its own reason."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engine.core.authority import Refusal, RunFacts, check, earned, parse_ref
from engine.core.records import EventRecord, ProposalRecord, RunRecord
from engine.core.ruleset import Approval, DefinitionRef, Policy, RuleSet
from engine.loading import Paths, load_rules

TREE = Path(__file__).resolve().parents[1] / "data" / "authority"
TOUCH = "touch@1"
TICK = "manual:toucher:1"


@pytest.fixture(scope="module")
def rules() -> RuleSet:
    return load_rules(Paths(TREE / "loops", TREE / "registry", TREE / "config"))


def event(type: str = "auth.touch", loop: str | None = "toucher", **changes: Any) -> EventRecord:
    base = EventRecord(
        event_id=TICK,
        type=type,
        source="manual" if loop else "test",
        subject="",
        occurred_at="2026-12-01T09:00:00.000000Z",
        correlation_id=TICK,
        payload={"loop": loop} if loop else {},
        loop=loop,
        admitted_at="2026-12-01T09:00:00.000000Z",
        admitted_by="operator:alice",
    )
    return replace(base, **changes)


def run(definition: str = TOUCH, loop: str | None = "toucher", **changes: Any) -> RunRecord:
    base = RunRecord(
        run_id="run-1",
        idempotency_key=f"event:{TICK}",
        event_id=TICK,
        proposal_id="prop-1",
        loop=loop,
        definition=definition,
        state="claimed",
        approved_by="schedule",
        attempts=1,
        lease_owner="w1",
        lease_expires_at="2026-12-01T09:01:00.000000Z",
        created_at="2026-12-01T09:00:00.000000Z",
    )
    return replace(base, **changes)


def proposal(definition: str = TOUCH, **changes: Any) -> ProposalRecord:
    base = ProposalRecord(
        proposal_id="prop-1",
        event_id=TICK,
        loop="toucher",
        definition=definition,
        state="approved",
        human_only=False,
        mutating=True,
        created_at="2026-12-01T09:00:00.000000Z",
    )
    return replace(base, **changes)


def facts(
    approvers: tuple[str, ...] = ("schedule",),
    *,
    the_run: RunRecord | None = None,
    the_event: EventRecord | None = None,
    the_proposal: ProposalRecord | None = None,
    no_event: bool = False,
    no_proposal: bool = False,
) -> RunFacts:
    return RunFacts(
        the_run or run(),
        None if no_event else (the_event or event()),
        None if no_proposal else (the_proposal or proposal()),
        approvers,
    )


def with_loop(rules: RuleSet, **changes: Any) -> RuleSet:
    loops = dict(rules.loops)
    loops["toucher"] = replace(loops["toucher"], **changes)
    return replace(rules, loops=loops)


def human_only(rules: RuleSet, event_type: str = "auth.touch") -> RuleSet:
    return replace(rules, human_only_types=rules.human_only_types | {event_type})


def look(approvers: tuple[str, ...]) -> RunFacts:
    """A read-only run of the route `auth.look` (approval auto)."""
    return RunFacts(
        run("look@1", loop=None),
        event("auth.look", loop=None),
        proposal("look@1", loop=None, mutating=False),
        approvers,
    )


# ---- allowed ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "approvers", [("schedule",), ("operator:alice",), ("system", "operator:bob")]
)
def test_an_approved_tick_of_an_auto_loop_may_run(
    rules: RuleSet, approvers: tuple[str, ...]
) -> None:
    """A tick of an `approval auto` loop approved by the schedule, or by a person, runs."""
    verdict = check(facts(approvers), rules)
    assert verdict.allowed and verdict.refusal is None


def test_a_read_only_run_of_an_auto_route_may_run_approved_by_system(rules: RuleSet) -> None:
    """An event whose route says `approval auto` runs with the engine's (`system`) approval."""
    assert check(look(("system",)), rules).allowed


def test_a_person_approves_work_the_rules_would_not(rules: RuleSet) -> None:
    """A named human's approval is enough for work no rule auto-approves."""
    watched = with_loop(rules, approval=Approval.WATCHED)
    assert check(facts(("operator:alice",)), watched).allowed


# ---- refused --------------------------------------------------------------------------


def test_a_run_of_an_event_that_is_not_stored_is_refused(rules: RuleSet) -> None:
    """A run naming an event the store does not hold has no authority."""
    verdict = check(facts(no_event=True), rules)
    assert verdict.refusal is Refusal.NO_EVENT
    assert TICK in verdict.note


@pytest.mark.parametrize("definition", ["touch@2", "gone@1", "touch", "touch@x", "@1", ""])
def test_a_definition_outside_the_rules_is_refused(rules: RuleSet, definition: str) -> None:
    """A definition or version the worker's rules do not have (or no `id@version` at
    all) is refused before anything else is read."""
    verdict = check(facts(the_run=run(definition)), rules)
    assert verdict.refusal is Refusal.UNKNOWN_DEFINITION


def test_a_definition_the_event_type_is_not_routed_to_is_refused(rules: RuleSet) -> None:
    """The rules must route the run's event type to the run's definition."""
    verdict = check(facts(the_run=run("look@1")), rules)
    assert verdict.refusal is Refusal.NOT_ROUTED
    assert "route 'auth.touch' to touch@1, not to look@1" in verdict.note


def test_an_event_type_with_no_route_is_refused(rules: RuleSet) -> None:
    """An event type no route handles any more gives its runs no authority."""
    routes = {k: v for k, v in rules.routes.items() if k != "auth.touch"}
    verdict = check(facts(), replace(rules, routes=routes))
    assert verdict.refusal is Refusal.NOT_ROUTED
    assert "nowhere" in verdict.note


def test_mutating_work_of_a_loop_in_shadow_is_refused(rules: RuleSet) -> None:
    """A mutating run of a loop that is in shadow under the worker's rules never runs,
    whoever approved it."""
    shadowed = with_loop(rules, policy=Policy(shadow=True))
    for approvers in [("schedule",), ("operator:alice",)]:
        verdict = check(facts(approvers), shadowed)
        assert verdict.refusal is Refusal.SHADOW
        assert "toucher" in verdict.note


def test_read_only_work_of_a_loop_in_shadow_is_not_refused_for_shadow(rules: RuleSet) -> None:
    """Shadow mode holds back mutation only: a read-only run is judged by its approval."""
    definitions = dict(rules.definitions)
    ref = DefinitionRef("touch", 1)
    definitions[ref] = definitions[ref].model_copy(update={"mutating": False})
    shadowed = replace(with_loop(rules, policy=Policy(shadow=True)), definitions=definitions)
    assert check(facts(("schedule",)), shadowed).allowed


@pytest.mark.parametrize(
    "case",
    [
        {"no_proposal": True},
        {"the_proposal": proposal(event_id="another-event")},
        {"the_proposal": proposal("look@1")},
        {"approvers": ()},
    ],
    ids=["no-proposal", "proposal-of-another-event", "proposal-of-another-definition", "never"],
)
def test_a_run_without_an_approval_in_the_journal_is_refused(
    rules: RuleSet, case: dict[str, Any]
) -> None:
    """The run's own `approved_by` is not evidence: without an `approved` journal entry
    on a proposal of the same event and definition, the run is refused."""
    verdict = check(facts(**case), rules)
    assert verdict.refusal is Refusal.NO_APPROVAL


def test_a_forged_approved_by_column_is_not_an_approval(rules: RuleSet) -> None:
    """A run row claiming an operator's approval, with nothing in the journal, is refused."""
    forged = run(approved_by="operator:alice", proposal_id=None)
    verdict = check(facts((), the_run=forged, no_proposal=True), rules)
    assert verdict.refusal is Refusal.NO_APPROVAL
    assert "no proposal" in verdict.note


@pytest.mark.parametrize("approvers", [("schedule",), ("system",), ("operator:",), ("bridge",)])
def test_human_only_work_needs_a_named_human(rules: RuleSet, approvers: tuple[str, ...]) -> None:
    """Work of a human-only event type is refused unless an `operator:<name>` approved it."""
    verdict = check(facts(approvers), human_only(rules))
    assert verdict.refusal is Refusal.HUMAN_ONLY
    assert check(facts((*approvers, "operator:alice")), human_only(rules)).allowed


def test_a_human_only_definition_or_proposal_needs_a_named_human(rules: RuleSet) -> None:
    """Human-only through the definition, or recorded so on the proposal, is human-only."""
    by_definition = replace(rules, human_only_definitions=frozenset({DefinitionRef("touch", 1)}))
    assert check(facts(), by_definition).refusal is Refusal.HUMAN_ONLY
    flagged = facts(the_proposal=proposal(human_only=True))
    assert check(flagged, rules).refusal is Refusal.HUMAN_ONLY


@pytest.mark.parametrize(
    ("the_rules", "the_facts"),
    [
        (lambda r: with_loop(r, approval=Approval.WATCHED), facts(("schedule",))),
        (lambda r: r, facts(("system",))),
        (lambda r: r, facts(("github",))),
        (lambda r: r, facts(("schedule",), the_event=event(loop=None))),
        (lambda r: r, facts(("schedule",), the_run=run(loop=None))),
        (lambda r: r, look(("schedule",))),
    ],
    ids=["watched-loop", "system-on-a-tick", "github", "not-a-tick", "no-loop", "route"],
)
def test_a_rule_approval_the_rules_do_not_give_is_refused(
    rules: RuleSet, the_rules: Any, the_facts: RunFacts
) -> None:
    """`schedule` approves only ticks of an `approval auto` loop, `system` only events of
    an `approval auto` route; any other non-human approver approves nothing."""
    verdict = check(the_facts, the_rules(rules))
    assert verdict.refusal is Refusal.APPROVAL_NOT_EARNED


def test_system_approval_needs_an_auto_route(rules: RuleSet) -> None:
    """A route that is watched under the worker's rules gives `system` no approval."""
    routes = dict(rules.routes)
    routes["auth.look"] = replace(routes["auth.look"], approval=Approval.WATCHED)
    assert check(look(("system",)), replace(rules, routes=routes)).refusal is (
        Refusal.APPROVAL_NOT_EARNED
    )
    assert not earned("system", run(loop=None), event("auth.nothing", loop=None), rules)


def test_definition_references_parse_strictly() -> None:
    """Only `id@version` with a whole version is a reference."""
    assert parse_ref("touch@1") == DefinitionRef("touch", 1)
    assert [parse_ref(t) for t in ["touch", "touch@", "@1", "touch@1.5", "touch@-1"]] == [None] * 5
