"""The host-clock bridge (seed 1 §15), pure: a validated host clock becomes the argv of
its `engine emit`, a launchd plist or a systemd service and timer pair; a bridge
loop's post gets the slot identity `bridge:<loop>:<slot>`. Nothing here installs,
loads or edits a timer: installing is the operator's act."""

from __future__ import annotations

import json
import plistlib
import shlex
from datetime import UTC, datetime
from typing import Any

from engine.core.config import HostTimer
from engine.core.ticks import bridge_tick_id, slot_text

LABEL_PREFIX = "engine.bridge."
UNIT_PREFIX = "engine-bridge-"


def payload_text(payload: dict[str, Any]) -> str:
    """Compact JSON with sorted keys: the same payload always renders the same text."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def emit_argv(clock: HostTimer, engine: str) -> list[str]:
    """`engine emit TYPE --payload JSON [--gate CMD] [--dry CMD] [--loop NAME --every D]`."""
    argv = [engine, "emit", clock.event_type, "--payload", payload_text(clock.payload)]
    if clock.gate_command:
        argv += ["--gate", shlex.join(clock.gate_command)]
    if clock.dry_command:
        argv += ["--dry", shlex.join(clock.dry_command)]
    if clock.loop is not None:
        argv += ["--loop", clock.loop, "--every", clock.cadence]
    return argv


def bridge_slot(now: datetime, every_seconds: int) -> datetime:
    """The host-clock slot `now` falls in: the epoch floor of the cadence."""
    epoch = int(now.timestamp())
    return datetime.fromtimestamp(epoch - epoch % every_seconds, UTC)


def bridge_event_id(loop: str, slot: datetime) -> str:
    """A bridge post's identity; never `clock:...`, so it cannot take a native slot's."""
    return bridge_tick_id(loop, slot)


def tick_payload(payload: dict[str, Any], loop: str, slot: datetime, every: int) -> dict[str, Any]:
    """A bridge loop's tick payload: the static payload plus {loop, slot,
    cadenceSeconds, skippedSlots} (a host timer never catches up: 0 skipped)."""
    return {
        **payload,
        "loop": loop,
        "slot": slot_text(slot),
        "cadenceSeconds": every,
        "skippedSlots": 0,
    }


# ---- launchd --------------------------------------------------------------------------


def launchd_label(clock: HostTimer) -> str:
    return LABEL_PREFIX + clock.name


def launchd_plist(clock: HostTimer, engine: str) -> dict[str, Any]:
    """The launchd job (for plistlib.dumps, which sorts keys): run `engine emit` every
    cadence, not at load, so a reload never fires an extra post."""
    return {
        "Label": launchd_label(clock),
        "ProgramArguments": emit_argv(clock, engine),
        "StartInterval": clock.every_seconds,
        "RunAtLoad": False,
        "ProcessType": "Background",
    }


# ---- systemd --------------------------------------------------------------------------


def unit_name(clock: HostTimer) -> str:
    return UNIT_PREFIX + clock.name


def _systemd_word(word: str) -> str:
    """One ExecStart argument: double-quoted with C escapes when it needs quoting;
    `%` and `$` doubled so systemd expands neither specifiers nor variables."""
    text = word.replace("%", "%%").replace("$", "$$")
    if text and all(c.isalnum() or c in "/._-=:,@+" for c in text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_service(clock: HostTimer, engine: str) -> str:
    exec_start = " ".join(_systemd_word(w) for w in emit_argv(clock, engine))
    return (
        "[Unit]\n"
        f"Description=engine host clock {clock.name}: emit {clock.event_type}\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"ExecStart={exec_start}\n"
    )


def systemd_timer(clock: HostTimer) -> str:
    seconds = clock.every_seconds
    return (
        "[Unit]\n"
        f"Description=engine host clock {clock.name} every {clock.cadence}\n"
        "\n"
        "[Timer]\n"
        f"OnBootSec={seconds}s\n"
        f"OnUnitActiveSec={seconds}s\n"
        f"Unit={unit_name(clock)}.service\n"
        "\n"
        "[Install]\n"
        "WantedBy=timers.target\n"
    )


def render_files(kind: str, clocks: tuple[HostTimer, ...], engine: str) -> dict[str, bytes]:
    """File name -> content for every enabled host clock, sorted by name: launchd
    plists, or systemd .service + .timer pairs. Deterministic: no timestamps."""
    files: dict[str, bytes] = {}
    for clock in sorted((c for c in clocks if c.enabled), key=lambda c: c.name):
        if kind == "launchd":
            data = plistlib.dumps(launchd_plist(clock, engine), sort_keys=True)
            files[launchd_label(clock) + ".plist"] = data
        else:
            files[unit_name(clock) + ".service"] = systemd_service(clock, engine).encode()
            files[unit_name(clock) + ".timer"] = systemd_timer(clock).encode()
    return files
