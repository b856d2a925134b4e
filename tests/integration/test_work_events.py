"""Work from events (docs/work.md#work-from-events): `work.open`, `work.complete` and
`work.cancel` events, admitted through the normal admission path like any event and
applied by planning as their admitting actor, on the shipped registry over a real
SQLite file and a real PostgreSQL database. What the work machine refuses is journaled
`work_refused` on the event; the event stays admitted and planned."""

from __future__ import annotations

import itertools
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import NO_CONFIG

from engine.bootstrap import open_service
from engine.core.envelope import Envelope
from engine.core.work import WorkQuery
from engine.errors import Unprocessable
from engine.intake.github import Admit, translate
from engine.loading import Paths
from engine.service import Service

ROOT = Path(__file__).resolve().parents[2]
_ids = itertools.count(1)


@pytest.fixture
def service(database: str) -> Iterator[Service]:
    opened = open_service(database, Paths(ROOT / "loops", ROOT / "registry", NO_CONFIG))
    yield opened
    opened.rt.store.close()


def admit(service: Service, type: str, actor: str = "inject", **payload: Any) -> str:
    """Admit one event and plan everything admitted; its id."""
    event_id = f"w-{next(_ids)}"
    envelope = Envelope.model_validate(
        {
            "eventId": event_id,
            "type": type,
            "source": "manual",
            "occurredAt": "2026-12-07T09:00:00Z",
            "payload": payload,
        }
    )
    [[admission]] = service.admit_batch([service.checked([envelope], actor)])
    assert admission.admitted
    while service.plan_pending():
        pass
    return event_id


def journal(service: Service, entity_id: str) -> list[tuple[str, str, str]]:
    entries = service.journal(limit=1000, entity_id=entity_id)
    return [(e.action, e.actor, e.note) for e in entries]


def test_events_open_and_complete_work_as_their_actor(service: Service) -> None:
    """A `work.open` from GitHub's actor opens the item; the same key again answers it
    (`existing_work`); `work.complete` by key completes it as the chain's actor."""
    admit(service, "work.open", "github", semanticKey="issue:r1#7", title="Fix #7", repo="r1")
    admit(service, "work.open", "chain", semanticKey="issue:r1#7", title="Again")
    [item] = service.work_page(WorkQuery(key="issue:r1#7")).items
    assert (item.state, item.title, item.repo, item.created_by) == (
        "open",
        "Fix #7",
        "r1",
        "github",
    )
    admit(service, "work.complete", "chain", semanticKey="issue:r1#7", note="merged")
    done = service.work_item(item.work_id)
    assert done.state == "completed"
    assert journal(service, item.work_id) == [
        ("opened", "github", ""),
        ("existing_work", "chain", ""),
        ("completed", "chain", "merged"),
    ]


def test_a_refused_command_is_journaled_on_its_event(service: Service) -> None:
    """Cancelling work that is not there, or that already ended, changes nothing but a
    `work_refused` entry on the event, which is planned like any other."""
    missing = admit(service, "work.cancel", semanticKey="nothing-here")
    assert [a for a, _, _ in journal(service, missing)] == [
        "admitted",
        "work_refused",
        "decided:noop",
    ]
    admit(service, "work.open", semanticKey="k", title="t")
    [item] = service.work_page(WorkQuery(key="k")).items
    admit(service, "work.cancel", workId=item.work_id)
    again = admit(service, "work.complete", workId=item.work_id)
    refused = [e for e in journal(service, again) if e[0] == "work_refused"]
    assert refused == [
        ("work_refused", "inject", f"work '{item.work_id}' is cancelled: it cannot complete")
    ]
    assert service.work_item(item.work_id).state == "cancelled"
    assert service.event(again)["event"].planned is True


def test_a_payload_outside_the_schema_is_not_admitted(service: Service) -> None:
    """The registry's schemas refuse a `work.open` without a title and a close that
    names no item (422 at intake): nothing is admitted."""

    for type, payload in (("work.open", {"semanticKey": "k"}), ("work.complete", {"note": "x"})):
        envelope = Envelope.model_validate(
            {
                "eventId": f"bad-{next(_ids)}",
                "type": type,
                "source": "manual",
                "occurredAt": "2026-12-07T09:00:00Z",
                "payload": payload,
            }
        )
        with pytest.raises(Unprocessable):
            service.checked([envelope], "inject")


def test_a_github_issue_opens_work_through_the_documented_translation(
    tmp_path: Path, database: str
) -> None:
    """The translation example of docs/work.md, beside the shipped rules, turns a
    labelled-issue delivery into a `work.open` event; planned, it opens work as
    `github`, keyed by the issue's URL."""

    text = (ROOT / "docs" / "work.md").read_text()
    section = text.split("## Work from events", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```rules\n(.*?)```", section, re.S)
    shutil.copytree(ROOT / "loops", tmp_path / "loops")
    (tmp_path / "loops" / "work.rules").write_text(block)
    paths = Paths(tmp_path / "loops", ROOT / "registry", NO_CONFIG)
    service = open_service(database, paths)
    try:
        issue = {"number": 7, "title": "Flaky sync", "html_url": "https://github.com/o/r/issues/7"}
        payload = {"action": "labeled", "label": {"name": "engine-work"}, "issue": issue}
        found = translate(service.rt.rules, "issues", "guid-1", payload, datetime.now(UTC))
        assert isinstance(found, Admit)
        [[admission]] = service.admit_batch([service.checked([found.envelope], "github")])
        assert admission.admitted
        while service.plan_pending():
            pass
        [item] = service.work_page(WorkQuery()).items
        assert (item.semantic_key, item.title, item.created_by) == (
            issue["html_url"],
            "Flaky sync",
            "github",
        )
        other = {**payload, "label": {"name": "bug"}}
        assert not isinstance(
            translate(service.rt.rules, "issues", "guid-2", other, datetime.now(UTC)), Admit
        )
    finally:
        service.rt.store.close()
