"""Work-bound loop instances as loops (docs/work.md#work-bound-loops), pure.

A reviewed shape of loops/*.rules bound to a work item (a binding in the store) fires
like any loop: on the occurrence engine, with its triage, budgets, backoff, shadow,
approval and journal. `with_instances` is the rule set the runtime plans with: the
declared loops and one loop per binding (`shape@work-id`), each following its shape's
trigger and bounds, in shadow until it graduates (and never out of what its rule file
allows), with one active occurrence at a time. Its firings route to its controller's
wake (`wake_definition`), a definition the rule set makes of each entry of
registry/controllers.yaml; the wake's adapter launches the controller
(engine.adapters.controller)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Final

from engine.core.controllers import Controller
from engine.core.registry import Definition
from engine.core.ruleset import (
    DefinitionRef,
    Loop,
    Route,
    RuleSet,
    WorkBound,
    WorkShape,
)
from engine.core.work import BindingState, WorkBinding, instance_name

WAKE_ADAPTER: Final = "controller"
WAKE_CONTRACT: Final = "engine.controller-wake/v1"
WOKEN: Final = "WOKEN"  # the controller claimed (or reported on) the work
DID_NOT_CLAIM: Final = "DID_NOT_CLAIM"  # the reservation ended without a claim
WAKE_SCHEMA: Final[Mapping[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": WAKE_CONTRACT,
    "type": "object",
    "required": ["outcome"],
    "properties": {"outcome": {"enum": [WOKEN, DID_NOT_CLAIM]}},
}


def wake_ref(controller: str) -> DefinitionRef:
    """The wake definition of a controller: `controller-<id>@1`."""
    return DefinitionRef(f"controller-{controller}", 1)


def wake_definition(controller: Controller) -> Definition:
    """What waking `controller` is as a definition: mutating work of the `controller`
    adapter with the controller's timeout, whose result says whether the controller
    claimed; a reservation that ended without a claim is an infrastructure failure
    (backoff, then the circuit breaker)."""
    ref = wake_ref(controller.id)
    return Definition.model_construct(
        id=ref.id,
        version=ref.version,
        description=f"wake controller {controller.id}: {controller.description}".rstrip(": "),
        adapter=WAKE_ADAPTER,
        argv=(),
        params={},
        env=(),
        capture_stdout=None,
        output_contract=WAKE_CONTRACT,
        mutating=True,
        timeout=controller.timeout,
        outcomes=(WOKEN, DID_NOT_CLAIM),
        classify={DID_NOT_CLAIM: "infrastructure_failure"},
        workspace=None,
        fake=None,
    )


def wake_definitions(controllers: Mapping[str, Controller]) -> dict[DefinitionRef, Definition]:
    return {wake_ref(c.id): wake_definition(c) for c in controllers.values()}


def is_wake(definition: Definition) -> bool:
    return definition.adapter == WAKE_ADAPTER


def instance_loop(shape: WorkShape, binding: WorkBinding) -> Loop:
    """The loop of one binding: the shape's template under the instance's name,
    enabled while the binding is in shadow or live, in shadow until it graduated, one
    active occurrence at a time, routed to its controller's wake."""
    live = binding.state == BindingState.LIVE and shape.graduates
    template = shape.loop
    budget = replace(template.policy.budget, active_occurrences=1)
    policy = replace(template.policy, budget=budget, shadow=not live)
    route = None
    if shape.controller is not None:
        route = Route(
            template.event_type, wake_ref(shape.controller), template.approval, shape.origin
        )
    return replace(
        template,
        name=instance_name(shape.name, binding.work_id),
        enabled=binding.state != BindingState.DISABLED,
        singleton=True,
        policy=policy,
        work=WorkBound(
            shape=shape.name,
            binding_id=binding.binding_id,
            work_id=binding.work_id,
            mode=shape.mode,
            controller=shape.controller,
            probe=shape.probe,
            cooldown_seconds=shape.cooldown_seconds,
            live=live,
        ),
        route=route,
    )


def with_instances(rules: RuleSet, bindings: Iterable[WorkBinding]) -> RuleSet:
    """The rule set with one loop per binding whose shape the rules still declare (a
    binding of a shape that left the rules fires nothing)."""
    instances = {
        loop.name: loop
        for loop in (
            instance_loop(rules.work_shapes[b.shape], b)
            for b in bindings
            if b.shape in rules.work_shapes
        )
    }
    declared = {name: loop for name, loop in rules.loops.items() if loop.work is None}
    if not instances and len(declared) == len(rules.loops):
        return rules
    return replace(rules, loops={**declared, **instances})


def declared_only(rules: RuleSet) -> RuleSet:
    """The rule set without its instances."""
    return with_instances(rules, ())
