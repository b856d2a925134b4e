"""From a rule set to the profile of each loop and event type: what the rules decide
that shapes the machines (approval, singleton, human-only, shadow). Pure."""

from __future__ import annotations

from engine.core.ruleset import Approval, Loop, RuleSet
from engine.machines.specs import Profile


def loop_profile(rules: RuleSet, loop: Loop) -> Profile:
    """A loop's ticks: its own approval and singleton flag, and its compiled shadow
    (on for a loop of mutating work that does not say `shadow off`, seed 2 §18)."""
    return Profile(
        approval=loop.approval,
        singleton=loop.singleton,
        human_only=rules.is_human_only(loop.event_type),
        shadow=loop.policy.shadow,
    )


def event_type_profile(rules: RuleSet, event_type: str) -> Profile:
    """Events no loop emitted (webhooks, chains, injections): the route's approval,
    watched when unrouted; never singleton, never shadow."""
    route = rules.routes.get(event_type)
    return Profile(
        approval=route.approval if route is not None else Approval.WATCHED,
        singleton=False,
        human_only=rules.is_human_only(event_type),
        shadow=False,
    )


def loop_profiles(rules: RuleSet) -> dict[str, Profile]:
    """Every loop's profile, by loop name."""
    return {name: loop_profile(rules, loop) for name, loop in sorted(rules.loops.items())}


def event_type_profiles(rules: RuleSet) -> dict[str, Profile]:
    """Every registered or routed event type's profile, by type."""
    names = sorted(set(rules.event_types) | set(rules.routes))
    return {name: event_type_profile(rules, name) for name in names}
