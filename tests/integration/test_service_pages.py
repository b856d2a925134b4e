"""The service's pages and a loop's live counts, on a real SQLite file under the
authority tree: a loop triggered by an operator and planned shows in the journal by
loop (its event, occurrence, proposal and run entries, and the operator's own), runs and the
journal page with a `next` cursor that the store's cursor readers take back, and the
loop's occurrences, proposals and runs are counted by state."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from engine.bootstrap import open_service
from engine.core.paging import JournalQuery, RunQuery
from engine.errors import BadRequest
from engine.loading import Paths
from engine.service import Service
from engine.store.ports import journal_cursor, run_cursor

TREE = Path(__file__).resolve().parents[1] / "data" / "authority"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    opened = open_service(
        str(tmp_path / "engine.db"), Paths(TREE / "loops", TREE / "registry", TREE / "config")
    )
    yield opened
    opened.rt.store.close()


def test_a_loops_journal_pages_hold_its_entries_of_every_kind(service: Service) -> None:
    """After an operator triggers a loop and it is planned, the loop's journal holds the
    entries about its event, occurrence, proposal and run, newest first, and no other loop's."""
    service.trigger("toucher", "operator:tester")
    service.pump()
    page = service.journal_page(JournalQuery(loop="toucher"))
    everything = service.journal_page(JournalQuery())
    assert page.next is None and everything.next is None
    assert {e.entity for e in page.items} >= {"event", "occurrence", "proposal", "run"}
    assert [e.seq for e in page.items] == sorted((e.seq for e in page.items), reverse=True)
    (run,) = service.runs(state="queued")
    ours = {run.event_id, run.proposal_id, run.run_id, "toucher"}
    assert [e for e in everything.items if e.entity_id in ours] == page.items
    mine = service.journal_page(JournalQuery(loop="toucher", actor="operator:tester"))
    assert [e.entity for e in mine.items] == ["event"]


def test_pages_follow_their_cursor_to_the_end(service: Service) -> None:
    """Pages read from each `next` give every run and entry once, newest first, and the
    last page has no `next`; the cursors are what the store's readers take back."""
    for _ in range(3):
        service.trigger("toucher", "operator:tester")
        service.pump()
    runs = service.runs(limit=100, state=None)
    walked, query = [], RunQuery(loop="toucher")
    while True:
        page = service.runs_page(query, limit=1)
        walked.extend(page.items)
        if page.next is None:
            break
        query = replace(query, before=run_cursor(page.next))
    assert [r.run_id for r in walked] == [r.run_id for r in runs] and len(walked) >= 1
    entries, jq = [], JournalQuery()
    while True:
        jpage = service.journal_page(jq, limit=4)
        entries.extend(jpage.items)
        if jpage.next is None:
            break
        jq = replace(jq, before=journal_cursor(jpage.next))
    assert entries == service.journal_page(JournalQuery(), limit=1000).items
    assert [e.seq for e in entries] == list(range(len(entries), 0, -1))


def test_a_full_last_page_has_no_next(service: Service) -> None:
    """A page that holds exactly the rows left says there is nothing after it."""
    service.trigger("toucher", "operator:tester")
    service.pump()
    total = len(service.journal_page(JournalQuery(), limit=1000).items)
    assert service.journal_page(JournalQuery(), limit=total).next is None
    assert service.journal_page(JournalQuery(), limit=total - 1).next == "2"


def test_a_bad_page_size_is_a_bad_request(service: Service) -> None:
    """A page size under one is refused as bad input, before the store is read."""
    with pytest.raises(BadRequest):
        service.runs_page(RunQuery(), limit=0)
    with pytest.raises(BadRequest):
        service.journal_page(JournalQuery(), limit=-5)


def test_lifecycle_counts_are_the_loops_rows_by_state(service: Service) -> None:
    """A loop's live counts are its occurrences, proposals and runs by state; a loop
    with none has empty counts."""
    service.trigger("toucher", "operator:tester")
    service.pump()
    counts = service.lifecycle_counts("toucher")
    assert counts["run"] == {"queued": 1}
    assert sum(counts["occurrence"].values()) == 1 and counts["proposal"] == {"approved": 1}
    (run,) = service.runs(state="queued")
    assert counts["occurrence"] == {service.event(run.event_id)["occurrence"]: 1}
    assert service.lifecycle_counts("nowhere") == {"occurrence": {}, "proposal": {}, "run": {}}
