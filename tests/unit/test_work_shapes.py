"""Work-bound loop shapes in the rules (`work MODE ...` in a loop block) and the
controller registry (registry/controllers.yaml): what compiles, onto which fields, and
every way a shape or a controller entry fails to load."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dsl.diagnostics import RulesError
from engine.core.compile_loops import tick_sample
from engine.core.ruleset import TICK_FIELDS, Trigger, TriggerKind, WorkMode
from engine.loading import Paths, load_rules

DATA = Path(__file__).resolve().parents[1] / "data" / "shapes"
BOUNDS = """  cooldown 30m
  backoff base 5m max 2h
  budget daily_runs 12
"""
NUDGE = (
    """
loop nudge
  work continuation controller coder
  every 1h
  emit work.nudged { note: "keep going" }
  approval watched
"""
    + BOUNDS
)
WATCH = (
    """
loop vendor
  work browser_watch probe vendor-status controller reviewer
  cron "*/15 * * * *" in UTC
  emit work.nudged
"""
    + BOUNDS
)
KEEPALIVE = (
    """
loop session
  work browser_keepalive probe vendor-status
  every 20m
  emit work.nudged
"""
    + BOUNDS
)
ROUTE = "route work.nudged to nudge@1\n"


def tree(
    root: Path, rules: str, controllers: str | None = None, schedule: str | None = None
) -> Paths:
    """The shape tests' registry (or `controllers` as its controllers.yaml) and `rules`."""
    shutil.copytree(DATA / "registry", root / "registry")
    if controllers is not None:
        (root / "registry" / "controllers.yaml").write_text(controllers)
    (root / "loops").mkdir()
    (root / "loops" / "t.rules").write_text(rules + ROUTE)
    (root / "config").mkdir()
    if schedule is not None:
        (root / "config" / "schedule.yaml").write_text(schedule)
    return Paths(root / "loops", root / "registry", root / "config")


def diagnostics(paths: Paths) -> list[tuple[str, int, int, str, str]]:
    with pytest.raises(RulesError) as caught:
        load_rules(paths)
    return [
        (Path(d.span.file).name, d.span.line, d.span.column, d.code, d.message)
        for d in caught.value.diagnostics
    ]


# ---- shapes that compile ---------------------------------------------------------------


def test_each_mode_compiles_to_a_shape_and_never_to_a_loop(tmp_path: Path) -> None:
    """A loop block with a `work` line is a shape in `work_shapes` with its mode, its
    controller and probe, its trigger and cooldown; `loops` does not hold it, so nothing
    fires it."""
    rules = load_rules(tree(tmp_path, NUDGE + WATCH + KEEPALIVE))
    assert dict(rules.loops) == {}
    nudge, vendor, session = (rules.work_shapes[n] for n in ("nudge", "vendor", "session"))
    assert (nudge.mode, nudge.controller, nudge.probe) == (WorkMode.CONTINUATION, "coder", None)
    assert nudge.trigger == Trigger(TriggerKind.INTERVAL, every_seconds=3600)
    assert nudge.cooldown_seconds == 1800
    assert (vendor.mode, vendor.controller, vendor.probe) == (
        WorkMode.BROWSER_WATCH,
        "reviewer",
        "vendor-status",
    )
    assert vendor.trigger.describe() == 'cron "*/15 * * * *" in UTC'
    assert (session.mode, session.controller, session.probe) == (
        WorkMode.BROWSER_KEEPALIVE,
        None,
        "vendor-status",
    )
    assert (nudge.origin.line, nudge.origin.column) == (2, 6)


def test_a_browser_watch_shape_may_leave_out_its_controller(tmp_path: Path) -> None:
    """`work browser_watch probe NAME` without a controller loads: a change wakes nothing."""
    rules = load_rules(tree(tmp_path, WATCH.replace(" controller reviewer", "")))
    assert rules.work_shapes["vendor"].controller is None


def test_the_template_loop_carries_the_settings_and_starts_in_shadow(tmp_path: Path) -> None:
    """The shape's loop template holds the block's settings (emit, payload, approval,
    budget, backoff) and is in shadow mode even where the block says `shadow false`."""
    rules = load_rules(tree(tmp_path, NUDGE + "  shadow false\n"))
    loop = rules.work_shapes["nudge"].loop
    assert (loop.name, loop.event_type, dict(loop.payload)) == (
        "nudge",
        "work.nudged",
        {"note": "keep going"},
    )
    assert loop.policy.shadow is True
    assert rules.work_shapes["nudge"].graduates is True
    assert load_rules(tree(tmp_path / "kept", NUDGE)).work_shapes["nudge"].graduates is False
    assert loop.policy.budget.daily_runs == 12
    assert (loop.policy.backoff.base_seconds, loop.policy.backoff.max_seconds) == (300, 7200)


