"""Golden streams (docs/testing.md, "Golden streams"): every recorded event stream of
tests/data/golden, replayed through the real service on a SQLite file, on a
PostgreSQL database and on the in-memory store, makes exactly the plans and leaves
exactly the records its golden holds; and each recorded plan is decided again, purely,
from the facts it was decided from. Regenerate on purpose: `python tests/golden.py
--write`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import databases
import golden
import pytest

from engine.bootstrap import open_store
from engine.store.memory import MemoryStore
from engine.store.ports import Store

STREAMS = golden.streams()
REGENERATE = "re-record on purpose with `python tests/golden.py --write` and review the diff"


@pytest.fixture
def store(store_database: str) -> Iterator[Store]:
    """A fresh store of each kind: a SQLite file, a PostgreSQL database, in memory."""
    opened = MemoryStore() if store_database == databases.MEMORY else open_store(store_database)
    yield opened
    opened.close()


def canonical(value: Any) -> Any:
    """`value` as its golden file holds it (tuples as lists, keys as text)."""
    return json.loads(golden.dumps(value))


@pytest.mark.parametrize("name", STREAMS)
def test_a_recorded_stream_plans_and_stores_what_its_golden_holds(
    name: str, store: Store, tmp_path: Path
) -> None:
    """The same events, operator actions and run results make the same plans, in the
    same order, and leave the same journal, decisions, occurrences, proposals, runs,
    findings, notifications and loop state, on every store."""
    got = canonical(golden.replay(golden.load_stream(name), store, tmp_path / "work"))
    want = golden.load_golden(name)
    assert len(got["plans"]) == len(want["plans"]), REGENERATE
    for number, (made, held) in enumerate(zip(got["plans"], want["plans"], strict=True)):
        assert made["plan"] == held["plan"], f"plan {number} ({held['event']['event_id']})"
    assert got["refusals"] == want["refusals"]
    for kind, rows in want["records"].items():
        assert got["records"][kind] == rows, f"{kind} differ: {REGENERATE}"
    assert got == want, REGENERATE


@pytest.mark.parametrize("name", STREAMS)
def test_each_recorded_plan_is_decided_again_from_its_recorded_facts(
    name: str, tmp_path: Path
) -> None:
    """`decide` is pure: the event and the facts a plan was decided from, read back
    from the golden, decide that same plan without any store."""
    rt, _ = golden.runtime_of(golden.load_stream(name), MemoryStore(), tmp_path)
    entries = golden.load_golden(name)["plans"]
    assert entries
    for entry in entries:
        assert canonical(golden.redecide(entry, rt)) == entry["plan"], entry["event"]["event_id"]


def test_the_streams_cover_every_kind_of_decision() -> None:
    """The goldens hold every decision kind and every fold, gate and triage reason the
    redesign must keep deciding, the operator actions and run results that settle
    occurrences, and the triggers that wait; a regeneration that loses one fails."""
    seen: set[str] = set()
    for name in STREAMS:
        found = golden.load_golden(name)["records"]
        seen |= {f"decision:{d['kind']}:{d['reason']}" for d in found["decisions"]}
        seen |= {f"journal:{e['action']}" for e in found["journal"]}
        seen |= {f"occurrence:{o['state']}" for o in found["occurrences"]}
        seen |= {f"run:{r['state']}" for r in found["runs"]}
        seen |= {f"skip:{s['reason']}" for s in found["skips"]}
    wanted = {
        *(f"decision:{kind}:None" for kind in ("run", "propose", "shadow")),
        *(
            f"decision:noop:{reason}"
            for reason in (
                "duplicate_occurrence",
                "occurrence_active",
                "coalesced",
                "skipped_active",
                "budget_exhausted",
                "stopped",
                "paused",
                "no_route",
                "nothing_to_do",
                "quiet_backoff",
                "candidate_recorded",
                "external_blocker",
                "human_attention_required",
            )
        ),
        *(
            f"journal:{action}"
            for action in (
                "approved",
                "rejected",
                "superseded",
                "cancelled",
                "chained",
                "fired",
                "follow_up",
                "retry_scheduled",
                "paused",
                "resumed",
                "promoted",
            )
        ),
        "occurrence:budget_exhausted",
        "occurrence:human_attention_required",
        *(f"run:{state}" for state in ("succeeded", "failed", "timed_out", "cancelled")),
        *(f"skip:{reason}" for reason in ("catchup_none", "catchup_cap", "paused")),
    }
    assert wanted <= seen, sorted(wanted - seen)
