"""Host clocks (config/schedule.yaml `host_clocks:`, docs/deploy.md#2-the-host-clock-bridge),
checked against the rules and their bridge loops."""

from __future__ import annotations

from collections.abc import Mapping

from engine.core.compile_base import SAMPLE_SLOT, CompilerBase
from engine.core.config import HostTimer
from engine.core.durations import DurationError, format_duration, parse_duration
from engine.core.ruleset import (
    TICK_FIELDS,
    Loop,
    TriggerKind,
)


class ClockCompiler(CompilerBase):
    # ---- host clocks (docs/deploy.md#2-the-host-clock-bridge) ----------------------
    def _host_clocks(self, loops: Mapping[str, Loop]) -> None:
        """Each host clock: a known event type, a parseable cadence and a payload that
        fits; one named like a kernel `host-clock` loop is that loop's bridge and must
        agree with it (event type, cadence). A loop of any other trigger with the same
        name stays independent: the clock posts plain events, never its ticks."""
        for located in self.tree.host_clocks:
            clock = located.value
            at_type = located.keys.get("emit", located.span)
            at_cadence = located.keys.get("cadence", located.span)
            known = self._known_type(clock.emit, at_type)
            try:
                seconds: int | None = parse_duration(clock.cadence)
            except DurationError as err:
                seconds = None
                self.c.error("E0201", f"bad cadence: {err}", at_cadence, "e.g. 5m, 60m, 24h")
            loop = loops.get(clock.name)
            bridge = loop if loop is not None and loop.trigger.kind is TriggerKind.HOST else None
            if bridge is not None and known and bridge.event_type != clock.emit:
                self.c.error(
                    "E0806",
                    f"host clock '{clock.name}' emits '{clock.emit}' but its bridge loop"
                    f" emits '{bridge.event_type}'",
                    at_type,
                    f"write: emit: {bridge.event_type}",
                )
                continue
            if (
                bridge is not None
                and seconds is not None
                and bridge.trigger.every_seconds != seconds
            ):
                expected = format_duration(bridge.trigger.every_seconds or 0)
                self.c.error(
                    "E0806",
                    f"host clock '{clock.name}' fires every {clock.cadence} but its bridge"
                    f" loop expects host_clock {expected}",
                    at_cadence,
                    f"write: cadence: {expected}",
                )
                continue
            if not known or seconds is None:
                continue
            reserved = sorted(TICK_FIELDS & set(clock.payload))
            if reserved:
                self.c.error(
                    "E0208",
                    f"host clock '{clock.name}' payload sets reserved tick field '{reserved[0]}'",
                    located.keys.get("payload", located.span),
                    "`engine emit --loop` adds loop and slot for a bridge loop's clock",
                )
                continue
            payload = {**(bridge.payload if bridge is not None else {}), **clock.payload}
            et = self.event_types[clock.emit]
            if et.payload_schema is not None:
                sample = payload
                if bridge is not None:
                    tick = {"slot": SAMPLE_SLOT, "cadenceSeconds": seconds, "skippedSlots": 0}
                    sample = {**payload, "loop": clock.name, **tick}
                error = next(iter(self._validator(et).iter_errors(sample)), None)
                if error is not None:
                    self.c.error(
                        "E0805",
                        f"host clock '{clock.name}' payload does not fit '{et.name}':"
                        f" {error.message}",
                        located.keys.get("payload", located.span),
                    )
                    continue
            self.host_timers.append(
                HostTimer(
                    name=clock.name,
                    event_type=clock.emit,
                    cadence=clock.cadence,
                    every_seconds=seconds,
                    payload=payload,
                    enabled=clock.enabled,
                    gate_command=tuple(clock.gate_command) if clock.gate_command else None,
                    dry_command=tuple(clock.dry_command) if clock.dry_command else None,
                    loop=clock.name if bridge is not None else None,
                )
            )
