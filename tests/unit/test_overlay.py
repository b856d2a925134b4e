"""The instance overlay (config/schedule.yaml) merged over kernel loops
(docs/rules.md#the-overlay-configscheduleyaml): what it may change, what stays pinned, and what a
new overlay loop looks like."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from dsl.diagnostics import RulesError, Span
from engine.core.config import OVERLAY_MUTABLE
from engine.core.ruleset import Approval, CatchUp, OnActive, RuleSet, Source, TriggerKind
from engine.loading import Paths, load_rules

CASE = Path(__file__).resolve().parents[1] / "data" / "rules" / "valid" / "overlay"


@pytest.fixture
def rules(monkeypatch: pytest.MonkeyPatch) -> RuleSet:
    monkeypatch.chdir(CASE)
    return load_rules(Paths(Path("loops"), Path("registry"), Path("config")))


def with_schedule(tmp_path: Path, schedule: str) -> Paths:
    """The golden overlay tree with its schedule.yaml replaced."""
    shutil.copytree(CASE, tmp_path / "tree")
    (tmp_path / "tree" / "config" / "schedule.yaml").write_text(schedule)
    root = tmp_path / "tree"
    return Paths(root / "loops", root / "registry", root / "config")


def test_only_enabled_every_and_payload_are_mutable() -> None:
    """The overlay may change exactly `enabled`, `every` and payload keys of a kernel loop."""
    assert frozenset({"enabled", "every", "payload"}) == OVERLAY_MUTABLE


def test_overlay_enables_a_kernel_loop_and_changes_its_cadence(rules: RuleSet) -> None:
    """A kernel loop keeps its source and origin but takes the overlay's enabled and every."""
    reaper = rules.loops["reaper"]
    assert reaper.enabled is True
    assert reaper.trigger.every_seconds == 15 * 60
    assert reaper.source is Source.KERNEL
    assert reaper.origin == Span("loops/loops.rules", 1, 6)
    assert reaper.overlay_origin == Span("config/schedule.yaml", 2, 3)
    assert reaper.overridden == ("enabled", "every")


def test_overlay_payload_keys_merge_and_the_rest_stays_pinned(rules: RuleSet) -> None:
    """Payload keys from the overlay replace the kernel's; every other field is the kernel's."""
    worker = rules.loops["worker"]
    assert worker.payload == {"repo": "beta"}
    assert worker.overridden == ("payload",)
    assert (worker.catch_up, worker.enabled, worker.approval) == (
        CatchUp.LAST,
        False,
        Approval.WATCHED,
    )
    assert worker.trigger.every_seconds == 30 * 60


def test_new_complete_overlay_loop(rules: RuleSet) -> None:
    """A name the kernel does not declare is a complete loop of the instance, sourced `overlay`."""
    nightly = rules.loops["nightly"]
    assert nightly.source is Source.OVERLAY
    assert nightly.origin == nightly.overlay_origin == Span("config/schedule.yaml", 7, 3)
    assert nightly.trigger.kind is TriggerKind.CRON
    assert (nightly.trigger.cron, nightly.trigger.timezone) == ("0 6 * * 1-5", "Europe/Budapest")
    assert (nightly.catch_up, nightly.catch_up_cap) == (CatchUp.ALL, 3)
    assert nightly.max_lateness_seconds == 7200
    assert (nightly.singleton, nightly.approval, nightly.enabled) == (False, Approval.WATCHED, True)
    assert nightly.description == "nightly sweep"
    assert nightly.event_type == "clock.tick.reaper"
    assert rules.warnings == ()


def overlay_loop(tmp_path: Path, lines: str) -> Paths:
    """The golden tree whose schedule.yaml holds one new manual loop with `lines` added."""
    entry = "".join(f"    {line}\n" for line in lines.splitlines())
    return with_schedule(
        tmp_path, f"schedules:\n  extra:\n    emit: clock.tick.reaper\n    manual: true\n{entry}"
    )


