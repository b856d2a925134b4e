"""A recorded GitHub delivery translated again under other rules (engine replay, pure):
the same event is no difference; a delivery the new table ignores or rejects, or
turns into another event, says what and by which line."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engine.core.envelope import iso
from engine.core.records import DeliveryRecord, EventRecord
from engine.core.ruleset import Repo, RuleSet
from engine.core.validation import Validators
from engine.intake.github import Admit, translate
from engine.intake.retranslation import retranslated
from engine.loading import Paths, load_rules

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data" / "github-payloads"  # GitHub's own examples, MIT
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GUID = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
REPOS = {"hello-world": Repo("hello-world", "Codertocat/Hello-World", "master", False)}
EMIT = "emit factory.merge.requested subject repo.name { repo: repo.name }"


def shipped(tmp_path: Path, old: str = "", new: str = "") -> RuleSet:
    """The shipped rules (github.rules with `old` replaced by `new`), the fixtures' repo."""
    loops = tmp_path / "loops"
    shutil.copytree(ROOT / "loops", loops)
    text = (loops / "github.rules").read_text()
    assert old in text
    (loops / "github.rules").write_text(text.replace(old, new, 1))
    rules = load_rules(Paths(loops, ROOT / "registry", ROOT / "tests" / "no-config"))
    return replace(rules, repos=REPOS)


def recorded(rules: RuleSet, name: str) -> tuple[DeliveryRecord, EventRecord]:
    """A pull_request delivery as intake kept it, and the event it became."""
    text = (FIXTURES / name).read_text()
    admitted = translate(rules, "pull_request", GUID, json.loads(text), NOW)
    assert isinstance(admitted, Admit)
    e = admitted.envelope.with_defaults()
    event = EventRecord(e.eventId, e.type, e.source, e.subject, iso(NOW), e.correlationId,
                        e.payload, None, iso(NOW), "github", True)  # fmt: skip
    return DeliveryRecord(
        e.eventId, GUID, "pull_request", text, str(admitted.rule), iso(NOW)
    ), event


@pytest.fixture
def old(tmp_path: Path) -> tuple[DeliveryRecord, EventRecord]:
    return recorded(shipped(tmp_path / "old"), "pull_request.synchronize.payload.json")


def again(rules: RuleSet, old: tuple[DeliveryRecord, EventRecord]) -> Any:
    return retranslated(rules, Validators.build(rules), *old)


def test_the_same_event_is_no_difference(tmp_path: Path, old: Any) -> None:
    """Under the rules it was admitted by (or rules that only moved), a delivery
    translates into the event it became: no difference."""
    assert again(shipped(tmp_path), old) is None
    moved = shipped(
        tmp_path / "moved", "webhook github pull_request", "\n\nwebhook github pull_request"
    )
    assert again(moved, old) is None


def test_a_new_ignore_line_ignores_it_by_that_line(tmp_path: Path, old: Any) -> None:
    """A new `ignore` line that matches: ignored with its reason and its file:line:col,
    and the `emit` line that admitted it kept beside."""
    line = '  ignore no_synchronize if action == "synchronize"\n  ignore unhandled_action'
    rules = shipped(tmp_path, "  ignore unhandled_action", line)
    found = again(rules, old)
    assert found.event is None
    what = found.what
    assert (what.outcome, what.reason) == ("ignored", "no_synchronize")
    assert what.rule == "loops/github.rules:10:10"
    assert (what.delivery_id, what.kind, what.admitted_by) == (GUID, "pull_request", old[0].rule)
    assert found.what.refusal().brief() == "ignored no_synchronize"


def test_a_repo_no_longer_configured_is_ignored(tmp_path: Path, old: Any) -> None:
    """The `repo` scope comes from the new rules' configuration: a repository it no
    longer names is ignored as unconfigured."""
    rules = replace(shipped(tmp_path), repos={})
    found = again(rules, old)
    assert (found.what.outcome, found.what.reason) == ("ignored", "unconfigured_repo")


def test_another_payload_is_another_event(tmp_path: Path, old: Any) -> None:
    """An `emit` line that now builds another payload emits another event: what differs
    is named, and the event is recorded as admission would (same id, when and by whom)."""
    rules = shipped(tmp_path, EMIT, EMIT.replace("repo.name }", "repo.name, prNumbers: [number] }"))
    found = again(rules, old)
    assert (found.what.outcome, found.what.differs) == ("emits", ("payload",))
    assert found.what.event_id == GUID and found.what.type == "factory.merge.requested"
    number = json.loads(old[0].body)["number"]
    assert found.event.payload == {"repo": "hello-world", "prNumbers": [number]}
    assert (found.event.admitted_at, found.event.admitted_by) == (iso(NOW), "github")
    assert found.what.lines()[1] == (
        f"now emits factory.merge.requested {GUID} by loops/github.rules:15:8 (differs: payload)"
    )


def test_another_event_admission_would_refuse_is_rejected(tmp_path: Path, old: Any) -> None:
    """Another event whose payload does not fit its type's schema is rejected as
    admission rejects it (invalid_payload), by the `emit` line."""
    rules = shipped(tmp_path, EMIT, EMIT.replace("repo: repo.name", "repo: repository.full_name"))
    found = again(rules, old)
    assert found.event is None
    assert (found.what.outcome, found.what.reason) == ("rejected", "invalid_payload")
    assert found.what.rule == "loops/github.rules:15:8"
