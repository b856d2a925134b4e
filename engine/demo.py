"""`engine demo`: the loop of docs/walkthrough.md, end to end, on the fake adapter.

A throwaway directory holds a fresh database and a `config/repos.yaml` naming one
repository (`demo` -> example/demo, base main). The shipped rules and registry are
loaded unchanged; the runtime (`make_app`: HTTP API, runtime loop, embedded worker) is
served in this process on 127.0.0.1, with agent work answered by fake scripts. Then
the demo drives it over HTTP the way an operator and GitHub would, printing each step
and the ids it created. Nothing here is a test dependency."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiohttp
from aiohttp import web

from engine.adapters import FakeAdapter
from engine.api.app import make_app
from engine.api.settings import EVENT_SECRET_ENV, GITHUB_SECRET_ENV, OPERATOR_TOKEN_ENV, Settings
from engine.bootstrap import open_service
from engine.core.registry import FakeScript
from engine.errors import EngineError
from engine.loading import Paths, project_root
from engine.worker import adapters_for

T = TypeVar("T")

HOST = "127.0.0.1"
REPO, GITHUB, BASE = "demo", "example/demo", "main"
PR, BRANCH = 42, "engine-demo/ready-ticket"
HEAD_SHA = hashlib.sha1(b"engine demo: the head CI tested").hexdigest()
OPERATOR = "demo"
WAIT_SECONDS = 20.0
FINISHED = frozenset({"succeeded", "failed", "timed_out", "cancelled"})

REPOS_YAML = f"""\
# Written by `engine demo`: one repository, so the repo loops expand once.
repos:
  {REPO}:
    github: {GITHUB}
    base: {BASE}
"""

# What the fake agent answers, by definition (the shipped ones are all `adapter: agent`).
SCRIPTS = {
    "dispatch@1": FakeScript(
        outcome="PR_OPEN",
        result={"prNumber": PR, "branch": BRANCH, "summary": "claimed the ready ticket"},
    ),
    "merge-scan@1": FakeScript(
        outcome="MERGE",
        result={"prNumber": PR, "headSha": HEAD_SHA, "summary": "reviewed cold: mergeable"},
    ),
    "merge-apply@1": FakeScript(outcome="MERGED", result={"summary": "merged at the pinned head"}),
}


class DemoError(EngineError):
    """A step of the demo did not go as the walkthrough says."""

    status, exit_code, code = 500, 1, "demo_failed"


# ---- the world: a directory, the settings, a GitHub delivery ---------------------------


@dataclass(frozen=True)
class World:
    directory: Path
    token: str  # the demo operator's bearer token
    github_secret: str

    @property
    def db(self) -> Path:
        return self.directory / "engine.db"

    @property
    def paths(self) -> Paths:
        root = project_root()
        return Paths(root / "loops", root / "registry", self.directory / "config")


def make_world(directory: Path) -> World:
    (directory / "config").mkdir(parents=True, exist_ok=True)
    (directory / "config" / "repos.yaml").write_text(REPOS_YAML, encoding="utf-8")
    return World(directory, uuid.uuid4().hex, uuid.uuid4().hex)


def settings_for(world: World) -> Settings:
    """Secrets as serve reads them from its environment, and a quick embedded worker
    whose `agent` adapter is the fake one."""
    env = {
        OPERATOR_TOKEN_ENV: f"{OPERATOR}:{world.token}",
        EVENT_SECRET_ENV: uuid.uuid4().hex,
        GITHUB_SECRET_ENV: world.github_secret,
    }
    agent = FakeAdapter(scripts=SCRIPTS)
    adapters = adapters_for(str(world.db), world.paths, overrides={"agent": agent})
    return Settings.from_env(
        env, adapters=adapters, pump_seconds=0.2, poll_seconds=0.1, worker_id="demo-worker"
    )


def workflow_run(run_id: int, workflow: str) -> dict[str, Any]:
    """A `workflow_run` delivery as GitHub sends it when a pull-request workflow
    succeeds (the shape of octokit/webhooks' workflow_run.completed.with-pull-requests
    example, trimmed), for PR #42 at the head the fake dispatch pushed."""
    repo = {"id": 7522, "name": REPO, "full_name": GITHUB, "private": True}
    pull = {
        "url": f"https://api.github.com/repos/{GITHUB}/pulls/{PR}",
        "number": PR,
        "head": {"ref": BRANCH, "sha": HEAD_SHA, "repo": repo},
        "base": {"ref": BASE, "sha": hashlib.sha1(b"base").hexdigest(), "repo": repo},
    }
    run = {
        "id": run_id,
        "name": workflow,
        "head_branch": BRANCH,
        "head_sha": HEAD_SHA,
        "event": "pull_request",
        "status": "completed",
        "conclusion": "success",
        "pull_requests": [pull],
        "html_url": f"https://github.com/{GITHUB}/actions/runs/{run_id}",
    }
    return {
        "action": "completed",
        "workflow": {"name": workflow, "path": f".github/workflows/{workflow}.yml"},
        "workflow_run": run,
        "repository": repo,
        "sender": {"login": "github-actions[bot]", "type": "Bot"},
    }


