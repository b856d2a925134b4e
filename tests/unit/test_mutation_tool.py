"""`make mutation` (tests/mutation.py) measures test strength only if its mutants are
real: each one parses, differs from the source, and changes exactly the point it names."""

from __future__ import annotations

import ast

import pytest
from mutation import ROOT, TARGETS, _apply, mutants_of, mutated_source


@pytest.mark.parametrize("module", sorted(TARGETS))
def test_every_mutant_is_python_that_differs_from_the_source(module: str) -> None:
    """Every mutation point of a target yields a module that parses and is not the
    original program, so no mutant is counted as killed or survived by mistake."""
    original = ast.dump(ast.parse((ROOT / module).read_text(encoding="utf-8")))
    found = mutants_of(module)
    assert found, f"{module} has no mutation points"
    for mutant in found[:: max(1, len(found) // 8)]:  # a spread of them, for speed
        mutated = ast.parse(mutated_source(mutant))
        assert ast.dump(mutated) != original, mutant.key


def test_a_mutant_changes_exactly_what_it_says() -> None:
    """`x < y and not z` mutated at each point gives exactly the expected programs."""
    expr = ast.parse("x < y and not z", mode="eval").body
    assert isinstance(expr, ast.BoolOp)
    compare, negation = expr.values
    changed = [
        ast.unparse(_apply(compare, "compare#0 < -> <=")),  # type: ignore[arg-type]
        ast.unparse(_apply(expr, "boolop and -> or")),  # type: ignore[arg-type]
        ast.unparse(_apply(negation, "drop not")),  # type: ignore[arg-type]
    ]
    assert changed == ["x <= y", "x < y or not z", "z"]


def test_keys_survive_moved_lines() -> None:
    """A mutant's key (how tests/mutation_equivalent.txt names it) has no line number."""
    for mutant in mutants_of("engine/core/planner.py")[:5]:
        assert str(mutant.line) not in mutant.key.split(" | ")[0]
        assert mutant.source_line in mutant.key
