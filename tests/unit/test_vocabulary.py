"""The persisted and returned strings (states, triggers, actors, reasons, journal
entities and actions) are StrEnum values whose set does not change: the stored data
of an older engine reads the same, and every journal entry the engine writes names an
entity and an action of the vocabulary."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path

from engine.core import decisions, states, work

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "data" / "vocabulary" / "persisted.json"
ENUMS: tuple[type[StrEnum], ...] = (
    states.MachineKind,
    states.OccurrenceState,
    states.OccurrenceTrigger,
    states.ProposalState,
    states.ProposalTrigger,
    states.RunState,
    states.RunTrigger,
    states.Condition,
    states.EventSource,
    states.FindingStatus,
    decisions.Actor,
    decisions.NoopReason,
    decisions.DecisionKind,
    decisions.Entity,
    decisions.JournalAction,
    work.WorkState,
    work.BindingState,
)


def test_persisted_values_did_not_change() -> None:
    """Every persisted enum has exactly the values stored data was written with
    (tests/data/vocabulary/persisted.json; a new value is added there on purpose)."""
    found = {enum.__name__: sorted(m.value for m in enum) for enum in ENUMS}
    assert found == json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_members_compare_equal_to_the_stored_strings() -> None:
    """A member is the string stored for it, so rows written before the enums read back
    equal and hash alike."""
    assert states.OccurrenceState.CREATED == "created"
    assert {"queued": 1}[states.RunState.QUEUED] == 1
    assert json.dumps([decisions.Actor.SYSTEM]) == '["system"]'


def _journal_calls() -> Iterator[tuple[Path, ast.Call]]:
    for path in (ROOT / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("journal", "Journal"):
                yield path, node


def _literal(node: ast.expr) -> str | None:
    """The string a journal argument names: a literal, or `Enum.MEMBER` of the vocabulary."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        enum = getattr(decisions, node.value.id, None)
        member = getattr(enum, node.attr, None) if enum is not None else None
        return str(member) if isinstance(member, StrEnum) else None
    return None


def test_every_journal_entry_names_a_known_entity_and_action() -> None:
    """Each journal write in engine/ names an Entity and a JournalAction value (literal
    or member), so an action cannot be misspelt into the journal."""
    entities = {str(e) for e in decisions.Entity}
    actions = {str(a) for a in decisions.JournalAction}
    checked = 0
    for path, call in _journal_calls():
        first = 1 if isinstance(call.func, ast.Attribute) and len(call.args) >= 5 else 0
        if len(call.args) < first + 3:
            continue
        entity, action = _literal(call.args[first]), _literal(call.args[first + 2])
        if entity is not None:
            assert entity in entities, (path.name, call.lineno, entity)
            checked += 1
        if action is not None:
            assert action in actions, (path.name, call.lineno, action)
    assert checked > 30
