"""Loops: `for` expansion, settings, names, static payloads, and the checks on the
effective loop (after the overlay)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dsl import expr as ex
from dsl.diagnostics import Span, did_you_mean
from dsl.model import Arg, Emit, ForEach, LoopDecl
from engine.core.compile_base import COLLECTIONS, LOOP_NAME, SAMPLE_REPO, SAMPLE_SLOT
from engine.core.compile_shapes import ShapeCompiler
from engine.core.keys import KeyPattern, KeyTemplate, witness
from engine.core.loopsettings import read_settings, read_triage
from engine.core.provenance import loop_places
from engine.core.registry import EventType, param_problem
from engine.core.ruleset import (
    TICK_FIELDS,
    WATCH_FIELDS,
    Approval,
    Loop,
    Source,
    Trigger,
    TriggerKind,
    WorkShape,
    default_cap,
)
from engine.core.triage import TriageRule
from engine.core.triggers import (
    AFTER_FIELDS,
    EVENT_FIELDS,
    SAMPLE_TRIGGER,
    SAMPLE_UPSTREAM,
    dependency_cycle,
)
from engine.core.work import MAX_KEY

# The fields the engine fills in a loop's ticks, by trigger (E0208, E0206).
_FILLED = {
    TriggerKind.EVENT: EVENT_FIELDS,
    TriggerKind.AFTER: AFTER_FIELDS,
    TriggerKind.WATCH: WATCH_FIELDS,
}


class LoopCompiler(ShapeCompiler):
    # ---- loops -------------------------------------------------------------------
    def _loops(self, decls: list[Any]) -> dict[str, Loop]:
        loops: dict[str, Loop] = {}
        for decl in decls:
            if isinstance(decl, LoopDecl):
                self._add_loop(loops, self._loop(decl, {}))
            elif isinstance(decl, ForEach):
                scopes = self._expand(decl)
                for scope in scopes or ():
                    for loop_decl in decl.loops:
                        self._add_loop(loops, self._loop(loop_decl, scope))
                if scopes == []:
                    self._check_unexpanded(decl)
        return loops

    def _check_unexpanded(self, decl: ForEach) -> None:
        """A `for` block that selects no repo (none configured, as in CI) is checked
        against a sample repo, so its mistakes fail closed without a config."""
        scope = {decl.var: SAMPLE_REPO.as_scope()}
        dropped = set(self.dropped)  # sample loops are not kernel loops an overlay could name
        for loop_decl in decl.loops:
            loop = self._loop(loop_decl, scope)
            if loop is not None:
                self._check_loop(loop.loop if isinstance(loop, WorkShape) else loop, {})
            if isinstance(loop, Loop) and loop.key is not None:
                # its key as a template: the variable's placeholders stand for any text
                pattern = open_pattern(loop.key.origin, key_text(loop_decl))
                self.keyed.append((loop_decl.name, pattern, loop.key.origin))
        self.dropped = dropped

    def _add_loop(self, loops: dict[str, Loop], loop: Loop | WorkShape | None) -> None:
        """A loop, or a shape (kept apart, in `work_shapes`): one name space for both."""
        if loop is None:
            return
        first = loops.get(loop.name) or self.work_shapes.get(loop.name)
        if first is not None:
            self.c.error(
                "E0401",
                f"loop '{loop.name}' is declared twice (first at {first.origin})",
                loop.origin,
            )
            return
        if isinstance(loop, WorkShape):
            self.work_shapes[loop.name] = loop
        else:
            loops[loop.name] = loop
            if loop.key is not None:
                self.keyed.append((loop.name, loop.key.pattern, loop.key.origin))

    def _expand(self, decl: ForEach) -> list[dict[str, Any]] | None:
        """One scope per selected repo; None when the block itself is wrong."""
        if decl.collection not in COLLECTIONS:
            self.c.error(
                "E0606",
                f"unknown collection '{decl.collection}'",
                decl.collection_span,
                "a for block iterates over: " + ", ".join(COLLECTIONS),
            )
            return None
        if decl.where is not None and not self._roots_ok(decl.where, [decl.var]):
            return None
        scopes: list[dict[str, Any]] = []
        repos = [self.repos[name] for name in sorted(self.repos)] or [SAMPLE_REPO]
        for repo in repos:
            scope = {decl.var: repo.as_scope()}
            if decl.where is not None:
                try:
                    if not ex.truthy(ex.evaluate(decl.where, scope)):
                        continue
                except ex.EvalError as err:
                    self.c.error(
                        "E0607", f"'where' failed for repo '{repo.name}': {err.message}", err.span
                    )
                    return None
            if repo is not SAMPLE_REPO:
                scopes.append(scope)
        return scopes

    def _loop(self, decl: LoopDecl, scope: dict[str, Any]) -> Loop | WorkShape | None:
        """The loop a block declares, or its work-bound shape when it has a `work` line."""
        name = self._loop_name(decl, scope)
        draft = read_settings(decl.settings, self.c, decl.on_events)
        triage = read_triage(decl.triage, self.c)
        shape_ok = self._shape_ok(decl, draft) if "work" in draft.seen else False
        self._cooldown_alone(draft)
        key, key_ok = self._key(draft.key, scope, "work" in draft.seen)
        if draft.key is None:
            self._existing_unread(triage)
        if len(decl.emits) != 1:
            at = decl.emits[1].span if decl.emits else decl.name_span
            self.c.error(
                "E0104",
                "a loop emits exactly one event type",
                at,
                "write: emit TYPE { key: value }",
            )
            self.dropped.add(name or decl.name)
            return None
        emit = decl.emits[0]
        if emit.subject or emit.event_id or emit.guard:
            self.c.error(
                "E0105",
                "a loop's emit takes a type and a static payload only",
                emit.span,
                "tick ids and subjects come from the slot",
            )
        if draft.trigger is None and not draft.trigger_written:  # else reported already
            self.c.error(
                "E0103",
                f"loop '{name or decl.name}' has no trigger",
                decl.name_span,
                'add one of: every 60m | cron "0 9 * * *" in UTC | at 2026-12-01T09:00:00Z'
                " | manual | host_clock 24h | watch PROBE every 5m | on_event TYPE | after LOOP",
            )
        payload = self._static_payload(emit, scope, "in a loop payload")
        if draft.trigger is not None and draft.trigger.kind is TriggerKind.AFTER:
            draft.trigger = self._upstream_name(draft.trigger, draft.after_spans["loop"], scope)
        if draft.trigger is not None and draft.on_event is not None:
            self._check_on_event(draft.trigger, draft.on_event.type_span)
        if draft.trigger is None or name is None or payload is None or not key_ok:
            # The loop is dropped; what it emits is still checked, so one run reports all.
            self._routed_type(emit.event_type, emit.type_span)
            self.dropped.add(name or decl.name)
            return None
        if draft.approval_span is not None:
            self.approval_spans[name] = draft.approval_span
        if draft.after_spans:
            self.after_spans[name] = draft.after_spans
        if draft.probe_span is not None:
            self.probe_spans[name] = draft.probe_span
        payload_span = emit.payload.span if emit.payload is not None else emit.type_span
        self.emit_spans[name] = (emit.type_span, payload_span)
        self.loop_places[name] = loop_places(decl, in_for_block=bool(scope))
        loop = Loop(
            name=name,
            trigger=draft.trigger,
            event_type=emit.event_type,
            payload=payload,
            catch_up=draft.catch_up,
            catch_up_cap=default_cap(draft.catch_up, draft.catch_up_cap),
            max_lateness_seconds=draft.max_lateness_seconds,
            singleton=draft.singleton,
            approval=draft.approval,
            enabled=draft.enabled,
            policy=draft.policy,
            on_active=draft.on_active,
            triage=triage,
            description=draft.description,
            key=key,
            source=Source.KERNEL,
            origin=decl.name_span,
        )
        return self._shape(draft, loop, shape_ok) if "work" in draft.seen else loop

    # ---- semantic keys (docs/rules.md#semantic-keys-key) ------------------------------
    def _key(
        self, arg: Arg | None, scope: dict[str, Any], shape: bool
    ) -> tuple[KeyTemplate | None, bool]:
        """The loop's key with its `for` placeholders filled (those over `payload` are
        the decision's), and whether it compiled."""
        if arg is None:
            return None, True
        if shape:
            self.c.error(
                "E0105",
                "a work-bound loop shape takes no key: an instance works on its work item's"
                " semantic key",
                arg.span,
                "remove the key line",
            )
            return None, False
        try:
            template = ex.parse_template(arg.value, arg.span)
        except ex.TemplateError as err:
            at = Span(arg.span.file, arg.span.line, arg.span.column + 1 + err.offset)
            self.c.error("E0602", str(err), at)
            return None, False
        if not self._roots_ok(template, [*scope, "payload"], "in a loop key"):
            return None, False
        parts: list[str | ex.Path] = []
        pieces = template.parts if isinstance(template, ex.Template) else (str(template.value),)
        for part in pieces:
            if isinstance(part, str) or part.root == "payload":
                parts.append(part)
                continue
            try:
                parts.append(str(ex.evaluate(ex.Template((part,), part.span), scope)))
            except ex.EvalError as err:
                self.c.error("E0607", err.message, err.span)
                return None, False
        key = KeyTemplate(_joined(parts), arg.span)
        concrete = key.pattern.concrete
        if concrete is not None and len(concrete) > MAX_KEY:
            self.c.error(
                "E0105",
                f"the key is {len(concrete)} characters; at most {MAX_KEY}",
                arg.span,
            )
            return None, False
        return key, True

    def _existing_unread(self, triage: tuple[TriageRule, ...]) -> None:
        """`existing` is what the key's checks found: a loop without a key has none."""
        for rule in triage:
            for part in (rule.guard, rule.key):
                for path in ex.paths(part) if part is not None else ():
                    if path.root == "existing":
                        self.c.error(
                            "E0601",
                            "'existing' is read by a loop without a key: nothing is checked",
                            path.span,
                            'give the loop the key its work is on, e.g. key "repair:{repo.name}"',
                        )

    def _check_keys(self) -> None:
        """No two loops can claim one semantic key (E0405): each key template is text
        and placeholders, a placeholder any non-empty text, and two that some key
        matches both collide. The second in file order is reported."""
        concrete: dict[str, int] = {}
        patterns: list[int] = []
        for index, (name, pattern, at) in enumerate(self.keyed):
            key = pattern.concrete
            clash = [concrete[key]] if key is not None and key in concrete else []
            clash += [i for i in patterns if witness(self.keyed[i][1], pattern) is not None]
            if key is None:
                clash += [i for k, i in concrete.items() if pattern.matches(k)]
            if clash:
                first = min(clash)
                other, theirs, where = self.keyed[first]
                both = witness(theirs, pattern)
                self.c.error(
                    "E0405",
                    f"loop '{name}' can claim the same semantic key as loop '{other}'"
                    f" (key \"{theirs}\" at {where}): both claim '{both}'",
                    at,
                    "two loops on one key would make duplicate work: give each loop its own"
                    " key, or let one of them do the work",
                )
                continue
            if key is None:
                patterns.append(index)
            else:
                concrete[key] = index

    def _shadow_default(self, loops: Mapping[str, Loop]) -> dict[str, Loop]:
        """Shadow mode (docs/occurrences.md#shadow-mode): a loop whose routed definition is mutating
        runs in shadow unless its rule file says `shadow false` (an overlay loop cannot, so it stays
        in shadow)."""
        out: dict[str, Loop] = {}
        for name, loop in loops.items():
            route = self.routes.get(loop.event_type)
            definition = self.definitions.get(route.definition) if route else None
            mutating = definition is not None and definition.mutating
            if mutating and not loop.policy.shadow_declared:
                loop = replace(loop, policy=replace(loop.policy, shadow=True))
            out[name] = loop
        return out

    def _upstream_name(self, trigger: Trigger, at: Span, scope: dict[str, Any]) -> Trigger | None:
        """`after "merge-{repo.name}"` inside a `for` block names the repo's loop."""
        text = trigger.upstream or ""
        if "{" not in text:
            return trigger
        try:
            template = ex.parse_template(text, at)
        except ex.TemplateError as err:
            self.c.error("E0602", str(err), Span(at.file, at.line, at.column + 1 + err.offset))
            return None
        if not self._roots_ok(template, scope, "in an 'after' loop name"):
            return None
        try:
            return replace(trigger, upstream=str(ex.evaluate(template, scope)))
        except ex.EvalError as err:
            self.c.error("E0607", err.message, err.span)
            return None

    def _check_on_event(self, trigger: Trigger, at: Span) -> None:
        """The type an `on_event` loop waits for is registered; its guard and window
        read only `event`."""
        assert trigger.event_type is not None
        self._known_type(trigger.event_type, at)
        for part in (trigger.guard.expr if trigger.guard else None, trigger.window):
            if part is not None:
                self._roots_ok(part, ["event"], "in an on_event trigger")

    def _check_after(self, loops: Mapping[str, Loop]) -> None:
        """Each `after` names a loop there is, and outcomes its routed definition
        declares; no loop waits for itself, directly or around a circle."""
        for loop in loops.values():
            trigger = loop.trigger
            if trigger.kind is not TriggerKind.AFTER:
                continue
            spans = self.after_spans.get(loop.name, {})
            at = spans.get("loop", loop.origin)
            upstream = loops.get(trigger.upstream or "")
            if upstream is None:
                names = sorted(n for n in loops if n != loop.name)
                hint = did_you_mean(trigger.upstream or "", names) or (
                    "loops: " + ", ".join(names[:12]) if names else "no loop is declared"
                )
                self.c.error(
                    "E1001", f"'after' names an unknown loop '{trigger.upstream}'", at, hint
                )
                continue
            route = self.routes.get(upstream.event_type)
            definition = self.definitions.get(route.definition) if route else None
            if definition is None:
                continue
            for outcome in trigger.outcomes:
                if outcome not in definition.outcomes:
                    self.c.error(
                        "E1003",
                        f"loop '{upstream.name}' runs {definition.ref}, which has no outcome"
                        f" '{outcome}'",
                        spans.get(outcome, at),
                        did_you_mean(outcome, definition.outcomes)
                        or "outcomes: " + ", ".join(definition.outcomes),
                    )
        cycle = dependency_cycle(loops)
        if cycle is not None:
            first = cycle[0]
            self.c.error(
                "E1002",
                "loops wait for each other in a circle: " + " -> ".join(cycle),
                self.after_spans.get(first, {}).get("loop", loops[first].origin),
                "a loop after itself never starts; break the circle with another trigger",
            )

    def _loop_name(self, decl: LoopDecl, scope: dict[str, Any]) -> str | None:
        try:
            template = ex.parse_template(decl.name, decl.name_span)
        except ex.TemplateError as err:
            at = Span(decl.name_span.file, decl.name_span.line, decl.name_span.column + err.offset)
            self.c.error("E0602", str(err), at)
            return None
        if not self._roots_ok(template, scope, "in a loop name"):
            return None
        try:
            name = str(ex.evaluate(template, scope))
        except ex.EvalError as err:
            self.c.error("E0607", err.message, err.span)
            return None
        if not LOOP_NAME.match(name):
            self.c.error(
                "E0207",
                f"loop name '{name}' must be lower-case letters, digits, '.', '-' or '_'",
                decl.name_span,
            )
            return None
        return name

    def _static_payload(
        self, emit: Emit, scope: dict[str, Any], what: str
    ) -> dict[str, Any] | None:
        if emit.payload is None:
            return {}
        if not self._roots_ok(emit.payload, scope, what):
            return None
        try:
            value = ex.evaluate(emit.payload, scope)
        except ex.EvalError as err:
            self.c.error("E0607", err.message, err.span)
            return None
        assert isinstance(value, dict)
        return value

    def _check_loop(
        self, loop: Loop, overlay_keys: dict[str, Span], declared: Loop | None = None
    ) -> None:
        """Checks on the effective loop; errors point at the overlay key that set a
        value where the overlay did, otherwise at the rule."""
        if loop.source is Source.OVERLAY and not LOOP_NAME.match(loop.name):
            self.c.error(
                "E0207",
                f"loop name '{loop.name}' must be lower-case letters, digits, '.', '-' or '_'",
                loop.origin,
            )
        type_span, payload_span = self.emit_spans.get(loop.name, (loop.origin, loop.origin))
        watch = loop.trigger.kind is TriggerKind.WATCH
        filled = _FILLED.get(loop.trigger.kind, TICK_FIELDS)
        reserved = sorted(filled & set(loop.payload))
        if reserved:
            self.c.error(
                "E0208",
                f"loop '{loop.name}' sets tick field(s) {', '.join(reserved)} in its payload",
                overlay_keys.get("payload", payload_span),
                WATCH_HINT
                if watch
                else f"{', '.join(sorted(filled))} are filled by the engine"
                if loop.trigger.kind in _FILLED
                else "loop, slot, cadenceSeconds and skippedSlots are filled by the engine",
            )
        if watch:
            self._check_probe(loop, overlay_keys.get("payload", payload_span))
        at_type = overlay_keys.get("emit", type_span)
        self._routed_type(loop.event_type, at_type)
        approval_at = overlay_keys.get("approval", self.approval_spans.get(loop.name, loop.origin))
        # Disabling is always allowed: an overlay may switch off a kernel loop that
        # earned auto approval; only declaring auto on a loop that is not on fails.
        switched_off = declared is not None and declared.enabled and not loop.enabled
        # A shape is never enabled itself: its instances are, by their bindings, and
        # they run in shadow until they graduate (docs/work.md#work-bound-loops).
        shape = loop.name in self.work_shapes
        if loop.approval is Approval.AUTO and not loop.enabled and not switched_off and not shape:
            approval_at = overlay_keys.get("enabled", approval_at)
            self.c.error(
                "E0301",
                f"'approval auto' on loop '{loop.name}', which is not enabled",
                approval_at,
                "auto approval is earned by an enabled, observed loop; "
                "enable it in the same reviewed change",
            )
        if loop.approval is Approval.AUTO and loop.event_type in self.event_types:
            route = self.routes.get(loop.event_type)
            if loop.event_type in self.human_types or (
                route and route.definition in self.human_defs
            ):
                self.c.error(
                    "E0302",
                    f"'approval auto' on loop '{loop.name}', whose event type "
                    f"'{loop.event_type}' is human-approval-only",
                    approval_at,
                    "no rule, chain or overlay can make a human-only approval automatic",
                )
        if loop.approval is Approval.AUTO and loop.trigger.kind is TriggerKind.EVENT:
            route = self.routes.get(loop.event_type)
            definition = self.definitions.get(route.definition) if route else None
            if definition is not None and definition.mutating:
                self.c.error(
                    "E0305",
                    f"'approval auto' on loop '{loop.name}', fired by events from outside"
                    f" (on_event {loop.trigger.event_type}), whose definition"
                    f" {definition.ref} is mutating",
                    approval_at,
                    "an admitted event never runs mutating work unattended: keep the loop "
                    "watched, or have it run read-only work whose outcome chains further",
                )
        et = self.event_types.get(loop.event_type)
        if et is not None and et.payload_schema is not None:
            at_payload = overlay_keys.get("payload", overlay_keys.get("emit", payload_span))
            self._check_tick_payload(loop, et, at_payload)

    def _check_probe(self, loop: Loop, payload_at: Span) -> None:
        """A watch loop names a registered probe, and its static payload fills each of
        the probe's params with a value of the param's type."""
        name = loop.trigger.probe or ""
        at = self.probe_spans.get(loop.name, loop.origin)
        probe = self.probes.get(name)
        if probe is None:
            known = sorted(self.probes)
            hint = did_you_mean(name, known) or (
                "probes: " + ", ".join(known) if known else "declare it in registry/probes.yaml"
            )
            self.c.error("E0209", f"unknown probe '{name}'", at, hint)
            return
        if probe.kind != "command":  # a watch's poll runs a command (engine.adapters.probe)
            self.c.error(
                "E0209",
                f"probe '{name}' is a {probe.kind} probe; `watch` polls command probes",
                at,
                "a browser probe is opened by a browser_watch or browser_keepalive loop",
            )
            return
        for param_name, param in probe.params.items():
            if param_problem(param_name, param, loop.payload) is not None:
                self.c.error(
                    "E0209",
                    f"probe '{name}' param '{param_name}' reads {param.source}, which loop "
                    f"'{loop.name}' does not set to a {param.type}",
                    payload_at,
                    f"add it to the loop's static payload, e.g. {{ {param.source[8:]}: ... }}",
                )

    def _check_tick_payload(self, loop: Loop, et: EventType, at: Span) -> None:
        sample = tick_sample(loop)
        assert et.payload_schema is not None
        error = next(iter(self._validator(et).iter_errors(sample)), None)
        if error is not None:
            fields = "{" + ", ".join(k for k in sample if k not in loop.payload) + "}"
            if loop.trigger.kind is TriggerKind.WATCH:
                fields = WATCH_PAYLOAD
            self.c.error(
                "E0206",
                f"loop '{loop.name}' ticks would not fit '{et.name}': {error.message}",
                at,
                f"the tick payload is {fields} plus {sorted(loop.payload)}",
            )


