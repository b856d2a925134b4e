"""The compiler over the golden valid trees (tests/data/rules/valid/) and small inline
trees: what a RuleSet holds, and which mistakes fail closed without cascading."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsl.diagnostics import RulesError, Span
from engine.core.compiler import describe
from engine.core.ruleset import (
    Approval,
    Backoff,
    CatchUp,
    DefinitionRef,
    EmitRule,
    RuleSet,
    Source,
    StopCondition,
    TriggerKind,
)
from engine.loading import Paths, load_rules

VALID = Path(__file__).resolve().parents[1] / "data" / "rules" / "valid"
REGISTRY = VALID / "triggers" / "registry"
ROUTES = VALID / "triggers" / "loops" / "routes.rules"


def compile_case(name: str, monkeypatch: pytest.MonkeyPatch) -> RuleSet:
    """The RuleSet of one valid golden tree, with paths displayed relative to it."""
    monkeypatch.chdir(VALID / name)
    return load_rules(Paths(Path("loops"), Path("registry"), Path("config")))


def write_tree(root: Path, rules: str, **config: str) -> Paths:
    """A tree under `root`: the golden registry and routes, `rules` as loops/t.rules, and
    config files by stem (repos=..., schedule=...)."""
    shutil.copytree(REGISTRY, root / "registry")
    (root / "loops").mkdir()
    shutil.copy(ROUTES, root / "loops" / "routes.rules")
    (root / "loops" / "t.rules").write_text(rules)
    (root / "config").mkdir()
    for stem, text in config.items():
        (root / "config" / f"{stem}.yaml").write_text(text)
    return Paths(root / "loops", root / "registry", root / "config")


def codes(paths: Paths) -> list[tuple[str, int, str]]:
    """(file name, line, code) of every diagnostic, in report order."""
    with pytest.raises(RulesError) as caught:
        load_rules(paths)
    return [(Path(d.span.file).name, d.span.line, d.code) for d in caught.value.diagnostics]


TWO_REPOS = "repos:\n  alpha:\n    github: example/alpha\n  beta:\n    github: example/beta\n"


# ---- the valid golden trees ------------------------------------------------------------------


def test_every_trigger_kind_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Interval, cron with a zone, one-shot, manual and host-clock loops compile to their kinds."""
    rules = compile_case("triggers", monkeypatch)
    kinds = {name: loop.trigger.kind for name, loop in rules.loops.items()}
    assert kinds == {
        "reaper": TriggerKind.INTERVAL,
        "morning": TriggerKind.CRON,
        "launch": TriggerKind.AT,
        "on-demand": TriggerKind.MANUAL,
        "host-triage": TriggerKind.HOST,
    }
    morning = rules.loops["morning"].trigger
    assert (morning.cron, morning.timezone) == ("0 9 * * 1-5", "Europe/Budapest")
    assert rules.loops["launch"].trigger.at == datetime(2026, 12, 1, 9, tzinfo=UTC)
    assert rules.loops["host-triage"].trigger.every_seconds == 86400
    assert [loop.trigger.describe() for loop in rules.loops.values()] == [
        "every 1h",
        'cron "0 9 * * 1-5" in Europe/Budapest',
        "at 2026-12-01T09:00:00+00:00",
        "manual",
        "host_clock 1d",
    ]


def test_every_loop_setting_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Catch-up, lateness, overlap, approval, enablement and the occurrence policy are all kept."""
    reaper = compile_case("triggers", monkeypatch).loops["reaper"]
    assert reaper.description == "recover expired leases"
    assert (reaper.catch_up, reaper.catch_up_cap) == (CatchUp.ALL, 5)
    assert reaper.max_lateness_seconds == 7200
    assert reaper.singleton is False
    assert (reaper.approval, reaper.enabled) == (Approval.AUTO, True)
    assert reaper.policy.budget.daily_runs == 24
    assert reaper.policy.budget.wall_clock_seconds == 600
    assert reaper.policy.backoff == Backoff(30, 3600)
    assert reaper.policy.circuit_breaker == 3
    assert reaper.policy.stop_when == (StopCondition.BUDGET_EXHAUSTED, StopCondition.USER_PAUSED)
    assert reaper.policy.shadow is False
    assert (reaper.source, reaper.origin) == (Source.KERNEL, Span("loops/loops.rules", 2, 6))


def test_loop_defaults_are_the_safe_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loop that says nothing is disabled, watched, singleton, catch-up none, no payload."""
    morning = compile_case("triggers", monkeypatch).loops["morning"]
    assert (morning.enabled, morning.approval, morning.singleton) == (False, Approval.WATCHED, True)
    assert (morning.catch_up, morning.catch_up_cap, morning.max_lateness_seconds) == (
        CatchUp.NONE,
        None,
        None,
    )
    assert morning.payload == {}
    assert (morning.policy.shadow, morning.policy.shadow_declared) == (False, False)


def test_for_block_expands_per_selected_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    """A for block makes its loops once per selected repo, names and payloads filled in."""
    rules = compile_case("repos_chains_webhooks", monkeypatch)
    assert sorted(rules.loops) == ["review-alpha", "review-gamma", "work-alpha", "work-gamma"]
    assert rules.loops["work-gamma"].payload == {"repo": "gamma"}
    assert rules.loops["review-alpha"].payload == {"repo": "alpha-review"}
    assert rules.loops["review-alpha"].trigger.every_seconds == 4 * 3600
    assert rules.repos["beta"].report_only and rules.repos["gamma"].base == "master"


