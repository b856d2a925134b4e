"""`engine check --explain`'s pure part (engine.core.loop_explain): every effective
setting of a loop, under its name in the one spelling, with the place it came from (a
rule line, a default, an overlay line, the registry) on small trees."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from dsl.format import format_text
from engine.core.compiler import compile_rules
from engine.core.loop_explain import Row, UnknownLoop, explain_loop
from engine.core.provenance import Places
from engine.core.ruleset import RuleSet
from engine.loading import Paths, load_tree

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "rules" / "valid" / "triggers"
# In the golden registry: reaper@1 is read-only (`mutating: false` on line 6),
# dispatch@1 mutating (line 12); factory.ship.apply.requested is human_only (line 7).
READ_ONLY_AT = "registry/definitions.yaml:6"
MUTATING_AT = "registry/definitions.yaml:12"
ROUTES = "route clock.tick.reaper to reaper@1\nroute factory.work.requested to dispatch@1\n"
TWO_REPOS = "repos:\n  alpha:\n    github: example/alpha\n  beta:\n    github: example/beta\n"


def compiled(
    root: Path, monkeypatch: pytest.MonkeyPatch, rules: str, routes: str = ROUTES, **config: str
) -> RuleSet:
    """The rule set of a tree under `root` (the golden registry, `routes` as
    loops/routes.rules, `rules` as loops/t.rules), with paths shown relative to it."""
    shutil.copytree(GOLDEN / "registry", root / "registry")
    (root / "loops").mkdir()
    (root / "loops" / "routes.rules").write_text(routes)
    (root / "loops" / "t.rules").write_text(rules)
    (root / "config").mkdir()
    for stem, text in config.items():
        (root / "config" / f"{stem}.yaml").write_text(text)
    monkeypatch.chdir(root)
    return compile_rules(load_tree(Paths(Path("loops"), Path("registry"), Path("config"))))


def rows_by_setting(rules: RuleSet, loop: str) -> dict[str, Row]:
    rows = explain_loop(rules, loop)
    return {row.setting: row for row in rows if row.setting != "triage"}


def test_a_loop_that_says_little_shows_every_default_and_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = compiled(tmp_path, monkeypatch, "loop r\n  every 60m\n  emit clock.tick.reaper\n")
    rows = rows_by_setting(rules, "r")
    assert rows["loop"] == Row("loop", "r", "loops/t.rules:1")
    assert rows["trigger"] == Row("trigger", "every 1h", "loops/t.rules:2")
    assert rows["emit"] == Row("emit", "clock.tick.reaper", "loops/t.rules:3")
    assert (rows["route"].value, rows["route"].source) == (
        "clock.tick.reaper -> reaper@1",
        "loops/routes.rules:1",
    )
    assert rows["definition"] == Row("definition", "reaper@1 (read-only)", READ_ONLY_AT)
    defaults = {name: row.value for name, row in rows.items() if row.source == "default"}
    assert defaults == {
        "description": '""',
        "payload": "{}",
        "catch_up": "none",
        "max_lateness": "none",
        "overlap": "skip",
        "approval": "watched",
        "approval applied": "watched",
        "enabled": "false",
        "shadow": "false",
        "budget jobs_per_occurrence": "1",
        "budget retries_per_occurrence": "2",
        "budget wall_clock": "unlimited",
        "budget daily_wall_clock": "unlimited",
        "budget daily_runs": "unlimited",
        "backoff": "base 1m max 1h",
        "circuit_breaker": "none",
        "stop_when": "release_freeze repository_disabled",
    }
    assert rows["enabled"].note == "loops ship disabled"
    assert (
        rows["shadow"].note == f"route clock.tick.reaper -> reaper@1 is read-only ({READ_ONLY_AT})"
    )
    assert rows["stop_when"].note == "release_freeze and repository_disabled always apply"
    overlap = rows["overlap"].note or ""
    assert "previous_run_in_flight" in overlap and "occurrence_active" in overlap
    (triage,) = [row for row in explain_loop(rules, "r") if row.setting == "triage"]
    assert (triage.value, triage.source) == ("run_readonly_check", "default")
    assert (
        triage.note == f"no triage block: the default for read-only work, reaper@1 ({READ_ONLY_AT})"
    )


WRITTEN = """\
loop r
  description "every setting written"
  every 60m
  emit clock.tick.reaper { repo: "alpha" }
  catch-up all cap 6
  max-lateness 12h
  singleton
  on-active coalesce
  approval auto
  enabled
  budget retries-per-occurrence 0 daily-runs 4 wall-clock 30m
  backoff base 30s max 10m
  circuit-breaker 3
  stop-when user_paused end_date=2026-12-31 occurrence_count=10
  shadow on
