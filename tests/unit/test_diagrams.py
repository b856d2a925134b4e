"""Diagrams drawn from the compiled machines, and the `engine diagram` command."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from engine.core.ruleset import RuleSet
from engine.loading import default_paths, load_rules, project_root
from engine.machines.catalog import Machines
from engine.machines.diagrams import DiagramFormat, Target, render, resolve_target, targets
from engine.machines.errors import UnknownMachine

ROOT = project_root()
PYTHON = sys.executable
HAS_DOT = shutil.which("dot") is not None

BAD_RULES = """\
loop reaper
  every 60m
  emit clock.tik.reaper
  enabled false
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty instance configuration directory, so a local config/ cannot leak in."""
    return tmp_path_factory.mktemp("config")


@pytest.fixture(scope="module")
def machines(config: Path) -> Machines:
    rules: RuleSet = load_rules(replace(default_paths(), config=config))
    return Machines.from_rules(rules)


def engine(
    *args: str, config: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m engine ARGS` from the repository root with the shipped rules."""
    return subprocess.run(
        [PYTHON, "-m", "engine", *args, "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )


# ---- rendering -----------------------------------------------------------------------------


def test_targets_list_machines_loops_and_event_types(machines: Machines) -> None:
    """The targets are the three lifecycles, every loop and every event type."""
    names = [t.name for t in targets(machines)]
    assert names[:3] == ["occurrence", "proposal", "run"]
    assert "reaper" in names and "factory.ship.apply.requested" in names


def test_unknown_target_suggests_the_closest(machines: Machines) -> None:
    """An unknown target raises UnknownMachine with a did-you-mean."""
    with pytest.raises(UnknownMachine, match="did you mean 'proposal'"):
        resolve_target(machines, "proposl")


def test_mermaid_draws_every_state_and_edge(machines: Machines) -> None:
    """The mermaid text has every state, every table edge with its trigger, the
    loop's guard, and an end marker for every terminal state."""
    target = resolve_target(machines, "reaper")
    text = render(target, DiagramFormat.MERMAID)
    assert text.startswith("---\ntitle: ")
    assert "stateDiagram-v2" in text
    lines = text.splitlines()
    for edge_spec in target.machine.spec.transitions:
        for state in edge_spec.sources:
            start = f"{state} --> {edge_spec.dest}:"
            edge = [ln for ln in lines if ln.strip().startswith(start)]
            assert edge and edge_spec.trigger in edge[0], (state, edge_spec.trigger)
    assert "propose [no_run_in_flight]" in text
    for state in target.machine.spec.terminal:
        assert f"{state} --> [*]" in text


def test_human_only_guard_is_drawn(machines: Machines) -> None:
    """A human-only event type's diagram shows the actor_is_human guard on approve."""
    target = resolve_target(machines, "factory.ship.apply.requested")
    assert "approve [actor_is_human]" in render(target, DiagramFormat.MERMAID)


def test_dot_source_is_a_digraph_with_terminals_marked(machines: Machines) -> None:
    """The dot source is a Graphviz digraph naming every state; terminals get a double border."""
    target = resolve_target(machines, "run")
    source = render(target, DiagramFormat.DOT)
    assert source.lstrip().startswith("digraph")
    for state in target.machine.spec.states:
        assert state in source
    assert "succeeded [peripheries=2]" in source
    assert 'label="expire_lease [attempts_remain]"' in source


def test_live_counts_are_written_under_each_state(machines: Machines) -> None:
    """With counts (the web loop page), each counted state shows its number and is
    shaded when it holds some; without them the source is what `engine diagram` draws."""
    target = resolve_target(machines, "run")
    source = render(target, DiagramFormat.DOT, {"queued": 3, "failed": 0})
    assert 'queued [label="queued\\n3" fillcolor="#dbeafe" style=filled]' in source
    assert 'failed [label="failed\\n0" fillcolor="#ffffff" style=filled]' in source
    assert 'running [label="running\\n' not in source  # not counted: not relabelled
    assert "\\n" not in render(target, DiagramFormat.DOT)


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz `dot` is not installed")
def test_svg_is_rendered_with_dot(machines: Machines) -> None:
    """With Graphviz installed, svg output is an SVG document naming the states."""
    svg = render(resolve_target(machines, "proposal"), DiagramFormat.SVG)
    assert "<svg" in svg and "superseded" in svg


def test_diagram_support_is_imported_only_when_drawing() -> None:
    """Compiling and firing machines never imports transitions' diagram support."""
    code = (
        "import sys\n"
        "from engine.machines.catalog import lifecycle\n"
        "from engine.core.machines import DEFAULT_PROFILE, occurrence_machine\n"
        "lifecycle(DEFAULT_PROFILE)\n"
        "occurrence_machine(DEFAULT_PROFILE).fire('created', 'triage')\n"
        "import engine.machines.diagrams\n"
        "print('transitions.extensions.diagrams' in sys.modules, 'graphviz' in sys.modules)\n"
    )
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_every_target_renders(machines: Machines) -> None:
    """Every listed target renders in mermaid and dot."""
    every: list[Target] = targets(machines)
    for target in every:
        assert target.machine.initial in render(target, DiagramFormat.MERMAID)
        assert "digraph" in render(target, DiagramFormat.DOT)


# ---- the command ----------------------------------------------------------------------------


def test_cli_lists_targets_without_one(config: Path) -> None:
    """`engine diagram` with no target lists the targets and exits 0."""
    done = engine("diagram", config=config)
    assert done.returncode == 0, done.stderr
    assert "machines:" in done.stdout and "reaper" in done.stdout


def test_cli_lists_targets_as_json(config: Path) -> None:
    """`engine diagram --json` lists targets as JSON."""
    done = engine("diagram", "--json", config=config)
    assert done.returncode == 0, done.stderr
    listed = {row["target"]: row for row in json.loads(done.stdout)}
    assert listed["reaper"]["kind"] == "loop"


def test_cli_draws_a_loop_in_mermaid(config: Path) -> None:
    """`engine diagram reaper` prints the loop's occurrence machine with its guards."""
    done = engine("diagram", "reaper", config=config)
    assert done.returncode == 0, done.stderr
    assert "stateDiagram-v2" in done.stdout and "no_run_in_flight" in done.stdout


def test_cli_writes_dot_to_a_file(config: Path, tmp_path: Path) -> None:
    """`--format dot --out FILE` writes the Graphviz source to FILE."""
    out = tmp_path / "run.dot"
    done = engine("diagram", "run", "--format", "dot", "--out", str(out), config=config)
    assert done.returncode == 0, done.stderr
    assert out.read_text().lstrip().startswith("digraph")


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz `dot` is not installed")
def test_cli_writes_svg(config: Path, tmp_path: Path) -> None:
    """`--format svg` writes an SVG document when `dot` is installed."""
    out = tmp_path / "occurrence.svg"
    done = engine("diagram", "occurrence", "--format", "svg", "--out", str(out), config=config)
    assert done.returncode == 0, done.stderr
    assert "<svg" in out.read_text()


def test_cli_svg_without_dot_is_a_usage_error(config: Path, tmp_path: Path) -> None:
    """Without `dot` on PATH, svg exits 2 with a message saying what to install."""
    done = engine("diagram", "run", "--format", "svg", config=config, env={"PATH": str(tmp_path)})
    assert done.returncode == 2
    assert "dot" in done.stderr and "Graphviz" in done.stderr
    assert done.stdout == ""


def test_cli_unknown_target_exits_2_with_suggestion(config: Path) -> None:
    """An unknown target exits 2 and suggests the closest name."""
    done = engine("diagram", "reapr", config=config)
    assert done.returncode == 2
    assert "did you mean 'reaper'?" in done.stderr


def test_cli_invalid_rules_print_diagnostics_and_exit_1(config: Path, tmp_path: Path) -> None:
    """Invalid rules print their located diagnostics on stderr and exit 1."""
    rules = tmp_path / "loops"
    rules.mkdir()
    (rules / "reaper.rules").write_text(BAD_RULES)
    done = engine(
        "diagram", "run", "--rules", str(rules), "--registry", str(ROOT / "registry"), config=config
    )
    assert done.returncode == 1
    assert "reaper.rules:3:" in done.stderr and "clock.tik.reaper" in done.stderr
    assert done.stdout == ""


def test_cli_help_explains_targets_and_formats(config: Path) -> None:
    """`engine diagram --help` explains targets, formats and exit codes."""
    done = engine("diagram", "--help", config=config)
    assert done.returncode == 0
    for word in ("TARGET", "occurrence", "mermaid", "svg", "exit codes"):
        assert word in done.stdout
