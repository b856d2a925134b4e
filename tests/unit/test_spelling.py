"""The one spelling of the rules language (docs/rules.md#one-spelling): the new forms
parse and compile; every old spelling (docs/rules.md#old-spellings) still loads with
exactly its old meaning and one W0901 warning at the old word, whose fix-it is the new
form; old and new forms of one setting together are E0102; and each `overlap` value
decides as the table of docs/rules.md#overlap says."""

from __future__ import annotations

import dataclasses
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsl import spelling
from dsl.diagnostics import RulesError, Span
from dsl.model import Old
from dsl.parser import parse
from engine.core import loopsettings
from engine.core.decide import Facts, decide
from engine.core.effects import Decide, Signal
from engine.core.envelope import iso
from engine.core.records import EventRecord, OccurrenceRecord
from engine.core.ruleset import Loop, OnActive, RuleSet, max_active
from engine.core.ticks import tick
from engine.core.validation import Validators
from engine.loading import Paths, load_rules
from engine.service.admission import admit_record
from engine.service.context import Runtime
from engine.store.memory import MemoryStore

VALID = Path(__file__).resolve().parents[1] / "data" / "rules" / "valid"
REGISTRY = VALID / "repos_chains_webhooks" / "registry"
ROUTES = VALID / "repos_chains_webhooks" / "loops" / "routes.rules"
HEAD = "loop x\n  every 60m\n  emit clock.tick.reaper\n"


