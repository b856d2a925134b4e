"""`engine work` (docs/work.md#from-the-command-line) on a real SQLite file and a real
PostgreSQL database: add answers the live item of a key, list pages with the command
of the next page, moves are journaled with the operator, and a refusal is one line and
its documented exit code."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from conftest import API_TREE, NO_CONFIG

from engine.bootstrap import open_service
from engine.cli.main import main
from engine.loading import Paths


@pytest.fixture
def db(database: str) -> str:
    """A migrated database over the API tree (as a serve leaves it)."""
    open_service(
        database, Paths(API_TREE / "loops", API_TREE / "registry", NO_CONFIG)
    ).rt.store.close()
    return database


def engine(db: str, *args: str) -> tuple[int, str, str]:
    """`engine ARGS --db DB` over the API tree: (exit, stdout, stderr)."""
    tree = ["--rules", str(API_TREE / "loops"), "--registry", str(API_TREE / "registry")]
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([*args, "--db", db, *tree, "--config", str(NO_CONFIG)])
    return code, out.getvalue(), err.getvalue()


def as_json(db: str, *args: str) -> Any:
    code, out, err = engine(db, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_add_list_show_and_move(db: str) -> None:
    first = as_json(db, "work", "add", "repair:r1#42", "Repair it", "--repo", "r1", "--as", "alice")
    again = as_json(db, "work", "add", "repair:r1#42", "Something else", "--as", "bob")
    assert first["created"] is True and again == {"work": first["work"], "created": False}
    work_id = first["work"]["workId"]
    code, out, _ = engine(db, "work", "add", "repair:r1#42", "x", "--as", "bob")
    assert (code, out) == (0, f"already open: {work_id} (repair:r1#42)\n")
    other = as_json(
        db, "work", "add", "vendor", "Watch it", "--link", "https://s.example", "--as", "alice"
    )
    assert other["work"]["context"] == {"summary": "", "links": ["https://s.example"]}

    code, out, _ = engine(db, "work", "list", "--limit", "1")
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:3] == ["WORK", "STATE", "KEY"]
    assert lines[2].split()[:3] == [other["work"]["workId"], "open", "vendor"]
    assert lines[-1].startswith("more: engine work list --limit 1 --before ")
    code, out, _ = engine(db, *lines[-1].removeprefix("more: engine ").split())
    assert out.splitlines()[2].split()[0] == work_id and "more:" not in out

    done = as_json(db, "work", "complete", work_id, "--note", "merged", "--as", "alice")
    assert done["work"]["state"] == "completed"
    assert as_json(db, "work", "show", work_id)["work"] == done["work"]
    assert [w["workId"] for w in as_json(db, "work", "list", "--state", "open")["work"]] == [
        other["work"]["workId"]
    ]
    entries = as_json(db, "journal", "--limit", "100")["entries"]
    assert [(e["action"], e["actor"]) for e in entries if e["entityId"] == work_id] == [
        ("opened", "operator:alice"),
        ("existing_work", "operator:bob"),
        ("existing_work", "operator:bob"),
        ("completed", "operator:alice"),
    ]


def test_refusals_are_one_line_and_their_exit_code(db: str) -> None:
    """A move terminal work cannot make, an unknown id or a blank key is exit 1 (a
    refusal); a reserved operator name or a bad cursor exit 2 (fix the command); none
    changes anything."""
    work_id = as_json(db, "work", "add", "k", "t", "--as", "alice")["work"]["workId"]
    assert engine(db, "work", "cancel", work_id, "--as", "alice")[0] == 0
    before = as_json(db, "journal", "--limit", "100")["entries"]
    for args, code, says in (
        (("work", "complete", work_id, "--as", "alice"), 1, "is cancelled: it cannot complete"),
        (("work", "show", "work-nope"), 1, "no work item 'work-nope'"),
        (("work", "add", " ", "t", "--as", "alice"), 1, "a semantic key is 1 to 200 characters"),
        (("work", "add", "k", "t", "--as", "schedule"), 2, "reserved"),
    ):
        found, out, err = engine(db, *args)
        assert (found, out) == (code, ""), (args, found, err)
        assert len(err.splitlines()) == 1 and says in err, err
    with pytest.raises(SystemExit) as stopped, redirect_stderr(io.StringIO()):
        engine(db, "work", "list", "--before", "garbage")
    assert stopped.value.code == 2
    assert as_json(db, "journal", "--limit", "100")["entries"] == before


def test_a_database_that_does_not_exist_is_not_made(tmp_path: Path) -> None:
    code, _, err = engine(str(tmp_path / "none.db"), "work", "list")
    assert code == 1 and "no database" in err and not (tmp_path / "none.db").exists()
