"""The compiler's part of the occurrence engine: triage tables, on-active, budget
defaults, stop-when values, the shadow default, the registry's classify/workspace and
the repos' disabled/frozen flags (tests/data/rules/valid/occurrences/)."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from dsl import expr as ex
from dsl.diagnostics import RulesError
from engine.core.compiler import compile_rules, release_freeze
from engine.core.registry import Workspace
from engine.core.ruleset import (
    Backoff,
    Budget,
    OnActive,
    RuleSet,
    Source,
    StopCondition,
    max_active,
)
from engine.core.triage import TriageDecision
from engine.loading import Paths, load_rules, load_tree

ROOT = Path(__file__).resolve().parents[2]
VALID = ROOT / "tests" / "data" / "rules" / "valid"
CASE = VALID / "occurrences"


@pytest.fixture(scope="module")
def rules() -> RuleSet:
    return load_rules(Paths(CASE / "loops", CASE / "registry", CASE / "config"))


def write_tree(root: Path, text: str, **config: str) -> Paths:
    """The occurrences case's registry and routes, `text` as loops/t.rules, config files."""
    shutil.copytree(CASE / "registry", root / "registry")
    (root / "loops").mkdir()
    shutil.copy(CASE / "loops" / "routes.rules", root / "loops" / "routes.rules")
    (root / "loops" / "t.rules").write_text(text)
    (root / "config").mkdir()
    for stem, body in config.items():
        (root / "config" / f"{stem}.yaml").write_text(body)
    return Paths(root / "loops", root / "registry", root / "config")


def codes(paths: Paths) -> list[tuple[int, int, str]]:
    with pytest.raises(RulesError) as caught:
        load_rules(paths)
    return [(d.span.line, d.span.column, d.code) for d in caught.value.diagnostics]


LOOP = 'loop r\n  every 1h\n  emit factory.work.requested { repo: "alpha" }\n'


# ---- triage tables ---------------------------------------------------------------------------


def test_triage_lines_compile_in_order(rules: RuleSet) -> None:
    table = rules.loops["repair"].triage
    assert [r.decision for r in table] == [
        TriageDecision.NOTHING_TO_DO,
        TriageDecision.HUMAN_ATTENTION_REQUIRED,
        TriageDecision.CREATE_CANDIDATE_FINDING,
        TriageDecision.CREATE_CANDIDATE_FINDING,
        TriageDecision.RUN_REPAIR_TASK,
    ]
    assert {Path(r.origin.file).name for r in table} == {"loops.rules"}
    assert [(r.origin.line, r.origin.column) for r in table] == [(n, 5) for n in range(13, 18)]
    assert [r.note for r in table] == [
        "a run is still in flight",
        "two failures in a row",
        None,
        None,
        None,
    ]
    assert [r.negate for r in table] == [False, False, False, True, False]
    assert [r.category for r in table] == [None, None, "flaky", "general", None]
    assert table[-1].guard is None and table[-1].key is None
    assert isinstance(table[2].key, ex.Template)
    assert rules.loops["quiet"].triage == ()


def test_a_loop_has_one_triage_table(tmp_path: Path) -> None:
    text = LOOP + "  triage\n    run_repair_task\n  triage\n    nothing_to_do\n"
    assert codes(write_tree(tmp_path, text)) == [(6, 3, "E0102")]


def test_triage_options_come_in_order(tmp_path: Path) -> None:
    """`note`, `key`, `category`, in this order (a syntax error otherwise)."""
    text = LOOP + '  triage\n    nothing_to_do note "x" if in_flight > 0\n'
    assert codes(write_tree(tmp_path, text)) == [(5, 28, "E0001")]


def test_a_bad_key_template_is_located(tmp_path: Path) -> None:
    text = LOOP + '  triage\n    create_candidate_finding key "a:{payload.repo"\n'
    assert codes(write_tree(tmp_path, text)) == [(5, 37, "E0602")]  # at the brace


def test_triage_names_checked_in_for_blocks_too(tmp_path: Path) -> None:
    """Inside a for block a triage rule reads the snapshot, not the loop variable."""
    text = (
        "for r in repos\n  loop w-{r.name}\n    every 1h\n"
        "    emit factory.work.requested { repo: r.name }\n"
        "    triage\n      nothing_to_do if r.frozen\n"
    )
    assert codes(write_tree(tmp_path, text)) == [(6, 24, "E0601")]


