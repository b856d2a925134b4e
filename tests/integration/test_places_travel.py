"""Places that travel (docs/rules.md#places), through a real `engine serve` and real
`engine` subprocesses: the rules are a copy of tests/data/places in a directory of
another name, given by absolute path, and every process runs in a working directory of
its own. Each rule place — the schedule's origin, a decision's rule, the journal's
`rule` fields, `engine explain`, a review's rule and its lines, the loop and proposal
pages, a webhook answer, `engine check`'s diagnostics — is `loops/team/places.rules:N`,
the file under the rules directory. And `engine explain` finds an event whose id the
GitHub table templated from the delivery's GUID (`gh-{delivery.id}`), by that id and by
the GUID."""

from __future__ import annotations

import hashlib
import hmac
import html
import http.cookiejar
import json
import re
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Serve, launch_serve

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "tests" / "data" / "places"
ISSUES = ROOT / "tests" / "data" / "github-payloads" / "issues.opened.payload.json"
FILE = "loops/team/places.rules"
ROUTE, LOOP = f"{FILE}:4:1", f"{FILE}:6:6"  # the route's line, the loop's name
SECRET, TOKEN = "hook-secret", "tok"
GUID = "6d1f3a8e-2b4c-4e0a-9f7d-0c5e8b2a1f3d"


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree copied to a directory of another name: `team-rules/` holds the rules."""
    where = tmp_path_factory.mktemp("elsewhere") / "checkout"
    shutil.copytree(TREE / "registry", where / "registry")
    shutil.copytree(TREE / "loops", where / "team-rules")
    return where


def rule_options(rules: Path) -> list[str]:
    """The options that point a command at the copy, each by absolute path."""
    return [
        "--rules",
        str((rules / "team-rules").absolute()),
        "--registry",
        str((rules / "registry").absolute()),
        "--config",
        str(ROOT / "tests" / "data" / "no_config"),
    ]


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory, rules: Path) -> Iterator[Serve]:
    """One `engine serve` in a working directory of its own over the copy."""
    workdir = tmp_path_factory.mktemp("serve-here")
    env = {"ENGINE_OPERATOR_TOKEN": f"alice:{TOKEN}", "ENGINE_GITHUB_WEBHOOK_SECRET": SECRET}
    started = launch_serve(workdir, TREE, env, *rule_options(rules), "--no-worker")
    yield started
    started.stop()


def engine(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`engine ARGS` as a subprocess in `cwd`."""
    command = [sys.executable, "-m", "engine", *args]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "ENGINE_CHECK_CACHE": "0"}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def triggered(serve: Serve) -> str:
    """Run `nightly` now and wait until its tick is decided: the tick's event id."""
    status, answer = serve.request("POST", "/schedules/nightly/trigger", {}, token=TOKEN)
    assert status == 202, answer
    event_id = str(answer["eventId"])
    serve.wait_for(f"/events/{event_id}", lambda doc: doc["decision"] is not None, TOKEN)
    return event_id


def proposal_of(serve: Serve, event_id: str) -> str:
    """The id of the open proposal `event_id` was decided into."""
    status, found = serve.request("GET", "/proposals?state=open&limit=100", token=TOKEN)
    assert status == 200, found
    (proposal,) = [p for p in found["proposals"] if p["eventId"] == event_id]
    return str(proposal["proposalId"])


def delivered(serve: Serve) -> dict[str, Any]:
    """GitHub's `issues` example delivery, signed, as GUID: the answer."""
    body = ISSUES.read_bytes()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": GUID,
        "X-Hub-Signature-256": signature,
    }
    status, answer = serve.request("POST", "/github", raw=body, headers=headers)
    assert status in (200, 202), answer
    return dict(answer)


def signed_in(serve: Serve) -> urllib.request.OpenerDirector:
    """A client with alice's session, signed in through the form as a person would."""
    jar = http.cookiejar.CookieJar()
    client = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPCookieProcessor(jar)
    )
    with client.open(serve.url + "/ui/signin") as page:
        form = page.read().decode()
    found = re.search(r'name="csrf" value="([^"]+)"', form)
    assert found, form
    data = urllib.parse.urlencode({"csrf": found[1], "token": TOKEN, "next": "/"}).encode()
    with client.open(serve.url + "/ui/signin", data=data) as answer:
        assert "Sign out" in answer.read().decode()
    return client


def page(client: urllib.request.OpenerDirector, serve: Serve, path: str) -> str:
    with client.open(serve.url + path) as answer:
        return html.unescape(answer.read().decode())


def test_the_schedule_and_a_decision_name_the_file_under_the_rules_directory(
    serve: Serve,
) -> None:
    """The loop's origin and its tick's decision are `loops/team/places.rules:N`, though
    serve read the rules from `team-rules/` by absolute path, from another directory."""
    status, found = serve.request("GET", "/schedules", token=TOKEN)
    assert status == 200
    (nightly,) = [s for s in found["schedules"] if s["name"] == "nightly"]
    assert nightly["origin"] == f"{FILE}:6"
    event_id = triggered(serve)
    status, doc = serve.request("GET", f"/events/{urllib.parse.quote(event_id)}", token=TOKEN)
    assert status == 200 and doc["decision"]["rule"] == LOOP


