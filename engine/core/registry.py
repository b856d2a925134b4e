"""Registry values: event types, command/agent definitions and output contracts, as
validated pydantic models. The YAML files under `registry/` are read by
`engine.loading`; this module only defines and checks their shape."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from engine.core.browsing import (
    MAX_CHARS,
    MAX_CHARS_MAX,
    BrowserSpec,
    LoginMarkers,
    TargetError,
    parse_target,
    parse_url,
)
from engine.core.durations import DurationError, parse_duration

NAME_PATTERN = r"^[a-z][a-z0-9-]*$"
EVENT_TYPE_PATTERN = r"^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)+$"
OUTCOME_PATTERN = r"^[A-Z][A-Z0-9_]*$"
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")

# Placeholders every command template may use; payload values arrive through `params`.
BUILTIN_PLACEHOLDERS = {
    "python": "the Python interpreter running the engine",
    "run_id": "the run's id",
    "run_dir": "the run's artifact directory",
    "event_id": "the event's id",
}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EventType(_Frozen):
    """An admissible event type. `schema_file` names a JSON Schema under
    `registry/schemas/` for the payload; `human_only` types are approved by a human
    operator only, whatever any rule says."""

    name: str = Field(pattern=EVENT_TYPE_PATTERN)
    description: str = ""
    schema_file: str | None = Field(default=None, alias="schema")
    human_only: bool = False
    payload_schema: dict[str, Any] | None = Field(default=None, exclude=True)

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


ParamType = Literal["name", "text", "int", "sha", "slug"]

PARAM_PATTERNS: dict[str, str] = {
    # A value can never start with '-', so it can never become an option.
    "name": r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$",
    "slug": r"^[A-Za-z0-9_][A-Za-z0-9_.-]*/[A-Za-z0-9_][A-Za-z0-9_.-]*$",
    "sha": r"^[0-9a-f]{7,64}$",
    "int": r"^[0-9]+$",
    "text": r"^[^-\x00][^\x00]*$",
}


class Param(_Frozen):
    """A typed placeholder of a command template, filled from the event."""

    source: str = Field(alias="from", pattern=r"^payload(\.[A-Za-z_][A-Za-z0-9_]*)+$")
    type: ParamType = "name"

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def lookup(payload: Mapping[str, Any], source: str) -> object:
    """The value at `payload.a.b` (the `from:` of a param); None when absent."""
    value: object = payload
    for key in source.split(".")[1:]:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def param_problem(name: str, param: Param, payload: Mapping[str, Any]) -> str | None:
    """Why `payload` does not fill the param `name` (None when it does): its value must
    be text or a whole number matching the param type's pattern."""
    value = lookup(payload, param.source)
    if isinstance(value, bool) or not isinstance(value, str | int):
        shown = "missing" if value is None else f"a {type(value).__name__}"
        return f"param '{name}' ({param.source}) is {shown}, not a {param.type}"
    text = str(value)
    if re.fullmatch(PARAM_PATTERNS[param.type], text) is None:
        return f"param '{name}' ({param.source}) = {text[:80]!r} is not a valid {param.type}" + (
            "; a value may never start with '-'" if text.startswith("-") else ""
        )
    return None


class FakeScript(_Frozen):
    """What the fake adapter answers: an outcome and a result document."""

    outcome: str = Field(pattern=OUTCOME_PATTERN)
    result: dict[str, Any] = Field(default_factory=dict)


# The failure classes of docs/occurrences.md#failures-backoff-and-the-circuit-breaker
# (engine.core.policy.FailureClass has the same values).
FailureClassName = Literal[
    "success",
    "nothing_to_do",
    "conflict",
    "implementation_failure",
    "external_blocker",
    "infrastructure_failure",
]


class Workspace(_Frozen):
    """Where a command runs (docs/occurrences.md#dirty-workspaces): `path` is a template over the
    command's params and built-in placeholders; `isolate: worktree` runs it in a git worktree of
    that path, `none` (default) in the path itself. The engine never resets, cleans or stashes a
    workspace."""

    path: str = Field(min_length=1)
    isolate: Literal["worktree", "none"] = "none"


