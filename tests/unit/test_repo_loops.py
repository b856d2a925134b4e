"""Repo loops and chains (docs/rules.md#per-repo-loops-for-repo-in-repos, docs/rules.md#chains,
docs/walkthrough.md) as the shipped kernel rules declare them: work/merge/ship loops per configured
repo that is not report-only, the chain edges of a dispatch, the merge-loop exception
(docs/walkthrough.md#the-merge-loop-exception: the merge loop auto-approves its read-only cold scan,
nothing else), and ship-apply human-only against every way a rule, route or overlay could try to
make it automatic."""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsl.diagnostics import RulesError
from engine.core.chains import resolve
from engine.core.decisions import DecisionKind, NoopReason
from engine.core.envelope import Envelope
from engine.core.planner import Snapshot, plan
from engine.core.ruleset import Approval, CatchUp, DefinitionRef, RuleSet, Source, TriggerKind
from engine.loading import Paths, load_rules

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
SHA = "0123456789abcdef0123456789abcdef01234567"

# Three repos, one report-only: the for block expands for alpha and beta only.
REPOS = """\
repos:
  alpha:
    github: example/alpha
  beta:
    github: example/beta
    base: master
  gamma:
    github: example/gamma
    report_only: true
"""
ACTIVE = ("alpha", "beta")
KINDS = ("work", "merge", "ship")
DISPATCH = DefinitionRef("dispatch", 1)


def tree(root: Path, schedule: str | None = None, **rule_files: str) -> Paths:
    """A copy of the shipped loops/ and registry/ with the three repos configured;
    `rule_files` replace or add files under loops/ (by stem), `schedule` is the overlay."""
    shutil.copytree(ROOT / "loops", root / "loops")
    shutil.copytree(ROOT / "registry", root / "registry")
    (root / "config").mkdir()
    (root / "config" / "repos.yaml").write_text(REPOS)
    if schedule is not None:
        (root / "config" / "schedule.yaml").write_text(schedule)
    for stem, text in rule_files.items():
        (root / "loops" / f"{stem}.rules").write_text(text)
    return Paths(root / "loops", root / "registry", root / "config")


def shipped_text(name: str) -> str:
    return (ROOT / "loops" / name).read_text()


def codes(paths: Paths) -> list[str]:
    """The diagnostic codes loading `paths` reports (it must fail)."""
    with pytest.raises(RulesError) as caught:
        load_rules(paths)
    return [d.code for d in caught.value.diagnostics]


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> RuleSet:
    """The shipped kernel with three repos configured and no overlay."""
    return load_rules(tree(tmp_path_factory.mktemp("kernel")))


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> RuleSet:
    """The shipped kernel with no instance configuration at all."""
    empty = tmp_path_factory.mktemp("none")
    return load_rules(Paths(ROOT / "loops", ROOT / "registry", empty))


def event(event_type: str, payload: dict[str, object], source: str = "chain") -> Envelope:
    return Envelope(
        eventId=f"{source}-{event_type}",
        type=event_type,
        source=source,
        subject=str(payload.get("repo", "")),
        occurredAt=NOW,
        correlationId="corr-1",
        payload=payload,
    )


def tick(loop: str, event_type: str, repo: str, source: str = "schedule") -> Envelope:
    slot = "2026-11-30T12:00:00Z"
    payload = {"repo": repo, "loop": loop, "slot": slot, "cadenceSeconds": 1800, "skippedSlots": 0}
    return Envelope(
        eventId=f"clock:{loop}:{slot}",
        type=event_type,
        source=source,
        occurredAt=NOW,
        payload=payload,
    )


# ---- the loops -----------------------------------------------------------------------


