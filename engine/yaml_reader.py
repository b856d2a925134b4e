"""The one way the engine reads a YAML file (registry, configuration, the overlay it
edits): the text is measured from the parser's event stream before any loader builds
a value, and refused, with its place, when building it could exhaust the stack or the
memory (docs/rules.md#e0908-yaml-or-json-nested-too-deeply,
docs/rules.md#e0909-yaml-aliases-expand-too-far).

Why a budget, and not "no aliases": YAML's anchors and aliases (`&defaults` ...
`<<: *defaults`, `labels: *common`) are an ordinary way to share a block of settings,
and nothing in the engine's schemas forbids one. What must never happen is a few
hundred bytes that expand to a billion values: the loaders share an aliased value, but
everything after them (the copy into plain dicts, validation, a JSON Schema check)
walks it whole, once per alias. So the measure computes, without expanding anything,
how many values each anchor stands for and how deeply it nests, and refuses a file

- whose aliases together repeat more than MAX_ALIAS_NODES values (E0909),
- with an alias inside its own anchor, a value without end (E0909),
- nested deeper than MAX_NESTING, written so or through an alias (E0908, E0909),
- defining an anchor twice (E0901: libyaml refuses it, the Python loader only warns),
- or declaring `%YAML 1.1` (E0901: the engine reads YAML 1.2, the same on both loaders).

A file without aliases is bounded by its size, and only the depth applies to it. The
measure is linear in the events, so a refusal comes in milliseconds.

It reads the events of the parser that loads the file: the round-trip parser's own, as
the composer takes them (`_MeasuredParser`), or, before the libyaml loader, a parse by
the same C parser. Two parsers can disagree about a text (libyaml breaks lines at NEL
and LS, the round-trip parser does not inside quotes), and a bound checked on one
parser's reading must hold for what the other builds."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ruamel.yaml
from ruamel.yaml import YAML
from ruamel.yaml.constructor import ConstructorError, RoundTripConstructor, SafeConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    Event,
    NodeEvent,
    ScalarEvent,
    StreamStartEvent,
)
from ruamel.yaml.parser import RoundTripParser
from ruamel.yaml.reader import ReaderError

from dsl.diagnostics import YAML_LINE_BREAK, Collector, Span
from engine.files import MAX_NESTING, Refusal, read_text, too_deep

# How many values the aliases of one file may repeat in all (E0909): a shared block of
# a few dozen settings, aliased in every one of hundreds of entries, stays far below it;
# copying and validating this many values takes a few tenths of a second.
MAX_ALIAS_NODES = 100_000


@dataclass
class _Open:
    """A mapping or list being read: its anchor, and what it holds so far."""

    anchor: str | None
    size: int = 1  # values, itself included, as if every alias in it were written out
    height: int = 1  # levels of mappings and lists, itself included


@dataclass
class _Measure:
    """What the events read so far amount to (the state of `measure`)."""

    budget: int
    depth: int
    stack: list[_Open]
    anchors: dict[str, tuple[int, int] | None]  # name -> (size, height); None: still open
    repeated: int = 0


class Refused(YAMLError):
    """Raised while YAML is read, before any value is built: the text passes a bound."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(
            f"{refusal.line}:{refusal.column}: error[{refusal.code}]: {refusal.message}"
        )
        self.refusal = refusal


def refusal(text: str, budget: int = MAX_ALIAS_NODES, depth: int = MAX_NESTING) -> Refusal | None:
    """Why YAML text must not be loaded, and where (None: it may be), as the round-trip
    loader measures it. A syntax error is left to the loader, which reports it."""
    try:
        return measure(YAML(typ="rt").parse(text), budget, depth)
    except YAMLError:
        return None


def measure(events: Iterable[Event], budget: int, depth: int) -> Refusal | None:
    """The first bound the event stream passes (see the module's docstring), or None."""
    state = _Measure(budget, depth, [], {})
    for event in events:
        found = _step(state, event)
        if found is not None:
            return found
    return None


