"""Every effective setting of one work-bound loop shape and where it came from: `engine
check --explain SHAPE` (docs/rules.md#seeing-a-shapes-effective-settings). Pure: a
compiled RuleSet and a shape name in, rows out, as engine.core.loop_explain does for a
loop.

Beside a loop's settings a shape has its mode, the registry entries its `work` line
names (a controller of registry/controllers.yaml, a browser probe of
registry/probes.yaml), its cooldown, the fields the engine fills in each tick of an
instance, and how its instances start (in shadow, with one active occurrence) and
whether they may graduate. A controller is shown by its argv template, its timeout, how
the work's context reaches it, the NAME of its token's environment variable and how it
reports back; a token's value is never part of a rule set, so never of a row. A probe
is shown by its page, its allowlist, its selector, its timeout and how many login
markers it has."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from dsl.diagnostics import Span
from engine.core.compile_loops import tick_sample
from engine.core.controllers import Controller
from engine.core.durations import format_duration
from engine.core.loop_explain import DEFAULT, LoopExplainer, Row, UnknownLoop, value_text, where
from engine.core.provenance import LoopPlaces
from engine.core.registry import Probe
from engine.core.ruleset import TICK_FIELDS, RuleSet, WorkMode, WorkShape
from engine.core.work import instance_name

CONTROLLERS_FILE = "registry/controllers.yaml"
PROBES_FILE = "registry/probes.yaml"
# An instance's first state (docs/work.md#work-bound-loops), whatever the block says.
INSTANCE_START = "every instance starts in shadow, with one active occurrence"


def explain_shape(rules: RuleSet, name: str) -> list[Row]:
    """Every effective setting of work-bound shape `name`; raises UnknownLoop."""
    shape = rules.work_shapes.get(name)
    if shape is None:
        raise UnknownLoop(name)
    return list(_ShapeExplainer(rules, shape).rows())


def _source(keys: Mapping[str, Span], key: str) -> str:
    """The line of a registry entry's key; `default` when the entry does not write it."""
    span = keys.get(key)
    return DEFAULT if span is None else where(span)


def _entry(keys: Mapping[str, Span], file: str) -> str:
    span = keys.get("")
    return file if span is None else where(span)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


