"""`engine check --explain SHAPE`'s pure part (engine.core.shape_explain): every effective
setting of a work-bound loop shape, with the place it came from: the shape's rule lines,
the registry lines of the controller and the browser probe its `work` line names, and
the defaults (an instance's shadow start among them), on small trees."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.core.compiler import compile_rules
from engine.core.loop_explain import Row, UnknownLoop, explain_loop, warnings_of
from engine.core.ruleset import TICK_FIELDS, RuleSet
from engine.core.shape_explain import explain_shape
from engine.loading import Paths, load_tree

DATA = Path(__file__).resolve().parents[1] / "data" / "shapes" / "registry"
ROUTE = "route work.nudged to nudge@1\n"
NUDGE = """\
loop nudge
  description "keep the work moving"
  work continuation controller coder
  every 1h
  emit work.nudged { note: "keep going" }
  cooldown 30m
  backoff base 5m max 2h
  budget daily_runs 12 wall_clock 20m
"""
VENDOR = """\
loop vendor
  work browser_watch probe vendor-status controller reviewer
  cron "*/15 * * * *" in UTC
  emit work.nudged
  cooldown 1h
  backoff base 5m max 1h
  budget daily_runs 48
  shadow false
"""
# A browser probe that writes its timeout and login markers (probes.yaml lines 2-12).
PROBES = """\
probes:
  - id: vendor-status
    kind: browser
    timeout: 20s
    browser:
      allow:
        - https://status.example.com/incidents
        - https://status.example.com/login
      url: https://status.example.com/incidents
      login:
        urls: ["/login\\\\b", "^https://sso\\\\."]
        texts: ["Your session has expired"]
"""


def compiled(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    rules: str,
    probes: str | None = None,
    repos: str | None = None,
) -> RuleSet:
    """The rule set of the shape tests' registry (`probes` as its probes.yaml), `rules`
    as loops/t.rules and `repos` as config/repos.yaml, with the places relative to
    `root`."""
    shutil.copytree(DATA, root / "registry")
    if probes is not None:
        (root / "registry" / "probes.yaml").write_text(probes)
    (root / "loops").mkdir()
    (root / "loops" / "t.rules").write_text(rules)
    (root / "loops" / "routes.rules").write_text(ROUTE)
    (root / "config").mkdir()
    if repos is not None:
        (root / "config" / "repos.yaml").write_text(repos)
    monkeypatch.chdir(root)
    return compile_rules(load_tree(Paths(Path("loops"), Path("registry"), Path("config"))))


def by_setting(rows: list[Row]) -> dict[str, Row]:
    return {row.setting: row for row in rows}


def test_a_continuation_shape_shows_its_controller_from_its_registry_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The work line is the source of the mode and the controller; each of the
    controller's settings comes from its line of registry/controllers.yaml, its token by
    the variable's name only."""
    monkeypatch.setenv("ENGINE_WORK_TOKEN", "s3cret-token-value")
    rows = by_setting(explain_shape(compiled(tmp_path, monkeypatch, NUDGE), "nudge"))
    assert rows["shape"].source == "loops/t.rules:1"
    assert rows["mode"] == Row(
        "mode", "continuation", "loops/t.rules:3", "each firing wakes the controller coder"
    )
    assert (rows["controller"].value, rows["controller"].source) == ("coder", "loops/t.rules:3")
    assert rows["controller"].note == "the entry at registry/controllers.yaml:3"
    found = {
        name: (row.value, row.source)
        for name, row in rows.items()
        if name.startswith("controller ")
    }
    assert found == {
        "controller argv": ('["agent", "exec", "--work={work_id}"]', "registry/controllers.yaml:5"),
        "controller env": ("[]", "default"),
        "controller timeout": ("2h", "registry/controllers.yaml:6"),
        "controller context": ("stdin", "registry/controllers.yaml:7"),
        "controller token_env": ("ENGINE_WORK_TOKEN", "registry/controllers.yaml:8"),
        "controller report": ("http", "registry/controllers.yaml:9"),
    }
    assert "probe" not in rows
    assert not any("s3cret" in f"{row.value} {row.note}" for row in rows.values())


def test_the_shapes_own_settings_name_their_rule_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trigger, emit and payload, cooldown, backoff and each written budget key come from
    the shape's lines; what it leaves out is a default, as on a loop."""
    rows = by_setting(explain_shape(compiled(tmp_path, monkeypatch, NUDGE), "nudge"))
    written = {
        name: (row.value, row.source)
        for name, row in rows.items()
        if row.source.startswith("loops/t.rules") and not name.startswith(("controller", "mode"))
    }
    assert written == {
        "shape": ("nudge", "loops/t.rules:1"),
        "description": ('"keep the work moving"', "loops/t.rules:2"),
        "trigger": ("every 1h", "loops/t.rules:4"),
        "emit": ("work.nudged", "loops/t.rules:5"),
        "payload": ('{note: "keep going"}', "loops/t.rules:5"),
        "cooldown": ("30m", "loops/t.rules:6"),
        "backoff": ("base 5m max 2h", "loops/t.rules:7"),
        "budget daily_runs": ("12", "loops/t.rules:8"),
        "budget wall_clock": ("20m", "loops/t.rules:8"),
    }
    assert rows["route"].value == "work.nudged -> nudge@1"
    assert (rows["approval"].value, rows["approval"].source) == ("watched", "default")
    assert (rows["budget jobs_per_occurrence"].value, rows["overlap"].value) == ("1", "skip")
    assert "enabled" not in rows  # an instance's state is its binding's, not the block's


