"""Work-bound loop shapes (docs/rules.md#work-bound-loop-shapes): a loop block with a
`work MODE ...` line compiles to a WorkShape, never to a loop, so nothing fires it; an
instance bound to a work item starts from it. The checks here are what a shape needs
beyond a loop's: a clock trigger, its bounds, and the registry entries it names."""

from __future__ import annotations

from dataclasses import replace

from dsl.diagnostics import Span, did_you_mean
from dsl.model import Arg, LoopDecl
from engine.core.compile_base import CompilerBase
from engine.core.loopsettings import Draft
from engine.core.ruleset import Loop, TriggerKind, WorkShape

# The triggers a shape may have: the clocks. A shape's firings are its own, never an
# event's or another loop's.
SHAPE_TRIGGERS = (TriggerKind.INTERVAL, TriggerKind.CRON)
TRIGGER_WORDS = {
    TriggerKind.AT: "at",
    TriggerKind.MANUAL: "manual",
    TriggerKind.HOST: "host_clock",
    TriggerKind.WATCH: "watch",
    TriggerKind.EVENT: "on_event",
    TriggerKind.AFTER: "after",
}
# Each bound a shape must write, and the line the E0106 hint suggests for it.
BOUNDS = {
    "backoff": "backoff base 1m max 1h",
    "cooldown": "cooldown 30m",
    "budget daily_runs": "budget daily_runs 24",
}


def written_bounds(decl: LoopDecl) -> set[str]:
    """The bounds a loop block writes, well or badly (a bad one is reported by its
    setting, so it is not reported missing too)."""
    found: set[str] = set()
    for setting in decl.settings:
        if setting.key in ("backoff", "cooldown"):
            found.add(setting.key)
        keys = {arg.value for arg in setting.args[::2]}
        if setting.key == "budget" and keys & {"daily_runs", "daily-runs"}:
            found.add("budget daily_runs")
    return found


class ShapeCompiler(CompilerBase):
    def _shape_ok(self, decl: LoopDecl, draft: Draft) -> bool:
        """Every check of a shape that its settings and the registry decide, all
        reported in one run: its bounds (E0106), its trigger, its controller (E0210)
        and its probe (E0209). False when one fails or its `work` line was wrong."""
        checks = [self._bounds_ok(decl), self._trigger_ok(draft)]
        if draft.work is not None:
            if draft.work.controller is not None:
                checks.append(self._controller_ok(draft.work.controller))
            if draft.work.probe is not None:
                checks.append(self._browser_probe_ok(draft.work.probe, str(draft.work.mode)))
        return draft.work is not None and all(checks)

    def _bounds_ok(self, decl: LoopDecl) -> bool:
        missing = [bound for bound in BOUNDS if bound not in written_bounds(decl)]
        if missing:
            self.c.error(
                "E0106",
                f"work-bound loop shape '{decl.name}' leaves out its bounds: " + ", ".join(missing),
                decl.name_span,
                "every instance of a shape is bounded: write "
                + "; ".join(BOUNDS[bound] for bound in missing),
            )
        return not missing

    def _trigger_ok(self, draft: Draft) -> bool:
        trigger = draft.trigger
        if trigger is None or trigger.kind in SHAPE_TRIGGERS:
            return trigger is not None
        at = draft.trigger_span or Span("<unknown>", 1, 1)
        self.c.error(
            "E0105",
            f"a work-bound loop shape fires by 'every' or 'cron', not "
            f"'{TRIGGER_WORDS[trigger.kind]}'",
            at,
            'write: every 1h, or cron "0 9 * * 1-5" in UTC (the work item, not an event, '
            "is what an instance follows)",
        )
        return False

    def _controller_ok(self, name: Arg) -> bool:
        if name.value in self.controllers:
            return True
        known = sorted(self.controllers)
        hint = did_you_mean(name.value, known) or (
            "controllers: " + ", ".join(known)
            if known
            else "declare it in registry/controllers.yaml"
        )
        self.c.error("E0210", f"unknown controller '{name.value}'", name.span, hint)
        return False

    def _browser_probe_ok(self, name: Arg, mode: str) -> bool:
        probe = self.probes.get(name.value)
        if probe is None:
            browsers = sorted(p.id for p in self.probes.values() if p.kind == "browser")
            hint = did_you_mean(name.value, browsers) or (
                "browser probes: " + ", ".join(browsers)
                if browsers
                else "declare a probe of kind: browser in registry/probes.yaml"
            )
            self.c.error("E0209", f"unknown probe '{name.value}'", name.span, hint)
            return False
        if probe.kind != "browser":
            self.c.error(
                "E0209",
                f"probe '{name.value}' is a {probe.kind} probe; a {mode} shape opens "
                "browser probes",
                name.span,
                "a command probe is polled by a `watch` loop",
            )
            return False
        return True

    def _shape(self, draft: Draft, loop: Loop, ok: bool) -> WorkShape | None:
        """The shape of a compiled loop block with a `work` line; None (the block
        dropped) when a check of `_shape_ok` failed. An instance starts in shadow."""
        if not ok or draft.work is None or draft.cooldown_seconds is None:
            self.dropped.add(loop.name)
            return None
        work = draft.work
        template = replace(loop, policy=replace(loop.policy, shadow=True))
        return WorkShape(
            name=loop.name,
            mode=work.mode,
            controller=work.controller.value if work.controller else None,
            probe=work.probe.value if work.probe else None,
            trigger=loop.trigger,
            cooldown_seconds=draft.cooldown_seconds,
            loop=template,
            origin=loop.origin,
            graduates=loop.policy.shadow_declared and not loop.policy.shadow,
        )

    def _cooldown_alone(self, draft: Draft) -> None:
        """`cooldown` belongs to a shape: on a loop without `work` it is an error."""
        at = draft.seen.get("cooldown")
        if at is not None and "work" not in draft.seen:
            self.c.error(
                "E0105",
                "'cooldown' belongs to a work-bound loop shape (a loop with a `work` line)",
                at,
                "remove it, or make the loop a shape: work continuation controller NAME",
            )