def tree(root: Path, rules: str) -> Paths:
    """A tree under `root`: a golden registry and routes, `rules` as loops/t.rules."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REGISTRY, root / "registry")
    (root / "loops").mkdir()
    shutil.copy(ROUTES, root / "loops" / "routes.rules")
    (root / "loops" / "t.rules").write_text(rules)
    (root / "config").mkdir()
    return Paths(root / "loops", root / "registry", root / "config")


def load(root: Path, rules: str) -> RuleSet:
    return load_rules(tree(root, rules))


def unspanned(value: Any) -> Any:
    """`value` with every Span replaced by one placeholder: equal apart from spans."""
    if isinstance(value, Span):
        return Span("", 0, 0)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: unspanned(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    if isinstance(value, tuple):
        return tuple(unspanned(v) for v in value)
    if isinstance(value, list):
        return [unspanned(v) for v in value]
    if isinstance(value, dict):
        return {k: unspanned(v) for k, v in value.items()}
    return value


def warnings(rules: RuleSet) -> list[tuple[int, int, str, str | None]]:
    return [(w.span.line, w.span.column, w.message, w.hint) for w in rules.warnings]


def fix(new: str) -> str:
    return f"write: {new} ({spelling.FIX_IT})"


# ---- old and new forms of one loop compile to the same loop ---------------------------------

# (old lines, the same settings in the new forms, the fix-it hint of each old line)
PAIRS = [
    ("catch-up all cap 6", "catch_up all cap 6", [fix("catch_up all cap 6")]),
    ("max-lateness 2h", "max_lateness 2h", [fix("max_lateness 2h")]),
    ("circuit-breaker 3", "circuit_breaker 3", [fix("circuit_breaker 3")]),
    (
        "stop-when release_freeze end_date=2026-12-31",
        "stop_when release_freeze end_date=2026-12-31",
        [fix("stop_when release_freeze end_date=2026-12-31")],
    ),
    (
        "budget daily-runs 4 wall-clock 30m",
        "budget daily_runs 4 wall_clock 30m",
        [fix("budget daily_runs 4 wall_clock 30m")] * 2,
    ),
    (
        "budget retries-per-occurrence 0 jobs-per-occurrence 1 daily-wall-clock 1h",
        "budget retries_per_occurrence 0 jobs_per_occurrence 1 daily_wall_clock 1h",
        [fix("budget retries_per_occurrence 0 jobs_per_occurrence 1 daily_wall_clock 1h")] * 3,
    ),
    ("enabled", "enabled true", [fix("enabled true")]),
    ("disabled", "enabled false", [fix("enabled false")]),
    ("shadow on", "shadow true", [fix("shadow true")]),
    ("shadow off", "shadow false", [fix("shadow false")]),
    ("singleton", "overlap skip", [fix("overlap skip")]),
    ("on-active return", "overlap skip", [fix("overlap skip")]),
    ("on-active coalesce", "overlap buffer_one", [fix("overlap buffer_one")]),
    ("singleton\n  on-active coalesce", "overlap buffer_one", [fix("overlap buffer_one")] * 2),
    ("overlapping", "overlap allow", [fix("overlap allow")]),
    (
        "overlapping\n  budget active-occurrences 3",
        "overlap allow max 3",
        [fix("overlap allow max 3")] * 2,
    ),
]


@pytest.mark.parametrize(("old", "new", "hints"), PAIRS, ids=[p[0] for p in PAIRS])
def test_an_old_spelling_means_what_its_new_form_means(
    tmp_path: Path, old: str, new: str, hints: list[str]
) -> None:
    """A loop in the old spelling compiles to the loop of its new form (apart from spans),
    with one W0901 per old word whose hint is the new form; the new form warns nothing."""
    before = load(tmp_path / "old", f"{HEAD}  {old}\n")
    after = load(tmp_path / "new", f"{HEAD}  {new}\n")
    assert unspanned(before.loops["x"]) == unspanned(after.loops["x"])
    assert after.warnings == ()
    assert [w.hint for w in before.warnings] == hints
    assert all((w.code, w.severity) == (spelling.OLD_SPELLING, "warning") for w in before.warnings)
    assert before.digest != after.digest  # the files differ; a warning changes no digest


def test_the_warning_points_at_the_old_word(tmp_path: Path) -> None:
    """W0901 is at the old key, budget key, shadow value or bare flag, not the line start."""
    text = HEAD + "  budget daily_runs 2 wall-clock 1h\n  shadow  off\n  disabled\n"
    rules = load(tmp_path, text)
    assert [(line, col) for line, col, *_ in warnings(rules)] == [(4, 23), (5, 11), (6, 3)]
    assert [m for _, _, m, _ in warnings(rules)] == [
        "old spelling 'wall-clock'",
        "old spelling 'shadow off'",
        "old spelling 'disabled'",
    ]


def test_the_overlap_note_and_the_combination_no_value_means(tmp_path: Path) -> None:
    """Old `on-active skip` rewrites to `overlap skip` with a note on its reason; a
    combination no overlap value means loads with its old meaning, and says the nearest."""
    skip = load(tmp_path / "a", HEAD + "  on-active skip\n")
    (warning,) = skip.warnings
    assert warning.hint == fix("overlap skip") + (
        "; its no-op's reason is now occurrence_active, linked to the active occurrence"
    )
    assert skip.loops["x"].on_active is OnActive.SKIP  # the old meaning, for one release
    pair = load(tmp_path / "b", HEAD + "  singleton\n  budget active-occurrences 2\n")
    loop = pair.loops["x"]
    assert (loop.singleton, max_active(loop)) == (True, 2)
    assert [w.hint for w in pair.warnings] == ["the nearest is: overlap allow max 2"] * 2
    assert all("no one overlap value means" in w.message for w in pair.warnings)
    coalesce = load(tmp_path / "c", HEAD + "  overlapping\n  on-active coalesce\n")
    assert {w.hint for w in coalesce.warnings} == {"the nearest is: overlap buffer_one"}


def test_an_expanded_loop_warns_once(tmp_path: Path) -> None:
    """A `for` block's old spelling is one warning, however many repos it expands to."""
    text = "for repo in repos\n  loop w-{repo.name}\n    every 1h\n"
    text += "    emit factory.work.requested { repo: repo.name }\n    catch-up none\n"
    paths = tree(tmp_path, text)
    (paths.config / "repos.yaml").write_text(
        "repos:\n  a:\n    github: o/a\n  b:\n    github: o/b\n"
    )
    rules = load_rules(paths)
    assert len(rules.loops) == 2 and [w[:2] for w in warnings(rules)] == [(5, 5)]


