"""The runtime commands as a user runs them: `engine inject` into a real `engine serve`
over the shipped loops/ and registry/, then `proposals`, `approve`, `reject`, `runs`,
`events` and `journal` on its SQLite file, and `serve` refusing invalid rules."""

from __future__ import annotations

import getpass
import json
import os
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
INVALID = ROOT / "tests" / "data" / "rules" / "invalid" / "e0203_unknown_event_type"


@pytest.fixture
def shipped(shipped_serve: Any) -> Any:
    """The module's `engine serve` over the shipped rules (factory.work.requested is watched)."""
    return shipped_serve


def engine(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        cwd=ROOT,
        env={**base, **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def engines(*commands: list[str]) -> list[subprocess.CompletedProcess[str]]:
    """Run several independent commands at once (each as its own subprocess)."""
    started = [
        (
            argv,
            subprocess.Popen(
                [sys.executable, "-m", "engine", *argv],
                cwd=ROOT,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            ),
        )
        for argv in commands
    ]
    done = []
    for argv, process in started:
        out, err = process.communicate(timeout=60)
        done.append(subprocess.CompletedProcess(argv, process.returncode, out, err))
    return done


def work(repo: str = "factory") -> dict[str, Any]:
    return {
        "eventId": f"cli-{time.time_ns()}",
        "type": "factory.work.requested",
        "source": "manual",
        "occurredAt": "2026-11-30T09:00:00Z",
        "payload": {"repo": repo},
    }


def inject(
    shipped: Any, tmp_path: Path, doc: Any, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    file = tmp_path / f"envelope-{time.time_ns()}.json"
    file.write_text(json.dumps(doc))
    return engine("inject", str(file), "--url", shipped.url, *args, env=env)


def planned(shipped: Any, event_id: str) -> dict[str, Any]:
    """Wait (over HTTP) until the runtime has proposed the event; its proposal."""
    answer = shipped.wait_for(
        "/proposals?state=all&limit=1000",
        lambda a: any(p["eventId"] == event_id for p in a["proposals"]),
        shipped.token("alice"),
    )
    found: dict[str, Any] = next(p for p in answer["proposals"] if p["eventId"] == event_id)
    return found


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_inject_admits_once_then_answers_duplicate(shipped: Any, tmp_path: Path) -> None:
    """`engine inject FILE` admits an envelope; the same file again is a duplicate, exit 0."""
    doc = work()
    first = inject(shipped, tmp_path, doc)
    assert first.returncode == 0 and f"{doc['eventId']}: admitted" in first.stdout
    again = as_json(inject(shipped, tmp_path, doc, "--json"))
    assert again == {"admitted": False, "duplicate": True, "eventId": doc["eventId"]}


def test_inject_reads_a_list_from_stdin_as_an_operator(shipped: Any) -> None:
    """`engine inject - --as NAME` with NAME's token ($ENGINE_TOKEN) admits a list from
    stdin with actor operator:<NAME>."""
    docs = [work(), work("other")]
    docs[1]["eventId"] += "-b"
    result = engine(
        "inject",
        "-",
        "--url",
        shipped.url,
        "--as",
        "bob",
        "--json",
        stdin=json.dumps(docs),
        env={"ENGINE_TOKEN": shipped.token("bob")},
    )
    assert [a["admitted"] for a in as_json(result)] == [True, True]
    _, shown = shipped.request("GET", f"/events/{docs[1]['eventId']}", token=shipped.token("bob"))
    assert shown["event"]["admittedBy"] == "operator:bob"


def test_inject_as_an_operator_takes_their_token(shipped: Any, tmp_path: Path) -> None:
    """`--as NAME` without NAME's token is a usage error (exit 2) and sends nothing; with
    another operator's token the runtime refuses it (exit 1); `ENGINE_OPERATOR_TOKEN`
    holding NAME's entry is NAME's token."""
    doc = work()
    missing = inject(shipped, tmp_path, doc, "--as", "carol")
    assert missing.returncode == 2 and "carol's token" in missing.stderr
    wrong = inject(
        shipped, tmp_path, doc, "--as", "alice", env={"ENGINE_TOKEN": shipped.token("bob")}
    )
    assert wrong.returncode == 1 and "operator:bob" in wrong.stderr
    assert shipped.request("GET", f"/events/{doc['eventId']}", token=shipped.token("bob"))[0] == 404
    listed = {"ENGINE_OPERATOR_TOKEN": shipped.env["ENGINE_OPERATOR_TOKEN"]}
    assert inject(shipped, tmp_path, doc, "--as", "alice", env=listed).returncode == 0
    _, shown = shipped.request("GET", f"/events/{doc['eventId']}", token=shipped.token("bob"))
    assert shown["event"]["admittedBy"] == "operator:alice"


@pytest.mark.parametrize(
    "name", ["schedule", "system", "chain", "github", "worker", "inject", "bridge"]
)
def test_approve_refuses_a_reserved_actor_name(shipped: Any, name: str) -> None:
    """`engine approve --as schedule` (or any reserved actor) is a usage error: nothing
    is ever journaled `operator:schedule`."""
    result = engine("approve", "prop-0000000000000000", "--as", name, *shipped.argv())
    assert result.returncode == 2 and "reserved actor name" in result.stderr
    assert "Traceback" not in result.stderr


def test_inject_refused_prints_the_reason_and_exits_1(shipped: Any, tmp_path: Path) -> None:
    """A refused envelope exits 1 with the runtime's reason on stderr, no traceback."""
    result = inject(shipped, tmp_path, {**work(), "type": "factory.nothing.requested"})
    assert result.returncode == 1
    assert "not registered" in result.stderr and "Traceback" not in result.stderr


def test_inject_without_a_runtime_exits_1(tmp_path: Path) -> None:
    """`engine inject` exits 1 with "runtime unreachable at URL" when nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    file = tmp_path / "e.json"
    file.write_text(json.dumps(work()))
    result = engine("inject", str(file), "--url", url)
    assert result.returncode == 1 and f"runtime unreachable at {url}" in result.stderr


def test_listing_commands_print_the_api_documents(shipped: Any) -> None:
    """`proposals`, `events`, `journal` and `runs` with --json print what the API serves."""
    doc = work()
    assert shipped.request("POST", "/inject", doc)[0] == 202
    proposal = planned(shipped, doc["eventId"])
    at = shipped.argv()
    proposals, by_type, shown, page, runs = map(
        as_json,
        engines(
            ["proposals", "--json", *at],
            ["events", "--type", "factory.work.requested", "--json", *at],
            ["events", doc["eventId"], "--json", *at],
            ["journal", "--entity", "event", "--id", doc["eventId"], "--json", *at],
            ["runs", "--state", "queued", "--json", *at],
        ),
    )
    assert proposal["proposalId"] in {p["proposalId"] for p in proposals["proposals"]}
    assert doc["eventId"] in {e["eventId"] for e in by_type["events"]}
    assert shown["decision"]["kind"] == "propose" and shown["occurrence"]
    assert [(e["action"], e["actor"]) for e in page["entries"]] == [("admitted", "inject")]
    assert all(r["state"] == "queued" for r in runs["runs"])


def test_approve_names_the_operator_and_refuses_twice(shipped: Any) -> None:
    """`engine approve ID --as NAME` queues the run approved by operator:<NAME>; approving
    again exits 1 with the reason and no traceback."""
    doc = work()
    assert shipped.request("POST", "/inject", doc)[0] == 202
    proposal = planned(shipped, doc["eventId"])
    approve = ["approve", proposal["proposalId"], "--as", "dana", *shipped.argv()]
    approved = as_json(engine(*approve, "--json"))
    assert approved["run"]["approvedBy"] == "operator:dana"
    again, shown = engines(approve, ["runs", approved["run"]["runId"], "--json", *shipped.argv()])
    assert again.returncode == 1 and "not open" in again.stderr
    assert "Traceback" not in again.stderr
    assert as_json(shown)["run"]["approvedBy"] == "operator:dana"


def test_reject_defaults_to_the_login_name(shipped: Any) -> None:
    """`engine reject ID --reason TEXT` records operator:<login name>; the table lists it."""
    doc = work()
    assert shipped.request("POST", "/inject", doc)[0] == 202
    proposal = planned(shipped, doc["eventId"])
    result = engine("reject", proposal["proposalId"], "--reason", "not today", *shipped.argv())
    assert result.returncode == 0, result.stderr
    table = engine("proposals", "--state", "rejected", *shipped.argv())
    assert "PROPOSAL" in table.stdout and proposal["proposalId"] in table.stdout
    assert f"operator:{getpass.getuser().lower()}" in table.stdout


def test_unknown_ids_and_missing_databases_exit_1(tmp_path: Path, shipped: Any) -> None:
    """An unknown id or a database that does not exist is a message and exit 1."""
    missing, no_db = engines(
        ["runs", "nope", *shipped.argv()], ["events", "--db", str(tmp_path / "none.db")]
    )
    assert missing.returncode == 1 and "no run 'nope'" in missing.stderr
    assert no_db.returncode == 1 and "no database" in no_db.stderr
    assert not (tmp_path / "none.db").exists()


def test_serve_refuses_invalid_rules(tmp_path: Path) -> None:
    """`engine serve` on invalid rules prints the diagnostics, exits 2 (a configuration a
    restart cannot fix, docs/cli.md#exit-codes) and serves nothing."""
    result = engine(
        "serve",
        "--db",
        str(tmp_path / "e.db"),
        "--port",
        "1",
        "--rules",
        str(INVALID / "loops"),
        "--registry",
        str(INVALID / "registry"),
        "--config",
        str(INVALID / "config"),
    )
    assert result.returncode == 2 and "E0203" in result.stderr
    assert "Traceback" not in result.stderr


def test_engine_version_prints_the_installed_version(run_engine: Any) -> None:
    """`engine --version` prints `engine <version>` (the installed package's) and exits 0."""
    done = run_engine("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"engine {metadata.version('engine')}"