def _step(state: _Measure, event: Event) -> Refusal | None:
    if isinstance(event, (StreamStartEvent, DocumentStartEvent)):
        state.stack.clear()
        state.anchors.clear()
        state.repeated = 0
        return _versioned(event)
    elif isinstance(event, CollectionStartEvent):
        return _open(state, event)
    elif isinstance(event, CollectionEndEvent):
        done = state.stack.pop()
        _hold(state, done.anchor, done.size, done.height)
    elif isinstance(event, ScalarEvent):
        found = _anchored(state, event)
        if found is None:
            _hold(state, event.anchor, 1, 0)
        return found
    elif isinstance(event, AliasEvent):
        return _alias(state, event)
    return None


def _versioned(event: Event) -> Refusal | None:
    """E0901 for a `%YAML 1.1` directive: the engine reads YAML 1.2 (where `yes` is a
    string and `1e3` a number), and 1.1's rules would read the same file otherwise."""
    version = getattr(event, "version", None)
    if version is None or tuple(version) == (1, 2):
        return None
    shown = ".".join(str(part) for part in version)
    hint = "remove the directive: the engine reads every file as YAML 1.2"
    return Refusal("E0901", f"invalid YAML: %YAML {shown}: not YAML 1.2", *_where(event), hint)


def _open(state: _Measure, event: CollectionStartEvent) -> Refusal | None:
    if len(state.stack) >= state.depth:
        return too_deep(_where(event), state.depth)
    found = _anchored(state, event)
    if found is None:
        state.stack.append(_Open(event.anchor))
        if event.anchor is not None:
            state.anchors[event.anchor] = None
    return found


def _anchored(state: _Measure, event: NodeEvent) -> Refusal | None:
    """E0901 for an anchor given a second time (libyaml refuses it; the Python loader
    would only warn, and an alias would mean the later one)."""
    if event.anchor is None or event.anchor not in state.anchors:
        return None
    return Refusal(
        "E0901",
        f"invalid YAML: anchor '&{event.anchor}' is defined twice",
        *_where(event),
        "give each anchor its own name",
    )


def _hold(state: _Measure, anchor: str | None, size: int, height: int) -> None:
    """A value has been read: its anchor now stands for it, and its parent holds it."""
    if anchor is not None:
        state.anchors[anchor] = (size, height)
    if state.stack:
        parent = state.stack[-1]
        parent.size += size
        parent.height = max(parent.height, height + 1)


def _alias(state: _Measure, event: AliasEvent) -> Refusal | None:
    name = event.anchor
    if name not in state.anchors:
        return None  # an undefined alias: the loader reports it (E0901)
    value = state.anchors[name]
    if value is None:
        why = f"alias '*{name}' is inside its own anchor: its value would never end"
        return _too_far(event, why, "an anchor's value cannot hold an alias of itself")
    size, height = value
    if len(state.stack) + height > state.depth:
        why = f"alias '*{name}' nests the value more than {state.depth} levels deep"
        return _too_far(event, why, "the engine reads mappings and lists nested at most this deep")
    state.repeated += size
    if state.repeated > state.budget:
        why = f"aliases repeat more than {state.budget} values"
        hint = "write the values out, or alias fewer: each alias repeats its anchor's whole value"
        return _too_far(event, why, hint)
    _hold(state, None, size, height)
    return None


def _too_far(event: Event, message: str, hint: str) -> Refusal:
    return Refusal("E0909", message, *_where(event), hint)


def _where(event: Event) -> tuple[int, int]:
    mark = event.start_mark
    return mark.line + 1, mark.column + 1


# ---- loading --------------------------------------------------------------------------


