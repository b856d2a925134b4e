"""The host-clock bridge (docs/deploy.md#2-the-host-clock-bridge), pure: a validated
host clock becomes the argv of its `engine emit`, a launchd plist or a systemd
service and timer pair; a bridge loop's post gets the slot identity
`bridge:<loop>:<slot>`. Nothing here installs, loads or edits a timer: installing is
the operator's act."""

from __future__ import annotations

import json
import plistlib
import shlex
from collections.abc import Callable
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


def retry_delays(retries: int, first: float, cap: float, draw: Callable[[], float]) -> list[float]:
    """The waits before each of `retries` retries of a post that found no runtime:
    `first` doubling, capped at `cap`, each jittered into its upper half by `draw()`
    (a number in [0, 1)), so timers that fired together do not retry together."""
    waits = []
    for attempt in range(retries):
        full = min(cap, first * 2 ** min(attempt, 64))
        waits.append(full / 2 + full / 2 * draw())
    return waits


# ---- calendars: a cadence's slots as the host's timer states them ---------------------

WEEK = 7 * 86400
# The epoch (1970-01-01) was a Thursday, so the epoch floor of a week is a Thursday.
EPOCH_WEEKDAY = ("Thu", 4)  # systemd's name, launchd's Weekday (0 and 7 are Sunday)


def on_calendar(every: int) -> str | None:
    """A systemd calendar expression (UTC) that fires exactly at the slots
    `bridge_slot` computes for a cadence of `every` seconds, the epoch multiples of it;
    None when none can: a cadence that does not divide a minute, an hour or a day
    evenly into whole units, nor is a week (docs/deploy.md#calendar-timers)."""
    if every < 60 and 60 % every == 0:
        return f"*-*-* *:*:00/{every} UTC"
    if every == 60:
        return "*-*-* *:*:00 UTC"
    minutes, hours = divmod(every, 60), divmod(every, 3600)
    if minutes[1] == 0 and minutes[0] < 60 and 60 % minutes[0] == 0:
        return f"*-*-* *:00/{minutes[0]}:00 UTC"
    if every == 3600:
        return "*-*-* *:00:00 UTC"
    if hours[1] == 0 and hours[0] < 24 and 24 % hours[0] == 0:
        return f"*-*-* 00/{hours[0]}:00:00 UTC"
    if every == 86400:
        return "*-*-* 00:00:00 UTC"
    if every == WEEK:
        return f"{EPOCH_WEEKDAY[0]} *-*-* 00:00:00 UTC"
    return None


def launchd_calendar(every: int) -> list[dict[str, int]] | None:
    """launchd's StartCalendarInterval for a cadence of whole minutes that divides an
    hour, of whole hours that divides a day, or of a day or a week; None otherwise
    (StartInterval then). launchd reads it in local time and has no seconds: each
    firing still falls in a slot of its own (docs/deploy.md#calendar-timers)."""
    minutes, hours = divmod(every, 60), divmod(every, 3600)
    if every == WEEK:
        return [{"Weekday": EPOCH_WEEKDAY[1], "Hour": 0, "Minute": 0}]
    if every == 86400:
        return [{"Hour": 0, "Minute": 0}]
    if minutes[1] == 0 and 1 < minutes[0] <= 60 and 60 % minutes[0] == 0:
        return [{"Minute": m} for m in range(0, 60, minutes[0])]
    if hours[1] == 0 and hours[0] < 24 and 24 % hours[0] == 0:
        return [{"Hour": h, "Minute": 0} for h in range(0, 24, hours[0])]
    return None


# ---- launchd --------------------------------------------------------------------------


def launchd_label(clock: HostTimer) -> str:
    return LABEL_PREFIX + clock.name


def launchd_plist(clock: HostTimer, engine: str, variables: dict[str, str]) -> dict[str, Any]:
    """The launchd job (for plistlib.dumps, which sorts keys): run `engine emit` at the
    cadence's calendar slots (a missed one runs on wake), else every cadence; never at
    load, so a reload never fires an extra post. `variables`: its environment."""
    job: dict[str, Any] = {
        "Label": launchd_label(clock),
        "ProgramArguments": emit_argv(clock, engine),
        "RunAtLoad": False,
        "ProcessType": "Background",
    }
    calendar = launchd_calendar(clock.every_seconds)
    if calendar is None:
        job["StartInterval"] = clock.every_seconds
    else:
        job["StartCalendarInterval"] = calendar
    if variables:
        job["EnvironmentVariables"] = dict(variables)
    return job


# ---- systemd --------------------------------------------------------------------------


def unit_name(clock: HostTimer) -> str:
    return UNIT_PREFIX + clock.name


def systemd_word(word: str) -> str:
    """One ExecStart argument: double-quoted with C escapes when it needs quoting;
    `%` and `$` doubled so systemd expands neither specifiers nor variables."""
    text = word.replace("%", "%%").replace("$", "$$")
    if text and all(c.isalnum() or c in "/._-=:,@+" for c in text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def exec_start(argv: list[str]) -> str:
    return " ".join(systemd_word(w) for w in argv)


def systemd_service(clock: HostTimer, engine: str, environment: str) -> str:
    """The oneshot service a clock's timer starts; `environment`: its Environment= and
    EnvironmentFile= lines."""
    return (
        "[Unit]\n"
        f"Description=engine host clock {clock.name}: emit {clock.event_type}\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"{environment}"
        f"ExecStart={exec_start(emit_argv(clock, engine))}\n"
    )


def systemd_timer(clock: HostTimer) -> str:
    """At the cadence's calendar slots (UTC), a slot missed while the host was off
    fired once at boot (Persistent=true); a cadence no calendar states exactly falls
    back to a monotonic timer (docs/deploy.md#calendar-timers)."""
    seconds = clock.every_seconds
    calendar = on_calendar(seconds)
    if calendar is None:
        when = (
            f"# no calendar states every {seconds}s: monotonic (docs/deploy.md#calendar-timers)\n"
            f"OnBootSec={seconds}s\n"
            f"OnUnitActiveSec={seconds}s\n"
        )
    else:
        when = f"OnCalendar={calendar}\nPersistent=true\n"
    return (
        "[Unit]\n"
        f"Description=engine host clock {clock.name} every {clock.cadence}\n"
        "\n"
        "[Timer]\n"
        f"{when}"
        "AccuracySec=1s\n"
        f"Unit={unit_name(clock)}.service\n"
        "\n"
        "[Install]\n"
        "WantedBy=timers.target\n"
    )


def render_clocks(
    kind: str,
    clocks: tuple[HostTimer, ...],
    engine: str,
    environment: str = "",
    variables: dict[str, str] | None = None,
) -> dict[str, bytes]:
    """File name -> content for every enabled host clock, sorted by name: launchd
    plists, or systemd .service + .timer pairs. Deterministic: no timestamps.
    `environment` (systemd lines) and `variables` (launchd) give each its settings."""
    files: dict[str, bytes] = {}
    for clock in sorted((c for c in clocks if c.enabled), key=lambda c: c.name):
        if kind == "launchd":
            job = launchd_plist(clock, engine, variables or {})
            files[launchd_label(clock) + ".plist"] = plistlib.dumps(job, sort_keys=True)
        else:
            service = systemd_service(clock, engine, environment)
            files[unit_name(clock) + ".service"] = service.encode()
            files[unit_name(clock) + ".timer"] = systemd_timer(clock).encode()
    return files