def test_the_rule_set_carries_the_controllers(tmp_path: Path) -> None:
    """registry/controllers.yaml compiles onto the rule set, each entry by its id."""
    rules = load_rules(tree(tmp_path, NUDGE))
    coder = rules.controllers["coder"]
    assert (coder.argv, coder.timeout_seconds, coder.context) == (
        ("agent", "exec", "--work={work_id}"),
        7200,
        "stdin",
    )
    assert (coder.token_env, coder.report) == ("ENGINE_WORK_TOKEN", "http")
    assert rules.controllers["reviewer"].context == "file"


def test_no_controllers_file_means_no_controllers(tmp_path: Path) -> None:
    """registry/controllers.yaml is optional: without it the rules load, with none."""
    paths = tree(tmp_path, "")
    (paths.registry / "controllers.yaml").unlink()
    assert dict(load_rules(paths).controllers) == {}


def test_the_controllers_file_is_in_the_digest(tmp_path: Path) -> None:
    """registry/controllers.yaml is a kernel file: editing it changes the rules digest."""
    paths = tree(tmp_path, NUDGE)
    before = load_rules(paths).digest
    file = paths.registry / "controllers.yaml"
    file.write_text(file.read_text().replace("timeout: 2h", "timeout: 3h"))
    assert load_rules(paths).digest != before


# ---- shapes that do not load -----------------------------------------------------------


@pytest.mark.parametrize(
    ("bound", "line"),
    [
        ("cooldown", "  cooldown 30m\n"),
        ("backoff", "  backoff base 5m max 2h\n"),
        ("budget daily_runs", "  budget daily_runs 12\n"),
    ],
)
def test_each_missing_bound_is_E0106_naming_it(tmp_path: Path, bound: str, line: str) -> None:
    """A shape that leaves out its cooldown, backoff or daily budget does not load: one
    E0106 at the loop's name, naming what is missing."""
    found = diagnostics(tree(tmp_path, NUDGE.replace(line, "")))
    assert found == [
        (
            "t.rules",
            2,
            6,
            "E0106",
            f"work-bound loop shape 'nudge' leaves out its bounds: {bound}",
        )
    ]


def test_all_missing_bounds_are_listed_once(tmp_path: Path) -> None:
    """A shape without any bound gets one E0106 listing all three."""
    found = diagnostics(tree(tmp_path, NUDGE.replace(BOUNDS, "")))
    assert [(f[3], f[4].split(": ")[1]) for f in found] == [
        ("E0106", "backoff, cooldown, budget daily_runs")
    ]


def test_a_budget_without_daily_runs_leaves_the_bound_out(tmp_path: Path) -> None:
    """`budget wall_clock 1h` is a budget, but not the daily one a shape needs."""
    rules = NUDGE.replace("budget daily_runs 12", "budget wall_clock 1h")
    assert [f[3] for f in diagnostics(tree(tmp_path, rules))] == ["E0106"]


def test_a_bad_bound_is_reported_by_its_setting_not_as_missing(tmp_path: Path) -> None:
    """A cooldown written with a bad duration is its E0201, not also a missing bound."""
    found = diagnostics(tree(tmp_path, NUDGE.replace("cooldown 30m", "cooldown soon")))
    assert [(f[1], f[3]) for f in found] == [(7, "E0201")]


def test_an_unknown_controller_is_E0210_with_a_suggestion(tmp_path: Path) -> None:
    """`controller NAME` must name an entry of registry/controllers.yaml."""
    with pytest.raises(RulesError) as caught:
        load_rules(tree(tmp_path, NUDGE.replace("controller coder", "controller codr")))
    (d,) = caught.value.diagnostics
    assert (d.span.line, d.span.column, d.code) == (3, 32, "E0210")
    assert d.message == "unknown controller 'codr'"
    assert d.hint == "did you mean 'coder'?"