def _joined(parts: list[str | ex.Path]) -> tuple[str | ex.Path, ...]:
    out: list[str | ex.Path] = []
    for part in parts:
        if isinstance(part, str) and out and isinstance(out[-1], str):
            out[-1] += part
        elif part != "":
            out.append(part)
    return tuple(out)


def key_text(decl: LoopDecl) -> str:
    """The text of a loop block's `key` line (the compiler read it already)."""
    return next(s.args[0].value for s in decl.settings if s.key == "key")


def open_pattern(at: Span, text: str) -> KeyPattern:
    """A `for` block's key as a template, every placeholder (its variable's too) open."""
    template = ex.parse_template(text, at)
    if not isinstance(template, ex.Template):
        return KeyPattern.of((str(template.value),))
    return KeyPattern.of(tuple(p if isinstance(p, str) else None for p in template.parts))


SAMPLE_FINGERPRINT = "0" * 64
WATCH_PAYLOAD = "{loop, window, fingerprint, previousFingerprint, observedAt}"
WATCH_HINT = f"a watch's tick fields {WATCH_PAYLOAD} are filled by the engine"


def tick_sample(loop: Loop) -> dict[str, Any]:
    """A payload of the shape the loop's ticks have, for the E0206 schema check."""
    if loop.trigger.kind is TriggerKind.WATCH:
        return {
            **loop.payload,
            "loop": loop.name,
            "window": f"watch:1-{SAMPLE_FINGERPRINT[:16]}",
            "fingerprint": SAMPLE_FINGERPRINT,
            "previousFingerprint": SAMPLE_FINGERPRINT,
            "observedAt": SAMPLE_SLOT,
        }
    # A waiting trigger's tick takes its cause's repo when the loop names none (the
    # runtime refuses, and journals, a tick that still does not fit).
    if loop.trigger.kind is TriggerKind.EVENT:
        return {
            "loop": loop.name,
            "window": "w",
            "trigger": SAMPLE_TRIGGER,
            "repo": "r",
            **loop.payload,
        }
    if loop.trigger.kind is TriggerKind.AFTER:
        return {
            "loop": loop.name,
            "window": "w",
            "upstream": SAMPLE_UPSTREAM,
            "repo": "r",
            **loop.payload,
        }
    cadence = (
        loop.trigger.every_seconds
        if loop.trigger.kind in (TriggerKind.INTERVAL, TriggerKind.HOST)
        else 0
    )
    return {
        "loop": loop.name,
        "slot": SAMPLE_SLOT,
        "cadenceSeconds": cadence or 0,
        "skippedSlots": 0,
        **loop.payload,
    }
