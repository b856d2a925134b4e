"""Paging of `GET /runs`, `/proposals` and `/events` against a real `engine serve`
subprocess, and of `engine runs|proposals|events` as subprocesses, over one SQLite file
holding 120 runs, proposals and events of one loop (docs/api.md#paging): newest first,
`next` until nothing older is left, a cursor no page gave refused."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Serve, launch_serve

from engine.bootstrap import open_store
from engine.core.records import EventRecord, ProposalRecord, RunRecord

LOOP = "paged"
COUNT = 120
KINDS = [("runs", "runId"), ("proposals", "proposalId"), ("events", "eventId")]


def at(n: int) -> str:
    """Instants that several rows share (ties are broken by the id)."""
    return f"2026-11-30T10:{n // 4 // 60:02d}:{n // 4 % 60:02d}.000000Z"


def rows(n: int) -> tuple[EventRecord, ProposalRecord, RunRecord]:
    event_id = f"paged-e-{n:03d}"
    event = EventRecord(
        event_id, "api.work.requested", "manual", "s", at(n), event_id, {}, LOOP, at(n), "inject"
    )
    proposal = ProposalRecord(
        f"paged-p-{n:03d}", event_id, LOOP, "d@1", "expired", False, False, at(n)
    )
    run = RunRecord(
        f"paged-r-{n:03d}",
        f"paged-k-{n}",
        event_id,
        None,
        LOOP,
        "d@1",
        "succeeded",
        "auto",
        1,
        None,
        None,
        at(n),
    )
    return event, proposal, run


@pytest.fixture(scope="module")
def paged_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """A serve whose database holds COUNT runs, proposals and events of loop `paged`."""
    serve = launch_serve(tmp_path_factory.mktemp("paged"))
    store = open_store(str(serve.db))
    try:
        with store.write() as tx:
            for event, proposal, run in map(rows, range(COUNT)):
                tx.insert_event(event)
                tx.insert_proposal(proposal)
                tx.insert_run(run)
    finally:
        store.close()
    yield serve
    serve.stop()


def expected(key: str) -> list[str]:
    """The ids of the loop's rows, newest first (time, then id, descending)."""
    index = {"runId": 2, "proposalId": 1, "eventId": 0}[key]
    found = [rows(n)[index] for n in range(COUNT)]
    ident = {"runId": "run_id", "proposalId": "proposal_id", "eventId": "event_id"}[key]
    return [
        getattr(r, ident)
        for r in sorted(found, key=lambda r: (at_of(r), getattr(r, ident)), reverse=True)
    ]


def at_of(record: Any) -> str:
    return str(getattr(record, "admitted_at", None) or record.created_at)


@pytest.mark.parametrize(("what", "key"), KINDS)
def test_the_api_pages_through_120_rows_in_pages_of_50(
    paged_serve: Serve, what: str, key: str
) -> None:
    """Pages of 50 read one after the other from each page's `next` give all 120 of
    the loop's rows newest first, none missing or repeated; the last page's `next` is
    null."""
    token = paged_serve.token("alice")
    state = "&state=all" if what == "proposals" else ""
    seen: list[str] = []
    sizes: list[int] = []
    cursor: str | None = None
    while True:
        after = "" if cursor is None else f"&before={urllib.parse.quote(cursor)}"
        status, page = paged_serve.request(
            "GET", f"/{what}?loop={LOOP}&limit=50{state}{after}", token=token
        )
        assert status == 200, page
        sizes.append(len(page[what]))
        seen.extend(r[key] for r in page[what])
        assert {r["loop"] for r in page[what]} <= {LOOP}
        cursor = page["next"]
        if cursor is None:
            break
    assert sizes == [50, 50, 20]
    assert seen == expected(key)


def test_the_default_page_is_the_newest_50_with_a_next(paged_serve: Serve) -> None:
    """Without a limit a page holds 50, and says more exist."""
    status, page = paged_serve.request("GET", f"/runs?loop={LOOP}", token=paged_serve.token("bob"))
    assert status == 200 and len(page["runs"]) == 50 and page["next"]
    assert [r["runId"] for r in page["runs"]] == expected("runId")[:50]


@pytest.mark.parametrize("what", ["runs", "proposals", "events"])
@pytest.mark.parametrize("cursor", ["nope", "WyJ4Il0", "a" * 3000, "==", "WyIxIiwiMiJd="])
def test_a_cursor_no_page_gave_is_a_400(paged_serve: Serve, what: str, cursor: str) -> None:
    """A `before` that is not the text of a `next` is refused with reason bad_cursor."""
    path = f"/{what}?before={urllib.parse.quote(cursor)}"
    status, answer = paged_serve.request("GET", path, token=paged_serve.token("alice"))
    assert status == 400 and answer["details"]["reason"] in {"bad_cursor", "bad_query"}, answer
    if len(cursor) < 2048:
        assert answer["details"]["reason"] == "bad_cursor"


def engine(serve: Serve, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine", *args, *serve.argv()],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in serve.env.items() if not k.startswith("ENGINE_")},
    )


@pytest.mark.parametrize(("what", "key"), KINDS)
def test_the_cli_prints_how_to_get_the_next_page(paged_serve: Serve, what: str, key: str) -> None:
    """`engine runs|proposals|events --loop L --limit N` prints after its table the
    command that shows the next page; running it continues where the page stopped,
    and the last page has no such line. `--json` carries `next`."""
    state = ["--state", "all"] if what == "proposals" else []
    first = engine(paged_serve, what, "--loop", LOOP, "--limit", "70", *state, "--json")
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert [r[key] for r in doc[what]] == expected(key)[:70] and doc["next"]
    shown = engine(paged_serve, what, "--loop", LOOP, "--limit", "70", *state)
    more = shown.stdout.splitlines()[-1]
    flags = " --state all" if what == "proposals" else ""
    assert more == f"more: engine {what}{flags} --loop {LOOP} --limit 70 --before {doc['next']}"
    command = more.removeprefix("more: engine ").split()
    rest = engine(paged_serve, *command, "--json")
    assert [r[key] for r in json.loads(rest.stdout)[what]] == expected(key)[70:]
    last = engine(paged_serve, *command)
    assert last.returncode == 0 and not last.stdout.splitlines()[-1].startswith("more:")


def test_the_cli_refuses_a_bad_cursor_as_a_usage_error(paged_serve: Serve) -> None:
    """`--before` that no page gave: exit 2 with an error line, no traceback."""
    found = engine(paged_serve, "runs", "--before", "nope")
    assert found.returncode == 2 and "--before" in found.stderr and "Traceback" not in found.stderr