def test_three_loops_per_repo_that_is_not_report_only(rules: RuleSet, bare: RuleSet) -> None:
    """Each repo not report-only gets work-, merge- and ship-<repo>; a report-only repo none."""
    added = set(rules.loops) - set(bare.loops)
    assert added == {f"{kind}-{repo}" for kind in KINDS for repo in ACTIVE}
    assert not any(name.endswith("-gamma") for name in rules.loops)
    for name in added:
        loop = rules.loops[name]
        assert loop.source is Source.KERNEL
        assert Path(loop.origin.file).name == "repos.rules"


def test_no_repo_loops_without_configured_repos(bare: RuleSet) -> None:
    """With no config/repos.yaml the kernel declares no repo loop, so nothing ticks."""
    assert not [n for n in bare.loops if n.split("-", 1)[0] in KINDS]
    assert not [n for n, loop in bare.loops.items() if loop.enabled]


@pytest.mark.parametrize("repo", ACTIVE)
@pytest.mark.parametrize(
    ("kind", "event_type", "seconds"),
    [("work", "factory.work.requested", 1800), ("ship", "factory.ship.requested", 7 * 86400)],
)
def test_work_and_ship_loops_ship_neutral(
    rules: RuleSet, repo: str, kind: str, event_type: str, seconds: int
) -> None:
    """work-<repo> (30m) and ship-<repo> (7d): disabled, watched, singleton, catch-up none;
    work-<repo> dispatches mutating work and says nothing about shadow, so it starts in
    shadow mode (docs/occurrences.md#shadow-mode); ship-<repo> is read-only."""
    loop = rules.loops[f"{kind}-{repo}"]
    assert (loop.trigger.kind, loop.trigger.every_seconds) == (TriggerKind.INTERVAL, seconds)
    assert (loop.event_type, dict(loop.payload)) == (event_type, {"repo": repo})
    assert (loop.enabled, loop.approval) == (False, Approval.WATCHED)
    assert (loop.singleton, loop.catch_up) == (True, CatchUp.NONE)
    assert (loop.policy.shadow, loop.policy.shadow_declared) == (kind == "work", False)


@pytest.mark.parametrize("repo", ACTIVE)
def test_merge_loop_is_the_one_enabled_auto_exception(rules: RuleSet, repo: str) -> None:
    """merge-<repo> (30m) ships enabled with approval auto, singleton, catch-up none: the
    merge-loop exception (docs/walkthrough.md#the-merge-loop-exception)."""
    loop = rules.loops[f"merge-{repo}"]
    assert (loop.trigger.kind, loop.trigger.every_seconds) == (TriggerKind.INTERVAL, 1800)
    assert (loop.event_type, dict(loop.payload)) == ("factory.merge.requested", {"repo": repo})
    assert (loop.enabled, loop.approval) == (True, Approval.AUTO)
    assert (loop.singleton, loop.catch_up) == (True, CatchUp.NONE)
    assert (loop.policy.shadow, loop.policy.shadow_declared) == (False, True)


def test_merge_loop_auto_approves_read_only_work_only(rules: RuleSet) -> None:
    """The only auto loops are merge-<repo>, and what they reach is merge-scan@1 (read-only)."""
    auto = {name for name, loop in rules.loops.items() if loop.approval is Approval.AUTO}
    assert auto == {f"merge-{repo}" for repo in ACTIVE}
    route = rules.routes["factory.merge.requested"]
    assert (route.definition, route.approval) == (DefinitionRef("merge-scan", 1), Approval.WATCHED)
    assert rules.definitions[route.definition].mutating is False
    assert not rules.is_human_only("factory.merge.requested")


def test_merge_loop_tick_runs_the_scan_as_schedule(rules: RuleSet) -> None:
    """A merge-<repo> slot plans a run of merge-scan@1 approved by `schedule`, never an operator."""
    decision = plan(
        tick("merge-alpha", "factory.merge.requested", "alpha"), "schedule", rules, Snapshot()
    )
    assert decision.kind is DecisionKind.RUN
    assert (decision.definition, decision.approved_by) == ("merge-scan@1", "schedule")
    assert (decision.mutating, decision.human_only, decision.loop) == (False, False, "merge-alpha")
    assert decision.rule is not None and Path(decision.rule.file).name == "repos.rules"


