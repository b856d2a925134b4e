"""bench/check.py measures `engine check` on a generated tree; that tree is written in the
language's current forms (docs/rules.md#one-spelling), so the bench times what operators
write, not the old-spelling warnings (W0901) a tree of old forms would also produce."""

from __future__ import annotations

import sys
from pathlib import Path

from dsl.format import format_text
from engine.loading import load_rules

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from synthetic_tree import Shape, write_tree


def test_the_bench_tree_loads_without_a_warning_in_the_canonical_layout(tmp_path: Path) -> None:
    paths = write_tree(tmp_path, Shape(loops=60, chains=40, webhooks=20))
    rules = load_rules(paths)
    assert len(rules.loops) >= 60 and rules.warnings == ()
    for file in sorted(paths.rules.rglob("*.rules")):
        text = file.read_text(encoding="utf-8")
        assert format_text(text, file.name, True).notes == ()
