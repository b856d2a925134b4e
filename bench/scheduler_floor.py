"""The floor for the scheduler wave (bench/scheduler.py): the rows the engine writes for
a wave of `loops` ticks, written with plain sqlite3 in one transaction.

Per tick, as the engine's file holds them after a wave: one `events` row (planned), one
`decisions` row (with the facts it read), one `occurrences` row, one `proposals` row,
three `journal` rows
(event admitted, occurrence decided, proposal opened) and an update of the loop's
`loop_state` cursor; values of the same width (JSON payloads, sha256-derived proposal
ids, the rules digest, a rule location). The schema is the engine's own migrations
(same tables, indexes, triggers), the pragmas the engine's (WAL, synchronous FULL,
foreign keys on). The loops' enablement rows are written first, untimed, as the
engine's first pass writes them. The floor is building the row tuples (JSON text, ids)
plus writing them; each part is reported too."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from scheduler_tree import DEFINITION, EVENT_TYPE, wave_loop

from engine.store.queries import migrations

PRAGMAS = (
    "journal_mode = WAL",
    "synchronous = FULL",
    "busy_timeout = 30000",
    "foreign_keys = ON",
)
DIGEST = "sha256:" + "0" * 64
NOTE = "watched: waiting for an operator"
SLOT = "2026-12-01T10:00:00Z"
AT = "2026-12-01T10:00:00.500000Z"
ENABLED = "2026-12-01T09:59:59.000000Z"
OCCURRED = "2026-12-01T10:00:00.000000Z"

INSERT = {
    "events": "INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?,1)",
    "decisions": "INSERT INTO decisions VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "occurrences": "INSERT INTO occurrences (event_id, loop, state, updated_at, "
    "occurrence_key, repo, window, decision, evidence, reserved, created_at) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
    "proposals": "INSERT INTO proposals VALUES (?,?,?,?,?,?,?,?,NULL,NULL,'')",
    "journal": "INSERT INTO journal (at, entity, entity_id, action, from_state, to_state, "
    "actor, rules_digest, note, data) VALUES (?,?,?,?,?,?,?,?,?,?)",
    "loop_state": "UPDATE loop_state SET cursor = ?, last_slot = ?, updated_at = ? WHERE loop = ?",
}

Rows = dict[str, list[tuple[Any, ...]]]


def connect(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(db), isolation_level=None)
    for pragma in PRAGMAS:
        conn.execute(f"PRAGMA {pragma}")
    for _, sql in migrations("sqlite"):
        conn.executescript(sql)
    return conn


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def enablement(conn: sqlite3.Connection, loops: int) -> None:
    """What the engine's first pass writes (untimed here as there)."""
    conn.execute("BEGIN IMMEDIATE")
    for i in range(loops):
        name = wave_loop(i)
        conn.execute(
            "INSERT INTO loop_state (loop, enabled, enabled_since, updated_at) VALUES (?,1,?,?)",
            (name, "2026-12-01T09:59:59Z", AT),
        )
        journal = (AT, "loop", name, "enabled", None, None, "system", DIGEST, "the rules say")
        conn.execute(INSERT["journal"], (*journal, None))
    conn.execute("COMMIT")


def journal(
    entity: str, entity_id: str, action: str, states: tuple[str | None, str], data: Any
) -> tuple[Any, ...]:
    """A journal row as the engine writes it: the event's by `schedule` without a note,
    the planner's by `system` with the decision's note."""
    actor, note = ("schedule", "") if entity == "event" else ("system", NOTE)
    return (AT, entity, entity_id, action, *states, actor, DIGEST, note, _dumps(data))


def tick_rows(loops: int) -> Rows:
    rows: Rows = {table: [] for table in INSERT}
    ref = f"{DEFINITION}@1"
    for i in range(loops):
        loop = wave_loop(i)
        event = f"clock:{loop}:{SLOT}"
        payload = _dumps({"cadenceSeconds": 3600, "loop": loop, "skippedSlots": 0, "slot": SLOT})
        proposal = "prop-" + hashlib.sha256(event.encode()).hexdigest()[:16]
        rule = f"/tmp/engine-bench/loops/wave-{i // 100:03d}.rules:{i % 100 * 6 + 1}:6"
        rows["events"].append(
            (event, EVENT_TYPE, "schedule", loop, OCCURRED, event, payload, loop, AT, "schedule")
        )
        # the facts the decision read (the loop's state), as compact JSON text
        facts = json.dumps(
            {"state": {"loop": loop, "enabled": True, "enabled_since": ENABLED, "cursor": None,
                       "last_slot": None, "paused": False, "pause_note": "", "paused_by": None,
                       "updated_at": ENABLED}},
            separators=(",", ":"),
        )  # fmt: skip
        rows["decisions"].append(
            (event, "propose", None, ref, loop, None, 0, 0, rule, NOTE, DIGEST, AT, facts)
        )
        snapshot = {
            "active": 0,
            "failures": 0,
            "findings": 0,
            "freeze": False,
            "in_flight": 0,
            "last_decision": None,
            "last_outcome": None,
            "last_state": None,
            "loop": loop,
            "nothing_streak": 0,
            "now": AT,
            "occurrences": 0,
            "paused": False,
            "payload": json.loads(payload),
            "repo": None,
        }
        rows["occurrences"].append(
            (
                event,
                loop,
                "awaiting_approval",
                AT,
                f"{loop}|-|{SLOT}",
                None,
                SLOT,
                "run_readonly_check",
                _dumps({"rule": None, "snapshot": snapshot}),
                _dumps({"runs": 1, "wall_clock_seconds": 600}),
                AT,
            )
        )
        rows["proposals"].append((proposal, event, loop, ref, "open", 0, 0, AT))
        admitted = {"loop": loop, "source": "schedule", "type": EVENT_TYPE}
        decided = {"definition": ref, "loop": loop, "reason": None, "rule": rule}
        rows["journal"] += [
            journal("event", event, "admitted", (None, "admitted"), admitted),
            journal(
                "occurrence", event, "decided:propose", ("created", "awaiting_approval"), decided
            ),
            journal(
                "proposal", proposal, "opened", (None, "open"), {"definition": ref, "event": event}
            ),
        ]
        rows["loop_state"].append((SLOT, SLOT, AT, loop))
    return rows


def write(conn: sqlite3.Connection, rows: Rows, batched: bool) -> int:
    """The statements executed (rows inserted or updated), in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    for table, values in rows.items():
        if batched:
            conn.executemany(INSERT[table], values)
        else:
            for row in values:
                conn.execute(INSERT[table], row)
    conn.execute("COMMIT")
    return sum(len(values) for values in rows.values())


def measure_floor(root: Path, loops: int, batched: bool) -> dict[str, Any]:
    """Seconds to build a wave's rows, and to write them in one transaction into a fresh
    file: `executemany` per table when `batched`, else one `execute` per row."""
    db = root / f"floor-{'batched' if batched else 'rows'}.db"
    conn = connect(db)
    enablement(conn, loops)
    start = time.perf_counter()
    rows = tick_rows(loops)
    built = time.perf_counter()
    written = write(conn, rows, batched)
    done = time.perf_counter()
    conn.close()
    return {
        "s": done - start,
        "build_s": built - start,
        "write_s": done - built,
        "rows_written": written,
    }