def test_the_journal_and_explain_name_the_same_place(serve: Serve, rules: Path) -> None:
    """The decision's journal entry carries `rule: loops/team/places.rules:6:6`;
    GET /explain and `engine explain` (run from yet another directory) say the same."""
    event_id = triggered(serve)
    quoted = urllib.parse.quote(event_id, safe="")
    status, journal = serve.request(
        "GET", f"/journal?entity=occurrence&entityId={quoted}", token=TOKEN
    )
    assert status == 200
    rules_seen = {e["data"]["rule"] for e in journal["entries"] if e["data"].get("rule")}
    assert rules_seen == {LOOP}
    status, explained = serve.request("GET", f"/explain/{quoted}", token=TOKEN)
    assert status == 200 and explained["decision"]["rule"] == LOOP
    elsewhere = rules / "another-directory"
    elsewhere.mkdir(exist_ok=True)
    done = engine(elsewhere, "explain", event_id, "--db", str(serve.db), *rule_options(rules))
    assert done.returncode == 0, done.stderr
    assert f"decided propose by {LOOP} " in done.stdout
    listed = engine(elsewhere, "journal", "--db", str(serve.db), *rule_options(rules))
    assert listed.returncode == 0, listed.stderr
    assert LOOP in listed.stdout and str(rules) not in listed.stdout


def test_a_review_reads_the_rule_lines_from_the_rules_directory(serve: Serve) -> None:
    """A proposal's review names the loop at its place and quotes its lines from the
    file under the rules directory."""
    event_id = triggered(serve)
    status, review = serve.request(
        "GET", f"/proposals/{proposal_of(serve, event_id)}/review", token=TOKEN
    )
    assert status == 200
    rule = review["rule"]
    assert (rule["at"], rule["file"], rule["problem"]) == (LOOP, FILE, None)
    assert [line["text"] for line in rule["lines"]][:2] == [
        "loop nightly",
        '  description "work every night"',
    ]


def test_the_pages_show_the_place(serve: Serve) -> None:
    """The loop's page says `Defined at loops/team/places.rules:6`, a proposal's page
    names the deciding rule at its place: no directory of this host on either."""
    event_id = triggered(serve)
    client = signed_in(serve)
    loop = page(client, serve, "/ui/loops/nightly")
    assert f"Defined at <code>{FILE}:6</code>" in loop
    shown = page(client, serve, f"/ui/proposals/{proposal_of(serve, event_id)}")
    assert LOOP in shown and "loop nightly" in shown
    assert str(serve.tree) not in loop + shown and "team-rules" not in loop + shown


def test_explain_finds_an_event_whose_id_was_templated_from_the_guid(
    serve: Serve, rules: Path
) -> None:
    """The `issues` table admits the delivery as `gh-<GUID>`: GET /explain and `engine
    explain` find it by that id, and by the GUID, with its route's place."""
    answer = delivered(serve)
    event_id = f"gh-{GUID}"
    assert answer["eventId"] == event_id
    serve.wait_for(f"/events/{event_id}", lambda doc: doc["decision"] is not None, TOKEN)
    for ident in (event_id, GUID):
        status, doc = serve.request("GET", f"/explain/{ident}", token=TOKEN)
        assert status == 200, doc
        assert doc["event"]["eventId"] == event_id
        assert doc["cause"] == {"kind": "delivery", "delivery": GUID}
        assert doc["decision"]["rule"] == ROUTE
    for ident in (event_id, GUID):
        done = engine(rules, "explain", ident, "--db", str(serve.db), *rule_options(rules))
        assert done.returncode == 0, done.stderr
        assert f"event {event_id} (places.work.requested, source github)" in done.stdout
        assert f"GitHub delivery {GUID}" in done.stdout


def test_a_webhook_refusal_names_the_rule_at_its_place(serve: Serve) -> None:
    """A delivery the table refuses is answered with the refusing line's place, not a
    path of this host."""
    body = json.dumps({"action": "opened"}).encode()  # no repository
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": "6d1f3a8e-0000-4e0a-9f7d-000000000001",
        "X-Hub-Signature-256": signature,
    }
    status, answer = serve.request("POST", "/github", raw=body, headers=headers)
    assert status == 422
    reason, where = answer["errors"]
    assert reason == "malformed_payload" and where.startswith(f"{FILE}:15:")


def test_check_names_the_place_whatever_the_directory(rules: Path, tmp_path: Path) -> None:
    """`engine check` on a broken copy given by absolute path, run from elsewhere,
    reports `loops/team/places.rules:LINE:COL`, in text and in --json."""
    broken = tmp_path / "broken"
    shutil.copytree(rules / "registry", broken / "registry")
    shutil.copytree(rules / "team-rules", broken / "team-rules")
    file = broken / "team-rules" / "team" / "places.rules"
    file.write_text(
        file.read_text().replace("emit places.work.requested {", "emit places.wrok.requested {")
    )
    done = engine(tmp_path, "check", *rule_options(broken))
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"{FILE}:9:8: error[E0203]: unknown event type 'places.wrok.requested'"
    )
    as_json = engine(tmp_path, "check", "--json", *rule_options(broken))
    (error,) = json.loads(as_json.stdout)["errors"]
    assert (error["file"], error["line"], error["code"]) == (FILE, 9, "E0203")