class _ShapeExplainer(LoopExplainer):
    def __init__(self, rules: RuleSet, shape: WorkShape) -> None:
        places = rules.places.shapes.get(shape.name) or LoopPlaces(declared=shape.origin)
        super().__init__(rules, shape.loop, places)
        self.shape = shape

    def rows(self) -> Iterator[Row]:
        yield self.declared()
        yield self.description()
        yield from self.work()
        yield self.trigger()
        yield from self.emit()
        yield self.tick_fields()
        yield from self.route_rows()
        yield self.catch_up()
        yield self.max_lateness()
        yield self.overlap()
        yield self.cooldown()
        yield from self.approval()
        yield self.shadow()
        yield self.graduates()
        yield from self.budget()
        yield self.backoff()
        yield self.circuit_breaker()
        yield self.stop_when()
        yield from self.triage()

    def declared(self) -> Row:
        note = "a work-bound loop shape: nothing fires it; an instance binds it to one work item"
        if self.places.in_for_block:
            note += "; declared in a for block: its lines are the template's"
        return Row("shape", self.shape.name, where(self.places.declared), note)

    # ---- the work line and what it names ---------------------------------------------
    def work(self) -> Iterator[Row]:
        shape, at = self.shape, self.written("work")
        yield Row("mode", str(shape.mode), at, mode_words(shape))
        if shape.controller is not None:
            yield from self.controller(shape.controller, at)
        elif shape.mode is WorkMode.BROWSER_WATCH:
            yield Row("controller", "none", at, "no controller: a changed page wakes nothing")
        if shape.probe is not None:
            yield from self.probe(shape.probe, at)

    def controller(self, name: str, at: str) -> Iterator[Row]:
        entry: Controller = self.rules.controllers[name]  # a shape names one, or does not load
        keys = self.rules.places.controllers.get(name, {})
        yield Row("controller", name, at, f"the entry at {_entry(keys, CONTROLLERS_FILE)}")
        yield Row(
            "controller argv",
            value_text(list(entry.argv)),
            _source(keys, "argv"),
            "run without a shell",
        )
        env = _source(keys, "env")
        yield Row(
            "controller env",
            value_text(list(entry.env)),
            env,
            "none passed" if not entry.env else "names only: the values are the engine's",
        )
        timeout = _source(keys, "timeout")
        yield Row(
            "controller timeout",
            format_duration(entry.timeout_seconds),
            timeout,
            "the default bound of one wake" if timeout == DEFAULT else "the bound of one wake",
        )
        delivered = (
            "on its standard input" if entry.context == "stdin" else "in a file, {context_file}"
        )
        yield Row(
            "controller context",
            entry.context,
            _source(keys, "context"),
            f"the work's context reaches it {delivered}",
        )
        yield Row(
            "controller token_env",
            entry.token_env,
            _source(keys, "token_env"),
            "the name of the variable that carries its controller token (the token itself is "
            "never in the rules)",
        )
        yield Row(
            "controller report",
            str(entry.report),
            _source(keys, "report"),
            "it calls POST /work/{id}/continue and /complete with its token",
        )

    def probe(self, name: str, at: str) -> Iterator[Row]:
        probe: Probe = self.rules.probes[name]  # a browser probe, or the shape does not load
        keys = self.rules.places.probes.get(name, {})
        yield Row("probe", name, at, f"the entry at {_entry(keys, PROBES_FILE)}")
        spec = probe.browser_spec
        yield Row("probe url", spec.url, _source(keys, "browser.url"))
        yield Row(
            "probe allow",
            value_text([str(target) for target in spec.allow]),
            _source(keys, "browser.allow"),
            "every request of the page passes it first",
        )
        selector = _source(keys, "browser.selector")
        yield Row(
            "probe selector",
            spec.selector,
            selector,
            "the whole page" if selector == DEFAULT else None,
        )
        yield Row(
            "probe timeout",
            format_duration(probe.timeout_seconds),
            _source(keys, "timeout"),
            "the bound of one run",
        )
        assert probe.browser is not None
        login = probe.browser.login
        count = len(login.urls) + len(login.texts)
        if count:
            urls, texts = _plural(len(login.urls), "url pattern"), _plural(len(login.texts), "text")
            value, note = f"{count} ({urls}, {texts})", "counted, not shown"
        else:
            value, note = "none", "a login is never detected"
        yield Row("probe login markers", value, _source(keys, "browser.login"), note)

    # ---- the shape's own settings -------------------------------------------------------
    def tick_fields(self) -> Row:
        """The fields the engine fills in each tick of an instance, as the E0206 check
        has them: the tick is these and the static payload, nothing else."""
        filled = [key for key in tick_sample(self.loop) if key in TICK_FIELDS]
        example = instance_name(self.shape.name, "work-ID")
        return Row(
            "tick fields",
            "{" + ", ".join(filled) + "}",
            DEFAULT,
            "each tick of an instance is the static payload and these, nothing else; "
            f"loop is the instance's name, {example}",
        )

    def cooldown(self) -> Row:
        return Row(
            "cooldown",
            format_duration(self.shape.cooldown_seconds),
            self.written("cooldown"),
            "the least time between two wakes of one instance",
        )

    def shadow(self) -> Row:
        return Row("shadow", "true", DEFAULT, f"{INSTANCE_START}, whatever the block says")

    def graduates(self) -> Row:
        written = self.written("shadow")
        if self.shape.graduates:
            note = (
                "the rule file writes shadow false: an instance may graduate out of shadow, "
                "to what the shape allows and never more"
            )
            return Row("graduates", "true", written, note)
        if written != DEFAULT:
            return Row("graduates", "false", written, "shadow true: every instance stays in shadow")
        return Row("graduates", "false", DEFAULT, "no shadow false: every instance stays in shadow")


def mode_words(shape: WorkShape) -> str:
    """What each firing of an instance does."""
    match shape.mode:
        case WorkMode.CONTINUATION:
            return f"each firing wakes the controller {shape.controller}"
        case WorkMode.BROWSER_WATCH:
            wakes = (
                f"only a changed page, or a login marker, wakes the controller {shape.controller}"
                if shape.controller is not None
                else "nothing wakes"
            )
            return f"each firing runs the browser probe {shape.probe}; {wakes}"
    return (
        f"each firing runs the browser probe {shape.probe} to refresh the page and check its "
        "login markers; nothing wakes"
    )


__all__ = ["explain_shape", "mode_words"]
