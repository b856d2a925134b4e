"""A proposal's review on a real SQLite file, worked off by the real worker: the argv
the review shows before approval is the argv the command then runs."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from engine.bootstrap import open_service
from engine.loading import Paths
from engine.worker import work_once

TREE = Path(__file__).resolve().parent.parent / "data" / "review"


def test_the_reviewed_argv_is_the_argv_that_runs(tmp_path: Path) -> None:
    """On SQLite: the review's argv, its pending builtins given the run's values, is
    what the approved run executed (its command.json); the next proposal of the loop
    then lists that run, succeeded with its outcome and its approver."""
    paths = Paths(TREE / "loops", TREE / "registry", TREE / "no-config")
    service = open_service(str(tmp_path / "engine.db"), paths)
    try:
        first = service.trigger("deploy-web", "operator:alice").eventId
        service.pump()
        [proposal] = service.proposals()
        review = service.review(proposal.proposal_id)
        assert review["event"]["eventId"] == first
        assert review["rule"]["lines"][1]["text"] == "loop deploy-web"
        _, run = service.approve(proposal.proposal_id, "operator:bob", "looks right")
        done = asyncio.run(work_once(service, "w1", 30.0))
        assert done is not None and (done.state, done.outcome) == ("succeeded", "OK")
        ran = json.loads((service.rt.artifacts / run.run_id / "command.json").read_text())
        known = {"<python>": sys.executable, "<run_id>": run.run_id}
        assert review["definition"]["pending"] == ["python", "run_id"]
        assert [known.get(a, a) for a in review["definition"]["argv"]] == ran["argv"]
        service.trigger("deploy-web", "operator:alice")
        service.pump()
        [following] = service.proposals()
        runs = service.review(following.proposal_id)["lastRuns"]
        assert [(r["runId"], r["state"], r["outcome"], r["approvedBy"]) for r in runs] == [
            (run.run_id, "succeeded", "OK", "operator:bob")
        ]
    finally:
        service.rt.store.close()