def test_merge_loop_tick_while_a_scan_is_in_flight_is_a_noop(rules: RuleSet) -> None:
    """The exception keeps the singleton: a second slot during a running scan plans nothing."""
    decision = plan(
        tick("merge-alpha", "factory.merge.requested", "alpha"),
        "schedule",
        rules,
        Snapshot(loop_in_flight=True),
    )
    assert (decision.kind, decision.reason) == (
        DecisionKind.NOOP,
        NoopReason.PREVIOUS_RUN_IN_FLIGHT,
    )


@pytest.mark.parametrize("source", ["chain", "github", "inject"])
def test_scoped_merge_requests_stay_watched(rules: RuleSet, source: str) -> None:
    """A merge request that is not a merge-loop tick (chain, webhook, injection) proposes."""
    request = event("factory.merge.requested", {"repo": "alpha", "prNumbers": [42]}, source)
    decision = plan(request, source, rules, Snapshot())
    assert (decision.kind, decision.approved_by) == (DecisionKind.PROPOSE, None)


def test_merge_verdict_chains_a_watched_head_pinned_apply(rules: RuleSet) -> None:
    """MERGE chains merge-apply:<repo>:<pr>:<sha>, which is mutating and waits for an operator."""
    scanned = tick("merge-alpha", "factory.merge.requested", "alpha")
    found = resolve(
        rules,
        DefinitionRef("merge-scan", 1),
        "MERGE",
        scanned,
        {"outcome": "MERGE", "prNumber": 42, "headSha": SHA},
        "run-1",
        NOW,
    )
    assert (found.errors, [e.eventId for e in found.envelopes]) == (
        [],
        [f"merge-apply:alpha:42:{SHA}"],
    )
    apply = found.envelopes[0]
    assert apply.payload == {"repo": "alpha", "prNumber": 42, "headSha": SHA}
    decision = plan(apply, "chain", rules, Snapshot())
    assert (decision.kind, decision.definition) == (DecisionKind.PROPOSE, "merge-apply@1")
    assert decision.mutating is True and decision.approved_by is None


def test_overlay_may_switch_off_or_slow_the_merge_loop(tmp_path: Path) -> None:
    """An instance opts out with enabled: false (allowed on an auto loop) or slows it with every."""
    schedule = "schedules:\n  merge-alpha:\n    enabled: false\n  merge-beta:\n    every: 4h\n"
    rules = load_rules(tree(tmp_path, schedule))
    off, slow = rules.loops["merge-alpha"], rules.loops["merge-beta"]
    assert (off.enabled, off.approval, off.overridden) == (False, Approval.AUTO, ("enabled",))
    assert (slow.enabled, slow.trigger.every_seconds) == (True, 4 * 3600)
    decision = plan(
        tick("merge-alpha", "factory.merge.requested", "alpha"), "schedule", rules, Snapshot()
    )
    assert (decision.kind, decision.reason) == (DecisionKind.NOOP, NoopReason.DISABLED)


@pytest.mark.parametrize(
    ("loop", "value"), [("merge-alpha", "watched"), ("work-alpha", "auto"), ("ship-beta", "auto")]
)
def test_overlay_cannot_change_a_repo_loops_approval(tmp_path: Path, loop: str, value: str) -> None:
    """Approval is pinned by repos.rules: the overlay can neither add nor remove auto (E0801)."""
    schedule = f"schedules:\n  {loop}:\n    enabled: true\n    approval: {value}\n"
    assert codes(tree(tmp_path, schedule)) == ["E0801"]


def test_kernel_auto_needs_the_loop_enabled(tmp_path: Path) -> None:
    """A kernel that declared the merge loop auto but disabled would not load (E0301)."""
    text = shipped_text("repos.rules").replace(
        "approval auto\n    enabled true", "approval auto\n    enabled false"
    )
    assert "E0301" in codes(tree(tmp_path, repos=text))


