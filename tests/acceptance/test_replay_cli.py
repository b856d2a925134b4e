"""`engine replay` as a subprocess over a database recorded by the real service
(docs/examples/replay/record.py: slots fired, a sleep under `catch-up none`, a proposal
approved and one rejected, a run with an outcome), and over one a real `engine serve`
recorded from signed GitHub deliveries (POST /github, GitHub's own example payloads):
what a rules change would decide otherwise, and never a write to the recorded file."""

from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Serve, launch_serve

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "replay"
sys.path.insert(0, str(EXAMPLE))

from record import record  # noqa: E402


def engine(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "engine", *map(str, args)]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("recorded") / "recorded.db"
    record(db)
    return db


def rules_with(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the example's rules with `old` replaced by `new` once."""
    copy = tmp_path / "loops"
    shutil.copytree(EXAMPLE / "loops", copy)
    text = (copy / "loops.rules").read_text()
    assert old in text
    (copy / "loops.rules").write_text(text.replace(old, new, 1))
    return copy


def replay(db: Path, rules: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = engine("replay", "--db", db, "--rules", rules, "--registry", EXAMPLE / "registry",
                  "--json", *extra)  # fmt: skip
    assert done.stderr == "", done.stderr
    return done.returncode, json.loads(done.stdout)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_unchanged_rules_differ_nowhere(recorded: Path) -> None:
    """Under the rules it was recorded with, nothing differs: exit 0 with --fail-on-diff."""
    code, report = replay(recorded, EXAMPLE / "loops", "--fail-on-diff")
    assert code == 0
    assert report["replayed"] == 4 and report["notReplayable"] == []
    assert report["changes"] == [] and report["slots"] == []


def test_approval_auto_changes_exactly_that_loops_proposals(recorded: Path, tmp_path: Path) -> None:
    """`approval auto` on one loop: exactly that loop's proposals become auto runs."""
    rules = rules_with(
        tmp_path, "catch_up none\n  approval watched", "catch_up none\n  approval auto"
    )
    before = digest(recorded)
    code, report = replay(recorded, rules, "--fail-on-diff")
    assert code == 1
    changed = {(c["eventId"], c["old"]["kind"], c["new"]["kind"]) for c in report["changes"]}
    assert changed == {
        ("clock:hourly:2026-12-01T10:00:00Z", "propose", "run"),
        ("clock:hourly:2026-12-01T14:00:00Z", "propose", "run"),
    }
    assert report["slots"] == []
    assert digest(recorded) == before


def test_catch_up_all_fires_exactly_the_skipped_slots(recorded: Path, tmp_path: Path) -> None:
    """`catch-up all` on one loop: exactly the slots it skipped during the sleep would
    fire, each decided with the facts recorded in that pass; rules that only moved
    (lines inserted above them) are no difference."""
    rules = rules_with(tmp_path, "catch_up none", "catch_up all")
    text = (rules / "loops.rules").read_text()
    (rules / "loops.rules").write_text("# moved\n# down\n" + text)
    code, report = replay(recorded, rules)
    assert code == 0  # differences without --fail-on-diff
    assert report["changes"] == []
    slots = [(s["loop"], s["first"], s["old"], s["new"]) for s in report["slots"]]
    assert slots == [
        ("hourly", f"2026-12-01T{h}:00:00Z", "skipped catchup_none", "fired") for h in (11, 12, 13)
    ]
    assert all(s["decision"]["kind"] == "propose" for s in report["slots"])


def test_the_how_to_fixture_replays_cleanly_under_the_committed_rules() -> None:
    """The committed recorded database replays without a difference under the committed
    rules, with the command the how-to runs in CI."""
    fixture = EXAMPLE / "recorded.db"
    before = digest(fixture)
    done = engine(
        "replay", "--db", "docs/examples/replay/recorded.db",
        "--rules", "docs/examples/replay/loops", "--registry", "docs/examples/replay/registry",
        "--fail-on-diff",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 differ" in done.stdout
    assert digest(fixture) == before


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--db", "nowhere.db"], 2, "no database file at nowhere.db"),
        (
            ["--since", "2026-12-02T00:00:00Z", "--until", "2026-12-01T00:00:00Z"],
            2,
            "is not before",
        ),
        (["--since", "yesterday"], 2, "is not an ISO-8601 time"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    recorded: Path, args: list[str], code: int, says: str
) -> None:
    """A missing database or a bad window is one line on stderr and exit 2."""
    base = ["--db", recorded, "--rules", EXAMPLE / "loops", "--registry", EXAMPLE / "registry"]
    done = engine("replay", *base, *args)
    assert done.returncode == code
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_invalid_rules_exit_1_as_engine_check(recorded: Path, tmp_path: Path) -> None:
    """Invalid new rules are reported as `engine check` reports them (exit 1), never a
    traceback."""
    rules = rules_with(tmp_path, "every 60m", "every sixty")
    done = engine("replay", "--db", recorded, "--rules", rules, "--registry", EXAMPLE / "registry")
    assert done.returncode == 1
    assert "error[" in done.stderr and "Traceback" not in done.stderr


# ---- webhook deliveries recorded by a real `engine serve` ---------------------------------

FIXTURES = ROOT / "tests" / "data" / "github-payloads"  # GitHub's own examples, MIT
SECRET = "webhook-secret"
TOKEN = "tok"
DOCS = ROOT / "docs" / "replay.md"


def payload(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_bytes())
    return data


def green_run() -> dict[str, Any]:
    """The completed run with one PR as a successful pull-request workflow."""
    data = payload("workflow_run.completed.with-pull-requests.payload.json")
    run = data["workflow_run"]
    run["event"], run["head_sha"] = "pull_request", run["pull_requests"][0]["head"]["sha"]
    return data


# (X-GitHub-Event, body): GitHub's example deliveries as docs/replay.md's worked example
# sends them, each under the GUID 6f1c8a2e-000N-4c1e-9a1b-3d2f0000000N (N from 1).
DELIVERIES = [
    ("pull_request", payload("pull_request.opened.payload.json")),
    ("pull_request", payload("pull_request.synchronize.payload.json")),
    ("pull_request", payload("pull_request.ready_for_review.payload.json")),
    ("workflow_run", green_run()),
    ("ping", payload("ping.payload.json")),  # ignored: not kept
]
GUIDS = [f"6f1c8a2e-000{n}-4c1e-9a1b-3d2f0000000{n}" for n in range(1, len(DELIVERIES) + 1)]
# The worked example's rules changes: a new first line of the pull_request table, and
# an `emit` line that builds another payload.
FIRST = "  ignore unhandled_action unless action in"
NO_SYNC = '  ignore no_synchronize if action == "synchronize"\n' + FIRST
EMIT = "subject repo.name { repo: repo.name }"
OTHER_PAYLOAD = "subject repo.name { repo: repo.name, prNumbers: [number] }"


def config_of(folder: Path) -> None:
    """A repos.yaml naming the fixtures' repositories, as their payloads spell them."""
    pull = payload("pull_request.opened.payload.json")
    run = payload("workflow_run.completed.payload.json")["repository"]["full_name"]
    folder.mkdir()
    (folder / "repos.yaml").write_text(
        "repos:\n"
        f"  hello-world:\n    github: {pull['repository']['full_name']}\n"
        f"    base: {pull['pull_request']['base']['ref']}\n"
        f"  octo-repo:\n    github: {run}\n    base: master\n"
    )


def post(serve: Serve, kind: str, body: dict[str, Any], guid: str) -> dict[str, Any]:
    """POST /github as GitHub does (signed over the raw bytes): the answer."""
    data = json.dumps(body).encode()
    headers = {
        "X-GitHub-Event": kind,
        "X-GitHub-Delivery": guid,
        "X-Hub-Signature-256": "sha256="
        + hmac.new(SECRET.encode(), data, hashlib.sha256).hexdigest(),
    }
    status, answer = serve.request("POST", "/github", raw=data, headers=headers)
    assert status in (200, 202), answer
    return answer


def shipped_with(workdir: Path, name: str, old: str, new: str) -> Path:
    """A copy `name` of the shipped loops/ with `old` replaced by `new` once in
    github.rules."""
    copy = workdir / name
    shutil.copytree(ROOT / "loops", copy)
    text = (copy / "github.rules").read_text()
    assert old in text
    (copy / "github.rules").write_text(text.replace(old, new, 1))
    return copy


@pytest.fixture(scope="module")
def webhooks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory where `engine serve` (the shipped rules, given as `loops`,
    `registry` and `config` beside it) recorded `webhooks.db` from signed deliveries,
    each admitted one decided before the server stopped; with the example's changed
    rules `loops-new` and `loops-pr`."""
    workdir = tmp_path_factory.mktemp("webhooks")
    shutil.copytree(ROOT / "loops", workdir / "loops")
    shutil.copytree(ROOT / "registry", workdir / "registry")
    config_of(workdir / "config")
    env = {"ENGINE_GITHUB_WEBHOOK_SECRET": SECRET, "ENGINE_OPERATOR_TOKEN": f"alice:{TOKEN}"}
    paths = ("--rules", "loops", "--registry", "registry", "--config", "config")
    serve = launch_serve(workdir, ROOT, env, *paths, "--db", "webhooks.db", "--no-worker")
    try:
        answers = [post(serve, k, body, g) for (k, body), g in zip(DELIVERIES, GUIDS, strict=True)]
        for answer in answers[:-1]:
            assert answer["admitted"], answer
            path = f"/events/{answer['eventId']}"
            serve.wait_for(path, lambda a: a["decision"] is not None, TOKEN)
        assert answers[-1]["ignored"]
    finally:
        assert serve.stop() == 0
    shipped_with(workdir, "loops-new", FIRST, NO_SYNC)
    shipped_with(workdir, "loops-pr", EMIT, OTHER_PAYLOAD)
    return workdir


def replay_webhooks(workdir: Path, rules: str, *extra: str) -> tuple[int, dict[str, Any]]:
    done = engine("replay", "--db", "webhooks.db", "--rules", rules, "--registry", "registry",
                  "--config", "config", "--json", *extra, cwd=workdir)  # fmt: skip
    assert done.stderr == "", done.stderr
    return done.returncode, json.loads(done.stdout)


def test_unchanged_webhook_rules_differ_nowhere(webhooks: Path) -> None:
    """Deliveries recorded through POST /github translate again into the events they
    became, and each is decided the same: nothing differs, exit 0 with --fail-on-diff."""
    code, report = replay_webhooks(webhooks, "loops", "--fail-on-diff")
    assert (code, report["changes"], report["retranslated"]) == (0, [], 0)
    assert report["replayed"] == 4 and report["notReplayable"] == []


def test_a_new_ignore_line_lists_exactly_the_deliveries_it_matches(webhooks: Path) -> None:
    """A new `ignore` line for `synchronize` pull requests lists exactly the delivery it
    matches, as that event's decision now ignored (with the new line's file:line:col
    and the recorded `emit` line), and nothing else; --fail-on-diff exits 1 and the
    recorded file is not written."""
    before = digest(webhooks / "webhooks.db")
    code, report = replay_webhooks(webhooks, "loops-new", "--fail-on-diff")
    assert code == 1 and digest(webhooks / "webhooks.db") == before
    (change,) = report["changes"]
    assert change["eventId"] == GUIDS[1] and report["retranslated"] == 1  # synchronize
    assert (change["new"]["kind"], change["new"]["reason"]) == ("ignored", "no_synchronize")
    assert change["new"]["rule"] == "loops/github.rules:10:10"
    assert change["delivery"]["deliveryId"] == GUIDS[1]
    assert (change["delivery"]["kind"], change["delivery"]["admittedBy"]) == (
        "pull_request",
        "loops/github.rules:15:8",
    )
    assert report["differingByKind"] == {f"{change['old']['kind']} -> ignored": 1}


def test_another_payload_lists_each_event_it_changes(webhooks: Path) -> None:
    """An `emit` line that builds another payload lists exactly the events of the
    deliveries of its table (the pull requests, not the workflow run), each with what
    differs."""
    code, report = replay_webhooks(webhooks, "loops-pr")
    assert code == 0
    assert [c["eventId"] for c in report["changes"]] == GUIDS[:3]
    assert {tuple(c["delivery"]["differs"]) for c in report["changes"]} == {("payload",)}


def console_blocks(section: str) -> list[tuple[str, str]]:
    """The (command, output) of each console block in a section of docs/replay.md."""
    text = DOCS.read_text().split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    blocks = text.split("```console\n")[1:]
    out = []
    for block in blocks:
        command, _, output = block.split("```", 1)[0].partition("\n")
        out.append((command.removeprefix("$ engine "), output))
    return out


def test_the_docs_webhook_example_is_real_output(webhooks: Path) -> None:
    """docs/replay.md's worked example of webhook deliveries is what replay prints over
    the deliveries recorded here: regenerate the doc text when the output changes."""
    blocks = console_blocks("Webhook deliveries")
    assert len(blocks) == 3
    for command, output in blocks:
        done = engine(*command.split(), cwd=webhooks)
        assert done.stdout == output, command