def test_an_unknown_probe_is_E0209(tmp_path: Path) -> None:
    """`probe NAME` must name a probe of registry/probes.yaml."""
    found = diagnostics(tree(tmp_path, KEEPALIVE.replace("probe vendor-status", "probe vendor")))
    assert found == [("t.rules", 3, 32, "E0209", "unknown probe 'vendor'")]


@pytest.mark.parametrize("rules", [WATCH, KEEPALIVE])
def test_a_command_probe_in_a_browser_mode_is_refused(tmp_path: Path, rules: str) -> None:
    """A browser mode opens browser probes only: a command probe there is E0209."""
    found = diagnostics(tree(tmp_path, rules.replace("vendor-status", "ci-status")))
    assert [(f[3], f[4].split(";")[0]) for f in found] == [
        ("E0209", "probe 'ci-status' is a command probe")
    ]


@pytest.mark.parametrize(
    ("trigger", "word"),
    [
        ("watch ci-status every 5m", "watch"),
        ("on_event work.nudged", "on_event"),
        ("manual", "manual"),
        ("after other", "after"),
    ],
)
def test_a_trigger_other_than_a_clock_is_refused(tmp_path: Path, trigger: str, word: str) -> None:
    """A shape fires by `every` or `cron`: any other trigger is E0105 at its line."""
    found = diagnostics(tree(tmp_path, NUDGE.replace("every 1h", trigger)))
    assert found == [
        (
            "t.rules",
            4,
            3,
            "E0105",
            f"a work-bound loop shape fires by 'every' or 'cron', not '{word}'",
        )
    ]


@pytest.mark.parametrize(
    ("line", "column", "says"),
    [
        ("work", 3, "'work' takes MODE ..."),
        ("work forever controller coder", 8, "unknown work mode 'forever'"),
        ("work continuation", 3, "'work continuation' takes continuation controller NAME"),
        ("work continuation probe vendor-status", 21, "'work continuation' takes"),
        ("work continuation controller", 21, "'controller' needs a name"),
        ('work continuation controller "coder"', 32, "'controller' needs a name"),
        ("work browser_keepalive probe vendor-status controller coder", 46, "takes"),
        ("work browser_watch controller coder probe vendor-status", 3, "takes"),
    ],
)
def test_a_malformed_work_line_is_located(
    tmp_path: Path, line: str, column: int, says: str
) -> None:
    """A `work` line that does not read as a mode and its names is one E0105, at the word
    that is wrong; the block is then neither a loop nor a shape."""
    found = diagnostics(tree(tmp_path, NUDGE.replace("work continuation controller coder", line)))
    assert [(f[1], f[2], f[3]) for f in found] == [(3, column, "E0105")]
    assert says in found[0][4]


def test_a_cooldown_on_a_plain_loop_is_refused(tmp_path: Path) -> None:
    """`cooldown` belongs to shapes: on a loop without `work` it is E0105."""
    rules = "loop plain\n  every 1h\n  emit work.nudged\n  cooldown 5m\n"
    found = diagnostics(tree(tmp_path, rules))
    assert [(f[1], f[3]) for f in found] == [(4, "E0105")]


def test_a_shape_and_a_loop_share_one_name_space(tmp_path: Path) -> None:
    """A loop named like a shape is E0401, as two loops of one name are."""
    rules = NUDGE + "\nloop nudge\n  every 1h\n  emit work.nudged\n"
    assert [(f[1], f[3]) for f in diagnostics(tree(tmp_path, rules))] == [(11, "E0401")]


def test_the_overlay_cannot_name_a_shape(tmp_path: Path) -> None:
    """config/schedule.yaml naming a shape is E0802 at its entry: a shape is not a loop."""
    schedule = "schedules:\n  nudge:\n    enabled: true\n"
    found = diagnostics(tree(tmp_path, NUDGE, schedule=schedule))
    assert [(f[0], f[1], f[3]) for f in found] == [("schedule.yaml", 2, "E0802")]
    assert "work-bound loop shape" in found[0][4]


def test_an_after_cannot_wait_for_a_shape(tmp_path: Path) -> None:
    """A shape is no loop to wait for: `after nudge` names an unknown loop (E1001)."""
    rules = NUDGE + "\nloop later\n  after nudge\n  emit work.nudged\n"
    assert [f[3] for f in diagnostics(tree(tmp_path, rules))] == ["E1001"]


# ---- a shape's payload and its event type's schema -------------------------------------