@pytest.mark.parametrize(
    ("line", "singleton", "on_active"),
    [
        ("", True, OnActive.RETURN),  # the default is overlap: skip
        ("overlap: skip", True, OnActive.RETURN),
        ("overlap: buffer_one", True, OnActive.COALESCE),
        ("overlap: allow", False, OnActive.RETURN),
    ],
)
def test_an_overlay_loops_overlap_means_what_a_rule_files_does(
    tmp_path: Path, line: str, singleton: bool, on_active: OnActive
) -> None:
    """`overlap: skip|buffer_one|allow` sets the run and the occurrence level as the
    rule-file line `overlap VALUE` does (docs/rules.md#overlap), with no warning."""
    rules = load_rules(overlay_loop(tmp_path, line))
    extra = rules.loops["extra"]
    assert (extra.singleton, extra.on_active) == (singleton, on_active)
    assert extra.policy.budget.active_occurrences is None
    assert rules.warnings == ()


@pytest.mark.parametrize(("old", "new"), [(True, "skip"), (False, "allow")])
def test_the_old_singleton_key_loads_with_a_warning_and_its_overlap(
    tmp_path: Path, old: bool, new: str
) -> None:
    """`singleton: true|false` loads for one release with its old meaning and one W0901
    at the key, whose hint is the overlap line that means the same."""
    rules = load_rules(overlay_loop(tmp_path, f"singleton: {str(old).lower()}"))
    same = load_rules(overlay_loop(tmp_path / "new", f"overlap: {new}"))
    old_loop = rules.loops["extra"]
    assert old_loop == replace(
        same.loops["extra"], origin=old_loop.origin, overlay_origin=old_loop.overlay_origin
    )
    (w,) = rules.warnings
    assert (w.code, w.severity, w.span.line, w.span.column) == ("W0901", "warning", 5, 5)
    assert w.message == f"old spelling 'singleton: {str(old).lower()}'"
    assert w.hint is not None and w.hint.startswith(f"write: overlap: {new} ")


def test_singleton_beside_overlap_is_refused(tmp_path: Path) -> None:
    """The old and the new key together is E0102 at the old one: the loader will not
    guess which is meant."""
    with pytest.raises(RulesError) as caught:
        load_rules(overlay_loop(tmp_path, "overlap: allow\nsingleton: true"))
    (d,) = caught.value.diagnostics
    assert (d.code, d.span.line) == ("E0102", 6)
    assert "keep only the overlap line" in (d.hint or "")


@pytest.mark.parametrize("value", ["allow max 2", "sometimes", "true"])
def test_an_overlap_no_overlay_loop_can_have_is_refused(tmp_path: Path, value: str) -> None:
    """An overlay loop sets no budget, so `max N` needs a rule file; any other value is a
    typed error at the key."""
    with pytest.raises(RulesError) as caught:
        load_rules(overlay_loop(tmp_path, f"overlap: {value}"))
    (d,) = caught.value.diagnostics
    assert (d.code, d.span.line) == ("E0802", 5)


def test_new_overlay_loop_defaults_are_the_safe_ones(tmp_path: Path) -> None:
    """An overlay loop with only emit and a trigger is disabled, watched, singleton, no catch-up."""
    paths = with_schedule(
        tmp_path, "schedules:\n  extra:\n    emit: clock.tick.reaper\n    manual: true\n"
    )
    extra = load_rules(paths).loops["extra"]
    assert extra.trigger.kind is TriggerKind.MANUAL
    assert (extra.enabled, extra.approval, extra.singleton, extra.catch_up) == (
        False,
        Approval.WATCHED,
        True,
        CatchUp.NONE,
    )
    assert extra.payload == {}


def test_empty_overlay_entry_changes_nothing(tmp_path: Path) -> None:
    """An overlay entry with no fields leaves its kernel loop as the rule file wrote it."""
    paths = with_schedule(tmp_path, "schedules:\n  reaper:\n")
    reaper = load_rules(paths).loops["reaper"]
    assert (reaper.enabled, reaper.trigger.every_seconds, reaper.overridden) == (False, 3600, ())
    assert reaper.source is Source.KERNEL


