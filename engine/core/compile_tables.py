"""Chains and webhook tables: emit rules whose expressions read event data."""

from __future__ import annotations

from collections.abc import Iterable

from dsl.diagnostics import Span, did_you_mean
from dsl.model import ChainDecl, Emit, WebhookDecl
from dsl.spelling import FIX_IT, OLD_SPELLING
from engine.core.compile_base import CHAIN_ROOTS, WEBHOOK_SOURCES, CompilerBase
from engine.core.ruleset import (
    Chain,
    DefinitionRef,
    EmitRule,
    WebhookStep,
    WebhookTable,
)


class TableCompiler(CompilerBase):
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
        if emit.old is not None:
            self._old_guard(emit, emit.old.span)
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

    def _old_guard(self, emit: Emit, at: Span) -> None:
        """W0901 for `emit ... { payload } if COND`: the guard goes before the payload."""
        guard = self.c.sources.line(at.file, at.line)[at.column - 1 :].strip()
        options = " ..." if emit.subject is not None or emit.event_id is not None else ""
        self.c.warn(
            OLD_SPELLING,
            f"old spelling: '{guard.split()[0] if guard else 'if'}' after the payload",
            at,
            f"write: emit {emit.event_type}{options} {guard} {{ ... }} ({FIX_IT})",
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
