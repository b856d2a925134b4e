"""Keeping the rule set's work-bound instances (engine.core.instances) in step with the
bindings in the store (docs/work.md#work-bound-loops). Each runtime pass reads the
bindings that are not disabled (one small query) and, when any was made, moved or
graduated since the last read, plans with the rules and those instances from then on;
the scheduler then schedules a new instance from its next slot. A CLI process reads
them once, when it opens the service."""

from __future__ import annotations

from typing import Final

from engine.core.instances import with_instances
from engine.core.ruleset import Loop
from engine.service.context import Runtime

# The most instances one engine keeps (a binding past it fires nothing; doctor says so).
MAX_INSTANCES: Final = 10_000


def refresh(rt: Runtime) -> list[Loop]:
    """Read the bindings and plan with their instances: the instance loops that are
    new or changed (empty when nothing changed)."""
    with rt.store.read() as tx:
        bindings = tx.live_bindings(MAX_INSTANCES)
    seen = tuple((b.binding_id, b.state, b.version) for b in bindings)
    if seen == rt.instances:
        return []
    before = rt.rules.loops
    rules = with_instances(rt.rules, bindings)
    rt.use_rules(rules)
    rt.instances = seen
    return [
        loop
        for name, loop in rules.loops.items()
        if loop.work is not None and before.get(name) != loop
    ]
