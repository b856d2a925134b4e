"""The service modules import each other one way (docs/architecture.md, "Decide purely,
apply once"): use cases share facts and apply, never each other in a circle, and no
import hides inside a function to hold a circle together. Read from the source."""

from __future__ import annotations

import ast
import importlib
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[2] / "engine" / "service"
MODULES = sorted(p.stem for p in SERVICE.glob("*.py") if p.stem != "__init__")


def _targets(node: ast.Import | ast.ImportFrom) -> set[str]:
    """The service submodules an import statement names."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif node.module == "engine.service":  # `from engine.service import runs`
        names = [f"engine.service.{a.name}" for a in node.names]
    else:
        names = [node.module or ""]
    prefix = "engine.service."
    named = {n.removeprefix(prefix).split(".")[0] for n in names if n.startswith(prefix)}
    return named & set(MODULES)


def _imports(module: str) -> tuple[set[str], list[int]]:
    """(the service modules `module` imports, the lines of imports inside functions)."""
    tree = ast.parse((SERVICE / f"{module}.py").read_text(encoding="utf-8"))
    targets: set[str] = set()
    local: list[int] = []
    for scope in ast.walk(tree):
        if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(scope):
            if isinstance(node, ast.Import | ast.ImportFrom) and _targets(node):
                local.append(node.lineno)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            targets |= _targets(node)
    return targets, local


def test_no_service_module_imports_another_inside_a_function() -> None:
    """Every import of a service module by another is at module level, where the
    order of the layers is visible."""
    hidden = {m: lines for m in MODULES if (lines := _imports(m)[1])}
    assert hidden == {}


def test_the_service_modules_import_each_other_without_a_circle() -> None:
    """The graph of imports between the service modules has no cycle, so each one
    imports on its own, in any order."""
    graph = {m: _imports(m)[0] - {m} for m in MODULES}
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as err:
        raise AssertionError(f"service modules import in a circle: {err.args[1]}") from None
    assert sorted(order) == MODULES
    for module in MODULES:
        importlib.import_module(f"engine.service.{module}")


def test_the_import_reader_sees_a_circle_held_by_a_local_import() -> None:
    """The reader counts an import inside a function, the way the circle between
    occurrences and runs used to be held."""
    code = "def f():\n    from engine.service.runs import definition_of\n"
    node = ast.parse(code).body[0]
    assert isinstance(node, ast.FunctionDef)
    statement = node.body[0]
    assert isinstance(statement, ast.ImportFrom)
    assert _targets(statement) == {"runs"}