# ---- emit, on_event, human_only -------------------------------------------------------------

CHAIN_NEW = """on dispatch@1 outcome PR_OPEN
  emit factory.work.requested id "again:{result.prNumber}" if "prNumber" in result {
    repo: event.payload.repo,
  }
"""
CHAIN_OLD = """on dispatch@1 outcome PR_OPEN
  emit factory.work.requested id "again:{result.prNumber}" {
    repo: event.payload.repo,
  } if "prNumber" in result
"""


def test_the_guard_before_the_payload_means_the_old_trailing_guard(tmp_path: Path) -> None:
    """`emit ... if COND { payload }` is the chain edge `emit ... { payload } if COND` was;
    the old form warns at its `if`."""
    new = load(tmp_path / "new", CHAIN_NEW)
    old = load(tmp_path / "old", CHAIN_OLD)
    assert unspanned(new.chains) == unspanned(old.chains)
    (edge,) = new.chains.values()
    assert edge.emits[0].guard is not None and new.warnings == ()
    (warning,) = old.warnings
    assert (warning.span.line, warning.span.column) == (4, 5)
    assert warning.hint == fix('emit factory.work.requested ... if "prNumber" in result { ... }')


def test_webhook_emit_takes_unless_before_its_payload(tmp_path: Path) -> None:
    text = "webhook github pull_request\n  emit factory.work.requested unless pull_request.draft"
    text += " { repo: repo.name }\n"
    rules = load(tmp_path, text)
    (table,) = rules.webhooks.values()
    (emit,) = table.steps
    assert emit.guard is not None and emit.guard.negate and emit.payload is not None  # type: ignore[union-attr]
    assert rules.warnings == ()


def test_human_only_word_is_a_definition_when_it_has_an_at(tmp_path: Path) -> None:
    """`human_only WORD` declares a definition when WORD has an `@`, else an event type;
    the old `human-only [definition] WORD` means the same, with a warning."""
    new = load(tmp_path / "new", "human_only ship-apply@1\nhuman_only clock.tick.reaper\n")
    old = load(
        tmp_path / "old",
        "human-only definition ship-apply@1\nhuman-only clock.tick.reaper\n",
    )
    for rules in (new, old):
        assert rules.human_only_types == {"clock.tick.reaper", "factory.ship.apply.requested"}
        assert [str(d) for d in rules.human_only_definitions] == ["ship-apply@1"]
    assert new.warnings == ()
    assert [w.hint for w in old.warnings] == [
        fix("human_only ship-apply@1"),
        fix("human_only clock.tick.reaper"),
    ]


def test_the_parser_records_each_old_word() -> None:
    """The model keeps where each line used an old spelling, and nothing for new forms."""
    text = (
        "human_only definition a@1\nhuman-only t.x\nhuman_only t.y\n"
        "loop x\n  on-event t.x\n  emit t.y\n"
        "loop y\n  on_event t.x window event.id if event.ok\n  emit t.y\n"
    )
    decls = parse(text, "f.rules").decls
    olds = [getattr(d, "old", None) for d in decls[:3]]
    assert olds == [
        Old("definition", Span("f.rules", 1, 12)),
        Old("human-only", Span("f.rules", 2, 1)),
        None,
    ]
    x, y = decls[3], decls[4]
    assert x.on_events[0].old == Old("on-event", Span("f.rules", 5, 3))  # type: ignore[union-attr]
    assert y.on_events[0].old is None and y.on_events[0].guard is not None  # type: ignore[union-attr]


