"""Reading rule, registry and configuration files: the I/O edge in front of the pure
compiler. Every problem becomes a located Diagnostic; nothing here raises anything but
RulesError."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, TypeVar

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ValidationError

from dsl.diagnostics import YAML_LINE_BREAK, Collector, Diagnostic, RulesError, Span, did_you_mean
from dsl.model import RuleFile
from engine import check_cache, files
from engine.check_cache import CheckCache
from engine.core.browsing import allows
from engine.core.compiler import compile_rules, compile_with_clocks
from engine.core.config import REPO_NAME_PATTERN, HostClock, HostTimer, OverlayEntry, RepoEntry
from engine.core.controllers import Controller
from engine.core.inputs import Located, Tree
from engine.core.registry import Definition, EventType, Probe
from engine.core.ruleset import RuleSet
from engine.files import json_refusal, not_a_file, read_nested, read_text
from engine.home import LAYOUT, named_home
from engine.places import Root
from engine.places import display as display
from engine.yaml_reader import read_yaml

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


@dataclass(frozen=True)
class Paths:
    """Where the rules, the registry and the instance configuration are. A config
    directory that was asked for (`config_given`: by --config or ENGINE_CONFIG) must
    exist; the default one may be absent (no repos, no overlay)."""

    rules: Path
    registry: Path
    config: Path
    config_given: bool = False

    def roots(self) -> tuple[Root, Root, Root]:
        """The rules, registry and config directories, each named as the instance
        layout names it (`loops/`, `registry/`, `config/`: docs/rules.md#places)."""
        return (
            Root(LAYOUT["rules"], self.rules),
            Root(LAYOUT["registry"], self.registry),
            Root(LAYOUT["config"], self.config),
        )


def project_root() -> Path:
    """The checkout the package runs from (bundled `loops/`, `registry/`, `config/`)."""
    return Path(__file__).resolve().parent.parent


PATH_ENV = {"rules": "ENGINE_RULES", "registry": "ENGINE_REGISTRY", "config": "ENGINE_CONFIG"}


def default_paths() -> Paths:
    """Each directory from ENGINE_RULES / ENGINE_REGISTRY / ENGINE_CONFIG when set;
    else from the instance directory ENGINE_HOME (`<home>/loops`, `<home>/registry`,
    `<home>/config`, docs/deploy.md#the-instance-directory); else `./loops`,
    `./registry`, `./config` when present in the working directory; else the bundled
    ones. (A command the engine runs, such as `engine reap`, gets the variables.) The
    home is not checked here: `engine.home.instance_home` does, where it is used."""
    here = Path.cwd()
    home = named_home()
    if home is not None:
        base = home
    elif (here / "loops").is_dir() and (here / "registry").is_dir():
        base = here
    else:
        base = project_root()
    found = {key: os.environ.get(var) or "" for key, var in PATH_ENV.items()}
    where = {key: Path(found[key]) if found[key] else base / LAYOUT[key] for key in PATH_ENV}
    return Paths(where["rules"], where["registry"], where["config"])


def path_environment(paths: Paths) -> dict[str, str]:
    """The variables that make `default_paths()` in a child process find `paths`."""
    return {
        PATH_ENV["rules"]: str(paths.rules.resolve()),
        PATH_ENV["registry"]: str(paths.registry.resolve()),
        PATH_ENV["config"]: str(paths.config.resolve()),
    }


# ---- digest --------------------------------------------------------------------------


def kernel_files(paths: Paths, collector: Collector) -> Iterator[tuple[str, Path]]:
    """The tracked kernel files in canonical order: `loops/**/*.rules` then every file
    under `registry/`, each by its path relative to its directory (a directory that
    cannot be listed is reported to `collector`)."""
    rules, registry, _ = paths.roots()
    for root, pattern in ((rules, "*.rules"), (registry, "*")):
        if not root.path.is_dir():
            continue
        for file in (p for p in files.walk(root, pattern, collector) if p.is_file()):
            rel = file.relative_to(root.path).as_posix()
            if any(part.startswith(".") or part == "__pycache__" for part in rel.split("/")):
                continue
            yield root.name(file), file


def digest(paths: Paths) -> str:
    """sha256 over the kernel files (name, NUL, bytes, NUL each); the overlay and
    `config/` never change it. RulesError (E0905) when a kernel file cannot be read."""
    collector = Collector()
    h = hashlib.sha256()
    for name, file in kernel_files(paths, collector):
        try:
            h.update(name.encode() + b"\0" + file.read_bytes() + b"\0")
        except OSError as err:
            files.unreadable(collector, name, files.why_unreadable(err, file))
    collector.raise_if_any()
    return "sha256:" + h.hexdigest()


# ---- YAML with positions ---------------------------------------------------------------


def node_span(file: str, node: Any, key: str | int | None = None) -> Span:
    """Where a mapping key (or sequence item, or the node itself) was written."""
    lc = getattr(node, "lc", None)
    if lc is None:
        return Span(file, 1, 1)
    try:
        if key is None:
            line, col = lc.line, lc.col
        elif isinstance(node, list):
            line, col = lc.item(key)
        else:
            line, col = lc.key(key)
    except (KeyError, IndexError, TypeError):
        line, col = lc.line, lc.col
    if line is None or col is None:  # a node the parser made without a place (a lone `=`)
        return Span(file, 1, 1)
    return Span(file, line + 1, col + 1)


def _locate_error(file: str, node: Any, loc: tuple[Any, ...], at: Span | None) -> Span:
    """The span of the deepest part of `node` that a pydantic error location reaches;
    `at` (the entry's key) when it reaches no part of the node."""
    if at is not None and (not loc or loc[0] not in _keys(node)):
        return at
    span = node_span(file, node)
    for part in loc:
        in_map = isinstance(node, dict) and part in node
        in_seq = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if in_map or in_seq:
            span = node_span(file, node, part)
            node = node[part]
        else:
            break
    return span


def _keys(node: Any) -> set[Any]:
    return set(node) if isinstance(node, dict) else set()


def validate(
    model: type[M],
    data: Any,
    file: str,
    node: Any,
    collector: Collector,
    code: str = "E0902",
    at: Span | None = None,
) -> M | None:
    """Validate one YAML node into a model, reporting each error at its key (or at
    `at`, where the entry is named, when the node has no such key)."""
    try:
        return model.model_validate(_plain(data))
    except ValidationError as err:
        for e in err.errors():
            where = _path(e["loc"])
            message = e["msg"].removeprefix("Value error, ")
            hint = None
            if e["type"] == "extra_forbidden":
                message = f"unknown field '{e['loc'][-1]}'"
                known = [f.alias or n for n, f in model.model_fields.items() if not f.exclude]
                hint = did_you_mean(str(e["loc"][-1]), known) if len(e["loc"]) == 1 else None
            span = _locate_error(file, node, e["loc"], at)
            collector.error(code, f"{where}: {message}", span, hint)
    return None


def _path(loc: tuple[int | str, ...]) -> str:
    """A field's path as `a.b.0`, each part that is not a plain word quoted, so a key
    of spaces or dots still reads as one name."""
    parts = [str(p) if _WORD.fullmatch(str(p)) else repr(str(p)) for p in loc]
    return ".".join(parts) or "entry"


_WORD = re.compile(r"[A-Za-z0-9_-]+")


def _plain(data: Any) -> Any:
    if isinstance(data, dict):
        return {str(k): _plain(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_plain(v) for v in data]
    return data


def _key_spans(file: str, node: Any, deep: bool = False, prefix: str = "") -> dict[str, Span]:
    """The span of each key of a mapping; `deep`: of the keys of its mappings too, by
    their dotted path (`browser.allow`, `browser.login.urls`)."""
    if not isinstance(node, dict):
        return {}
    spans: dict[str, Span] = {}
    for k in node:
        spans[f"{prefix}{k}"] = node_span(file, node, k)
        if deep and isinstance(node[k], dict):
            spans.update(_key_spans(file, node[k], deep, f"{prefix}{k}."))
    return spans


def _section(
    root: Root, path: Path, key: str, kind: type, collector: Collector, fast: bool = False
) -> tuple[str, Any] | None:
    """Read `path` (under `root`) and return its place and its top-level `key` section,
    checked to be a `kind` (dict or list)."""
    found = _sections(root, path, {key: kind}, collector, fast)
    return None if found is None else (found[0], found[1][key])


def _sections(
    root: Root, path: Path, kinds: dict[str, type], collector: Collector, fast: bool = False
) -> tuple[str, dict[str, Any]] | None:
    """Read `path` (under `root`) once and return its place and each of its top-level
    sections (`kinds` maps each permitted key to dict or list); an absent key is an
    empty section."""
    name = root.name(path)
    problem = not_a_file(path)
    if problem is not None:
        files.unreadable(collector, name, problem)
        return None
    if not path.is_file():
        return None
    data = read_yaml(path, name, collector, fast)
    if data is None:
        return None
    holds = " and ".join(f"'{k}:'" for k in kinds)
    if not isinstance(data, dict) or set(data) - set(kinds):
        extra = sorted(set(data) - set(kinds), key=str) if isinstance(data, dict) else []
        first = next(iter(kinds))
        what = f"unknown top-level key '{extra[0]}'" if extra else f"expected a '{first}:' mapping"
        at = node_span(name, data, extra[0]) if extra else node_span(name, data)
        collector.error("E0902", f"{what}; this file holds only {holds}", at)
        return None
    out: dict[str, Any] = {}
    for key, kind in kinds.items():
        section = data.get(key)
        if section is None:
            out[key] = kind()
        elif isinstance(section, kind):
            out[key] = section
        else:
            shape = {dict: "a mapping", list: "a list", bool: "true or false"}[kind]
            collector.error("E0902", f"'{key}' must be {shape}", node_span(name, data, key))
            return None
    return name, out


# ---- the registry --------------------------------------------------------------------


def _load_json(
    root: Root, path: Path, collector: Collector, cache: CheckCache | None = None
) -> dict[str, Any] | None:
    name = root.name(path)
    text = read_nested(path, name, collector, json_refusal)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        collector.error("E0903", f"invalid JSON: {err.msg}", Span(name, err.lineno, err.colno))
        return None
    if not isinstance(data, dict):
        collector.error("E0903", "a JSON Schema must be an object", Span(name, 1, 1))
        return None
    problem = _checked_schema(text, cache)
    if problem is not None:
        collector.error("E0903", f"not a valid JSON Schema: {problem}", Span(name, 1, 1))
        return None
    return data


def _checked_schema(text: str, cache: CheckCache | None) -> str | None:
    """`_schema_problem`, kept in the check cache (the metaschema check is the dearest
    part of reading the registry)."""
    if cache is None:
        return _schema_problem(text)
    entry = check_cache.key("schema", "", text.encode())
    found = cache.get(entry)
    if isinstance(found, tuple) and len(found) == 1 and isinstance(found[0], (str, type(None))):
        return found[0]
    problem = _schema_problem(text)
    cache.put(entry, (problem,))
    return problem


@lru_cache(maxsize=1024)
def _schema_problem(text: str) -> str | None:
    """Checked once per distinct schema text (event types often share one schema)."""
    try:
        Draft202012Validator.check_schema(json.loads(text))
    except SchemaError as err:
        return str(err.message)
    return None


def load_event_types(
    registry: Path, collector: Collector, fast: bool = False, cache: CheckCache | None = None
) -> list[Located[EventType]]:
    root = Root(LAYOUT["registry"], registry)
    found = _section(root, registry / "event-types.yaml", "event_types", dict, collector, fast)
    if found is None:
        return []
    file, section = found
    out: list[Located[EventType]] = []
    for name, body in section.items():
        span = node_span(file, section, name)
        data = dict(body) if isinstance(body, dict) else body
        if isinstance(data, dict):
            data = {"name": name, **data}
        event_type = validate(EventType, data, file, body, collector, at=span)
        if event_type is None:
            continue
        if event_type.schema_file:
            schema_path = registry / "schemas" / event_type.schema_file
            if not schema_path.is_file():
                at = node_span(file, body, "schema")
                collector.error(
                    "E0903", f"schema file 'schemas/{event_type.schema_file}' does not exist", at
                )
                continue
            schema = _load_json(root, schema_path, collector, cache)
            event_type = event_type.model_copy(update={"payload_schema": schema})
        out.append(Located(event_type, span, _key_spans(file, body)))
    return out


def _kept(
    cache: CheckCache | None,
    kind: str,
    root: Root,
    path: Path,
    fast: bool,
    collector: Collector,
    load: Callable[[], list[Located[T]]],
) -> list[Located[T]]:
    """`load()` (a loader of the one YAML file `path`) through the check cache: a result
    that raised no diagnostic is kept under the file's name and bytes, and given back
    for the same bytes with the text registered for quoting, as reading it does. A
    file with problems is read afresh each time."""
    if cache is None or not path.is_file():
        return load()
    try:
        data = path.read_bytes()
    except OSError:
        return load()
    name = root.name(path)
    entry = check_cache.key(f"{kind}:{'fast' if fast else 'placed'}", name, data)
    found = cache.get(entry)
    if isinstance(found, list) and all(isinstance(item, Located) for item in found):
        collector.sources.add(name, data.decode("utf-8", "replace"), YAML_LINE_BREAK)
        return found
    before = len(collector.items)
    result = load()
    if len(collector.items) == before:
        cache.put(entry, result)
    return result


def load_definitions(
    registry: Path, collector: Collector, fast: bool = False, cache: CheckCache | None = None
) -> list[Located[Definition]]:
    root, path = Root(LAYOUT["registry"], registry), registry / "definitions.yaml"
    load = partial(_definitions, root, path, collector, fast)
    return _kept(cache, "definitions", root, path, fast, collector, load)


def _definitions(
    root: Root, path: Path, collector: Collector, fast: bool
) -> list[Located[Definition]]:
    return _entries(Definition, root, path, "definitions", collector, fast)


def _entries(
    model: type[M],
    root: Root,
    path: Path,
    key: str,
    collector: Collector,
    fast: bool,
    accept: Callable[[M, str, Any, Collector], bool] | None = None,
    deep: bool = False,
) -> list[Located[M]]:
    """A registry file's list under `key`, each entry validated into `model` (E0902 at
    its key) and kept when `accept` (a check beyond the model's) lets it; `deep`: the
    keys of its nested mappings are placed too (`browser.allow`)."""
    found = _section(root, path, key, list, collector, fast)
    if found is None:
        return []
    file, section = found
    out: list[Located[M]] = []
    for index, body in enumerate(section):
        entry = validate(model, body, file, body, collector)
        if entry is not None and (accept is None or accept(entry, file, body, collector)):
            spans = _key_spans(file, body, deep)
            out.append(Located(entry, node_span(file, section, index), spans))
    return out


def load_probes(registry: Path, collector: Collector, fast: bool = False) -> list[Located[Probe]]:
    """registry/probes.yaml (optional): the probes watch loops poll."""
    root, path = Root(LAYOUT["registry"], registry), registry / "probes.yaml"
    return _entries(Probe, root, path, "probes", collector, fast, _on_its_allowlist, deep=True)


def load_controllers(
    registry: Path, collector: Collector, fast: bool = False
) -> list[Located[Controller]]:
    """registry/controllers.yaml (optional; absent: no controllers): the programs a
    work-bound loop may wake, each validated like a probe (E0902 at its key)."""
    root, path = Root(LAYOUT["registry"], registry), registry / "controllers.yaml"
    return _entries(Controller, root, path, "controllers", collector, fast)


def _on_its_allowlist(probe: Probe, file: str, body: Any, collector: Collector) -> bool:
    """A browser probe's `url` is admitted by its own `allow` list (E0910 at the url
    when not); every other probe is."""
    if probe.browser is None:
        return True
    spec = probe.browser_spec
    if allows(spec.allow, spec.url):
        return True
    block = body["browser"]
    collector.error(
        "E0910",
        f"browser.url: '{spec.url}' is outside the allowlist of probe '{probe.id}'",
        node_span(file, block, "url"),
        "allow: "
        + ", ".join(str(target) for target in spec.allow)
        + "; add its scheme, host and path prefix, or correct the url",
    )
    return False


def load_contracts(
    registry: Path, collector: Collector, cache: CheckCache | None = None
) -> dict[str, dict[str, Any]]:
    contracts: dict[str, dict[str, Any]] = {}
    root = Root(LAYOUT["registry"], registry)
    for path in files.listing(root, registry / "contracts", "*.json", collector):
        schema = _load_json(root, path, collector, cache)
        if schema is None:
            continue
        contract_id = schema.get("$id")
        if not isinstance(contract_id, str):
            collector.error(
                "E0903", 'an output contract needs a string "$id"', Span(root.name(path), 1, 1)
            )
            continue
        contracts[contract_id] = schema
    return contracts


# ---- configuration -------------------------------------------------------------------


def load_repos(
    config: Path, collector: Collector, cache: CheckCache | None = None
) -> list[Located[tuple[str, RepoEntry]]]:
    root, path = Root(LAYOUT["config"], config), config / "repos.yaml"
    load = partial(_repos, root, path, collector)
    return _kept(cache, "repos", root, path, False, collector, load)


def _repos(root: Root, path: Path, collector: Collector) -> list[Located[tuple[str, RepoEntry]]]:
    found = _section(root, path, "repos", dict, collector)
    if found is None:
        return []
    file, section = found
    out: list[Located[tuple[str, RepoEntry]]] = []
    for name, body in section.items():
        span = node_span(file, section, name)
        if not isinstance(name, str) or not _repo_name_ok(name):
            collector.error(
                "E0902", f"repo name '{name}' must be lower-case letters, digits, - or _", span
            )
            continue
        entry = validate(RepoEntry, body, file, body, collector, at=span)
        if entry is not None:
            out.append(Located((name, entry), span, _key_spans(file, body)))
    return out


def _repo_name_ok(name: str) -> bool:
    return re.match(REPO_NAME_PATTERN, name) is not None


def load_overlay(config: Path, collector: Collector) -> list[Located[tuple[str, OverlayEntry]]]:
    """The `schedules:` entries of config/schedule.yaml."""
    return load_schedule(config, collector)[0]


def load_schedule(
    config: Path, collector: Collector
) -> tuple[list[Located[tuple[str, OverlayEntry]]], list[Located[HostClock]]]:
    """config/schedule.yaml, read once: its `schedules:` overlay entries and its
    `host_clocks:` (docs/deploy.md#2-the-host-clock-bridge), each validated with its place."""
    overlay, clocks, _ = load_schedule_settings(config, collector)
    return overlay, clocks


def load_schedule_settings(
    config: Path, collector: Collector
) -> tuple[list[Located[tuple[str, OverlayEntry]]], list[Located[HostClock]], bool]:
    """config/schedule.yaml: as `load_schedule`, and its top-level `release_freeze`."""
    kinds = {"schedules": dict, "host_clocks": dict, "release_freeze": bool}
    root = Root(LAYOUT["config"], config)
    found = _sections(root, config / "schedule.yaml", kinds, collector)
    if found is None:
        return [], [], False
    file, sections = found
    overlay: list[Located[tuple[str, OverlayEntry]]] = []
    section = sections["schedules"]
    for name, body in section.items():
        span = node_span(file, section, name)
        data = body if body is not None else {}
        entry = validate(OverlayEntry, data, file, body, collector, "E0802", at=span)
        if entry is not None:
            overlay.append(Located((str(name), entry), span, _key_spans(file, body)))
    clocks: list[Located[HostClock]] = []
    section = sections["host_clocks"]
    for name, body in section.items():
        span = node_span(file, section, name)
        data = {**body, "name": str(name)} if isinstance(body, dict) else body
        clock = validate(HostClock, data, file, body, collector, "E0805", at=span)
        if clock is not None:
            clocks.append(Located(clock, span, _key_spans(file, body)))
    return overlay, clocks, bool(sections["release_freeze"])


# ---- rules ---------------------------------------------------------------------------


def load_rule_files(
    rules: Path, collector: Collector, cache: CheckCache | None = None
) -> list[RuleFile]:
    """Parse every rule file, each through the check cache when one is given (the text
    is read either way: diagnostics quote its lines)."""
    found: list[RuleFile] = []
    root = Root(LAYOUT["rules"], rules)
    for path in files.walk(root, "*.rules", collector) if rules.is_dir() else []:
        name = root.name(path)
        text = read_text(path, name, collector)
        if text is None:
            continue
        parsed = _parse_cached(text, name, cache)
        if isinstance(parsed, RuleFile):
            found.append(parsed)
        else:
            collector.extend(parsed)
    return found


def _parse_cached(
    text: str, name: str, cache: CheckCache | None
) -> RuleFile | tuple[Diagnostic, ...]:
    """The parsed file, or the diagnostics its parse raised: from the cache when it holds
    this name and text, else parsed (and stored)."""
    entry = check_cache.key("rules", name, text.encode()) if cache is not None else ""
    if cache is not None:
        found = cache.get(entry)
        if isinstance(found, RuleFile) and found.path == name:
            return found
        if isinstance(found, tuple) and found and all(isinstance(d, Diagnostic) for d in found):
            return found
    from dsl.parser import parse  # the grammar (and Lark) only when a file is parsed

    result: RuleFile | tuple[Diagnostic, ...]
    try:
        result = parse(text, name)
    except RulesError as err:
        result = err.diagnostics
    if cache is not None:
        cache.put(entry, result)
    return result


def load_tree(paths: Paths, fast: bool = False, cache: CheckCache | None = None) -> Tree:
    """Read every kernel and instance file. Missing `loops/` or `registry/` directories
    are a usage error (raised as RulesError with code E0900). `fast` reads the registry
    YAML without positions (its positions only ever serve diagnostics). `cache` (the
    check cache, `engine.check_cache`) keeps parsed rule files and checked schemas."""
    collector = Collector()
    folders = [("rules", paths.rules), ("registry", paths.registry)]
    if paths.config_given:
        folders.append(("config", paths.config))
    for label, folder in folders:
        if not folder.is_dir():
            collector.error("E0900", f"{label} directory not found", Span(display(folder), 1, 1))
    registry = paths.roots()[1]
    for name in ("event-types.yaml", "definitions.yaml"):
        file = paths.registry / name
        problem = not_a_file(file)
        if problem is not None:
            files.unreadable(collector, registry.name(file), problem)
        elif paths.registry.is_dir() and not file.is_file():
            at = Span(registry.name(file), 1, 1)
            collector.error("E0900", f"registry file {name} not found", at)
    collector.raise_if_any()
    rule_files = load_rule_files(paths.rules, collector, cache)
    event_types = load_event_types(paths.registry, collector, fast, cache)
    definitions = load_definitions(paths.registry, collector, fast, cache)
    contracts = load_contracts(paths.registry, collector, cache)
    probes = load_probes(paths.registry, collector, fast)
    controllers = load_controllers(paths.registry, collector, fast)
    repos = load_repos(paths.config, collector, cache)
    overlay, host_clocks, release_freeze = load_schedule_settings(paths.config, collector)
    return Tree(
        rule_files=rule_files,
        event_types=event_types,
        definitions=definitions,
        contracts=contracts,
        repos=repos,
        overlay=overlay,
        digest=_digest(paths, collector),
        collector=collector,
        host_clocks=host_clocks,
        release_freeze=release_freeze,
        probes=probes,
        controllers=controllers,
    )


def _digest(paths: Paths, collector: Collector) -> str:
    try:
        return digest(paths)
    except RulesError as err:  # an unreadable kernel file, mostly reported already
        collector.extend(d for d in err.diagnostics if d not in collector.items)
        return ""


def load_rules(paths: Paths, cache: CheckCache | None = None) -> RuleSet:
    """Read and compile: the one call the CLI and the runtime use. Raises RulesError.

    The registry is first read without positions; when anything is wrong the whole
    tree is read again with them, so every diagnostic names its exact place. `cache`
    (`engine check`'s) is consulted and filled; entries it could not write are simply
    not kept."""
    try:
        with _collector_paused():
            try:
                return compile_rules(load_tree(paths, fast=True, cache=cache))
            except RulesError:
                return compile_rules(load_tree(paths, fast=False, cache=cache))
    finally:
        if cache is not None:
            cache.prune()


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a tree is read and compiled: the tens of
    thousands of model values it makes (nearly all kept) would set it off again and
    again, scanning them each time, for about a third of a large check's time. It is
    turned back on (when it was on) after; the cycles made meanwhile are found then."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def load_host_clocks(paths: Paths) -> tuple[RuleSet, tuple[HostTimer, ...]]:
    """The compiled rules and the validated host clocks of config/schedule.yaml (for
    `engine render`). Raises RulesError, like `load_rules`."""
    with _collector_paused():
        try:
            return compile_with_clocks(load_tree(paths, fast=True))
        except RulesError:
            return compile_with_clocks(load_tree(paths, fast=False))
