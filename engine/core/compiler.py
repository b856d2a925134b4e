"""Compile parsed rule files, the registry and the instance configuration into one
immutable RuleSet. Pure: it takes the loaded Tree and returns data, or raises
RulesError carrying every problem found (fail closed)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from jsonschema import Draft202012Validator

from dsl import expr as ex
from dsl.diagnostics import Collector, Span, did_you_mean
from dsl.model import ChainDecl, Emit, ForEach, HumanOnlyDecl, LoopDecl, RouteDecl, WebhookDecl
from engine.core.config import HostTimer
from engine.core.durations import DurationError, format_duration, parse_duration
from engine.core.inputs import Tree
from engine.core.loopsettings import read_settings
from engine.core.overlay import apply_overlay
from engine.core.registry import Definition, EventType
from engine.core.ruleset import (
    TICK_FIELDS,
    Approval,
    Chain,
    DefinitionRef,
    EmitRule,
    Loop,
    Repo,
    Route,
    RuleSet,
    Source,
    TriggerKind,
    WebhookStep,
    WebhookTable,
    default_cap,
)

LOOP_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
DEFINITION_REF = re.compile(r"^([a-z][a-z0-9-]*)@([0-9]+)$")
CHAIN_ROOTS = ("event", "result", "run")
WEBHOOK_SOURCES = ("github",)
COLLECTIONS = ("repos",)
SAMPLE_SLOT = "2026-01-01T00:00:00Z"
# A `for` block that expands to no loops is still checked, against this repo.
SAMPLE_REPO = Repo("example", "example/example", "main", report_only=False)


def compile_rules(tree: Tree) -> RuleSet:
    """The RuleSet for `tree`; raises RulesError listing every problem."""
    return _Compiler(tree).run()


def compile_with_clocks(tree: Tree) -> tuple[RuleSet, tuple[HostTimer, ...]]:
    """The RuleSet and the validated host clocks (in file order) of `tree`."""
    compiler = _Compiler(tree)
    rules = compiler.run()
    return rules, tuple(compiler.host_timers)


class _Compiler:
    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.c: Collector = tree.collector
        self.event_types: dict[str, EventType] = {}
        self.definitions: dict[DefinitionRef, Definition] = {}
        self.repos: dict[str, Repo] = {}
        self.routes: dict[str, Route] = {}
        self.human_types: set[str] = set()
        self.human_defs: set[DefinitionRef] = set()
        self.approval_spans: dict[str, Span] = {}
        self.validators: dict[str, Draft202012Validator] = {}
        self.emit_spans: dict[str, tuple[Span, Span]] = {}  # loop -> (type, payload)
        self.routed: set[str] = set()  # every routed type, including broken routes
        self.dropped: set[str] = set()  # kernel loops not compiled for their errors
        self.host_timers: list[HostTimer] = []

    # ---- driver ------------------------------------------------------------------
    def run(self) -> RuleSet:
        # Problems found while reading (syntax, YAML, registry and config entries) end
        # the run here: compiling over a partial tree would report their consequences
        # (unknown types, missing routes) as further, misleading errors.
        self.c.raise_if_any()
        self._index_registry()
        decls = [d for f in self.tree.rule_files for d in f.decls]
        for decl in decls:
            if isinstance(decl, HumanOnlyDecl):
                self._human_only(decl)
        for decl in decls:
            if isinstance(decl, RouteDecl):
                self._route(decl)
        kernel = self._loops(decls)
        # An overlay entry for a kernel loop that failed is not read as a new loop.
        overlay = [o for o in self.tree.overlay if o.value[0] not in self.dropped]
        loops, overlay_spans = apply_overlay(kernel, overlay, self.c)
        for loop in loops.values():
            declared = kernel.get(loop.name)
            self._check_loop(loop, overlay_spans.get(loop.name, {}), declared)
        chains = self._chains(d for d in decls if isinstance(d, ChainDecl))
        webhooks = self._webhooks(d for d in decls if isinstance(d, WebhookDecl))
        self._host_clocks(loops)
        self.c.raise_if_any()
        return RuleSet(
            loops=loops,
            routes=self.routes,
            chains=chains,
            webhooks=webhooks,
            event_types=self.event_types,
            definitions=self.definitions,
            human_only_types=frozenset(self.human_types),
            human_only_definitions=frozenset(self.human_defs),
            repos=self.repos,
            contracts=self.tree.contracts,
            digest=self.tree.digest,
        )

    # ---- registry ----------------------------------------------------------------
    def _index_registry(self) -> None:
        for located in self.tree.event_types:
            et = located.value
            if et.name in self.event_types:
                self.c.error("E0906", f"event type '{et.name}' is registered twice", located.span)
                continue
            self.event_types[et.name] = et
            if et.human_only:
                self.human_types.add(et.name)
        first_seen: dict[DefinitionRef, Span] = {}
        for d in self.tree.definitions:
            ref = DefinitionRef(d.value.id, d.value.version)
            if ref in self.definitions:
                self.c.error(
                    "E0906",
                    f"definition '{ref}' is registered twice (first at {first_seen[ref]})",
                    d.span,
                )
                continue
            first_seen[ref] = d.span
            if d.value.output_contract not in self.tree.contracts:
                at = d.keys.get("output_contract", d.span)
                hint = did_you_mean(d.value.output_contract, self.tree.contracts)
                self.c.error(
                    "E0904", f"unknown output contract '{d.value.output_contract}'", at, hint
                )
            self.definitions[ref] = d.value
        for r in self.tree.repos:
            name, entry = r.value
            self.repos[name] = Repo(name, entry.github, entry.base, entry.report_only)

    def _known_type(self, name: str, span: Span) -> bool:
        if name in self.event_types:
            return True
        hint = did_you_mean(name, self.event_types) or "register it in registry/event-types.yaml"
        self.c.error("E0203", f"unknown event type '{name}'", span, hint)
        return False

    def _routed_type(self, name: str, span: Span) -> None:
        if self._known_type(name, span) and name not in self.routed:
            self.c.error(
                "E0504",
                f"no route handles event type '{name}'",
                span,
                f"add a rule: route {name} to DEFINITION@VERSION",
            )

    def _definition(self, text: str, span: Span) -> tuple[DefinitionRef, Definition] | None:
        m = DEFINITION_REF.match(text)
        if m is None:
            self.c.error(
                "E0505",
                f"'{text}' is not a definition reference",
                span,
                "write NAME@VERSION, e.g. reaper@1",
            )
            return None
        ref = DefinitionRef(m.group(1), int(m.group(2)))
        if ref in self.definitions:
            return ref, self.definitions[ref]
        versions = sorted(r.version for r in self.definitions if r.id == ref.id)
        if versions:
            listed = ", ".join(f"{ref.id}@{v}" for v in versions)
            self.c.error(
                "E0502",
                f"definition '{ref.id}' has no version {ref.version}",
                span,
                f"registered: {listed}",
            )
        else:
            hint = did_you_mean(ref.id, {r.id for r in self.definitions})
            self.c.error("E0501", f"unknown definition '{ref.id}'", span, hint)
        return None

    # ---- approval policies and routes --------------------------------------------
    def _human_only(self, decl: HumanOnlyDecl) -> None:
        if decl.target_kind == "event":
            if self._known_type(decl.target, decl.target_span):
                self.human_types.add(decl.target)
            return
        found = self._definition(decl.target, decl.target_span)
        if found is not None:
            self.human_defs.add(found[0])

    def _route(self, decl: RouteDecl) -> None:
        self.routed.add(decl.event_type)  # a broken route is reported once, not per use
        if decl.event_type in self.routes:
            first = self.routes[decl.event_type].origin
            self.c.error(
                "E0402",
                f"event type '{decl.event_type}' is already routed at {first}",
                decl.type_span,
            )
            return
        known = self._known_type(decl.event_type, decl.type_span)
        found = self._definition(decl.definition, decl.definition_span)
        approval = Approval.WATCHED
        if decl.approval is not None:
            if decl.approval.value not in ("watched", "auto"):
                self.c.error(
                    "E0105",
                    f"unknown approval policy '{decl.approval.value}'",
                    decl.approval.span,
                    did_you_mean(decl.approval.value, ["watched", "auto"]) or "watched or auto",
                )
                return
            approval = Approval(decl.approval.value)
        if not known or found is None:
            return
        ref, definition = found
        if approval is Approval.AUTO:
            at = decl.approval.span if decl.approval else decl.span
            if decl.event_type in self.human_types or ref in self.human_defs:
                self.c.error(
                    "E0302",
                    f"'approval auto' on human-approval-only '{decl.event_type}' ({ref})",
                    at,
                    "a human-only type or definition is approved by an operator, always",
                )
                return
            if definition.mutating:
                self.c.error(
                    "E0303",
                    f"'approval auto' on a route to mutating definition '{ref}'",
                    at,
                    "routes auto-approve read-only work only; "
                    "a loop may earn auto for its own ticks",
                )
                return
        self.routes[decl.event_type] = Route(decl.event_type, ref, approval, decl.span)

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
                self._check_loop(loop, {})
        self.dropped = dropped

    def _add_loop(self, loops: dict[str, Loop], loop: Loop | None) -> None:
        if loop is None:
            return
        if loop.name in loops:
            first = loops[loop.name].origin
            self.c.error(
                "E0401", f"loop '{loop.name}' is declared twice (first at {first})", loop.origin
            )
            return
        loops[loop.name] = loop

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

    def _roots_ok(self, expr: ex.Expr, names: Iterable[str], what: str = "here") -> bool:
        allowed = sorted(names)
        ok = True
        for path in ex.paths(expr):
            if path.root not in allowed:
                listed = ", ".join(f"'{n}'" for n in allowed) or "nothing (values must be literals)"
                self.c.error(
                    "E0601",
                    f"unknown name '{path.root}' {what}",
                    path.span,
                    did_you_mean(path.root, allowed) or f"defined: {listed}",
                )
                ok = False
        return ok

    def _loop(self, decl: LoopDecl, scope: dict[str, Any]) -> Loop | None:
        name = self._loop_name(decl, scope)
        draft = read_settings(decl.settings, self.c)
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
                " | manual | host-clock 24h",
            )
        payload = self._static_payload(emit, scope, "in a loop payload")
        if draft.trigger is None or name is None or payload is None:
            # The loop is dropped; what it emits is still checked, so one run reports all.
            self._routed_type(emit.event_type, emit.type_span)
            self.dropped.add(name or decl.name)
            return None
        if draft.approval_span is not None:
            self.approval_spans[name] = draft.approval_span
        payload_span = emit.payload.span if emit.payload is not None else emit.type_span
        self.emit_spans[name] = (emit.type_span, payload_span)
        return Loop(
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
            description=draft.description,
            source=Source.KERNEL,
            origin=decl.name_span,
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
        reserved = sorted(TICK_FIELDS & set(loop.payload))
        if reserved:
            self.c.error(
                "E0208",
                f"loop '{loop.name}' sets tick field(s) {', '.join(reserved)} in its payload",
                overlay_keys.get("payload", payload_span),
                "loop, slot, cadenceSeconds and skippedSlots are filled by the engine",
            )
        at_type = overlay_keys.get("emit", type_span)
        self._routed_type(loop.event_type, at_type)
        approval_at = overlay_keys.get("approval", self.approval_spans.get(loop.name, loop.origin))
        # Disabling is always allowed: an overlay may switch off a kernel loop that
        # earned auto approval; only declaring auto on a loop that is not on fails.
        switched_off = declared is not None and declared.enabled and not loop.enabled
        if loop.approval is Approval.AUTO and not loop.enabled and not switched_off:
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
        et = self.event_types.get(loop.event_type)
        if et is not None and et.payload_schema is not None:
            at_payload = overlay_keys.get("payload", overlay_keys.get("emit", payload_span))
            self._check_tick_payload(loop, et, at_payload)

    def _validator(self, et: EventType) -> Draft202012Validator:
        """One payload validator per event type (building one is dear; loops share)."""
        found = self.validators.get(et.name)
        if found is None:
            assert et.payload_schema is not None
            found = self.validators[et.name] = Draft202012Validator(et.payload_schema)
        return found

    def _check_tick_payload(self, loop: Loop, et: EventType, at: Span) -> None:
        cadence = (
            loop.trigger.every_seconds
            if loop.trigger.kind in (TriggerKind.INTERVAL, TriggerKind.HOST)
            else 0
        )
        sample = {
            "loop": loop.name,
            "slot": SAMPLE_SLOT,
            "cadenceSeconds": cadence or 0,
            "skippedSlots": 0,
            **loop.payload,
        }
        assert et.payload_schema is not None
        error = next(iter(self._validator(et).iter_errors(sample)), None)
        if error is not None:
            self.c.error(
                "E0206",
                f"loop '{loop.name}' ticks would not fit '{et.name}': {error.message}",
                at,
                "the tick payload is {loop, slot, cadenceSeconds, skippedSlots} "
                f"plus {sorted(loop.payload)}",
            )

    # ---- host clocks (config/schedule.yaml `host_clocks:`, seed 1 §15) -------------
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
                self.c.error(
                    "E0201", f"unparseable cadence: {err}", at_cadence, "e.g. 5m, 60m, 24h"
                )
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
                    f" loop expects host-clock {expected}",
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

    # ---- chains ------------------------------------------------------------------
    def _chains(self, decls: Iterable[ChainDecl]) -> dict[tuple[DefinitionRef, str], Chain]:
        chains: dict[tuple[DefinitionRef, str], Chain] = {}
        for decl in decls:
            found = self._definition(decl.definition, decl.definition_span)
            if decl.stop is not None and decl.emits:
                self.c.error(
                    "E0105", "a chain edge either emits or stops, not both", decl.stop.span
                )
            emits = tuple(self._emit_rule(e, CHAIN_ROOTS, "in a chain") for e in decl.emits)
            if found is None:
                continue
            ref, definition = found
            for outcome in decl.outcomes:
                if outcome.name not in definition.outcomes:
                    self.c.error(
                        "E0503",
                        f"'{ref}' does not declare outcome '{outcome.name}'",
                        outcome.span,
                        did_you_mean(outcome.name, definition.outcomes)
                        or "declared: " + ", ".join(definition.outcomes),
                    )
                    continue
                key = (ref, outcome.name)
                if key in chains:
                    self.c.error(
                        "E0403",
                        f"outcome {outcome.name} of '{ref}' is already chained at "
                        f"{chains[key].origin}",
                        outcome.span,
                    )
                    continue
                chains[key] = Chain(ref, outcome.name, emits, decl.stop is not None, decl.span)
        return chains

    def _emit_rule(self, emit: Emit, roots: Iterable[str], what: str) -> EmitRule:
        self._routed_type(emit.event_type, emit.type_span)
        names = list(roots)
        for part in (
            emit.subject,
            emit.event_id,
            emit.payload,
            emit.guard.expr if emit.guard else None,
        ):
            if part is not None and names:
                self._roots_ok(part, names, what)
        return EmitRule(
            emit.event_type, emit.subject, emit.event_id, emit.payload, emit.guard, emit.span
        )

    # ---- webhooks ----------------------------------------------------------------
    def _webhooks(self, decls: Iterable[WebhookDecl]) -> dict[tuple[str, str], WebhookTable]:
        tables: dict[tuple[str, str], WebhookTable] = {}
        for decl in decls:
            if decl.source not in WEBHOOK_SOURCES:
                self.c.error(
                    "E0701",
                    f"unknown webhook source '{decl.source}'",
                    decl.source_span,
                    "sources: " + ", ".join(WEBHOOK_SOURCES),
                )
                continue
            key = (decl.source, decl.kind)
            if key in tables:
                self.c.error(
                    "E0404",
                    f"webhook {decl.source} {decl.kind} is already declared at "
                    f"{tables[key].origin}",
                    decl.span,
                )
                continue
            steps: list[WebhookStep] = []
            for line in decl.lines:
                # Webhook expressions read the delivery's own fields, so roots are open.
                steps.append(self._emit_rule(line, (), "") if isinstance(line, Emit) else line)
            tables[key] = WebhookTable(decl.source, decl.kind, tuple(steps), decl.span)
        return tables


def describe(rules: RuleSet) -> Mapping[str, Any]:
    """Counts for `engine check`'s summary."""
    return {
        "loops": len(rules.loops),
        "enabledLoops": sum(1 for loop in rules.loops.values() if loop.enabled),
        "routes": len(rules.routes),
        "chains": len(rules.chains),
        "webhookRules": sum(len(t.steps) for t in rules.webhooks.values()),
        "webhookKinds": len(rules.webhooks),
        "eventTypes": len(rules.event_types),
        "definitions": len(rules.definitions),
        "repos": len(rules.repos),
        "digest": rules.digest,
    }


__all__ = ["compile_rules", "describe"]