# work.nudged's payload: exactly a note and the tick fields the engine fills.
STRICT = """{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "note": {"type": "string"},
    "loop": {"type": "string"},
    "slot": {"type": "string", "format": "date-time"},
    "cadenceSeconds": {"type": "integer", "minimum": 0},
    "skippedSlots": {"type": "integer", "minimum": 0}
  },
  "required": ["note", "loop", "slot", "cadenceSeconds", "skippedSlots"],
  "additionalProperties": false
}
"""


def strict_tree(root: Path, rules: str) -> Paths:
    """The shape tests' tree with work.nudged held to STRICT."""
    paths = tree(root, rules)
    (paths.registry / "schemas").mkdir()
    (paths.registry / "schemas" / "nudged.json").write_text(STRICT)
    types = paths.registry / "event-types.yaml"
    types.write_text(types.read_text() + "    schema: nudged.json\n")
    return paths


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ("{ note: 12 }", "12 is not of type 'string'"),
        ('{ memo: "keep going" }', "'note' is a required property"),
        ('{ note: "keep going", repo: "bj29" }', "('repo' was unexpected)"),
    ],
)
def test_a_shape_whose_ticks_would_not_fit_its_type_does_not_load(
    tmp_path: Path, payload: str, says: str
) -> None:
    """A shape's static payload is checked against its event type's schema as a loop's
    is: a sample tick (the payload and the engine's tick fields) that does not validate
    is E0206 at the payload, and nothing loads."""
    rules = NUDGE.replace('{ note: "keep going" }', payload)
    found = diagnostics(strict_tree(tmp_path, rules))
    assert [f[:4] for f in found] == [("t.rules", 5, 20, "E0206")]
    assert found[0][4].startswith("loop 'nudge' ticks would not fit 'work.nudged': ")
    assert says in found[0][4]


def test_a_shape_payload_may_not_set_a_tick_field(tmp_path: Path) -> None:
    """The engine fills loop, slot, cadenceSeconds and skippedSlots: a shape's payload
    setting one is E0208 at the payload, as a loop's is."""
    rules = NUDGE.replace('{ note: "keep going" }', '{ note: "x", skippedSlots: 3 }')
    found = diagnostics(tree(tmp_path, rules))
    assert found == [
        ("t.rules", 5, 20, "E0208", "loop 'nudge' sets tick field(s) skippedSlots in its payload")
    ]


@pytest.mark.parametrize("trigger", ["every 1h", 'cron "0 9 * * 1-5" in Europe/Budapest'])
def test_an_instances_tick_is_the_static_payload_and_the_tick_fields_only(
    tmp_path: Path, trigger: str
) -> None:
    """A schema that admits exactly the payload's keys and the engine's tick fields
    (and requires them all) loads: the tick the check validates carries nothing else."""
    rules = load_rules(strict_tree(tmp_path, NUDGE.replace("every 1h", trigger)))
    shape = rules.work_shapes["nudge"]
    assert set(tick_sample(shape.loop)) == TICK_FIELDS | {"note"}
    assert tick_sample(shape.loop)["note"] == "keep going"


# ---- registry/controllers.yaml ---------------------------------------------------------

ENTRY = """controllers:
  - id: coder
    argv: ["agent", "exec", "--work={work_id}"]
    token_env: ENGINE_WORK_TOKEN
    report: http
"""
OPTION = '"--work={work_id}"'


@pytest.mark.parametrize(
    ("old", "new", "line", "says"),
    [
        ("    report: http\n", "", 2, "a controller needs a safe way to report back"),
        ("report: http", "report: stdout", 5, "report: 'stdout' is not a safe way"),
        ("ENGINE_WORK_TOKEN", "engine-token", 4, "'engine-token' is not an environment"),
        ("ENGINE_WORK_TOKEN", "PATH", 4, "token_env: 'PATH' already means something"),
        (OPTION, '"--{work_id}"', 3, "argv: argv element '--{work_id}'"),
        (OPTION, '"--work={repo}"', 3, "argv: argv placeholder '{repo}' is not one of"),
        ('"agent"', '"/bin/bash", "-c"', 3, "argv: argv[0] '/bin/bash' is a shell"),
        ('"agent"', '"{work_id}"', 3, "argv: argv[0] '{work_id}' is the program"),
        ("report: http", "report: http\n    timeout: 12h", 6, "timeout is at most 6h"),
        ("report: http", "report: http\n    context: file", 2, "put {context_file} in argv"),
        (OPTION, '"{context_file}"', 2, "{context_file} belongs to `context: file`"),
        ("report: http", "report: http\n    shell: true", 6, "unknown field 'shell'"),
    ],
)
def test_a_bad_controller_entry_is_a_located_E0902(
    tmp_path: Path, old: str, new: str, line: int, says: str
) -> None:
    """Each problem of a controller entry is one E0902 at the key it is in (at the entry
    for what spans keys), and nothing loads: without `report: http` a controller has
    no safe way back, so it does not load."""
    found = diagnostics(tree(tmp_path, NUDGE, controllers=ENTRY.replace(old, new)))
    assert [(f[0], f[1], f[3]) for f in found] == [("controllers.yaml", line, "E0902")]
    assert says in found[0][4]


