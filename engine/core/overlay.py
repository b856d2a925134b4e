"""The instance overlay (`config/schedule.yaml`) merged over the kernel loops.

A kernel loop may change `enabled`, `every` (an interval loop's cadence, or a watch
loop's poll cadence; its probe stays the reviewed one) and payload keys; every other
field is pinned by its reviewed rule file. A name the kernel does not declare is a new,
complete loop of the instance (docs/rules.md, "The overlay"), with a clock trigger: a watch,
an `on_event` or an `after` loop is declared in a rule file only."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from dsl import spelling
from dsl.diagnostics import Collector, Span, did_you_mean
from engine.core.config import OVERLAY_MUTABLE, OverlayEntry
from engine.core.durations import DurationError, parse_duration
from engine.core.inputs import Located
from engine.core.loopsettings import valid_cron, valid_zone
from engine.core.ruleset import (
    Approval,
    CatchUp,
    Loop,
    OnActive,
    Source,
    Trigger,
    TriggerKind,
    default_cap,
)


def apply_overlay(
    kernel: dict[str, Loop],
    overlay: list[Located[tuple[str, OverlayEntry]]],
    collector: Collector,
) -> tuple[dict[str, Loop], dict[str, dict[str, Span]]]:
    """Effective loops (kernel loops with their permitted overrides, plus new loops),
    and for each loop the overlay changed, where each of its fields was written."""
    loops = dict(kernel)
    spans: dict[str, dict[str, Span]] = {}
    for located in overlay:
        name, entry = located.value
        if name in kernel:
            changed = _override(kernel[name], entry, located, collector)
        else:
            changed = _new_loop(name, entry, located, collector, kernel)
        if changed is not None:
            loops[name] = changed
            spans[name] = located.keys
    return loops, spans


def _at(located: Located[tuple[str, OverlayEntry]], key: str) -> Span:
    return located.keys.get(key, located.span)


def _duration(text: str, span: Span, collector: Collector) -> int | None:
    try:
        return parse_duration(text)
    except DurationError as err:
        collector.error("E0201", f"bad duration: {err}", span, "e.g. 90s, 60m, 4h, 7d")
        return None


def _override(
    loop: Loop, entry: OverlayEntry, located: Located[tuple[str, OverlayEntry]], c: Collector
) -> Loop | None:
    given = entry.given()
    pinned = sorted(given - OVERLAY_MUTABLE)
    for key in pinned:
        c.error(
            "E0801",
            f"the overlay cannot change '{key}' of kernel loop '{loop.name}'",
            _at(located, key),
            f"it is pinned by {loop.origin}; change it there in a reviewed commit "
            "(an overlay may change enabled, every and payload keys)",
        )
    if pinned:
        return None
    trigger = loop.trigger
    if entry.every is not None:
        if trigger.kind not in (TriggerKind.INTERVAL, TriggerKind.WATCH):
            c.error(
                "E0801",
                f"'every' applies to interval and watch loops; '{loop.name}' is "
                f"{loop.trigger.describe()}",
                _at(located, "every"),
                f"its trigger is pinned by {loop.origin}",
            )
            return None
        seconds = _duration(entry.every, _at(located, "every"), c)
        if seconds is None:
            return None
        trigger = replace(trigger, every_seconds=seconds)
    payload = {**loop.payload, **(entry.payload or {})}
    return replace(
        loop,
        trigger=trigger,
        enabled=loop.enabled if entry.enabled is None else entry.enabled,
        payload=payload,
        overlay_origin=located.span,
        overridden=tuple(sorted(given)),
    )


def _unreviewed_grant(
    name: str, entry: OverlayEntry, located: Located[tuple[str, OverlayEntry]], c: Collector
) -> bool:
    """The overlay is not reviewed in git and the digest does not cover it, so it can
    never grant what only review may: `approval: auto` (the loop would run unattended)
    or a say over shadow mode. True when the entry tries (each try reported, E0304)."""
    tried = False
    if entry.approval == "auto":
        c.error(
            "E0304",
            f"overlay loop '{name}' cannot be 'approval: auto'",
            _at(located, "approval"),
            "config/schedule.yaml is not reviewed in git: a loop earns auto approval in a "
            "rule file under loops/, in a reviewed commit (or stays watched here)",
        )
        tried = True
    if "shadow" in entry.given():
        c.error(
            "E0304",
            f"overlay loop '{name}' cannot set shadow mode",
            _at(located, "shadow"),
            "shadow mode follows the rules: a loop of mutating work runs in shadow until a "
            "reviewed rule file under loops/ says `shadow false`",
        )
        tried = True
    return tried


def _new_loop(
    name: str,
    entry: OverlayEntry,
    located: Located[tuple[str, OverlayEntry]],
    c: Collector,
    kernel: dict[str, Loop],
) -> Loop | None:
    if _unreviewed_grant(name, entry, located, c):
        return None
    if entry.emit is None:
        close = did_you_mean(name, kernel)
        c.error(
            "E0803",
            f"overlay loop '{name}' is not a kernel loop and has no 'emit'",
            located.span,
            f"{close[:-1]} (a kernel loop)?"
            if close
            else "a new loop needs emit and one trigger (every, cron with timezone, at, or manual)",
        )
        return None
    trigger = _trigger(name, entry, located, c)
    if trigger is None:
        return None
    lateness = None
    if entry.max_lateness is not None:
        lateness = _duration(entry.max_lateness, _at(located, "max_lateness"), c)
        if lateness is None:
            return None
    if entry.catch_up_cap is not None and entry.catch_up != "all":
        c.error("E0804", "catch_up_cap applies to catch_up: all only", _at(located, "catch_up_cap"))
        return None
    overlap = _overlap(name, entry, located, c)
    if overlap is None:
        return None
    return Loop(
        name=name,
        trigger=trigger,
        event_type=entry.emit,
        payload=dict(entry.payload or {}),
        catch_up=CatchUp(entry.catch_up or "none"),
        catch_up_cap=default_cap(CatchUp(entry.catch_up or "none"), entry.catch_up_cap),
        max_lateness_seconds=lateness,
        singleton=overlap.singleton,
        on_active=OnActive(overlap.on_active),
        approval=Approval.WATCHED,  # never auto: see _unreviewed_grant
        enabled=bool(entry.enabled),
        description=entry.description or "",
        source=Source.OVERLAY,
        origin=located.span,
        overlay_origin=located.span,
    )


def _overlap(
    name: str, entry: OverlayEntry, located: Located[tuple[str, OverlayEntry]], c: Collector
) -> spelling.OverlapMeaning | None:
    """A new loop's `overlap: skip|buffer_one|allow` (default skip), as a rule file's
    `overlap` line means it (docs/rules.md#overlap); an overlay loop sets no budget, so no
    `max N`. The old `singleton: true|false` still loads, with a W0901 warning."""
    value = spelling.Overlap(entry.overlap or "skip")
    if entry.singleton is not None:
        if entry.overlap is not None:
            c.error(
                "E0102",
                f"the old 'singleton' of overlay loop '{name}' conflicts with its 'overlap'",
                _at(located, "singleton"),
                "overlap replaces singleton: keep only the overlap line",
            )
            return None
        rewrite = spelling.overlap_of(entry.singleton, "return", None)
        assert rewrite is not None  # either value of singleton alone has its overlap value
        value = rewrite.value
        c.warn(
            spelling.OLD_SPELLING,
            f"old spelling 'singleton: {str(entry.singleton).lower()}'",
            _at(located, "singleton"),
            f"write: overlap: {value} (engine fmt rewrites rule files, not this file)",
        )
    return spelling.meaning(value)


def _trigger(
    name: str, entry: OverlayEntry, located: Located[tuple[str, OverlayEntry]], c: Collector
) -> Trigger | None:
    kinds = [k for k in ("every", "cron", "at", "manual") if getattr(entry, k) not in (None, False)]
    if len(kinds) != 1:
        what = "no trigger" if not kinds else "several triggers (" + ", ".join(kinds) + ")"
        c.error(
            "E0803",
            f"overlay loop '{name}' has {what}",
            located.span,
            "give exactly one of: every, cron (with timezone), at, manual: true",
        )
        return None
    if entry.timezone is not None and kinds != ["cron"]:
        c.error("E0804", "timezone applies to cron loops only", _at(located, "timezone"))
        return None
    if entry.every is not None:
        seconds = _duration(entry.every, _at(located, "every"), c)
        return None if seconds is None else Trigger(TriggerKind.INTERVAL, every_seconds=seconds)
    if entry.cron is not None:
        return _cron_trigger(entry, located, c)
    if entry.at is not None:
        try:
            when = datetime.fromisoformat(entry.at)
        except ValueError:
            when = None
        if when is None or when.tzinfo is None:
            c.error(
                "E0205",
                f"'{entry.at}' is not an ISO-8601 time with an offset",
                _at(located, "at"),
                "e.g. 2026-12-01T09:00:00Z",
            )
            return None
        return Trigger(TriggerKind.AT, at=when)
    return Trigger(TriggerKind.MANUAL)


def _cron_trigger(
    entry: OverlayEntry, located: Located[tuple[str, OverlayEntry]], c: Collector
) -> Trigger | None:
    assert entry.cron is not None
    if entry.timezone is None:
        c.error(
            "E0804",
            "a cron loop needs an explicit timezone",
            _at(located, "cron"),
            "add: timezone: Europe/Budapest (or UTC)",
        )
        return None
    problem = valid_cron(entry.cron) or valid_zone(entry.timezone)
    if problem is not None:
        code, message, hint = problem
        key = "cron" if code == "E0202" else "timezone"
        c.error(code, message, _at(located, key), hint)
        return None
    return Trigger(TriggerKind.CRON, cron=entry.cron, timezone=entry.timezone)
