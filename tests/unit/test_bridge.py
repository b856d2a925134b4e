"""The host-clock bridge (docs/deploy.md#2-the-host-clock-bridge): host clocks loaded from
config/schedule.yaml, the emit argv, slot identity, and the launchd/systemd renderer against golden
files."""

from __future__ import annotations

import plistlib
import shutil
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.bridge import bridge_event_id, bridge_slot, emit_argv, render_clocks
from engine.cli.main import main
from engine.core.ruleset import Loop, Trigger, TriggerKind
from engine.core.ticks import BRIDGE_SKEW, slot_problem, tick_id
from engine.loading import Paths, load_host_clocks

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "bridge"
ENGINE = "/usr/local/bin/engine"


def paths(config: Path) -> Paths:
    return Paths(ROOT / "loops", ROOT / "registry", config)


def example_config(tmp_path: Path, extra: str = "") -> Path:
    """A config directory holding the shipped examples (plus `extra` YAML text)."""
    config = tmp_path / "config"
    config.mkdir(parents=True)
    shutil.copy(ROOT / "config" / "repos.example.yaml", config / "repos.yaml")
    text = (ROOT / "config" / "schedule.example.yaml").read_text()
    (config / "schedule.yaml").write_text(text + extra)
    return config


def test_example_ships_the_factory_floor(tmp_path: Path) -> None:
    """The example's host clocks are the bridge floor: triage 24h on, the rest off."""
    _, clocks = load_host_clocks(paths(example_config(tmp_path)))
    floor = {c.name: (c.cadence, c.enabled, c.event_type, c.loop) for c in clocks}
    assert floor == {
        "factory-triage": ("24h", True, "factory.triage.requested", "factory-triage"),
        "factory-dispatch": ("5m", False, "factory.work.requested", "factory-dispatch"),
        "factory-merge": ("10m", False, "factory.merge.requested", "factory-merge"),
        "factory-reaper": ("60m", False, "clock.tick.reaper", "factory-reaper"),
    }
    triage = next(c for c in clocks if c.name == "factory-triage")
    assert triage.gate_command == ("queue", "--repo", "factory", "--gate", "triage")
    assert triage.payload == {"repo": "factory"}  # the bridge loop's static payload


def test_emit_argv_is_gated_and_bound_to_its_loop(tmp_path: Path) -> None:
    """A bridge loop's clock calls `engine emit` with its payload, gate, loop and cadence."""
    _, clocks = load_host_clocks(paths(example_config(tmp_path)))
    triage = next(c for c in clocks if c.name == "factory-triage")
    assert emit_argv(triage, "engine") == [
        "engine",
        "emit",
        "factory.triage.requested",
        "--payload",
        '{"repo":"factory"}',
        "--gate",
        "queue --repo factory --gate triage",
        "--loop",
        "factory-triage",
        "--every",
        "24h",
    ]


def test_bridge_slot_is_the_cadence_floor_and_never_a_native_identity() -> None:
    """The slot is the epoch floor of the cadence; its id is bridge:<loop>:<slot>, not clock:."""
    slot = bridge_slot(datetime(2026, 3, 4, 10, 17, 42, tzinfo=UTC), 600)
    assert slot == datetime(2026, 3, 4, 10, 10, tzinfo=UTC)
    assert bridge_event_id("reaper", slot) == "bridge:reaper:2026-03-04T10:10:00Z"
    assert bridge_event_id("reaper", slot) != tick_id("reaper", slot)


def test_bridge_loop_and_native_loop_are_independent(tmp_path: Path) -> None:
    """A host clock named like a native loop neither edits it nor posts its ticks: the loop
    stays on while the clock is off, and the clock's posts carry no loop binding."""
    extra = (
        "  reaper:\n    cadence: 60m\n    emit: factory.unblock.requested\n"
        "    payload: {repo: factory}\n    enabled: false\n"
    )
    rules, clocks = load_host_clocks(paths(example_config(tmp_path, extra)))
    clock = next(c for c in clocks if c.name == "reaper")
    assert rules.loops["reaper"].enabled and clock.enabled is False
    assert clock.loop is None and "--loop" not in emit_argv(clock, "engine")
    assert "engine.bridge.reaper.plist" not in render_clocks("launchd", clocks, ENGINE)
    # and the other way round: the factory-reaper clock on leaves its bridge loop off
    on = example_config(tmp_path / "on")
    text = (on / "schedule.yaml").read_text()
    old = "    emit: clock.tick.reaper\n    enabled: false\n"
    (on / "schedule.yaml").write_text(text.replace(old, old.replace("false", "true")))
    rules, clocks = load_host_clocks(paths(on))
    assert next(c for c in clocks if c.name == "factory-reaper").enabled
    assert not rules.loops["factory-reaper"].enabled


def test_loop_switched_off_keeps_its_host_clock(tmp_path: Path) -> None:
    """Disabling a bridge loop in `schedules:` leaves its host clock (and timer) as written."""
    config = example_config(tmp_path)
    text = (config / "schedule.yaml").read_text()
    text = text.replace(
        "# the bridge floor: triage on, the rest off\n    enabled: true",
        "\n    enabled: false",
    )
    (config / "schedule.yaml").write_text(text)
    rules, clocks = load_host_clocks(paths(config))
    assert not rules.loops["factory-triage"].enabled
    assert [c.name for c in clocks if c.enabled] == ["factory-triage"]