def test_a_controller_registered_twice_is_E0906(tmp_path: Path) -> None:
    """Two entries of one id: the second is E0906."""
    twice = ENTRY + ENTRY.removeprefix("controllers:\n")
    found = diagnostics(tree(tmp_path, "", controllers=twice))
    assert [(f[0], f[1], f[3]) for f in found] == [("controllers.yaml", 6, "E0906")]


# ---- engine check ----------------------------------------------------------------------


def check(paths: Paths, *extra: str) -> str:
    argv = [sys.executable, "-m", "engine", "check", "--no-cache", *extra]
    argv += ["--rules", str(paths.rules), "--registry", str(paths.registry)]
    argv += ["--config", str(paths.config)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return done.stdout


def test_engine_check_counts_and_lists_the_shapes(tmp_path: Path) -> None:
    """The summary line ends with the count of shapes; --json lists each one."""
    paths = tree(tmp_path, NUDGE + WATCH)
    assert check(paths).splitlines()[0].endswith(", 0 repos, 2 work shapes")
    listed = json.loads(check(paths, "--json"))["workShapes"]
    assert [(s["name"], s["mode"], s["controller"], s["probe"]) for s in listed] == [
        ("nudge", "continuation", "coder", None),
        ("vendor", "browser_watch", "reviewer", "vendor-status"),
    ]
    assert listed[0]["trigger"] == "every 1h" and listed[0]["cooldownSeconds"] == 1800


# ---- the documented examples -----------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def fenced(doc: str, heading: str, kind: str) -> list[str]:
    """The `kind` blocks of one section of a doc (from its heading to the next of its
    level or above)."""
    text = (ROOT / "docs" / doc).read_text()
    level = heading.split(" ", 1)[0]
    section = text.split(heading + "\n", 1)[1]
    section = re.split(rf"\n#{{1,{len(level)}}} ", section, maxsplit=1)[0]
    return re.findall(rf"```{kind}\n(.*?)```", section, re.S)


def test_the_documented_shapes_and_controller_load_beside_the_shipped_rules(
    tmp_path: Path,
) -> None:
    """docs/rules.md's shapes, docs/work.md's shape, the controller example and the
    browser probe example, added to the shipped rules and registry, load: one shape of
    each mode, waking the documented controller."""
    shutil.copytree(ROOT / "loops", tmp_path / "loops")
    shutil.copytree(ROOT / "registry", tmp_path / "registry")
    [shapes] = fenced("rules.md", "## Work-bound loop shapes", "rules")
    [bound] = fenced("work.md", "## Work-bound loops", "rules")
    (tmp_path / "loops" / "shapes.rules").write_text(shapes)
    (tmp_path / "loops" / "bound.rules").write_text(bound.replace("nudge-repair", "nudge-2"))
    [controllers] = fenced("rules.md", "### `controllers.yaml`", "yaml")
    (tmp_path / "registry" / "controllers.yaml").write_text(controllers)
    probes = fenced("rules.md", "#### Browser probes", "yaml")[0]
    (tmp_path / "registry" / "probes.yaml").write_text(probes)
    (tmp_path / "config").mkdir()
    rules = load_rules(Paths(tmp_path / "loops", tmp_path / "registry", tmp_path / "config"))
    assert {name: str(shape.mode) for name, shape in rules.work_shapes.items()} == {
        "nudge-repair": "continuation",
        "nudge-2": "continuation",
        "vendor-incidents": "browser_watch",
        "vendor-session": "browser_keepalive",
    }
    assert rules.work_shapes["vendor-incidents"].controller == "coder"
    assert rules.controllers["coder"].token_env == "ENGINE_WORK_TOKEN"
    assert not set(rules.work_shapes) & set(rules.loops)