"""

# WRITTEN in the one spelling, as `engine fmt --write` rewrites it.
WRITTEN_NOW = format_text(WRITTEN).text


def test_each_written_setting_names_its_rule_line_under_its_new_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = compiled(tmp_path, monkeypatch, WRITTEN)
    found = {row.setting: (row.value, row.source) for row in explain_loop(rules, "r")}
    at = "loops/t.rules:"
    assert found == {
        "loop": ("r", f"{at}1"),
        "description": ('"every setting written"', f"{at}2"),
        "trigger": ("every 1h", f"{at}3"),
        "emit": ("clock.tick.reaper", f"{at}4"),
        "payload": ('{repo: "alpha"}', f"{at}4"),
        "route": ("clock.tick.reaper -> reaper@1", "loops/routes.rules:1"),
        "definition": ("reaper@1 (read-only)", READ_ONLY_AT),
        "catch_up": ("all cap 6", f"{at}5"),
        "max_lateness": ("12h", f"{at}6"),
        "overlap": ("buffer_one", f"{at}7, {at}8"),  # `singleton` + `on-active coalesce`
        "approval": ("auto", f"{at}9"),
        "approval applied": ("auto", f"{at}9"),
        "enabled": ("true", f"{at}10"),
        "budget jobs_per_occurrence": ("1", "default"),
        "budget retries_per_occurrence": ("0", f"{at}11"),
        "budget wall_clock": ("30m", f"{at}11"),
        "budget daily_wall_clock": ("unlimited", "default"),
        "budget daily_runs": ("4", f"{at}11"),
        "backoff": ("base 30s max 10m", f"{at}12"),
        "circuit_breaker": ("3", f"{at}13"),
        "stop_when": (
            "user_paused end_date=2026-12-31 occurrence_count=10 release_freeze "
            "repository_disabled",
            f"{at}14",
        ),
        "shadow": ("true", f"{at}15"),
        "triage": ("run_readonly_check", "default"),
    }


@pytest.mark.parametrize(
    ("lines", "overlap"),
    [
        ("  overlapping\n", "allow"),
        ("  overlapping\n  budget active-occurrences 3\n", "allow max 3"),
        ("  on-active skip\n", "skip"),
        ("  overlapping\n  on-active coalesce\n", "(no overlap value means: overlapping, "),
    ],
)
def test_the_old_overlap_settings_show_as_the_one_overlap_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: str, overlap: str
) -> None:
    rules = compiled(
        tmp_path, monkeypatch, "loop r\n  every 60m\n  emit clock.tick.reaper\n" + lines
    )
    row = rows_by_setting(rules, "r")["overlap"]
    assert row.value.startswith(overlap)
    written = len(lines.splitlines())
    assert row.source == ", ".join(f"loops/t.rules:{4 + i}" for i in range(written))


def test_allow_max_says_what_a_trigger_beyond_the_limit_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = "loop r\n  every 60m\n  emit clock.tick.reaper\n  overlap allow max 3\n"
    note = rows_by_setting(compiled(tmp_path, monkeypatch, loop), "r")["overlap"].note
    assert note == (
        "runs overlap; 3 active occurrences per repo "
        "(else no-op occurrence_active, linked to the active one)"
    )


def test_shadow_follows_a_mutating_definition_unless_the_rule_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = compiled(
        tmp_path,
        monkeypatch,
        "loop w\n  every 1h\n  emit factory.work.requested\n\n"
        "loop g\n  every 1h\n  emit factory.work.requested\n  shadow false\n",
    )
    w = rows_by_setting(rules, "w")["shadow"]
    assert (w.value, w.source) == ("true", "default")
    assert w.note == f"route factory.work.requested -> dispatch@1 is mutating ({MUTATING_AT})"
    g = rows_by_setting(rules, "g")["shadow"]
    assert (g.value, g.source, g.note) == ("false", "loops/t.rules:8", None)
    assert rows_by_setting(rules, "g")["definition"].value == "dispatch@1 (mutating)"


def test_a_human_only_event_type_decides_the_approval_whatever_the_loop_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    routes = ROUTES + "route factory.ship.apply.requested to ship-apply@1\n"
    loop = "loop s\n  manual\n  emit factory.ship.apply.requested\n  approval watched\n"
    rows = rows_by_setting(compiled(tmp_path, monkeypatch, loop, routes), "s")
    assert (rows["approval"].value, rows["approval"].source) == ("watched", "loops/t.rules:4")
    applied = rows["approval applied"]
    # declared `human_only: true` in the registry (no human-only line in the rules)
    assert (applied.value, applied.source) == ("human_only", "registry/event-types.yaml:7")
    assert (applied.note or "").startswith("event type factory.ship.apply.requested is human-only")


def test_a_human_only_definition_line_is_the_source_of_the_approval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = "human_only dispatch@1\n\nloop w\n  every 1h\n  emit factory.work.requested\n"
    applied = rows_by_setting(compiled(tmp_path, monkeypatch, rules), "w")["approval applied"]
    assert (applied.value, applied.source) == ("human_only", "loops/t.rules:1")
    assert (applied.note or "").startswith("definition dispatch@1 is human-only")


SCHEDULE = """\
schedules:
  r:
    enabled: true
    every: 4h
    payload: {repo: beta}
  extra:
    emit: clock.tick.reaper
    cron: "0 6 * * 1-5"
    timezone: UTC
    enabled: false
