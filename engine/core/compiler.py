"""Compile parsed rule files, the registry and the instance configuration into one
immutable RuleSet. Pure: it takes the loaded Tree and returns data, or raises
RulesError carrying every problem found (fail closed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dsl.diagnostics import Span, ordered
from dsl.model import ChainDecl, HumanOnlyDecl, RouteDecl, WebhookDecl
from engine.core.compile_clocks import ClockCompiler
from engine.core.compile_loops import LoopCompiler
from engine.core.compile_tables import TableCompiler
from engine.core.config import HostTimer, OverlayEntry
from engine.core.inputs import Located, Tree
from engine.core.instances import WAKE_CONTRACT, WAKE_SCHEMA, wake_definitions
from engine.core.overlay import apply_overlay
from engine.core.provenance import (
    LoopPlaces,
    Places,
    entry_places,
    human_only_places,
    registry_places,
)
from engine.core.ruleset import Loop, RuleSet, Source, WorkShape


def compile_rules(tree: Tree) -> RuleSet:
    """The RuleSet for `tree`; raises RulesError listing every problem."""
    return _Compiler(tree).run()


def compile_with_clocks(tree: Tree) -> tuple[RuleSet, tuple[HostTimer, ...]]:
    """The RuleSet and the validated host clocks (in file order) of `tree`."""
    compiler = _Compiler(tree)
    rules = compiler.run()
    return rules, tuple(compiler.host_timers)


class _Compiler(LoopCompiler, ClockCompiler, TableCompiler):
    """Runs the parts in order: registry, policies and routes, loops and the overlay,
    chains, webhook tables, host clocks."""

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
        self._check_keys()
        # An overlay entry for a kernel loop that failed is not read as a new loop.
        overlay = [o for o in self._overlay_of_loops() if o.value[0] not in self.dropped]
        loops, overlay_spans = apply_overlay(kernel, overlay, self.c)
        for loop in loops.values():
            declared = kernel.get(loop.name)
            self._check_loop(loop, overlay_spans.get(loop.name, {}), declared)
        self._check_after(loops)
        for shape in self.work_shapes.values():
            self._check_loop(shape.loop, {})
        chains = self._chains(d for d in decls if isinstance(d, ChainDecl))
        webhooks = self._webhooks(d for d in decls if isinstance(d, WebhookDecl))
        self._host_clocks(loops)
        self.c.raise_if_any()
        return RuleSet(
            loops=self._shadow_default(loops),
            routes=self.routes,
            chains=chains,
            webhooks=webhooks,
            event_types=self.event_types,
            definitions={**self.definitions, **wake_definitions(self.controllers)},
            human_only_types=frozenset(self.human_types),
            human_only_definitions=frozenset(self.human_defs),
            repos=self.repos,
            contracts=_with_wake_contract(self.tree.contracts, bool(self.controllers)),
            digest=self.tree.digest,
            release_freeze=release_freeze(self.tree),
            probes=self.probes,
            controllers=self.controllers,
            work_shapes=self.work_shapes,
            warnings=ordered(self.c.warnings),
            places=self._places(loops, overlay_spans, decls),
        )

    def _overlay_of_loops(self) -> list[Located[tuple[str, OverlayEntry]]]:
        """The overlay entries, but those naming a work-bound loop shape: a shape is
        not a loop, so config/schedule.yaml cannot change or redeclare it (E0802)."""
        kept = []
        for located in self.tree.overlay:
            name = located.value[0]
            if name in self.work_shapes:
                self.c.error(
                    "E0802",
                    f"'{name}' is a work-bound loop shape, not a loop: the overlay cannot name it",
                    located.span,
                    f"a shape is changed in its rule file ({self.work_shapes[name].origin}); "
                    "an instance binds it to a work item (docs/work.md#work-bound-loops)",
                )
                continue
            kept.append(located)
        return kept

    def _places(
        self,
        loops: Mapping[str, Loop],
        overlay_spans: Mapping[str, Mapping[str, Span]],
        decls: list[Any],
    ) -> Places:
        """Where each effective loop's and each shape's settings were written, and the
        registry entries they follow from (engine.core.provenance)."""
        placed: dict[str, LoopPlaces] = {}
        for name, loop in loops.items():
            kernel = self.loop_places.get(name) if loop.source is Source.KERNEL else None
            placed[name] = replace(
                kernel or LoopPlaces(declared=loop.origin),
                overlay=dict(overlay_spans.get(name, {})),
                overlay_entry=loop.overlay_origin,
            )
        definitions, event_types = registry_places(self.tree)
        human = human_only_places(d for d in decls if isinstance(d, HumanOnlyDecl))
        shapes = {
            name: self.loop_places.get(name) or LoopPlaces(declared=shape.origin)
            for name, shape in self.work_shapes.items()
        }
        return Places(
            placed,
            definitions,
            event_types,
            human,
            shapes=shapes,
            controllers=entry_places(self.tree.controllers, lambda c: str(c.id)),
            probes=entry_places(self.tree.probes, lambda p: str(p.id)),
        )


def release_freeze(tree: Tree) -> bool:
    """`release_freeze:` of config/schedule.yaml, as the loader reads it onto the tree
    (`Tree.release_freeze`); False when the loader does not provide it."""
    value = getattr(tree, "release_freeze", False)
    return value is True


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
        # Only when there are any, so a summary without shapes reads as it always did.
        **(
            {"workShapes": [shape_summary(s) for s in rules.work_shapes.values()]}
            if rules.work_shapes
            else {}
        ),
    }


def _with_wake_contract(
    contracts: Mapping[str, Mapping[str, Any]], controllers: bool
) -> Mapping[str, Mapping[str, Any]]:
    """The output contracts, and the wake's when a controller is declared."""
    return {**contracts, WAKE_CONTRACT: WAKE_SCHEMA} if controllers else contracts


def shape_summary(shape: WorkShape) -> Mapping[str, Any]:
    """One work-bound loop shape as `engine check --json` lists it."""
    return {
        "name": shape.name,
        "mode": str(shape.mode),
        "trigger": shape.trigger.describe(),
        "controller": shape.controller,
        "probe": shape.probe,
        "cooldownSeconds": shape.cooldown_seconds,
        "origin": str(shape.origin),
    }


__all__ = ["compile_rules", "describe"]