def test_on_event_in_both_spellings_is_one_trigger(tmp_path: Path) -> None:
    """`on-event` and `on_event` are one trigger: old and new compile alike; both in one
    loop are two triggers (E0102)."""
    body = "  on_event factory.work.requested if event.payload.repo == 'r'\n"
    body = body.replace("'r'", '"r"')
    text = "loop x\n{}  emit factory.ship.apply.requested\n"
    new = load(tmp_path / "new", text.format(body))
    old = load(tmp_path / "old", text.format(body.replace("on_event", "on-event")))
    assert unspanned(new.loops) == unspanned(old.loops)
    assert [w.hint for w in old.warnings] == [fix("on_event factory.work.requested ...")]
    both = text.format(body + body.replace("on_event", "on-event"))
    with pytest.raises(RulesError) as caught:
        load(tmp_path / "both", both)
    assert [d.code for d in caught.value.diagnostics] == ["E0102"]


# ---- bad values and mixed forms --------------------------------------------------------------

BAD = [
    ("enabled yes", "E0105", "write: enabled true, or enabled false"),
    ("enabled ture", "E0105", "did you mean 'true'?"),
    ("shadow of", "E0105", "write: shadow true, or shadow false"),  # no old value hinted
    ("overlap buffer-one", "E0105", "did you mean 'buffer_one'?"),
    ("overlap skip max 2", "E0105", "write: overlap allow max N"),
    ("overlap allow max 0", "E0105", None),
    ("overlap allow 2", "E0105", "write: overlap skip|buffer_one|allow [max N]"),
    ("budget dialy_runs 2", "E0105", "did you mean 'daily_runs'?"),
    ("overlap skip\n  overlapping", "E0102", None),
    ("budget active-occurrences 2\n  overlap allow", "E0102", None),
    ("catch-up none\n  catch_up last", "E0102", None),
    ("enabled false\n  enabled", "E0102", None),
    ("budget wall_clock 1h wall-clock 2h", "E0102", None),
]


@pytest.mark.parametrize(("line", "code", "hint"), BAD, ids=[b[0] for b in BAD])
def test_bad_values_and_mixed_forms_fail_closed(
    tmp_path: Path, line: str, code: str, hint: str | None
) -> None:
    with pytest.raises(RulesError) as caught:
        load(tmp_path, f"{HEAD}  {line}\n")
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.code == code
    if hint is not None:
        assert diagnostic.hint == hint


def test_a_failed_load_keeps_its_warnings_apart(tmp_path: Path) -> None:
    """Errors fail the load; the warnings found on the way ride along, never as errors."""
    with pytest.raises(RulesError) as caught:
        load(tmp_path, HEAD + "  catch-up none\n  overlap allow max x\n")
    assert [d.code for d in caught.value.diagnostics] == ["E0105"]
    assert [(w.code, w.span.line) for w in caught.value.warnings] == [("W0901", 4)]
    rendered = caught.value.render()
    assert rendered.index("error[E0105]") < rendered.index("warning[W0901]")


# ---- the overlap table, decided (docs/rules.md#overlap) ---------------------------------------

OVERLAP_LOOPS = "".join(
    f"loop {name}\n  every 1h\n  emit clock.tick.reaper\n  approval auto\n  enabled true\n"
    f"  {line}\n\n"
    for name, line in (
        ("skip", "overlap skip"),
        ("buffer", "overlap buffer_one"),
        ("allow", "overlap allow"),
        ("two", "overlap allow max 2"),
    )
)


@pytest.fixture(scope="module")
def overlap_rules(tmp_path_factory: pytest.TempPathFactory) -> RuleSet:
    rules = load(tmp_path_factory.mktemp("overlap"), OVERLAP_LOOPS)
    assert rules.warnings == ()
    return rules


SLOT_TIME = datetime(2026, 12, 1, 10, tzinfo=UTC)
AT = iso(SLOT_TIME)


