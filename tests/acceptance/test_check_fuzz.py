"""`engine check` under fuzzed configuration: whatever config/repos.yaml,
config/schedule.yaml or a registry file holds (random YAML shapes built from the real
field names, hostile YAML constructs, random bytes), the check exits 0, 1 or 2, prints
no traceback and no stray warning, and reports each problem on exactly one located
`file:line:col: error[CODE]: message` line (then its source line, caret and hint),
counted by the closing `error: N problems found` line.

The command runs in-process (`engine.cli.main.main`, as `engine check` calls it) so
that hypothesis can try hundreds of files: an exception escaping it is the traceback
the operator would see, and a Python warning raises (the suite's `filterwarnings =
error`). tests/acceptance/test_yaml_bombs.py runs the real process."""

from __future__ import annotations

import io
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from ruamel.yaml import YAML

from engine.cli.main import main
from engine.core.config import HostClock, OverlayEntry, RepoEntry
from engine.core.registry import Definition, EventType, Probe

ROOT = Path(__file__).resolve().parents[2]
FUZZ = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

HEAD = re.compile(r"\S[^:]*:[1-9][0-9]*:[1-9][0-9]*: (error|warning)\[[EW][0-9]{4}\]: \S.*")
GUTTER = re.compile(r" *([0-9]+ )?\|( .*)?")
SUMMARY = re.compile(r"error: ([0-9]+) problems? found; nothing was loaded")


def fields(*models: type[BaseModel]) -> list[str]:
    return sorted({f.alias or n for m in models for n, f in m.model_fields.items()})


# ---- random YAML shapes ---------------------------------------------------------------

WORDS = st.sampled_from(
    [
        "reaper", "work-bj29", "bj29", "factory-triage", "a/b", "watt-mind/bj29", "main",
        "1h", "0s", "-1m", "99999999999d", "4h", "*/5 * * * *", "0 9 * * 1-5", "UTC",
        "Nope/Zone", "2024-01-01", "2024-13-40T25:00:00", "yes", "~", "", " ", "{python}",
        "{repo}", "clock.tick.reaper", "factory.work.requested", "reaper@1", "fake",
        "command", "agent", "OK", "FAILED", "x.json", "../x.json", "/etc/passwd", "\t",
    ]
)  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=12),
    WORDS,
)
ENTRY_KEYS = fields(RepoEntry, OverlayEntry, HostClock, Definition, EventType, Probe)
KEYS = st.one_of(st.sampled_from(ENTRY_KEYS), WORDS, st.text(max_size=8), st.integers(-3, 3))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=16,
)


def entries(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    """A mapping of the model's own field names (some of them) to random values."""
    return st.dictionaries(st.sampled_from(fields(model)), VALUES, max_size=6)


NAMES = st.one_of(WORDS, st.text(max_size=8))
SHAPES = {
    "config/repos.yaml": st.fixed_dictionaries(
        {"repos": st.dictionaries(NAMES, entries(RepoEntry) | VALUES, max_size=3)}
    ),
    "config/schedule.yaml": st.fixed_dictionaries(
        {},
        optional={
            "schedules": st.dictionaries(NAMES, entries(OverlayEntry) | VALUES, max_size=3),
            "host_clocks": st.dictionaries(NAMES, entries(HostClock) | VALUES, max_size=3),
            "release_freeze": VALUES,
        },
    ),
    "registry/probes.yaml": st.fixed_dictionaries(
        {"probes": st.lists(entries(Probe) | VALUES, max_size=3)}
    ),
}
SHIPPED_LISTS = {"registry/definitions.yaml": ("definitions", Definition)}
SHIPPED_MAPS = {"registry/event-types.yaml": ("event_types", EventType)}


def dump(value: Any) -> str:
    out = io.StringIO()
    yaml = YAML(typ="safe")
    yaml.default_flow_style = False
    yaml.dump(value, out)
    return out.getvalue()


def shipped(name: str) -> Any:
    return YAML(typ="safe").load((ROOT / name).read_text(encoding="utf-8"))


@st.composite
def changed_registry(draw: st.DrawFn, name: str) -> str:
    """The shipped registry file with one entry's field set to a random value (or the
    entry replaced by one), so the rest still compiles and the change reaches past
    the first check."""
    data = shipped(name)
    key, model = {**SHIPPED_LISTS, **SHIPPED_MAPS}[name]
    section = data[key]
    names = list(range(len(section))) if isinstance(section, list) else sorted(section)
    which = draw(st.sampled_from(names))
    if draw(st.booleans()):
        section[which] = draw(entries(model) | VALUES)
    else:
        section[which][draw(st.sampled_from(fields(model)))] = draw(VALUES)
    return dump(data)


# ---- hostile YAML text --------------------------------------------------------------------

CONSTRUCTS = st.sampled_from(
    [
        "repos:", "schedules:", "host_clocks:", "definitions:", "event_types:", "probes:",
        "release_freeze: true", "  reaper:", "  bj29:", "    github: a/b", "    enabled: yes",
        "    every: 1h", "  - id: reaper", "    version: 1", "&a", "*a", "&b [*a, *a]", "<<: *a",
        "<<: [*a, *b]", "!!python/object:os.system", "!!binary aGVsbG8=", "!!timestamp 2024-01-01",
        "!!set {a, b}", "!!omap [a: 1]", "!!float nan", "!!int 0x10", "!!str", "!custom x",
        "? [a, b]", "? {a: 1}", ": x", "---", "...", "%YAML 1.1", "%YAML 1.2", "%TAG ! tag:x,1:",
        "1e3", "0o17", "0x_", ".inf", "-.nan", "2001-12-14t21:59:43.10-05:00", "=", "<<",
        "|", ">-", "'", '"\\x"', "\\u0000", "\ufeff", "\t", "#", "- - -", "{", "}", "[", "]",
        ",", "a: b: c", "!", "&", "*", "@", "`",
    ]
)  # fmt: skip
HOSTILE = st.lists(
    st.tuples(
        st.sampled_from(("", "  ", "    ", "      ")),
        st.lists(CONSTRUCTS, min_size=1, max_size=4).map(" ".join),
    ).map("".join),
    max_size=14,
).map("\n".join)
BYTES = st.one_of(
    HOSTILE.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=200),
)


