"""The rules loader under hostile input: whatever bytes a rule file, a registry file or
the instance configuration holds, loading the tree ends in a RuleSet or a RulesError
with located diagnostics, never in another exception (a traceback for the operator)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dsl.diagnostics import RulesError
from dsl.parser import parse
from engine.loading import Paths, load_rules

ROOT = Path(__file__).resolve().parents[2]
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Words and marks of the rules language, so generated files reach past the first token.
WORDS = (
    "loop", "every", "cron", "in", "at", "manual", "host-clock", "emit", "run", "catch-up",
    "none", "last", "all", "cap", "singleton", "overlapping", "approval", "auto", "watched",
    "enabled", "disabled", "shadow", "on", "off", "budget", "daily-runs", "backoff", "base",
    "max", "route", "to", "on", "outcome", "stop", "webhook", "github", "ignore", "reject",
    "if", "unless", "let", "for", "repo", "repos", "where", "not", "and", "or", "human-only",
    "definition", "triage", "subject", "id", "60m", "1h", "99999999999d", "0s", "UTC",
    "clock.tick.reaper", "factory.work.requested", "reaper@1", "dispatch@1", "PR_OPEN",
    "event.payload.repo", "repo.name", '"0 9-9 * * 1-5"', '"x"', "{", "}", "[", "]", ",",
    ":", "==", "!=", "(", ")", "count", "\\",
)  # fmt: skip
LINES = st.lists(
    st.tuples(
        st.sampled_from(("", "  ", "    ", "\t", " ")),
        st.lists(st.sampled_from(WORDS), min_size=0, max_size=8).map(" ".join),
    ).map("".join),
    max_size=25,
).map("\n".join)
TEXT = st.one_of(LINES, st.text(max_size=300))
BYTES = st.one_of(
    st.binary(max_size=300),
    TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.integers(min_value=1, max_value=6000).map(lambda n: b"[" * n),  # nested YAML/JSON
    st.integers(min_value=1, max_value=6000).map(lambda n: b"a: " + b"{x: " * n),
    st.integers(min_value=1, max_value=4000).map(
        lambda n: b"loop x\n  every 1h\n  emit clock.tick.reaper " + b"{a: " * n + b"}" * n
    ),
)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped loops/ and registry/, with an empty config/, made once for
    every example: each puts its file back as it was (`loads_or_refuses`)."""
    root = tmp_path_factory.mktemp("engine-fuzz")
    shutil.copytree(ROOT / "loops", root / "loops")
    shutil.copytree(ROOT / "registry", root / "registry")
    (root / "config").mkdir()
    return root


@contextmanager
def changed(file: Path, data: bytes) -> Iterator[None]:
    """`file` holding `data`, then as it was again (its bytes, or no file)."""
    before = file.read_bytes() if file.exists() else None
    file.write_bytes(data)
    try:
        yield
    finally:
        if before is None:
            file.unlink()
        else:
            file.write_bytes(before)


def loads_or_refuses(root: Path, file: Path, data: bytes) -> None:
    """With `file` of the tree at `root` holding `data`, load_rules answers a RuleSet or
    a RulesError whose diagnostics all have a place."""
    try:
        with changed(file, data):
            load_rules(Paths(root / "loops", root / "registry", root / "config"))
    except RulesError as err:
        assert err.diagnostics
        assert all(d.code and d.span.file and d.span.line >= 1 for d in err.diagnostics)


@FUZZ
@given(data=BYTES)
def test_any_rule_file_loads_or_is_a_located_error(root: Path, data: bytes) -> None:
    """A rule file of any bytes (text, binary, invalid UTF-8, deep nesting)."""
    loads_or_refuses(root, root / "loops" / "fuzz.rules", data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXT)
def test_any_rule_text_parses_or_every_syntax_error_is_located_once(text: str) -> None:
    """parse() on any text (the parser alone, so many more examples) answers a RuleFile
    or raises RulesError only: every diagnostic on a line of the file, and at most one
    syntax error a line (the recovery drops the rest of a bad line, no cascade)."""
    try:
        parse(text, "fuzz.rules")
    except RulesError as err:
        lines = max(len(text.splitlines()), 1)
        assert err.diagnostics
        assert all(1 <= d.span.line <= lines and d.span.column >= 1 for d in err.diagnostics)
        syntax = [d.span.line for d in err.diagnostics if d.code in ("E0001", "E0002")]
        assert len(syntax) == len(set(syntax))


@FUZZ
@given(
    name=st.sampled_from(
        ("event-types.yaml", "definitions.yaml", "probes.yaml", "controllers.yaml")
    ),
    data=BYTES,
)
@example(name="event-types.yaml", data=b"=")  # YAML's value tag: a node with no place
@example(name="event-types.yaml", data=b":\n(:")  # a null key beside a text key
def test_any_registry_file_loads_or_is_a_located_error(root: Path, name: str, data: bytes) -> None:
    """A registry file of any bytes, in place of the shipped one."""
    loads_or_refuses(root, root / "registry" / name, data)


@FUZZ
@given(name=st.sampled_from(("schedule.yaml", "repos.yaml")), data=BYTES)
def test_any_instance_config_loads_or_is_a_located_error(
    root: Path, name: str, data: bytes
) -> None:
    """config/schedule.yaml or repos.yaml of any bytes."""
    loads_or_refuses(root, root / "config" / name, data)


@FUZZ
@given(data=BYTES)
def test_any_schema_file_loads_or_is_a_located_error(root: Path, data: bytes) -> None:
    """A JSON Schema of the registry of any bytes."""
    schema = next(iter(sorted((root / "registry" / "schemas").glob("*.json"))))
    loads_or_refuses(root, schema, data)
