"""`make mutation` (tests/mutation.py) measures test strength only if its mutants are
real: each one parses, differs from the source, and changes exactly the point it names."""

from __future__ import annotations

import ast
from pathlib import Path

import mutation
import pytest
from mutation import (
    KILLED,
    ROOT,
    SURVIVED,
    TARGETS,
    TIMED_OUT,
    _apply,
    equivalent_keys,
    main,
    mutants_of,
    mutated_source,
    run_tests,
)


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


def test_every_mutant_has_its_own_key() -> None:
    """Two like changes on one line (two `>` in one condition) have different keys, so
    marking one equivalent never hides the other."""
    keys = [m.key for module in TARGETS for m in mutants_of(module)]
    assert len(keys) == len(set(keys))
    twice = [k for k in keys if k.endswith(" #2")]
    assert twice and all(k.removesuffix(" #2") in keys for k in twice)


def test_a_mutant_that_fails_passes_or_hangs_the_tests_is_told_apart(tmp_path: Path) -> None:
    """A failing test kills, passing tests let the mutant survive, and tests that run
    past the timeout count as a kill by the timeout."""
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    (tmp_path / "test_bad.py").write_text("def test_bad():\n    assert False\n")
    (tmp_path / "test_slow.py").write_text("import time\n\ndef test_slow():\n    time.sleep(60)\n")
    # A generous bound where the tests end by themselves (a loaded machine starts pytest
    # slowly), a short one where they never would.
    outcomes = [run_tests(tmp_path, (f"test_{n}.py",), 60, 0) for n in ("ok", "bad")]
    outcomes.append(run_tests(tmp_path, ("test_slow.py",), 3, 0))
    assert outcomes == [SURVIVED, KILLED, TIMED_OUT]


def test_the_equivalent_list_needs_a_reason_and_current_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry is `key  # reason`, the key never holding the source line's comment; an
    entry without a reason is refused, and one that names no mutant any more stops the
    run so the mutant is judged again."""
    listed = tmp_path / "equivalent.txt"
    monkeypatch.setattr(mutation, "EQUIVALENT", listed)
    source = (ROOT / "engine/core/policy.py").read_text(encoding="utf-8")
    assert "return False  # pragma: no cover" in source
    policy = mutants_of("engine/core/policy.py")
    [commented, *_] = [m for m in policy if m.function == "_holds" and "False" in m.source_line]
    assert commented.key == "engine/core/policy.py | _holds | return False | return None"
    listed.write_text(f"# a comment line\n{commented.key}  # why it is equivalent\n")
    assert equivalent_keys() == {commented.key: "why it is equivalent"}
    listed.write_text(f"{commented.key}\n")
    with pytest.raises(SystemExit, match=r"equivalent\.txt:1"):
        equivalent_keys()
    listed.write_text("engine/core/policy.py | gone | x = 1 | constant 1 -> 2  # why\n")
    assert main(["--module", "engine/core/policy.py", "--list"]) == 2
    assert "no longer exist" in capsys.readouterr().out