@pytest.mark.parametrize("schedule", [None, "", "schedules:\n"])
def test_missing_or_empty_schedule_file_is_no_overlay(tmp_path: Path, schedule: str | None) -> None:
    """Without schedule.yaml, or with an empty one, the kernel loops are used as written."""
    paths = with_schedule(tmp_path, schedule or "")
    if schedule is None:
        (paths.config / "schedule.yaml").unlink()
    loops = load_rules(paths).loops
    assert sorted(loops) == ["reaper", "worker"]
    assert all(loop.overlay_origin is None for loop in loops.values())


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ("approval: auto", "approval"),
        ("emit: factory.work.requested", "emit"),
        ("catch_up: all", "catch_up"),
        ("singleton: false", "singleton"),
        ("overlap: allow", "overlap"),
        ("manual: true", "manual"),
        ("description: x", "description"),
    ],
)
def test_pinned_kernel_fields_cannot_be_overlaid(tmp_path: Path, entry: str, key: str) -> None:
    """Changing any pinned field of a kernel loop is E0801 at that overlay key."""
    paths = with_schedule(tmp_path, f"schedules:\n  reaper:\n    enabled: true\n    {entry}\n")
    with pytest.raises(RulesError) as caught:
        load_rules(paths)
    (d,) = caught.value.diagnostics
    assert (d.code, d.span.line, d.span.column) == ("E0801", 4, 5)
    assert key in d.message and "pinned by" in (d.hint or "")


def test_overlay_may_switch_off_a_loop_that_earned_auto(tmp_path: Path) -> None:
    """Disabling is always allowed: an enabled auto kernel loop can be switched off
    by the overlay (it stops ticking), while declaring auto on a disabled loop fails."""
    paths = with_schedule(tmp_path, "schedules:\n  reaper:\n    enabled: false\n")
    rules_file = paths.rules / "loops.rules"
    text = rules_file.read_text().replace(
        "  enabled false\n", "  approval auto\n  enabled true\n", 1
    )
    rules_file.write_text(text)
    reaper = load_rules(paths).loops["reaper"]
    assert (reaper.approval, reaper.enabled) == (Approval.AUTO, False)
    rules_file.write_text(
        text.replace("  approval auto\n  enabled true\n", "  approval auto\n  enabled false\n")
    )
    with pytest.raises(RulesError) as err:
        load_rules(paths)
    assert [d.code for d in err.value.diagnostics] == ["E0301"]


@pytest.mark.parametrize(
    ("entry", "key"),
    [("approval: auto", "approval"), ("shadow: off", "shadow"), ("shadow: false", "shadow")],
)
def test_an_overlay_loop_never_grants_what_only_review_may(
    tmp_path: Path, entry: str, key: str
) -> None:
    """A loop declared only in the git-ignored overlay cannot be `approval: auto` nor set
    shadow mode: E0304 at that key, so nothing runs unattended that no reviewed rule file
    allowed (the digest does not cover the overlay)."""
    schedule = f"schedules:\n  extra:\n    emit: clock.tick.reaper\n    every: 2h\n    {entry}\n"
    schedule += "    enabled: true\n"
    with pytest.raises(RulesError) as caught:
        load_rules(with_schedule(tmp_path, schedule))
    (d,) = caught.value.diagnostics
    assert (d.code, d.span.line, d.span.column) == ("E0304", 5, 5)
    assert key in d.message and "loops/" in (d.hint or "")


def test_an_overlay_loop_may_say_watched(tmp_path: Path) -> None:
    """`approval: watched` is what an overlay loop gets anyway; writing it is allowed."""
    schedule = "schedules:\n  extra:\n    emit: clock.tick.reaper\n    every: 2h\n"
    schedule += "    approval: watched\n    enabled: true\n"
    extra = load_rules(with_schedule(tmp_path, schedule)).loops["extra"]
    assert (extra.approval, extra.enabled, extra.source) == (Approval.WATCHED, True, Source.OVERLAY)


def test_shadow_of_a_kernel_loop_is_pinned(tmp_path: Path) -> None:
    """The overlay cannot switch a kernel loop's shadow mode either (E0801)."""
    paths = with_schedule(tmp_path, "schedules:\n  reaper:\n    shadow: off\n")
    with pytest.raises(RulesError) as caught:
        load_rules(paths)
    assert [(d.code, d.span.line) for d in caught.value.diagnostics] == [("E0801", 3)]
