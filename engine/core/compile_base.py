"""The compiler's shared state and checks: the registry index, event types,
definitions, routes and approval policies, expression roots. The loop, host-clock and
table parts (compile_loops, compile_clocks, compile_tables) build on it."""

from __future__ import annotations

import re
from collections.abc import Iterable

from jsonschema import Draft202012Validator

from dsl import expr as ex
from dsl.diagnostics import Collector, Span, did_you_mean
from dsl.model import HumanOnlyDecl, RouteDecl
from dsl.spelling import FIX_IT, OLD_SPELLING
from engine.core.config import HostTimer
from engine.core.controllers import Controller
from engine.core.inputs import Tree
from engine.core.keys import KeyPattern
from engine.core.provenance import LoopPlaces
from engine.core.registry import Definition, EventType, Probe
from engine.core.ruleset import (
    Approval,
    DefinitionRef,
    Repo,
    Route,
    WorkShape,
)
from engine.core.work import COMMAND_TYPES

LOOP_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
DEFINITION_REF = re.compile(r"^([a-z][a-z0-9-]*)@([0-9]+)$")
CHAIN_ROOTS = ("event", "result", "run")
WEBHOOK_SOURCES = ("github",)
COLLECTIONS = ("repos",)
SAMPLE_SLOT = "2026-01-01T00:00:00Z"
# A `for` block that expands to no loops is still checked, against this repo.
SAMPLE_REPO = Repo("example", "example/example", "main", report_only=False)


class CompilerBase:
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
        self.after_spans: dict[str, dict[str, Span]] = {}  # loop -> `after`'s loop, outcomes
        self.validators: dict[str, Draft202012Validator] = {}
        self.emit_spans: dict[str, tuple[Span, Span]] = {}  # loop -> (type, payload)
        self.routed: set[str] = set()  # every routed type, including broken routes
        self.dropped: set[str] = set()  # kernel loops not compiled for their errors
        self.host_timers: list[HostTimer] = []
        self.probes: dict[str, Probe] = {}  # registry/probes.yaml, by id
        self.probe_spans: dict[str, Span] = {}  # watch loop -> where its probe is named
        self.loop_places: dict[str, LoopPlaces] = {}  # loop -> where its settings are written
        self.controllers: dict[str, Controller] = {}  # registry/controllers.yaml, by id
        self.work_shapes: dict[str, WorkShape] = {}  # `work MODE ...` loop blocks, by name
        # the loops' semantic keys in file order: (loop, key pattern, where it is written)
        self.keyed: list[tuple[str, KeyPattern, Span]] = []

    # ---- registry ----------------------------------------------------------------
    def _index_probes(self) -> None:
        for located in self.tree.probes:
            probe = located.value
            if probe.id in self.probes:
                self.c.error("E0906", f"probe '{probe.id}' is registered twice", located.span)
                continue
            self.probes[probe.id] = probe

    def _index_controllers(self) -> None:
        for located in self.tree.controllers:
            controller = located.value
            if controller.id in self.controllers:
                self.c.error(
                    "E0906", f"controller '{controller.id}' is registered twice", located.span
                )
                continue
            self.controllers[controller.id] = controller

    def _index_registry(self) -> None:
        for located in self.tree.event_types:
            et = located.value
            if et.name in self.event_types:
                self.c.error("E0906", f"event type '{et.name}' is registered twice", located.span)
                continue
            self.event_types[et.name] = et
            if et.human_only:
                self.human_types.add(et.name)
        self._index_probes()
        self._index_controllers()
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
            self.repos[name] = Repo(
                name,
                entry.github,
                entry.base,
                entry.report_only,
                disabled=entry.disabled,
                frozen=entry.frozen,
            )

    def _known_type(self, name: str, span: Span) -> bool:
        if name in self.event_types:
            return True
        hint = did_you_mean(name, self.event_types) or "register it in registry/event-types.yaml"
        self.c.error("E0203", f"unknown event type '{name}'", span, hint)
        return False

    def _routed_type(self, name: str, span: Span) -> None:
        """A type emitted must be routed, but for the commands on work: planning itself
        applies those (docs/work.md#work-from-events), a route is optional."""
        if self._known_type(name, span) and name not in self.routed and name not in COMMAND_TYPES:
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
        if decl.old is not None:
            self.c.warn(
                OLD_SPELLING,
                f"old spelling '{decl.old.word}'",
                decl.old.span,
                f"write: human_only {decl.target} ({FIX_IT})",
            )
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

    def _validator(self, et: EventType) -> Draft202012Validator:
        """One payload validator per event type (building one is dear; loops share)."""
        found = self.validators.get(et.name)
        if found is None:
            assert et.payload_schema is not None
            found = self.validators[et.name] = Draft202012Validator(et.payload_schema)
        return found