"""


def test_overlay_lines_are_the_source_of_what_the_overlay_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = 'loop r\n  every 60m\n  emit clock.tick.reaper { repo: "alpha" }\n  enabled false\n'
    rules = compiled(tmp_path, monkeypatch, loop, schedule=SCHEDULE)
    rows = rows_by_setting(rules, "r")
    assert (rows["enabled"].value, rows["enabled"].source) == ("true", "config/schedule.yaml:3")
    assert rows["enabled"].note == "the overlay overrides the rule file (loops/t.rules:4)"
    assert (rows["trigger"].value, rows["trigger"].source) == ("every 4h", "config/schedule.yaml:4")
    assert (
        rows["trigger"].note == "the overlay changes the cadence; the rule line is loops/t.rules:2"
    )
    assert (rows["payload"].value, rows["payload"].source) == (
        '{repo: "beta"}',
        "config/schedule.yaml:5",
    )
    assert rows["catch_up"].source == "default"  # what the overlay left alone


def test_an_overlay_loop_is_explained_from_its_overlay_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = "loop r\n  every 60m\n  emit clock.tick.reaper\n"
    rows = rows_by_setting(compiled(tmp_path, monkeypatch, loop, schedule=SCHEDULE), "extra")
    assert rows["loop"] == Row(
        "loop",
        "extra",
        "config/schedule.yaml:6",
        "a loop of the instance overlay, not of a reviewed rule file",
    )
    assert (rows["trigger"].value, rows["trigger"].source) == (
        'cron "0 6 * * 1-5" in UTC',
        "config/schedule.yaml:8",
    )
    assert (rows["emit"].source, rows["enabled"].source) == (
        "config/schedule.yaml:7",
        "config/schedule.yaml:10",
    )
    assert rows["approval"].note == "an overlay loop is always watched"
    assert (rows["shadow"].note or "").endswith("the overlay cannot change shadow")


def test_a_for_block_loop_is_named_by_its_expansion_and_sourced_by_the_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = compiled(
        tmp_path,
        monkeypatch,
        "for repo in repos\n  loop work-{repo.name}\n    every 30m\n"
        "    emit factory.work.requested { repo: repo.name }\n    catch_up last\n",
        repos=TWO_REPOS,
    )
    alpha, beta = rows_by_setting(rules, "work-alpha"), rows_by_setting(rules, "work-beta")
    assert alpha["loop"].source == beta["loop"].source == "loops/t.rules:2"
    assert alpha["loop"].note == "declared in a for block: its lines are the template's"
    assert (alpha["payload"].value, beta["payload"].value) == ('{repo: "alpha"}', '{repo: "beta"}')
    assert alpha["catch_up"] == beta["catch_up"] == Row("catch_up", "last", "loops/t.rules:5")
    with pytest.raises(UnknownLoop):
        explain_loop(rules, "work-{repo.name}")


TRIAGE = """\
loop w
  every 1h
  emit factory.work.requested
  triage
    nothing_to_do if in_flight > 0 and not (paused or freeze) note "busy"
    human_attention_required unless failures < 2
    create_candidate_finding if last_outcome in ["FAILED", "BLOCKED"] \
      key "flaky:{payload.repo}" category flaky
"""


def test_triage_lines_are_shown_as_written_then_the_default_that_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [
        r
        for r in explain_loop(compiled(tmp_path, monkeypatch, TRIAGE), "w")
        if "triage" in r.setting
    ]
    assert [(r.setting, r.value, r.source, r.note) for r in rows] == [
        (
            "triage",
            "nothing_to_do if in_flight > 0 and not (paused or freeze)",
            "loops/t.rules:5",
            "busy",
        ),
        ("triage", "human_attention_required unless failures < 2", "loops/t.rules:6", None),
        (
            "triage",
            'create_candidate_finding if last_outcome in ["FAILED", "BLOCKED"] key '
            '"flaky:{payload.repo}" category flaky',
            "loops/t.rules:7",
            None,
        ),
        (
            "triage default",
            "run_repair_task",
            "default",
            f"when no line matches: the default for mutating work, dispatch@1 ({MUTATING_AT})",
        ),
    ]


def test_a_triage_line_without_a_guard_leaves_no_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = "loop w\n  every 1h\n  emit factory.work.requested\n  triage\n    nothing_to_do\n"
    rows = [
        r for r in explain_loop(compiled(tmp_path, monkeypatch, loop), "w") if "triage" in r.setting
    ]
    assert [(r.setting, r.value) for r in rows] == [("triage", "nothing_to_do")]


def test_an_unknown_loop_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rules = compiled(tmp_path, monkeypatch, "loop r\n  every 60m\n  emit clock.tick.reaper\n")
    with pytest.raises(UnknownLoop) as caught:
        explain_loop(rules, "rr")
    assert caught.value.name == "rr"


def test_places_change_neither_equality_nor_the_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provenance rides beside the meaning: a rule set without it is equal."""
    rules = compiled(tmp_path, monkeypatch, WRITTEN_NOW)
    assert rules.places.loops["r"].settings  # recorded
    bare = replace(rules, places=Places())
    assert bare == rules
    assert bare.digest == rules.digest
    assert bare.loops == rules.loops