class Definition(_Frozen):
    """A versioned unit of work. `command` runs a closed argv template without a shell;
    `fake` answers a scripted outcome (demo and tests); `agent` names work an external
    agent runner performs."""

    id: str = Field(pattern=NAME_PATTERN)
    version: Annotated[int, Field(ge=1)]
    description: str = ""
    # `controller`: a wake, made by the rule set of each entry of registry/controllers.yaml
    # (engine.core.instances.wake_definition); never written in definitions.yaml.
    adapter: Literal["command", "fake", "agent", "controller"]
    argv: tuple[str, ...] = ()
    params: dict[str, Param] = Field(default_factory=dict)
    env: tuple[str, ...] = ()
    capture_stdout: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
    output_contract: str
    mutating: bool
    timeout: str = "10m"
    outcomes: tuple[str, ...] = Field(min_length=1)
    # How each declared outcome counts when the run finishes
    # (docs/occurrences.md#failures-backoff-and-the-circuit-breaker); an outcome not listed takes
    # the default of engine.core.policy.classify.
    classify: dict[str, FailureClassName] = Field(default_factory=dict)
    workspace: Workspace | None = None
    fake: FakeScript | None = None

    @property
    def ref(self) -> str:
        return f"{self.id}@{self.version}"

    @property
    def timeout_seconds(self) -> int:
        return parse_duration(self.timeout)

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: str) -> str:
        return timeout_within(value)

    @field_validator("adapter")
    @classmethod
    def _adapter(cls, value: str) -> str:
        if value == "controller":
            raise ValueError(
                "a controller's wake is declared in registry/controllers.yaml, not as a definition"
            )
        return value

    @field_validator("outcomes")
    @classmethod
    def _outcomes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for outcome in value:
            if not re.match(OUTCOME_PATTERN, outcome):
                raise ValueError(f"outcome '{outcome}' must be UPPER_SNAKE_CASE")
        if len(set(value)) != len(value):
            raise ValueError("an outcome is listed twice")
        return value

    @field_validator("classify")
    @classmethod
    def _classify(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        outcomes = info.data.get("outcomes")
        if outcomes is None:  # the outcomes are wrong themselves, and reported
            return value
        for outcome in value:
            if outcome not in outcomes:
                declared = ", ".join(outcomes)
                raise ValueError(
                    f"outcome '{outcome}' is not among the outcomes (declared: {declared})"
                )
        return value

    @field_validator("workspace")
    @classmethod
    def _workspace(cls, value: Workspace | None, info: ValidationInfo) -> Workspace | None:
        if value is None:
            return value
        adapter = info.data.get("adapter")
        if adapter is not None and adapter != "command":
            raise ValueError(f"a workspace belongs to command definitions, not {adapter}")
        params = info.data.get("params") or {}
        for name in PLACEHOLDER.findall(value.path):
            if name not in params and name not in BUILTIN_PLACEHOLDERS:
                known = ", ".join(sorted([*params, *BUILTIN_PLACEHOLDERS]))
                raise ValueError(
                    f"path placeholder '{{{name}}}' is not a declared param (known: {known})"
                )
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return env_names(value)

    @model_validator(mode="after")
    def _adapter_fields(self) -> Definition:
        if self.adapter == "command":
            if not self.argv:
                raise ValueError("a command definition needs an argv template")
            for item in self.argv:
                _check_option_placeholder(item)
                for name in PLACEHOLDER.findall(item):
                    if name not in self.params and name not in BUILTIN_PLACEHOLDERS:
                        known = ", ".join(sorted([*self.params, *BUILTIN_PLACEHOLDERS]))
                        raise ValueError(
                            f"argv placeholder '{{{name}}}' is not a declared param "
                            f"(known: {known})"
                        )
        elif self.argv or self.params:
            raise ValueError(f"argv and params belong to command definitions, not {self.adapter}")
        if self.adapter == "fake" and self.fake is None:
            raise ValueError("a fake definition needs a `fake:` script")
        if self.fake is not None and self.fake.outcome not in self.outcomes:
            raise ValueError(f"fake outcome '{self.fake.outcome}' is not among the outcomes")
        templates = [*self.argv, *([self.workspace.path] if self.workspace else [])]
        unused = set(self.params) - {n for a in templates for n in PLACEHOLDER.findall(a)}
        if unused:
            raise ValueError(
                f"params {sorted(unused)} are declared but not used in argv or workspace"
            )
        return self


# A probe's timeout: the default, and the most it may declare.
PROBE_TIMEOUT = "30s"
PROBE_TIMEOUT_MAX = 600


def _regexes(value: tuple[str, ...], what: str) -> tuple[str, ...]:
    for pattern in value:
        try:
            re.compile(pattern)
        except re.error as err:
            raise ValueError(f"{what} '{pattern}' is not a regex: {err}") from None
    return value


class Login(_Frozen):
    """A browser probe's markers of "authentication required": URL patterns (regular
    expressions searched in the URL the page ended at) and texts."""

    urls: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()

    @field_validator("urls")
    @classmethod
    def _urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _regexes(value, "login url pattern")

    @field_validator("texts")
    @classmethod
    def _texts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not text.strip() for text in value):
            raise ValueError("a login text is a word or phrase, not blank")
        return value


