"""The operator's CLI on a real `engine serve` over the shipped loops/ and registry/:
`engine proposals show ID` (payload, rule and argv), approving and rejecting several
ids at once, and `engine journal --follow` (docs/cli.md)."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Serve, launch_serve

ROOT = Path(__file__).resolve().parent.parent.parent
REVIEW = ROOT / "tests" / "data" / "review"


def engine(*args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """One `engine serve` over tests/data/review (a command definition with params)."""
    started = launch_serve(tmp_path_factory.mktemp("review"), REVIEW)
    yield started
    started.stop()


def proposed(serve: Serve, service: str = "web") -> str:
    """Inject a deploy request over HTTP; the id of the proposal the runtime made."""
    event_id = f"op-{time.time_ns()}"
    doc = {
        "eventId": event_id,
        "type": "review.deploy.requested",
        "source": "manual",
        "occurredAt": "2026-11-30T09:00:00Z",
        "payload": {"service": service, "ref": "abc1234"},
    }
    assert serve.request("POST", "/inject", doc)[0] == 202
    answer = serve.wait_for(
        "/proposals?state=all&limit=1000",
        lambda a: any(p["eventId"] == event_id for p in a["proposals"]),
        serve.token("alice"),
    )
    return str(next(p["proposalId"] for p in answer["proposals"] if p["eventId"] == event_id))


def without_ages(text: str) -> str:
    return re.sub(r"\((just now|\d+[smhd] ago)\)", "(...)", text)


def test_proposals_show_prints_payload_rule_and_argv(serve: Serve) -> None:
    """`engine proposals show ID` prints the event's payload, the deciding rule's file,
    line and text, and the exact argv; `--json` is the API's review document."""
    proposal = proposed(serve, "shown")
    shown = engine("proposals", "show", proposal, *serve.argv())
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert text.startswith(f"proposal {proposal}: open\n")
    assert '      "service": "shown"\n' in text  # the payload, whole
    assert "loops/review.rules:4:1\n     4 | route review.deploy.requested to deploy@1\n" in text
    event_id = next(
        line.split()[1].rstrip(":") for line in text.splitlines() if line.startswith("event ")
    )
    assert "  argv        '<python>' -c " in text
    assert f" --service=shown abc1234 {event_id} '<run_id>'\n" in text
    alias = engine("proposals", proposal, *serve.argv()).stdout  # `show` is optional
    assert without_ages(alias) == without_ages(text)

    as_json = engine("proposals", "show", proposal, "--json", *serve.argv())
    doc = json.loads(as_json.stdout)
    status, api = serve.request("GET", f"/proposals/{proposal}/review", token=serve.token("alice"))
    assert status == 200
    assert {k: doc[k] for k in ("proposal", "event", "rule", "definition")} == {
        k: api[k] for k in ("proposal", "event", "rule", "definition")
    }


def test_proposals_show_without_an_id_or_an_unknown_one(serve: Serve) -> None:
    """`show` with no id is a usage error (2); an unknown id is not found (1)."""
    bare = engine("proposals", "show", *serve.argv())
    assert bare.returncode == 2 and "which proposal?" in bare.stderr
    unknown = engine("proposals", "show", "prop-0000000000000000", *serve.argv())
    assert unknown.returncode == 1 and "no proposal 'prop-0000000000000000'" in unknown.stderr


def test_approve_several_ids_decides_each_and_lists_the_refused(serve: Serve) -> None:
    """`engine approve A B C`: each id is decided on its own; a refused one (already
    decided, unknown) is listed and exits 1, and the ids after it are still approved."""
    first, second = proposed(serve), proposed(serve, "api")
    at = [*serve.argv(), "--as", "alice"]
    assert engine("approve", first, *at).returncode == 0
    unknown = "prop-0000000000000000"
    done = engine("approve", first, unknown, second, *at)
    assert done.returncode == 1
    assert done.stdout.startswith(f"approved {second} as operator:alice: run run-")
    assert f"error: {first}: " in done.stderr and f"error: {unknown}: " in done.stderr
    assert done.stderr.endswith(f"approved 1 of 3; refused: {first} {unknown}\n")
    states = json.loads(engine("proposals", "--state", "all", "--json", *serve.argv()).stdout)
    state = {p["proposalId"]: p["state"] for p in states["proposals"]}
    assert state[first] == state[second] == "approved"


def test_reject_several_ids_as_json_and_all_succeeding_exits_0(serve: Serve) -> None:
    """`engine reject A B --reason R --json` prints one result per id; all rejected is
    exit 0, and one refused among them is exit 1 with its error code."""
    first, second = proposed(serve), proposed(serve, "api")
    at = [*serve.argv(), "--as", "bob", "--reason", "duplicates"]
    done = engine("reject", first, second, "--json", *at)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    assert [(r["id"], r["ok"], r["proposal"]["state"]) for r in results] == [
        (first, True, "rejected"),
        (second, True, "rejected"),
    ]
    again = engine("reject", first, "--json", *at)  # one id: its own document and code
    assert again.returncode == 1 and "not open" in again.stderr
    mixed = engine("reject", second, proposed(serve), "--json", *at)
    assert mixed.returncode == 1
    assert [(r["ok"], r.get("error")) for r in json.loads(mixed.stdout)["results"]] == [
        (False, "conflict"),
        (True, None),
    ]


def test_journal_follow_prints_new_records_until_interrupted(serve: Serve) -> None:
    """`engine journal --follow` prints the records written after it started, as they
    are written, and Ctrl-C (SIGINT) ends it with exit 0 and no traceback."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    command = [sys.executable, "-m", "engine", "journal", "--follow", "--interval", "0.1"]
    lines: queue.Queue[str] = queue.Queue()
    with subprocess.Popen(
        [*command, "--entity", "proposal", *serve.argv()],
        cwd=ROOT,
        env=base,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a test worker ignores SIGINT, and a child inherits that.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as follower:
        reader = threading.Thread(target=lambda: [lines.put(x) for x in follower.stdout or ()])
        reader.start()
        try:
            for service in ("first", "second"):  # the second once the first was printed
                proposal, seen = proposed(serve, service), ""
                while f" proposal {proposal} " not in seen:
                    seen = lines.get(timeout=30)
        finally:
            follower.send_signal(signal.SIGINT)
            try:
                code = follower.wait(30)
            except subprocess.TimeoutExpired:
                follower.kill()  # never a hung test: the assertion below fails instead
                code = follower.wait()
            reader.join(30)
        errors = follower.stderr.read() if follower.stderr else ""
    assert re.fullmatch(rf"\d+ \S+Z proposal {proposal} opened system -> open: .*\n", seen)
    assert code == 0 and "Traceback" not in errors