class _MeasuredParser(RoundTripParser):
    """The round-trip parser, measuring every event as it is made, before the composer
    looks at it: the loader composes a whole document before it builds a value, so a
    refusal comes before anything is built, from the very events the loader reads."""

    def __init__(self, loader: Any) -> None:
        super().__init__(loader)
        self.measured = _Measure(MAX_ALIAS_NODES, MAX_NESTING, [], {})

    def _next(self) -> None:
        if self.current_event is None and self.state:
            self.current_event = event = self.state()
            found = _step(self.measured, event)
            if found is not None:
                raise Refused(found)

    def check_event(self, *choices: Any) -> bool:
        self._next()
        return super().check_event(*choices)

    def peek_event(self) -> Any:
        self._next()
        return super().peek_event()

    def get_event(self) -> Any:
        self._next()
        return super().get_event()


class _Placing:
    """A constructor whose failure on one value (ruamel's `!!float nan x` is a
    ValueError; `!!int`, `!!timestamp`, `!!binary` have their own) is a
    ConstructorError at that value's place, as a syntax error is, never a traceback."""

    def construct_non_recursive_object(self, node: Any, tag: str | None = None) -> Any:
        try:
            return super().construct_non_recursive_object(node, tag)  # type: ignore[misc]
        except YAMLError:
            raise
        except Exception as err:  # whatever a value's constructor raises: the file's fault
            problem = f"cannot read this {node.tag.rsplit(':', 1)[-1]} value ({err})"
            raise ConstructorError(None, None, problem, node.start_mark) from None


class _RoundTripConstructor(_Placing, RoundTripConstructor):
    pass


class _SafeConstructor(_Placing, SafeConstructor):
    pass


def round_trip() -> YAML:
    """A round-trip YAML (every position, comments, quoting kept) that raises Refused
    for text past a bound; what `engine.overlay_edit` edits the overlay with."""
    yaml = YAML(typ="rt")
    yaml.Parser = _MeasuredParser
    yaml.Constructor = _RoundTripConstructor
    yaml.allow_duplicate_keys = False
    return yaml


def load(text: str, fast: bool = False) -> Any:
    """YAML text as values: round-trip (with positions), or, when `fast`, through the
    libyaml (C) loader, several times faster and with no positions, for files whose
    positions serve only diagnostics and a run that has none (see
    `engine.loading.load_rules`). Refused before a value is built for text past a bound
    (measured from the C parser's own events on the fast path); YAMLError for text that
    is not YAML."""
    if not (fast and ruamel.yaml.__with_libyaml__):
        return round_trip().load(text)
    found = measure(YAML(typ="safe").parse(text), MAX_ALIAS_NODES, MAX_NESTING)
    if found is not None:
        raise Refused(found)
    yaml = YAML(typ="safe")
    yaml.Constructor = _SafeConstructor
    yaml.allow_duplicate_keys = False
    return yaml.load(text)


def read_yaml(path: Path, name: str, collector: Collector, fast: bool = False) -> Any:
    """Parse the YAML file `path` (its place `name`; positions kept unless `fast`);
    None (with a diagnostic) when it is not YAML, or passes a bound."""
    text = read_text(path, name, collector, YAML_LINE_BREAK)
    if text is None:
        return None
    try:
        return load(text, fast)
    except Refused as err:
        found = err.refusal
        at = Span(name, found.line, found.column)
        collector.error(found.code, found.message, at, found.hint)
    except MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        message = (err.problem or err.context or "invalid YAML").strip()
        collector.error("E0901", f"invalid YAML: {message}", Span(name, line, col))
    except ReaderError as err:  # a character YAML does not allow (NUL, other controls)
        line, col = _place(text, err.position if isinstance(err.position, int) else 0)
        collector.error("E0901", f"invalid YAML: {err.reason}", Span(name, line, col))
    except YAMLError as err:  # any other refusal of the parser, without a position
        collector.error("E0901", f"invalid YAML: {str(err).strip()[:200]}", Span(name, 1, 1))
    return None


def _place(text: str, offset: int) -> tuple[int, int]:
    """The line and column (1-based) of a character offset into `text`."""
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1