class Browser(_Frozen):
    """A browser probe's `browser:` block (engine.core.browsing): the page, the
    allowlist every request of it is held to (`scheme://host[:port][/path-prefix]`),
    the element whose text counts, how that text is reduced and bounded, and the login
    markers. That `url` is on its own allowlist is checked by the loader (E0910)."""

    allow: tuple[str, ...] = Field(min_length=1)
    url: str
    selector: str = Field(default="body", min_length=1)
    include_terms: tuple[str, ...] = ()
    ignore_patterns: tuple[str, ...] = ()
    max_chars: Annotated[int, Field(ge=1, le=MAX_CHARS_MAX)] = MAX_CHARS
    login: Login = Login()

    @field_validator("allow")
    @classmethod
    def _allow(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            try:
                parse_target(entry)
            except TargetError as err:
                raise ValueError(str(err)) from None
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        try:
            parse_url(value)
        except TargetError as err:
            raise ValueError(str(err)) from None
        return value

    @field_validator("selector")
    @classmethod
    def _selector(cls, value: str) -> str:
        if "\n" in value or not value.strip():
            raise ValueError("a selector is one line of CSS, e.g. main .incidents")
        return value

    @field_validator("include_terms")
    @classmethod
    def _terms(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not term.strip() for term in value):
            raise ValueError("an include term is a word or phrase, not blank")
        return value

    @field_validator("ignore_patterns")
    @classmethod
    def _ignore(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _regexes(value, "ignore pattern")


class Probe(_Frozen):
    """A read-only observation a watch loop polls (registry/probes.yaml).

    A `command` probe (the default kind) is a closed argv template like a command
    definition's (typed params from the loop's static payload, the `{python}` builtin,
    `env` names only), a required upper bound on its run time, and the projection of
    its JSON stdout that counts: the `include` terms (dotted paths, `[]` for every item
    of a list; none: the whole document) and the `ignore` regular expressions cut from
    every string (engine.core.probes). A `browser` probe opens one page in headless
    Chromium instead, as its `browser:` block says (engine.core.browsing)."""

    id: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    kind: Literal["command", "browser"] = "command"
    argv: tuple[str, ...] = ()
    params: dict[str, Param] = Field(default_factory=dict)
    env: tuple[str, ...] = ()
    timeout: str = PROBE_TIMEOUT
    include: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    browser: Browser | None = None

    @property
    def timeout_seconds(self) -> int:
        return parse_duration(self.timeout)

    @property
    def browser_spec(self) -> BrowserSpec:
        """A browser probe's spec, what engine.adapters.browser runs."""
        if self.browser is None:
            raise TypeError(f"probe '{self.id}' is a {self.kind} probe, not a browser probe")
        block = self.browser
        return BrowserSpec(
            probe=self.id,
            url=block.url,
            allow=tuple(parse_target(entry) for entry in block.allow),
            selector=block.selector,
            include_terms=block.include_terms,
            ignore_patterns=block.ignore_patterns,
            max_chars=block.max_chars,
            timeout_seconds=self.timeout_seconds,
            login=LoginMarkers(block.login.urls, block.login.texts),
        )

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: str) -> str:
        return timeout_within(value, PROBE_TIMEOUT_MAX, "a probe's timeout is at most 10m")

    @field_validator("env")
    @classmethod
    def _env(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return env_names(value)

    @field_validator("include")
    @classmethod
    def _include(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for term in value:
            if re.fullmatch(INCLUDE_TERM, term) is None:
                raise ValueError(
                    f"include term '{term}' is not a dotted path (e.g. status, [].headSha, "
                    "jobs[].conclusion)"
                )
        return value

    @field_validator("ignore")
    @classmethod
    def _ignore(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _regexes(value, "ignore pattern")

    @model_validator(mode="after")
    def _kind(self) -> Probe:
        if self.kind == "browser":
            return self._browser_fields()
        if self.browser is not None:
            raise ValueError("a `browser:` block belongs to probes of `kind: browser`")
        if not self.argv:
            raise ValueError("a command probe needs an argv template")
        return self._template()

    def _browser_fields(self) -> Probe:
        if self.browser is None:
            raise ValueError("a browser probe needs a `browser:` block (allow, url, selector)")
        given = [
            name for name in ("argv", "params", "env", "include", "ignore") if getattr(self, name)
        ]
        if given:
            raise ValueError(
                f"{', '.join(given)} belong to command probes; a browser probe's projection "
                "is its browser block's selector, include_terms and ignore_patterns"
            )
        return self

    def _template(self) -> Probe:
        for item in self.argv:
            _check_option_placeholder(item)
            for name in PLACEHOLDER.findall(item):
                if name not in self.params and name not in PROBE_BUILTINS:
                    known = ", ".join(sorted([*self.params, *PROBE_BUILTINS]))
                    raise ValueError(
                        f"argv placeholder '{{{name}}}' is not a declared param (known: {known})"
                    )
        unused = set(self.params) - {n for a in self.argv for n in PLACEHOLDER.findall(a)}
        if unused:
            raise ValueError(f"params {sorted(unused)} are declared but not used in argv")
        return self


# A probe runs outside any run: of the builtins, only the interpreter is known.
PROBE_BUILTINS = ("python",)
# One include term: `a.b`, `[]`, `[].a`, `a[].b`, `a.b[]` (keys of letters, digits, _ -).
INCLUDE_TERM = r"(\[\]|[A-Za-z0-9_-]+(\[\])?)(\.([A-Za-z0-9_-]+(\[\])?|\[\]))*"


def timeout_within(value: str, most: int | None = None, says: str = "") -> str:
    """A `timeout:` of a registry entry: a duration, at most `most` seconds when given
    (`says` the limit, then the value)."""
    try:
        seconds = parse_duration(value)
    except DurationError as err:
        raise ValueError(str(err)) from None
    if most is not None and seconds > most:
        raise ValueError(f"{says}, not {value}")
    return value


def env_names(value: tuple[str, ...]) -> tuple[str, ...]:
    """An `env:` list: environment variable names only (their values are never written)."""
    for name in value:
        if not re.match(r"^[A-Z_][A-Z0-9_]*$", name):
            raise ValueError(f"'{name}' is not an environment variable name")
    return value


def _check_option_placeholder(item: str) -> None:
    """An option may carry a value after a fixed `=` (`--title={title}`), but a
    placeholder may never choose the option itself (`--{flag}`, `-{x}`)."""
    first = item.find("{")
    if item.startswith("-") and first >= 0 and "=" not in item[:first]:
        raise ValueError(
            f"argv element '{item}': a placeholder inside an option must follow a fixed '=' "
            "(e.g. --title={title}); a payload value must never choose an option"
        )