def decided(rules: RuleSet, loop: str, facts: Facts) -> tuple[str, str | None, bool]:
    """The decision kind and reason of the loop's tick under `facts`, and whether the
    plan signals an active occurrence (a buffered follow-up)."""
    rt = Runtime(MemoryStore(), rules, Validators.build(rules), lambda: SLOT_TIME)
    with rt.store.write() as tx:
        event = admit_record(rt, tx, tick(rt.rules.loops[loop], SLOT_TIME, 0), "schedule", AT)
    assert isinstance(event, EventRecord)
    plan = decide(event, rt.rules, facts, rt.lifecycle, AT)
    record = next(e for e in plan if isinstance(e, Decide)).record
    return record.kind, record.reason, any(isinstance(e, Signal) for e in plan)


def active(loop: str, count: int) -> tuple[OccurrenceRecord, ...]:
    return tuple(
        OccurrenceRecord(f"clock:{loop}:{n}", loop, "waiting_for_retry", AT) for n in range(count)
    )


@pytest.mark.parametrize(
    ("loop", "expected"),
    [
        ("skip", ("noop", "previous_run_in_flight", False)),
        ("buffer", ("noop", "previous_run_in_flight", False)),
        ("allow", ("run", None, False)),
        ("two", ("run", None, False)),
    ],
)
def test_overlap_at_the_run_level(overlap_rules: RuleSet, loop: str, expected: Any) -> None:
    """A tick while a run of the loop is in flight: skip and buffer_one are a no-op
    previous_run_in_flight; allow (with or without max) runs."""
    assert decided(overlap_rules, loop, Facts(in_flight=True)) == expected


@pytest.mark.parametrize(
    ("loop", "count", "expected"),
    [
        ("skip", 1, ("noop", "occurrence_active", False)),
        ("buffer", 1, ("noop", "coalesced", True)),
        ("allow", 5, ("run", None, False)),
        ("two", 1, ("run", None, False)),
        ("two", 2, ("noop", "occurrence_active", False)),
    ],
)
def test_overlap_at_the_occurrence_level(
    overlap_rules: RuleSet, loop: str, count: int, expected: Any
) -> None:
    """A trigger while the repo's active occurrences are at the limit: skip (limit 1) and
    allow max N return it to the active one (occurrence_active); buffer_one folds it in
    (coalesced, a signal for one follow-up); allow has no limit."""
    facts = Facts(active=active(loop, count))
    assert decided(overlap_rules, loop, facts) == expected


@given(st.sampled_from(list(spelling.Overlap)), st.integers(min_value=1, max_value=50))
def test_every_overlap_value_rewrites_back_to_itself(value: spelling.Overlap, most: int) -> None:
    """What an overlap value sets, read back as an old combination, is that value's line:
    meaning() and overlap_of() agree, so the old spellings' fix-its are exact."""
    most_of = most if value is spelling.Overlap.ALLOW else None
    meant = spelling.meaning(value, most_of)
    rewrite = spelling.overlap_of(meant.singleton, meant.on_active, meant.active_occurrences)
    line = f"overlap {value.value}" + (f" max {most}" if most_of else "")
    assert rewrite is not None and rewrite.line == line and rewrite.note is None


def test_loop_defaults_are_overlap_skip(tmp_path: Path) -> None:
    """A loop without an overlap line is `overlap skip`."""
    default = load(tmp_path / "a", HEAD).loops["x"]
    skip = load(tmp_path / "b", HEAD + "  overlap skip\n").loops["x"]
    assert unspanned(default) == unspanned(skip)
    assert isinstance(default, Loop) and (default.singleton, max_active(default)) == (True, 1)


def test_the_vocabulary_of_loop_settings_is_the_compilers() -> None:
    """dsl.spelling's list of loop settings (what the recovering parser calls "a setting
    outside a loop") is exactly what the compiler gives a meaning, old spellings included."""
    assert set(loopsettings.HANDLERS) | {"on_event"} == spelling.LOOP_SETTINGS
    old = set(loopsettings.OLD_HANDLERS) | {"on-event"}
    old |= {k for k, v in spelling.RENAMED_KEYS.items() if v in loopsettings.HANDLERS}
    assert spelling.LOOP_SETTINGS | old == spelling.LOOP_SETTING_WORDS