def test_every_instance_starts_in_shadow_and_graduates_only_by_shadow_false(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the block says, an instance starts in shadow with one active occurrence;
    `graduates` is true only where the rule file writes `shadow false`, and names it."""
    rules = compiled(tmp_path, monkeypatch, NUDGE + "\n" + VENDOR + "\n" + bound("kept"))
    start = Row(
        "shadow",
        "true",
        "default",
        "every instance starts in shadow, with one active occurrence, whatever the block says",
    )
    nudge, vendor, kept = (by_setting(explain_shape(rules, n)) for n in ("nudge", "vendor", "kept"))
    assert nudge["shadow"] == vendor["shadow"] == kept["shadow"] == start
    assert (nudge["graduates"].value, nudge["graduates"].source) == ("false", "default")
    assert (vendor["graduates"].value, vendor["graduates"].source) == ("true", "loops/t.rules:17")
    assert "may graduate out of shadow" in (vendor["graduates"].note or "")
    assert (kept["graduates"].value, kept["graduates"].source) == ("false", "loops/t.rules:27")


def bound(name: str) -> str:
    """A shape that writes `shadow true` on its last line."""
    return NUDGE.replace("loop nudge", f"loop {name}") + "  shadow true\n"


def test_a_browser_shape_shows_its_probe_from_its_registry_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's page, allowlist, selector and timeout, each from its line of
    registry/probes.yaml (or `default`), and its login markers by count only."""
    rules = compiled(tmp_path, monkeypatch, VENDOR, probes=PROBES)
    rows = by_setting(explain_shape(rules, "vendor"))
    assert rows["mode"].note == (
        "each firing runs the browser probe vendor-status; only a changed page, or a login"
        " marker, wakes the controller reviewer"
    )
    assert rows["controller context"].value == "file"
    assert rows["controller timeout"] == Row(
        "controller timeout", "1h", "default", "the default bound of one wake"
    )
    assert (rows["probe"].source, rows["probe"].note) == (
        "loops/t.rules:2",
        "the entry at registry/probes.yaml:2",
    )
    found = {
        name: (row.value, row.source) for name, row in rows.items() if name.startswith("probe ")
    }
    assert found == {
        "probe url": ("https://status.example.com/incidents", "registry/probes.yaml:9"),
        "probe allow": (
            '["https://status.example.com/incidents", "https://status.example.com/login"]',
            "registry/probes.yaml:6",
        ),
        "probe selector": ("body", "default"),
        "probe timeout": ("20s", "registry/probes.yaml:4"),
        "probe login markers": ("3 (2 url patterns, 1 text)", "registry/probes.yaml:10"),
    }
    assert not any("sso" in f"{row.value} {row.note}" for row in rows.values())


def test_a_probe_without_login_markers_and_a_watch_without_a_controller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No `login:` block: no marker (a login is never detected). A browser_watch shape
    without a controller says a change wakes nothing."""
    rules = compiled(tmp_path, monkeypatch, VENDOR.replace(" controller reviewer", ""))
    rows = by_setting(explain_shape(rules, "vendor"))
    assert rows["probe login markers"] == Row(
        "probe login markers", "none", "default", "a login is never detected"
    )
    assert rows["probe selector"] == Row(
        "probe selector", "main .incidents", "registry/probes.yaml:9"
    )
    assert rows["controller"] == Row(
        "controller", "none", "loops/t.rules:2", "no controller: a changed page wakes nothing"
    )
    assert rows["mode"].note == "each firing runs the browser probe vendor-status; nothing wakes"


def test_the_tick_fields_are_the_engines_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An instance's tick is the static payload and the engine's tick fields; the row
    names those fields and the instance's loop name."""
    rows = by_setting(explain_shape(compiled(tmp_path, monkeypatch, NUDGE), "nudge"))
    tick = rows["tick fields"]
    assert set(tick.value.strip("{}").split(", ")) == TICK_FIELDS
    assert tick.source == "default"
    assert "nudge@work-ID" in (tick.note or "")


def test_a_shape_is_not_a_loop_to_explain_as_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop explanation refuses a shape's name, and the shape explanation a loop's."""
    loop = "loop plain\n  every 1h\n  emit work.nudged\n"
    rules = compiled(tmp_path, monkeypatch, NUDGE + "\n" + loop)
    with pytest.raises(UnknownLoop):
        explain_loop(rules, "nudge")
    with pytest.raises(UnknownLoop) as caught:
        explain_shape(rules, "plain")
    assert caught.value.name == "plain"


def test_a_shape_of_a_for_block_is_named_by_its_expansion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `for` block's shape is explained per repo, from the template's lines."""
    lines = NUDGE.replace("loop nudge", "loop nudge-{repo.name}").splitlines()
    rules_text = "for repo in repos\n" + "".join(f"  {line}\n" for line in lines)
    repos = "repos:\n  alpha:\n    github: example/alpha\n"
    rules = compiled(tmp_path, monkeypatch, rules_text, repos=repos)
    rows = by_setting(explain_shape(rules, "nudge-alpha"))
    assert rows["shape"].source == "loops/t.rules:2"
    assert (rows["shape"].note or "").endswith(
        "declared in a for block: its lines are the template's"
    )
    assert (rows["cooldown"].source, rows["payload"].value) == (
        "loops/t.rules:7",
        '{note: "keep going"}',
    )


def test_an_old_spelling_on_a_shapes_lines_is_one_of_its_warnings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The W0901 of an old spelling on a shape's line is the shape's warning, and the
    row names the setting in the one spelling."""
    rules = compiled(tmp_path, monkeypatch, NUDGE + "  catch-up last\n")
    assert [(w.code, w.span.line) for w in warnings_of(rules, "nudge")] == [("W0901", 9)]
    assert by_setting(explain_shape(rules, "nudge"))["catch_up"] == Row(
        "catch_up", "last", "loops/t.rules:9"
    )