@pytest.mark.parametrize("kind", ["launchd", "systemd"])
def test_render_matches_golden_files(kind: str, tmp_path: Path) -> None:
    """`engine render KIND` writes exactly the golden files under tests/data/bridge/KIND."""
    out = tmp_path / kind
    out.mkdir()
    stale = "engine.bridge.gone.plist" if kind == "launchd" else "engine-bridge-gone.timer"
    (out / stale).write_text("a clock since disabled")
    (out / "unrelated.txt").write_text("kept")
    args = ["render", kind, "--rules", str(ROOT / "loops"), "--registry", str(ROOT / "registry")]
    args += ["--config", str(DATA / "config"), "--out", str(out), "--engine", ENGINE]
    assert main(args) == 0
    golden = DATA / kind
    written = sorted(p.name for p in out.iterdir() if p.name != "unrelated.txt")
    assert written == sorted(p.name for p in golden.iterdir())
    for name in written:
        assert (out / name).read_bytes() == (golden / name).read_bytes(), name
    assert (out / "unrelated.txt").read_text() == "kept"


def test_render_is_deterministic(tmp_path: Path) -> None:
    """Rendering twice gives byte-identical files in a stable order."""
    _, clocks = load_host_clocks(paths(DATA / "config"))
    for kind in ("launchd", "systemd"):
        first, second = render_clocks(kind, clocks, ENGINE), render_clocks(kind, clocks, ENGINE)
        assert first == second and list(first) == sorted(first)


def test_launchd_plists_parse() -> None:
    """Each golden clock plist parses with plistlib into a job that calls `engine emit`
    at calendar slots or on an interval, never at load."""
    for path in sorted((DATA / "launchd").glob("engine.bridge.*.plist")):
        job = plistlib.loads(path.read_bytes())
        assert job["Label"] == path.stem
        assert job["ProgramArguments"][:2] == [ENGINE, "emit"]
        assert job.get("StartInterval", 0) > 0 or job["StartCalendarInterval"]
        assert job["RunAtLoad"] is False


# ---- a host timer's post claims only its own, current slot -----------------------------

HOST_LOOP = Loop(
    name="factory-dispatch",
    trigger=Trigger(TriggerKind.HOST, every_seconds=300),
    event_type="factory.work.requested",
    payload={},
)
POSTED_AT = datetime(2026, 12, 1, 9, 7, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("slot", "problem"),
    [
        ("2026-12-01T09:05:00Z", None),  # the current slot
        ("2026-12-01T08:00:00Z", None),  # an older one (a late timer)
        ("2026-12-01T09:10:00Z", None),  # next slot, within the clock skew
        ("2026-12-01T09:15:00Z", "has not come yet"),  # a future slot
        ("2026-12-01T09:06:00Z", "not a slot of loop"),  # not on the 5-minute cadence
        ("2026-12-01T09:05:00.5Z", "not a slot"),
        ("2026-12-01T09:05:00+00:00", "not a slot"),
        ("yesterday", "not a slot"),
        (None, "needs payload.slot"),
    ],
)
def test_a_bridge_tick_must_be_a_slot_of_its_loop_that_has_come(
    slot: str | None, problem: str | None
) -> None:
    """A signed post may fire its host-clock loop's slot, never one that has not come
    (which would take the real slot's identity) nor one off the loop's cadence."""
    payload = {} if slot is None else {"slot": slot}
    found = slot_problem(HOST_LOOP, payload, POSTED_AT, BRIDGE_SKEW)
    assert (found is None) if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize(
    ("trigger", "slot", "ok"),
    [
        (Trigger(TriggerKind.INTERVAL, every_seconds=3600), "2026-12-01T08:00:00Z", True),
        (Trigger(TriggerKind.INTERVAL, every_seconds=3600), "2026-12-01T08:30:00Z", False),
        (Trigger(TriggerKind.INTERVAL, every_seconds=3600), "2026-12-01T10:00:00Z", False),
        (Trigger(TriggerKind.CRON, cron="0 6 * * *", timezone="Europe/Budapest"),
         "2026-12-01T05:00:00Z", True),
        (Trigger(TriggerKind.CRON, cron="0 6 * * *", timezone="Europe/Budapest"),
         "2026-12-01T06:00:00Z", False),
        (Trigger(TriggerKind.MANUAL), "2026-12-01T06:00:00Z", False),
    ],
)  # fmt: skip
def test_an_operators_backfilled_tick_must_be_a_past_slot(
    trigger: Trigger, slot: str, ok: bool
) -> None:
    """A backfilled tick (no skew) names a slot of the loop's own sequence that has come:
    09:07:30 is now, so 10:00 has not, 08:30 is off an hourly cadence, 06:00 UTC is not
    06:00 in Budapest, and a manual loop has no slots."""
    loop = replace(HOST_LOOP, name="nightly", trigger=trigger)
    assert (slot_problem(loop, {"slot": slot}, POSTED_AT) is None) is ok
