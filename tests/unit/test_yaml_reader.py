"""The one YAML reader (engine.yaml_reader): what its measure of the event stream
refuses before a loader builds anything (docs/rules.md#e0909-yaml-aliases-expand-too-far),
and that aliases within the budget load as if written out."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from ruamel.yaml.events import CollectionStartEvent, ScalarEvent

from dsl.diagnostics import Collector
from engine.files import MAX_NESTING
from engine.loading import load_definitions, load_repos
from engine.yaml_reader import MAX_ALIAS_NODES, measure, read_yaml, refusal

# ---- the measure against the expansion it spares ---------------------------------------


@st.composite
def documents(draw: st.DrawFn) -> str:
    """Flow YAML up to five levels deep whose values may carry anchors and whose
    aliases name anchors already complete (never one they sit inside)."""
    done: list[str] = []
    names = itertools.count()

    def node(depth: int) -> str:
        kinds = ["scalar", "alias", "list", "map"] if depth < 5 else ["scalar", "alias"]
        kind = draw(st.sampled_from(kinds))
        if kind == "alias" and done:
            return "*" + draw(st.sampled_from(done))
        if kind == "list":
            body = "[" + ", ".join(node(depth + 1) for _ in range(draw(st.integers(0, 4)))) + "]"
        elif kind == "map":
            items = (f"k{i}: {node(depth + 1)}" for i in range(draw(st.integers(0, 4))))
            body = "{" + ", ".join(items) + "}"
        else:
            body = draw(st.sampled_from(["1", "x", "null", "'s'", "[]", "{}"]))
        if not draw(st.booleans()):
            return body
        name = f"a{next(names)}"
        done.append(name)
        return f"&{name} {body}"

    return node(0)


def expanded(value: Any, sizes: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(values, levels) of a loaded value as if every alias were written out; an
    aliased value is one shared object, so each is counted once and remembered."""
    if id(value) in sizes:
        return sizes[id(value)]
    children = list(value.values()) if isinstance(value, dict) else value
    if not isinstance(value, (dict, list)):
        return 1, 0
    inner = [expanded(child, sizes) for child in children]
    keys = len(value) if isinstance(value, dict) else 0
    found = 1 + keys + sum(s for s, _ in inner), 1 + max((h for _, h in inner), default=0)
    sizes[id(value)] = found
    return found


@settings(max_examples=300, deadline=None)
@given(text=documents())
def test_the_measure_draws_its_bounds_exactly_where_the_expansion_passes_them(text: str) -> None:
    """Computed from the events alone, the measure lets a document through with the
    budget and depth its aliases, written out, would take (what the loaded value,
    expanded, shows), and refuses it with one value or one level less."""
    events = list(YAML(typ="safe").parse(text))
    written = sum(isinstance(e, (ScalarEvent, CollectionStartEvent)) for e in events)
    values, levels = expanded(YAML(typ="safe").load(text), {})
    extra = values - written
    assert measure(events, extra, levels) is None, text
    if extra > 0:
        fewer = measure(events, extra - 1, levels)
        assert fewer is not None and fewer.code == "E0909", text
    if levels > 0:
        shallower = measure(events, extra, levels - 1)
        assert shallower is not None and shallower.code in ("E0908", "E0909"), text


def test_aliases_repeating_exactly_the_budget_pass_and_one_more_value_is_refused() -> None:
    """100 aliases of a 1,000-value list repeat 100,000 values: allowed; one more
    aliased scalar is refused, at that alias."""
    items = ", ".join(["1"] * 999)
    text = f"s: &s 1\na: &a [{items}]\nb: [{', '.join(['*a'] * 100)}]\n"
    assert MAX_ALIAS_NODES == 100_000 and refusal(text) is None
    found = refusal(text + "c: *s\n")
    assert found is not None and (found.code, found.line, found.column) == ("E0909", 4, 4)


@pytest.mark.parametrize(
    "text",
    ["a: &x [1, *x]\n", "a: &x {k: *x}\n", "a: &x\n  b:\n    <<: *x\n"],
    ids=["list", "mapping", "merge-key"],
)
def test_an_alias_inside_its_own_anchor_is_refused_at_the_alias(text: str) -> None:
    """A value that holds an alias of itself would never end: E0909 at the alias."""
    found = refusal(text)
    assert found is not None and found.code == "E0909" and "inside its own anchor" in found.message
    line = text.splitlines()[found.line - 1]
    assert line[found.column - 1 :].startswith("*x")


def test_an_alias_nesting_past_the_bound_is_refused_at_the_alias() -> None:
    """An anchor 60 levels deep aliased 10 levels down nests 70 deep: E0909 there."""
    deep = "[" * 60 + "]" * 60
    text = f"a: &d {deep}\nb: {'[' * 9}*d{']' * 9}\n"
    found = refusal(text)
    assert found is not None and (found.code, found.line, found.column) == ("E0909", 2, 13)
    assert f"more than {MAX_NESTING} levels deep" in found.message


# ---- through the reader, on both loaders -------------------------------------------------