# ---- running the check ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped loops/ and registry/, with an empty config/, made once for
    every example: each puts its file back as it was (`changed`)."""
    root = tmp_path_factory.mktemp("engine-check-fuzz")
    shutil.copytree(ROOT / "loops", root / "loops")
    shutil.copytree(ROOT / "registry", root / "registry")
    (root / "config").mkdir()
    return root


@contextmanager
def changed(root: Path, name: str, data: bytes) -> Iterator[None]:
    """The tree at `root` with `name` holding `data`, then as it was again (the shipped
    file's bytes, or no file)."""
    file = root / name
    before = file.read_bytes() if file.exists() else None
    file.write_bytes(data)
    try:
        yield
    finally:
        if before is None:
            file.unlink()
        else:
            file.write_bytes(before)


def check(root: Path, name: str, data: bytes) -> tuple[int, str, str]:
    """`engine check` of the tree with `name` holding `data`: its exit, stdout, stderr."""
    where = {"--rules": "loops", "--registry": "registry", "--config": "config"}
    options = [part for flag, folder in where.items() for part in (flag, str(root / folder))]
    out, err = io.StringIO(), io.StringIO()
    with changed(root, name, data), redirect_stdout(out), redirect_stderr(err):
        code = main(["check", "--no-cache", *options])
    return code, out.getvalue(), err.getvalue()


def checks_cleanly(root: Path, name: str, data: bytes) -> None:
    """`engine check` of the tree at `root` with `name` holding `data`: exit 0 with its
    summary, or 1 or 2 with one located line a problem and the count of them; nothing
    else printed."""
    code, out, err = check(root, name, data)
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in out + err
    lines = err.splitlines()
    heads = [line for line in lines if HEAD.fullmatch(line)]
    if code == 0:
        assert out.startswith("ok: "), (out, err)
        return
    summary = SUMMARY.fullmatch(lines[-1]) if lines else None
    assert summary is not None, err
    errors = [line for line in heads if ": error[" in line]
    assert int(summary.group(1)) == len(errors) >= 1, err
    for line in lines[:-1]:
        known = HEAD.fullmatch(line) or GUTTER.fullmatch(line) or line.startswith("  help: ")
        assert known or line == "" or line.startswith("warning: "), (line, err)


# ---- the properties --------------------------------------------------------------------------


@FUZZ
@given(data=st.data(), name=st.sampled_from(sorted(SHAPES)))
def test_check_of_any_configuration_shape_is_clean(
    root: Path, data: st.DataObject, name: str
) -> None:
    """Random YAML built from the real field names in repos.yaml, schedule.yaml or
    registry/probes.yaml."""
    checks_cleanly(root, name, dump(data.draw(SHAPES[name])).encode())


@FUZZ
@given(data=st.data(), name=st.sampled_from(sorted({**SHIPPED_LISTS, **SHIPPED_MAPS})))
def test_check_of_a_registry_with_one_random_field_is_clean(
    root: Path, data: st.DataObject, name: str
) -> None:
    """The shipped definitions or event types with one field (or entry) made random."""
    checks_cleanly(root, name, data.draw(changed_registry(name)).encode())


@FUZZ
@given(
    name=st.sampled_from(
        (
            "config/repos.yaml",
            "config/schedule.yaml",
            "registry/definitions.yaml",
            "registry/event-types.yaml",
            "registry/probes.yaml",
        )
    ),
    data=BYTES,
)
@example(name="config/repos.yaml", data=b"repos: &a\n  x: *a\n")  # a value without end
@example(name="config/schedule.yaml", data=b"a: &x 1\nb: &x 2\n")  # the Python loader warned
@example(name="config/repos.yaml", data=b'repos:\n  "\\N": {}\n')  # a NEL in the message
@example(name="config/repos.yaml", data=b"repos:\n  ? !!float nan repos\n")  # a ValueError
@example(name="registry/probes.yaml", data=b"probes: [!!float 1e3e4]\n")  # another
@example(name="config/schedule.yaml", data=b"%YAML 1.1\n---\na: 1e3\n")  # a 1.1 warning
def test_check_of_any_hostile_yaml_is_clean(root: Path, name: str, data: bytes) -> None:
    """Tags, directives, anchors, merge keys and stray marks, or random bytes, in any
    configuration or registry file."""
    checks_cleanly(root, name, data)
