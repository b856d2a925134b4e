"""Where each effective setting of a loop or a work-bound loop shape was written: a rule
line, an overlay line, or the registry entry it follows from. Recorded by the compiler
beside the RuleSet (`RuleSet.places`), read by `engine check --explain NAME`
(engine.core.loop_explain, engine.core.shape_explain,
docs/rules.md#seeing-a-loops-effective-settings).

The places never change what a rule set means: they are not part of the digest (which
covers the kernel files' bytes) and a RuleSet compares equal without them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsl import spelling
from dsl.diagnostics import Span
from dsl.model import HumanOnlyDecl, LoopDecl, Setting

if TYPE_CHECKING:
    from engine.core.inputs import Located, Tree

# A loop setting as written (old or new spelling) and the setting it is now
# (docs/rules.md#one-spelling): the trigger keys are one setting, `trigger`, and the
# old overlap words are `overlap`.
TRIGGER_KEYS = frozenset(
    {"every", "cron", "at", "manual", "host_clock", "host-clock", "watch", "after"}
)
_SETTING_OF: dict[str, str] = {
    **spelling.RENAMED_KEYS,
    **{key: "overlap" for key in spelling.OLD_OVERLAP_KEYS},
    **{old: new for old, (new, _) in spelling.OLD_FLAGS.items()},
    **{key: "trigger" for key in TRIGGER_KEYS},
}
# The old `budget active-occurrences N`, folded into `overlap`.
OLD_ACTIVE_OCCURRENCES = "active-occurrences"


def setting_name(key: str) -> str:
    """The setting a key written in a loop block sets, in the one spelling."""
    return _SETTING_OF.get(key, key)


@dataclass(frozen=True, slots=True)
class LoopPlaces:
    """Where a loop's settings were written. `settings` maps a setting's name (new
    spelling; `budget KEY` for each budget key) to the lines that set it (an old
    overlap may take several: `singleton` and `on-active coalesce`); `overlay` maps an
    overlay key of config/schedule.yaml to its line."""

    declared: Span  # the `loop NAME` line (a `for` block's template line)
    settings: Mapping[str, tuple[Span, ...]] = field(default_factory=dict)
    emit: Span | None = None
    payload: Span | None = None
    triage: Span | None = None
    in_for_block: bool = False
    overlay: Mapping[str, Span] = field(default_factory=dict)
    overlay_entry: Span | None = None

    def first(self, setting: str) -> Span | None:
        spans = self.settings.get(setting, ())
        return spans[0] if spans else None


@dataclass(frozen=True, slots=True)
class Places:
    """The places of a compiled rule set: each loop's and each work-bound shape's (by
    name), each registry entry's (its span under "" and each key's; a probe's nested
    keys by their dotted path, `browser.allow`), and each `human_only` line by its
    target."""

    loops: Mapping[str, LoopPlaces] = field(default_factory=dict)
    definitions: Mapping[str, Mapping[str, Span]] = field(default_factory=dict)  # by DEF@V
    event_types: Mapping[str, Mapping[str, Span]] = field(default_factory=dict)
    human_only: Mapping[str, Span] = field(default_factory=dict)  # TYPE or DEF@V
    shapes: Mapping[str, LoopPlaces] = field(default_factory=dict)
    controllers: Mapping[str, Mapping[str, Span]] = field(default_factory=dict)  # by id
    probes: Mapping[str, Mapping[str, Span]] = field(default_factory=dict)  # by id


def loop_places(decl: LoopDecl, in_for_block: bool) -> LoopPlaces:
    """The places of one parsed loop block (the compiler calls it for a loop it kept)."""
    settings: dict[str, list[Span]] = {}
    for s in decl.settings:
        _add(settings, setting_name(s.key), s.span)
        if setting_name(s.key) == "catch_up" and len(s.args) == 3:
            _add(settings, "catch_up cap", s.args[2].span)
        if s.key == "budget":
            for key, span in _budget_keys(s):
                _add(settings, key, span)
    for line in decl.on_events:
        _add(settings, "trigger", line.span)
    emit = decl.emits[0] if decl.emits else None
    return LoopPlaces(
        declared=decl.name_span,
        settings={key: tuple(spans) for key, spans in settings.items()},
        emit=emit.span if emit else None,
        payload=emit.payload.span if emit is not None and emit.payload is not None else None,
        triage=decl.triage[0].span if decl.triage else None,
        in_for_block=in_for_block,
    )


def _add(settings: dict[str, list[Span]], key: str, span: Span) -> None:
    spans = settings.setdefault(key, [])
    if span not in spans:
        spans.append(span)


def _budget_keys(s: Setting) -> Iterable[tuple[str, Span]]:
    for key in s.args[::2]:
        if key.value == OLD_ACTIVE_OCCURRENCES:
            yield "overlap", key.span
        else:
            yield f"budget {spelling.RENAMED_BUDGET_KEYS.get(key.value, key.value)}", key.span


def registry_places(tree: Tree) -> tuple[dict[str, dict[str, Span]], dict[str, dict[str, Span]]]:
    """Each definition's (by `DEF@V`) and each event type's entry span and key spans,
    the first entry of a name winning as it does in the compiler."""
    definitions = entry_places(tree.definitions, lambda d: str(d.ref))
    event_types = entry_places(tree.event_types, lambda e: str(e.name))
    return definitions, event_types


def entry_places(
    entries: Iterable[Located[Any]], name: Callable[[Any], str]
) -> dict[str, dict[str, Span]]:
    """Each registry entry's span (under "") and key spans by its `name`, the first
    entry of a name winning as it does in the compiler."""
    found: dict[str, dict[str, Span]] = {}
    for entry in entries:
        found.setdefault(name(entry.value), {"": entry.span, **entry.keys})
    return found


def human_only_places(decls: Iterable[HumanOnlyDecl]) -> dict[str, Span]:
    """The first `human_only` line of each target."""
    found: dict[str, Span] = {}
    for decl in decls:
        found.setdefault(decl.target, decl.span)
    return found