def read(tmp_path: Path, text: str, fast: bool) -> tuple[Any, Collector]:
    path = tmp_path / "file.yaml"
    path.write_text(text, encoding="utf-8")
    collector = Collector()
    return read_yaml(path, path.name, collector, fast), collector


@pytest.mark.parametrize("fast", [False, True], ids=["round-trip", "libyaml"])
def test_an_anchor_defined_twice_is_invalid_yaml_on_either_loader(
    tmp_path: Path, fast: bool
) -> None:
    """Both loaders refuse an anchor given twice (E0901 at the second), where the
    round-trip loader alone would only warn and let a later alias mean the second."""
    data, collector = read(tmp_path, "a: &x 1\nb: &x 2\nc: *x\n", fast)
    assert data is None
    [problem] = collector.items
    assert (problem.code, problem.span.line, problem.span.column) == ("E0901", 2, 4)


@pytest.mark.parametrize("fast", [False, True], ids=["round-trip", "libyaml"])
def test_a_text_the_parsers_read_differently_is_measured_as_it_is_loaded(
    tmp_path: Path, fast: bool
) -> None:
    """A NEL in a plain value is a line break to libyaml (so the text is not YAML to
    it) but part of the value to the round-trip loader: the round-trip read still
    measures the aliases after it and refuses them; neither read builds them."""
    many = ", ".join(["*a"] * 200)
    text = f"x: 1\x85d\na: &a [{', '.join(['1'] * 999)}]\nb: [{many}]\n"
    data, collector = read(tmp_path, text, fast)
    assert data is None
    [problem] = collector.items
    assert problem.code == ("E0901" if fast else "E0909")


def test_a_shared_block_of_settings_loads_as_written_out(tmp_path: Path) -> None:
    """An anchored repo's settings merged into another (`<<: *defaults`) and a
    definition's env list aliased by another load as if each were written out."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "repos.yaml").write_text(
        "repos:\n"
        "  one: &defaults\n    github: o/one\n    base: develop\n    report_only: true\n"
        "  two:\n    <<: *defaults\n    github: o/two\n",
        encoding="utf-8",
    )
    collector = Collector()
    repos = {r.value[0]: r.value[1] for r in load_repos(config, collector)}
    assert collector.items == []
    assert (repos["two"].github, repos["two"].base, repos["two"].report_only) == (
        "o/two",
        "develop",
        True,
    )
    registry = tmp_path / "registry"
    registry.mkdir()
    (registry / "definitions.yaml").write_text(
        "definitions:\n"
        "  - &first\n    id: one\n    version: 1\n    adapter: command\n"
        '    argv: ["{python}", "-m", "x"]\n    env: &env [ENGINE_DB, ENGINE_RULES]\n'
        "    output_contract: c/v1\n    mutating: false\n    timeout: 5m\n    outcomes: [OK]\n"
        "  - <<: *first\n    id: two\n"
        "  - <<: *first\n    id: three\n    env: *env\n",
        encoding="utf-8",
    )
    for fast in (False, True):
        found = [d.value for d in load_definitions(registry, collector, fast)]
        assert collector.items == []
        assert [(d.id, d.argv, d.env) for d in found] == [
            (name, ("{python}", "-m", "x"), ("ENGINE_DB", "ENGINE_RULES"))
            for name in ("one", "two", "three")
        ]


@pytest.mark.parametrize("fast", [False, True], ids=["round-trip", "libyaml"])
@pytest.mark.parametrize(
    "value", ["!!float nan repos", "!!float 1e3e4", "!!int 12x", "!!timestamp 2024-13-45"]
)
def test_a_tagged_value_its_tag_cannot_read_is_invalid_yaml_at_its_place(
    tmp_path: Path, fast: bool, value: str
) -> None:
    """A value whose explicit tag's constructor fails on it (ruamel raises a bare
    ValueError for some) is E0901 at the value, on either loader, not a traceback."""
    data, collector = read(tmp_path, f"repos:\n  a: {value}\n", fast)
    assert data is None
    [problem] = collector.items
    assert (problem.code, problem.span.line, problem.span.column) == ("E0901", 2, 6)
    assert problem.message.startswith("invalid YAML: cannot read this ")


@pytest.mark.parametrize("fast", [False, True], ids=["round-trip", "libyaml"])
def test_a_yaml_1_1_directive_is_refused_on_either_loader(tmp_path: Path, fast: bool) -> None:
    """`%YAML 1.1` would read the file by other rules (and make ruamel warn at length
    about `1e3`): E0901 with a hint, on either loader; `%YAML 1.2` is read."""
    data, collector = read(tmp_path, "%YAML 1.1\n---\na: 1e3\n", fast)
    assert data is None
    [problem] = collector.items
    assert problem.code == "E0901" and "%YAML 1.1" in problem.message and problem.hint
    data, collector = read(tmp_path, "%YAML 1.2\n---\na: 1e3\n", fast)
    assert (data, collector.items) == ({"a": 1000.0}, [])