def test_every_snapshot_name_and_field_is_accepted(tmp_path: Path) -> None:
    guards = [
        "payload.anything.below",
        'loop == "r"',
        "repo.name and repo.github and repo.disabled and repo.frozen and repo.report_only",
        "in_flight > 0 or active > 0 or failures > 0 or nothing_streak > 0",
        'last_outcome == "FAILED" or findings > 1',
        "budget.daily_runs_used > 1 and budget.daily_runs_left == 0",
        "budget.daily_wall_clock_used > 1 and budget.daily_wall_clock_left == 0",
        "paused or freeze",
    ]
    lines = "".join(f"    nothing_to_do if {g}\n" for g in guards)
    rules = load_rules(write_tree(tmp_path, LOOP + "  triage\n" + lines))
    assert len(rules.loops["r"].triage) == len(guards)


# ---- on-active, budgets, stop-when, backoff --------------------------------------------------


def test_occurrence_settings(rules: RuleSet) -> None:
    repair, quiet, check = rules.loops["repair"], rules.loops["quiet"], rules.loops["check"]
    assert (max_active(repair), max_active(quiet), max_active(check)) == (1, None, 1)
    assert (repair.on_active, quiet.on_active, check.on_active) == (
        OnActive.COALESCE,
        OnActive.RETURN,
        OnActive.RETURN,
    )
    assert repair.policy.budget == Budget(  # `overlap buffer_one`: the default limit, 1
        active_occurrences=None,
        retries_per_occurrence=2,
        daily_runs=4,
        wall_clock_seconds=1800,
    )
    assert repair.policy.backoff == Backoff(60, 3600)
    assert repair.policy.circuit_breaker == 3
    assert repair.policy.stop_when == (
        StopCondition.RELEASE_FREEZE,
        StopCondition.REPOSITORY_DISABLED,
        StopCondition.USER_PAUSED,
        StopCondition.END_DATE,
        StopCondition.OCCURRENCE_COUNT,
    )
    assert repair.policy.end_at == datetime(2027, 1, 1, tzinfo=UTC)  # the whole of 12-31
    assert repair.policy.max_occurrences == 50
    plus_one = timezone(timedelta(hours=1))
    assert check.policy.end_at == datetime(2026, 12, 31, 18, tzinfo=plus_one)
    assert quiet.policy.end_at is None and quiet.policy.max_occurrences is None


def test_budget_defaults_and_max_active(rules: RuleSet) -> None:
    """active-occurrences: 1 for a singleton, unlimited for an overlapping loop; 2 retries."""
    quiet, check = rules.loops["quiet"], rules.loops["check"]
    assert quiet.policy.budget == Budget() == check.policy.budget
    assert Budget().active_occurrences is None and Budget().retries_per_occurrence == 2
    assert (quiet.singleton, max_active(quiet)) == (False, None)
    assert (check.singleton, max_active(check)) == (True, 1)
    assert max_active(rules.loops["repair"]) == 1


def test_declared_active_occurrences_win_over_the_default(tmp_path: Path) -> None:
    text = LOOP + "  overlap allow max 3\n  budget retries_per_occurrence 0\n"
    loop = load_rules(write_tree(tmp_path, text)).loops["r"]
    assert max_active(loop) == 3 and loop.policy.budget.retries_per_occurrence == 0


# ---- shadow ----------------------------------------------------------------------------------


def test_shadow_default_follows_the_routed_definition(rules: RuleSet) -> None:
    """Mutating and silent: shadow. `shadow false` keeps it off; read-only stays off."""
    shadow = {
        name: (loop.policy.shadow, loop.policy.shadow_declared)
        for name, loop in rules.loops.items()
    }
    assert shadow == {
        "repair": (False, True),  # mutating, `shadow false`
        "quiet": (True, False),  # mutating, silent: the default
        "check": (False, False),  # read-only, silent
        "check-shadow": (True, True),  # read-only, `shadow true`
    }