def test_chains_are_keyed_by_definition_and_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each outcome of a chain line is its own edge; `stop` edges emit nothing."""
    rules = compile_case("repos_chains_webhooks", monkeypatch)
    dispatch = DefinitionRef("dispatch", 1)
    assert set(rules.chains) == {
        (dispatch, "PR_OPEN"),
        (dispatch, "NOT_CLAIMED"),
        (dispatch, "FAILED"),
    }
    pr_open = rules.chains[(dispatch, "PR_OPEN")]
    assert (pr_open.stop, len(pr_open.emits)) == (False, 2)
    assert pr_open.emits[1].event_id is not None
    failed = rules.chains[(dispatch, "FAILED")]
    assert (failed.stop, failed.emits) == (True, ())


def test_webhook_table_keeps_lines_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """A webhook table keeps its let, ignore, reject and emit lines in the order written."""
    table = compile_case("repos_chains_webhooks", monkeypatch).webhooks[("github", "pull_request")]
    kinds = [getattr(step, "kind", type(step).__name__) for step in table.steps]
    assert kinds == ["ignore", "ignore", "Let", "reject", "EmitRule"]
    emit = table.steps[-1]
    assert isinstance(emit, EmitRule) and emit.event_type == "factory.work.requested"


def test_human_only_types_and_definitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Types are human-only by registry flag or rule, or through a human-only definition."""
    rules = compile_case("repos_chains_webhooks", monkeypatch)
    assert rules.human_only_types == {"factory.ship.apply.requested", "clock.tick.reaper"}
    assert rules.human_only_definitions == {DefinitionRef("ship-apply", 1)}
    assert rules.is_human_only("clock.tick.reaper")
    assert rules.is_human_only("factory.ship.apply.requested")
    assert not rules.is_human_only("factory.work.requested")


def test_routes_and_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Routes default to watched, and `describe` counts what `engine check` prints."""
    rules = compile_case("repos_chains_webhooks", monkeypatch)
    route = rules.routes["factory.work.requested"]
    assert (route.definition, route.approval) == (DefinitionRef("dispatch", 1), Approval.WATCHED)
    assert rules.definition_for("factory.work.requested") == rules.definitions[route.definition]
    summary = dict(describe(rules))
    assert summary == {
        "loops": 4,
        "enabledLoops": 0,
        "routes": 3,
        "chains": 3,
        "webhookRules": 5,
        "webhookKinds": 1,
        "eventTypes": 3,
        "definitions": 3,
        "repos": 3,
        "digest": rules.digest,
    }
    assert rules.digest.startswith("sha256:")


# ---- fail closed, without cascades ------------------------------------------------------------

FOR_BLOCK = """\
for repo in repos
  loop work-{repo.name}
    evry 30m
    every 30m
    emit factory.work.requestd { repo: repo.name }
"""


def test_for_block_is_checked_without_any_repo(tmp_path: Path) -> None:
    """With no repos configured a for block is still checked: the kernel alone fails closed."""
    assert codes(write_tree(tmp_path, FOR_BLOCK)) == [
        ("t.rules", 3, "E0101"),
        ("t.rules", 5, "E0203"),
    ]


def test_for_block_is_checked_when_its_filter_selects_nothing(tmp_path: Path) -> None:
    """A for block whose filter excludes every repo is still checked."""
    rules = FOR_BLOCK.replace("in repos", "in repos where repo.report_only")
    assert codes(write_tree(tmp_path, rules, repos=TWO_REPOS)) == [
        ("t.rules", 3, "E0101"),
        ("t.rules", 5, "E0203"),
    ]


def test_expanded_mistakes_are_reported_once(tmp_path: Path) -> None:
    """A mistake in a for block is reported once, not once per repo."""
    assert codes(write_tree(tmp_path, FOR_BLOCK, repos=TWO_REPOS)) == [
        ("t.rules", 3, "E0101"),
        ("t.rules", 5, "E0203"),
    ]


def test_bad_trigger_value_is_not_also_a_missing_trigger(tmp_path: Path) -> None:
    """A bad trigger value is reported once, not again as 'no trigger'; the emit is checked."""
    rules = "loop reaper\n  every 60x\n  emit clock.tick.reapr\n"
    assert codes(write_tree(tmp_path, rules)) == [("t.rules", 2, "E0201"), ("t.rules", 3, "E0203")]


def test_overlay_of_a_broken_kernel_loop_is_not_a_new_loop(tmp_path: Path) -> None:
    """An overlay entry for a kernel loop that failed is not misread as a new, incomplete loop."""
    rules = "loop reaper\n  every 60x\n  emit clock.tick.reaper\n"
    schedule = "schedules:\n  reaper:\n    enabled: true\n"
    assert codes(write_tree(tmp_path, rules, schedule=schedule)) == [("t.rules", 2, "E0201")]


def test_broken_route_does_not_leave_its_type_unrouted(tmp_path: Path) -> None:
    """A route with a bad definition is one error, not also 'no route' for each loop using it."""
    paths = write_tree(tmp_path, "loop reaper\n  every 60m\n  emit clock.tick.reaper\n")
    routes = paths.rules / "routes.rules"
    routes.write_text(routes.read_text().replace("reaper@1", "reaper@9"))
    assert codes(paths) == [("routes.rules", 1, "E0502")]


def test_load_errors_stop_before_compiling(tmp_path: Path) -> None:
    """A syntax error is reported alone, without the unknown types its missing rules would cause."""
    paths = write_tree(tmp_path, "loop reaper\n  every 60m\n  emit clock.tick.reaper\n")
    (paths.rules / "routes.rules").write_text("route clock.tick.reaper reaper@1\n")
    assert codes(paths) == [("routes.rules", 1, "E0001")]