# ---- the chain edges -----------------------------------------------------------------


def dispatched(
    rules: RuleSet, outcome: str, result: dict[str, object] | None = None
) -> tuple[bool, bool, list[Envelope]]:
    """(matched, stop, envelopes) of a dispatch@1 run for repo alpha ending in `outcome`."""
    handled = event("factory.work.requested", {"repo": "alpha"}, "inject")
    document = {"outcome": outcome, **(result or {})}
    found = resolve(rules, DISPATCH, outcome, handled, document, "run-d", NOW)
    assert found.errors == []
    return found.matched, found.stop, found.envelopes


def test_pr_open_fans_out_to_work_and_the_scoped_merge_request(bare: RuleSet) -> None:
    """PR_OPEN chains factory.work.requested {repo} and factory.merge.requested {repo, [pr]}."""
    matched, stop, out = dispatched(bare, "PR_OPEN", {"prNumber": 42, "branch": "work/42"})
    assert (matched, stop) == (True, False)
    assert [(e.eventId, e.type, e.payload) for e in out] == [
        ("chain:run-d:0", "factory.work.requested", {"repo": "alpha"}),
        ("chain:run-d:1", "factory.merge.requested", {"repo": "alpha", "prNumbers": [42]}),
    ]
    assert {(e.source, e.correlationId, e.subject) for e in out} == {("chain", "corr-1", "alpha")}


def test_not_claimed_refires_work_only(bare: RuleSet) -> None:
    """NOT_CLAIMED re-fires factory.work.requested and asks for no merge."""
    matched, stop, out = dispatched(bare, "NOT_CLAIMED")
    assert (matched, stop) == (True, False)
    assert [(e.type, e.payload) for e in out] == [("factory.work.requested", {"repo": "alpha"})]


@pytest.mark.parametrize("outcome", ["FAILED", "BLOCKED"])
def test_failed_and_blocked_terminate(bare: RuleSet, outcome: str) -> None:
    """A run that needs a human stops the chain: no scanner spins."""
    assert dispatched(bare, outcome) == (True, True, [])


def test_nothing_to_do_has_no_edge(bare: RuleSet) -> None:
    """An outcome without an edge simply ends there."""
    assert dispatched(bare, "NOTHING_TO_DO") == (False, False, [])


def test_chains_hold_exactly_the_kernel_edges(bare: RuleSet) -> None:
    """The chained outcomes are the kernel's (loops/chains.rules, the loop of docs/walkthrough.md)
    and no others."""
    expected = {
        ("dispatch@1", "PR_OPEN"): ("factory.work.requested", "factory.merge.requested"),
        ("dispatch@1", "NOT_CLAIMED"): ("factory.work.requested",),
        ("dispatch@1", "LOW_SUPPLY"): ("factory.triage.requested",),
        ("dispatch@1", "FAILED"): (),
        ("dispatch@1", "BLOCKED"): (),
        ("triage@1", "PROMOTED"): ("factory.work.requested",),
        ("merge-scan@1", "MERGE"): ("factory.merge.apply.requested",),
        ("ship-scan@1", "SHIP"): ("factory.ship.apply.requested",),
    }
    actual = {
        (str(ref), outcome): tuple(e.event_type for e in chain.emits)
        for (ref, outcome), chain in bare.chains.items()
    }
    assert actual == expected
    stops = {(str(ref), o) for (ref, o), chain in bare.chains.items() if chain.stop}
    assert stops == {("dispatch@1", "FAILED"), ("dispatch@1", "BLOCKED")}


# ---- ship-apply is human-only forever --------------------------------------------------

SHIP_APPLY_ROUTE = re.compile(r"^route factory\.ship\.apply\.requested\s+to ship-apply@1$", re.M)