def test_an_overlay_loop_of_mutating_work_runs_in_shadow(tmp_path: Path) -> None:
    schedule = (
        "schedules:\n  extra:\n    emit: factory.work.requested\n    every: 1h\n"
        "    payload: {repo: alpha}\n  r:\n    enabled: true\n"
    )
    rules = load_rules(write_tree(tmp_path, LOOP + "  shadow false\n", schedule=schedule))
    extra, kernel = rules.loops["extra"], rules.loops["r"]
    assert extra.source is Source.OVERLAY and extra.policy.shadow is True
    assert kernel.enabled and kernel.policy.shadow is False


def test_shipped_kernel_loops_that_act_say_shadow_off(tmp_path: Path) -> None:
    """The reaper, the triage/reaper bridge loops and merge-<repo> say `shadow false`;
    the mutating work-<repo> and factory-dispatch run in shadow until graduated."""
    config = tmp_path / "config"
    config.mkdir()
    shutil.copy(ROOT / "config" / "repos.example.yaml", config / "repos.yaml")
    shipped = load_rules(Paths(ROOT / "loops", ROOT / "registry", config))
    off = {n for n, loop in shipped.loops.items() if loop.policy.shadow_declared}
    assert not any(shipped.loops[n].policy.shadow for n in off)
    merges = {n for n in shipped.loops if n.startswith("merge-")}
    assert off == {"reaper", "factory-triage", "factory-reaper", *merges}
    shadow = {n for n, loop in shipped.loops.items() if loop.policy.shadow}
    works = {n for n in shipped.loops if n.startswith("work-")}
    assert shadow == {"factory-dispatch", *works}


# ---- registry and configuration --------------------------------------------------------------


def test_classify_and_workspace(rules: RuleSet) -> None:
    reaper = next(d for ref, d in rules.definitions.items() if ref.id == "reaper")
    assert reaper.classify == {"STUCK": "conflict", "FAILED": "infrastructure_failure"}
    assert reaper.workspace == Workspace(path="/srv/{repo}", isolate="worktree")
    dispatch = next(d for ref, d in rules.definitions.items() if ref.id == "dispatch")
    assert (dispatch.classify, dispatch.workspace) == ({}, None)
    assert Workspace(path="/x").isolate == "none"


def test_repos_disabled_and_frozen(rules: RuleSet) -> None:
    alpha, beta, gamma = (rules.repos[n] for n in ("alpha", "beta", "gamma"))
    assert (alpha.disabled, alpha.frozen) == (True, False)
    assert (beta.disabled, beta.frozen) == (False, True)
    assert (gamma.disabled, gamma.frozen) == (False, False)
    assert beta.as_snapshot() == {
        "name": "beta",
        "github": "example/beta",
        "disabled": False,
        "frozen": True,
        "report_only": False,
    }
    assert alpha.as_scope()["disabled"] is True and alpha.as_scope()["configured"] is True


def test_a_repo_flag_must_be_a_bool(tmp_path: Path) -> None:
    repos = "repos:\n  alpha:\n    github: example/alpha\n    frozen: sometimes\n"
    paths = write_tree(tmp_path, LOOP, repos=repos)
    with pytest.raises(RulesError) as caught:
        load_rules(paths)
    assert [(d.span.line, d.code) for d in caught.value.diagnostics] == [(4, "E0902")]


def test_release_freeze_is_off_unless_the_loader_sets_it(tmp_path: Path) -> None:
    """The rule set carries config/schedule.yaml's `release_freeze` as the loader reads
    it onto the tree; without it, there is no freeze."""
    tree = load_tree(write_tree(tmp_path, LOOP))
    assert compile_rules(tree).release_freeze is False
    tree.release_freeze = True  # type: ignore[attr-defined]  # what the loader sets
    assert release_freeze(tree) is True
    assert compile_rules(tree).release_freeze is True


def test_fixed_shape_names_have_only_their_fields(tmp_path: Path) -> None:
    """`repo` and `budget` fields are plain values: a path below one is refused."""
    text = LOOP + "  triage\n    nothing_to_do if repo.name.first or budget[0]\n"
    assert codes(write_tree(tmp_path, text)) == [(5, 22, "E0601"), (5, 41, "E0601")]