def github_headers(secret: str, body: bytes, delivery: str) -> dict[str, str]:
    """GitHub's headers: the kind, the delivery GUID and HMAC-SHA256 over the raw body."""
    mac = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/engine-demo",
        "X-GitHub-Event": "workflow_run",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": f"sha256={mac}",
    }


class Report(Protocol):
    """Where the steps go (the CLI prints them as they come, or collects JSON)."""

    def step(self, title: str) -> None: ...

    def line(self, label: str, text: str, **ids: Any) -> None: ...


# ---- talking to the runtime ----------------------------------------------------------


class Client:
    """The runtime's HTTP API as the demo operator sees it."""

    def __init__(self, session: aiohttp.ClientSession, base: str, token: str) -> None:
        self.session, self.base = session, base
        self.auth = {"Authorization": f"Bearer {token}"}

    async def call(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        merged = {**self.auth, **(headers or {})}
        async with self.session.request(
            method, self.base + path, data=body, headers=merged
        ) as answer:
            return answer.status, await answer.json(content_type=None)

    async def get(self, path: str) -> Any:
        status, doc = await self.call("GET", path)
        if status == 404:
            return None
        if status != 200:
            raise DemoError(f"GET {path} answered {status}: {doc}")
        return doc

    async def post(self, path: str, doc: Any, headers: dict[str, str] | None = None) -> Any:
        json_headers = {"Content-Type": "application/json", **(headers or {})}
        status, answer = await self.call("POST", path, json.dumps(doc).encode(), json_headers)
        if status not in (200, 202):
            raise DemoError(f"POST {path} answered {status}: {answer}")
        return answer


async def until(what: str, probe: Callable[[], Awaitable[T | None]]) -> T:
    """Poll `probe` until it answers something, for at most WAIT_SECONDS."""
    deadline = asyncio.get_running_loop().time() + WAIT_SECONDS
    while True:
        found = await probe()
        if found is not None:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise DemoError(f"gave up after {WAIT_SECONDS:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)


async def proposal_of(client: Client, event_id: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        found = await client.get("/proposals?state=all&limit=500")
        return next((p for p in found["proposals"] if p["eventId"] == event_id), None)

    return await until(f"the proposal of {event_id}", probe)


async def event_of(client: Client, event_id: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        found = await client.get(f"/events/{event_id}")
        return found if found and found["decision"] else None

    return await until(f"event {event_id} to be admitted and planned", probe)


async def finished(client: Client, run_id: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        run: dict[str, Any] = (await client.get(f"/runs/{run_id}"))["run"]
        return run if run["state"] in FINISHED else None

    run = await until(f"run {run_id} to finish", probe)
    if run["state"] != "succeeded":
        raise DemoError(f"run {run_id} ended {run['state']}: {run['error']}")
    return run


async def chained(client: Client, run_id: str) -> list[dict[str, Any]]:
    found = await client.get(f"/journal?entity=run&entityId={run_id}&limit=100")
    return [e for e in found["entries"] if e["action"] == "chained"]


def compact(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "))


# ---- the walkthrough (docs/walkthrough.md explains each step) --------------------------


async def show_loops(client: Client, report: Report) -> None:
    report.step(f"config/repos.yaml names '{REPO}': its repo loops (loops/repos.rules)")
    found = {s["name"]: s for s in (await client.get("/schedules"))["schedules"]}
    for kind in ("work", "merge", "ship"):
        entry = found[f"{kind}-{REPO}"]
        state = "enabled " if entry["enabled"] else "disabled"
        due = f", next slot {entry['nextDue']}" if entry["enabled"] else ""
        every = entry["trigger"]["describe"]
        text = f"{state} {entry['approval']:<7} {every:<9} ({entry['origin']}{due})"
        report.line(entry["name"], text, loop=entry["name"])


async def inject_work(client: Client, report: Report) -> str:
    report.step(f"A ticket becomes ready: POST /inject factory.work.requested {{repo: {REPO}}}")
    event_id = f"ticket-ready:{REPO}:1"
    envelope = {
        "schemaVersion": "factory.event/v1",
        "eventId": event_id,
        "type": "factory.work.requested",
        "source": "inject",
        "subject": REPO,
        "occurredAt": "2026-01-01T00:00:00Z",
        "payload": {"repo": REPO},
    }
    answer = await client.post("/inject", envelope, {"X-Engine-Operator": OPERATOR})
    report.line("event", f"{event_id} admitted={answer['admitted']}", eventId=event_id)
    return event_id


async def show_proposal(client: Client, report: Report, event_id: str) -> str:
    proposal = await proposal_of(client, event_id)
    kind = "mutating" if proposal["mutating"] else "read-only"
    report.line(
        "proposal",
        f"{proposal['proposalId']} {proposal['definition']} ({kind}) {proposal['state']}",
        proposalId=proposal["proposalId"],
    )
    await show_decision(client, report, event_id)
    return str(proposal["proposalId"])


async def show_decision(client: Client, report: Report, event_id: str) -> dict[str, Any]:
    decision: dict[str, Any] = (await event_of(client, event_id))["decision"]
    by = f", approved by {decision['approvedBy']}" if decision["approvedBy"] else ""
    text = f"{decision['kind']}{by} ({decision['rule']}): {decision['note']}"
    report.line("decision", text)
    return decision


async def approve(client: Client, report: Report, proposal_id: str, note: str) -> str:
    answer = await client.post(f"/proposals/{proposal_id}/approve", {"note": note})
    proposal, run = answer["proposal"], answer["run"]
    report.line("proposal", f"{proposal_id} {proposal['state']} by {proposal['decidedBy']}")
    report.line("run", f"{run['runId']} {run['state']}", runId=run["runId"])
    return str(run["runId"])


async def show_run(client: Client, report: Report, run_id: str) -> dict[str, Any]:
    run = await finished(client, run_id)
    result = {k: v for k, v in (run["result"] or {}).items() if k not in ("outcome", "summary")}
    text = f"{run_id} {run['state']}, outcome {run['outcome']} {compact(result)}"
    report.line("run", text, runId=run_id)
    artifact = "/".join(Path(run["artifact"]).parts[-3:])  # in the demo directory
    report.line("approved", f"by {run['approvedBy']}; the fake's answer in {artifact}")
    return run


async def show_chained(client: Client, report: Report, run_id: str) -> list[str]:
    ids: list[str] = []
    for entry in await chained(client, run_id):
        event_id = str(entry["data"]["eventId"])
        event = (await event_of(client, event_id))["event"]
        proposal = await proposal_of(client, event_id)
        kind = "mutating" if proposal["mutating"] else "read-only"
        rule = entry["data"]["rule"]
        text = f"{event_id} {event['type']} {compact(event['payload'])} ({rule})"
        report.line("chained", text, eventId=event_id)
        report.line(
            "proposal",
            f"{proposal['proposalId']} {proposal['definition']} ({kind}) {proposal['state']}",
            proposalId=proposal["proposalId"],
        )
        ids.append(event_id)
    return ids


async def deliver(client: Client, secret: str, doc: dict[str, Any], delivery: str) -> Any:
    body = json.dumps(doc).encode()
    headers = github_headers(secret, body, delivery)
    status, answer = await client.call("POST", "/github", body, headers)
    if status not in (200, 202):
        raise DemoError(f"POST /github answered {status}: {answer}")
    return status, answer


async def ci_green(client: Client, report: Report, secret: str) -> str:
    report.step("CI turns green: a signed workflow_run success delivered to POST /github")
    first = str(uuid.uuid4())
    sends = [
        ("delivery", workflow_run(9001, "ci"), first),
        ("redelivery", workflow_run(9001, "ci"), first),
        ("2nd green", workflow_run(9002, "lint"), str(uuid.uuid4())),
    ]
    event_id = ""
    for label, doc, delivery in sends:
        status, answer = await deliver(client, secret, doc, delivery)
        verdict = "duplicate" if answer.get("duplicate") else f"admitted={answer.get('admitted')}"
        text = f"{delivery} -> {status} {verdict} {answer.get('eventId')}"
        report.line(label, text, delivery=delivery, eventId=answer.get("eventId"))
        event_id = event_id or str(answer.get("eventId"))
    if event_id != f"merge-pr:{REPO}:{PR}:{HEAD_SHA}":
        raise DemoError(f"the delivery was admitted as {event_id}, not the scoped merge request")
    return event_id


async def merge_exception(client: Client, report: Report) -> None:
    report.step(f"The merge-loop exception: run merge-{REPO} now instead of waiting for its slot")
    answer = await client.post(f"/schedules/merge-{REPO}/trigger", {})
    event_id = str(answer["eventId"])
    report.line("event", f"{event_id} admitted={answer['admitted']}", eventId=event_id)
    decision = await show_decision(client, report, event_id)
    runs = (await client.get("/runs?limit=500"))["runs"]
    run_id = next((r["runId"] for r in runs if r["eventId"] == event_id), None)
    if run_id is None:  # e.g. its 30-minute slot fired meanwhile and is still in flight
        report.line("no run", f"the decision was {decision['kind']}: {decision['reason']}")
        return
    await show_run(client, report, run_id)
    for entry in await chained(client, run_id):
        pinned = entry["data"]["eventId"]
        found = await client.get("/proposals?state=all&limit=500")
        same = [p["proposalId"] for p in found["proposals"] if p["eventId"] == pinned]
        report.line("chained", f"{pinned} again: still {len(same)} proposal ({', '.join(same)})")


async def walk(client: Client, report: Report, world: World) -> None:
    """The loop of docs/walkthrough.md, step by step."""
    await show_loops(client, report)
    work = await inject_work(client, report)
    report.step("The work-scan proposal appears in the inbox (a watched route)")
    proposal = await show_proposal(client, report, work)
    report.step(f"The operator '{OPERATOR}' approves it")
    run = await approve(client, report, proposal, "ticket is ready")
    report.step(f"The (fake) dispatch runs: claim, branch, PR #{PR}")
    await show_run(client, report, run)
    report.step("PR_OPEN chains work again and the merge request scoped to that PR")
    await show_chained(client, report, run)
    scoped = await ci_green(client, report, world.github_secret)
    report.step("The merge-scan proposal of the green head")
    proposal = await show_proposal(client, report, scoped)
    report.step(f"The operator approves the cold scan; merge-scan reviews PR #{PR} only")
    run = await approve(client, report, proposal, "CI is green")
    await show_run(client, report, run)
    report.step("MERGE chains a head-SHA-pinned merge-apply proposal: approving it is the merge")
    (apply,) = await show_chained(client, report, run)
    await show_decision(client, report, apply)
    await merge_exception(client, report)


@asynccontextmanager
async def serving(world: World, port: int) -> AsyncIterator[str]:
    """The runtime over `world`, served on HOST:`port` (0: any free port) in this
    process until the block ends: its URL."""
    service = open_service(str(world.db), world.paths)
    runner = web.AppRunner(make_app(service, settings_for(world)))
    await runner.setup()
    try:
        try:
            await web.TCPSite(runner, HOST, port).start()
        except OSError as err:
            raise DemoError(f"cannot serve on {HOST}:{port}: {err.strerror} (try --port)") from None
        bound = runner.addresses[0][1] if runner.addresses else port
        yield f"http://{HOST}:{bound}"
    finally:
        await runner.cleanup()


async def walk_over_http(url: str, world: World, report: Report) -> None:
    async with aiohttp.ClientSession() as session:
        await walk(Client(session, url, world.token), report, world)