def reroute(target: str) -> str:
    """The shipped routes.rules with the ship-apply route's target replaced."""
    text, count = SHIP_APPLY_ROUTE.subn(
        f"route factory.ship.apply.requested {target}", shipped_text("routes.rules")
    )
    assert count == 1
    return text


SHIP_LOOP = """\
loop ship-now
  manual
  emit factory.ship.apply.requested { repo: "alpha", version: "1.0.0" }
  approval auto
  enabled true
"""


def test_shipped_rules_declare_ship_apply_human_only_twice(rules: RuleSet) -> None:
    """The type is human-only in the registry and in approvals.rules; so is the definition."""
    assert rules.event_types["factory.ship.apply.requested"].human_only is True
    assert "factory.ship.apply.requested" in rules.human_only_types
    assert DefinitionRef("ship-apply", 1) in rules.human_only_definitions
    decision = plan(
        event("factory.ship.apply.requested", {"repo": "alpha", "version": "1.0.0"}),
        "chain",
        rules,
        Snapshot(),
    )
    assert (decision.kind, decision.human_only, decision.approved_by) == (
        DecisionKind.PROPOSE,
        True,
        None,
    )


def test_a_route_cannot_make_ship_apply_auto(tmp_path: Path) -> None:
    """`approval auto` on the ship-apply route is refused as human-only (E0302)."""
    routes = reroute("to ship-apply@1 approval auto")
    assert codes(tree(tmp_path, routes=routes)) == ["E0302"]


def test_rerouting_the_type_to_read_only_work_still_cannot_be_auto(tmp_path: Path) -> None:
    """Routing the human-only type to a read-only definition does not lift the lock (E0302)."""
    routes = reroute("to ship-scan@1 approval auto")
    assert codes(tree(tmp_path, routes=routes)) == ["E0302"]


def test_the_registry_flag_holds_without_approvals_rules(tmp_path: Path) -> None:
    """Even with approvals.rules emptied, human_only: true in the registry refuses auto (E0302)."""
    routes = reroute("to ship-scan@1 approval auto")
    assert codes(tree(tmp_path, routes=routes, approvals="")) == ["E0302"]


def test_another_type_routed_to_ship_apply_cannot_be_auto(tmp_path: Path) -> None:
    """`human-only definition ship-apply@1` locks every type routed to it (E0302)."""
    routes = re.sub(
        r"^route factory\.unblock\.requested\s+to unblock@1$",
        "route factory.unblock.requested to ship-apply@1 approval auto",
        shipped_text("routes.rules"),
        flags=re.M,
    )
    assert codes(tree(tmp_path, routes=routes)) == ["E0302"]


def test_a_loop_cannot_make_ship_apply_auto(tmp_path: Path) -> None:
    """An enabled `approval auto` loop emitting factory.ship.apply.requested is E0302."""
    assert "E0302" in codes(tree(tmp_path, extra=SHIP_LOOP))


def test_an_overlay_loop_cannot_make_ship_apply_auto(tmp_path: Path) -> None:
    """A new overlay loop with approval auto on the human-only type is refused: no overlay
    loop is ever auto (E0304)."""
    schedule = (
        "schedules:\n  ship-now:\n    emit: factory.ship.apply.requested\n    manual: true\n"
        "    payload: {repo: alpha, version: 1.0.0}\n    approval: auto\n    enabled: true\n"
    )
    assert "E0304" in codes(tree(tmp_path, schedule))


def test_an_overlay_cannot_touch_the_ship_loops_approval(tmp_path: Path) -> None:
    """The overlay may switch ship-<repo> on, never change its approval (E0801)."""
    assert codes(tree(tmp_path, "schedules:\n  ship-alpha:\n    approval: auto\n")) == ["E0801"]
    on = load_rules(tree(tmp_path / "on", "schedules:\n  ship-alpha:\n    enabled: true\n"))
    assert (on.loops["ship-alpha"].enabled, on.loops["ship-alpha"].approval) == (
        True,
        Approval.WATCHED,
    )
