"""`Service.review`: everything a person needs to decide a proposal, read from a
service on the in-memory store over a copy of tests/data/review (so a test may change
the rule file, as someone editing the rules would)."""

from __future__ import annotations

import dataclasses
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.core.envelope import Envelope
from engine.core.validation import Validators
from engine.errors import BadRequest, NotFound
from engine.loading import Paths, load_rules
from engine.service import Execution, Service, review
from engine.service.context import Runtime
from engine.store.memory import MemoryStore

TREE = Path(__file__).resolve().parent.parent / "data" / "review"
START = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


class Ticking:
    """A clock that moves one millisecond each time it is read."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


class Bench:
    """The review tree copied into a directory, and services on one memory store over
    the rules as they are loaded (again after an edit)."""

    def __init__(self, root: Path) -> None:
        shutil.copytree(TREE, root, dirs_exist_ok=True)
        self.paths = Paths(root / "loops", root / "registry", root / "no-config")
        self.rules_file = root / "loops" / "review.rules"
        self.store = MemoryStore()
        self.clock = Ticking()
        self.service = self.load()

    def load(self) -> Service:
        rules = load_rules(self.paths)
        self.service = Service(
            Runtime(
                self.store,
                rules,
                Validators.build(rules),
                self.clock,
                Path("unused"),
                roots=self.paths.roots(),
            )
        )
        return self.service

    def edit(self, old: str, new: str) -> None:
        text = self.rules_file.read_text(encoding="utf-8")
        assert old in text
        self.rules_file.write_text(text.replace(old, new), encoding="utf-8")

    def propose(self, loop: str) -> str:
        """Trigger the loop and plan the tick: the open proposal's id."""
        admitted = self.service.trigger(loop, "operator:alice")
        self.service.pump()
        return self.proposal_of(admitted.eventId)

    def proposal_of(self, event_id: str) -> str:
        [found] = [p for p in self.service.proposals() if p.event_id == event_id]
        return found.proposal_id

    def inject(self, payload: dict[str, Any]) -> str:
        """Admit a deploy through its route (no loop) and plan it: the proposal's id."""
        envelope = Envelope(
            eventId=f"inject-{len(self.service.events(1000))}",
            type="review.deploy.requested",
            source="test",
            occurredAt=START,
            payload=payload,
        )
        admitted = self.service.admit(envelope, "operator:alice")
        self.service.pump()
        return self.proposal_of(admitted.eventId)

    def approve_and_finish(self, proposal_id: str, outcome: str | None) -> str:
        """Approve, then work the run off in-process: answered with `outcome`, or
        cancelled while queued (None). The run's id."""
        _, run = self.service.approve(proposal_id, "operator:bob", "go")
        if outcome is None:
            self.service.cancel(run.run_id, "operator:bob", "not now")
            return run.run_id
        claimed = self.service.claim("w1", 60)
        assert claimed is not None and claimed.run_id == run.run_id
        assert self.service.start(claimed, "w1")
        self.service.finish(claimed, "w1", Execution(result={"outcome": outcome}))
        return run.run_id


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    return Bench(tmp_path / "tree")


def test_the_argv_is_filled_from_the_payload_as_the_worker_fills_it(bench: Bench) -> None:
    """The definition shows the exact argv its run executes: params from the event's
    payload, {event_id} known, and the builtins only the run knows shown as `<name>`
    and listed as pending."""
    proposal_id = bench.propose("deploy-web")
    review = bench.service.review(proposal_id)
    event_id = review["event"]["eventId"]
    assert review["definition"]["argv"][3:] == ["--service=web", "abc1234", event_id, "<run_id>"]
    assert review["definition"]["argv"][0] == "<python>"
    assert review["definition"]["pending"] == ["python", "run_id"]
    assert review["definition"]["argvProblem"] is None
    assert {k: review["definition"][k] for k in ("ref", "adapter", "mutating", "timeout")} == {
        "ref": "deploy@1",
        "adapter": "command",
        "mutating": True,
        "timeout": "30s",
    }
    assert review["definition"]["env"] == ["DEPLOY_TOKEN"]


def test_a_payload_that_does_not_fit_a_param_shows_why_the_run_would_be_refused(
    bench: Bench,
) -> None:
    """A payload value outside its param's type gives no argv but the refusal the
    worker would record, so the person sees before approving that nothing would run."""
    proposal_id = bench.inject({"service": "web", "ref": "--force"})
    definition = bench.service.review(proposal_id)["definition"]
    assert definition["argv"] is None
    assert definition["argvProblem"] == (
        "param 'ref' (payload.ref) = '--force' is not a valid sha; a value may never start with '-'"
    )


def test_the_rule_shows_every_line_of_a_multi_line_loop(bench: Bench) -> None:
    """The deciding rule is the loop, named file:line:col, with its comment and every
    line of its block (the emit's object across lines), and not the next loop's."""
    rule = bench.service.review(bench.propose("deploy-web"))["rule"]
    assert rule["at"] == "loops/review.rules:8:6"
    assert (rule["file"], rule["line"], rule["stale"], rule["problem"]) == (
        "loops/review.rules",
        8,
        False,
        None,
    )
    assert [line["number"] for line in rule["lines"]] == list(range(7, 17))
    assert rule["lines"][0]["text"].startswith("# Deploy the web service")
    assert rule["lines"][-1]["text"] == "  shadow false"


def test_a_route_decision_shows_its_one_line(bench: Bench) -> None:
    """An event no loop emitted is decided by its route: that one line is shown."""
    rule = bench.service.review(bench.inject({"service": "web", "ref": "abc1234"}))["rule"]
    assert rule["lines"] == [{"number": 4, "text": "route review.deploy.requested to deploy@1"}]


def test_a_rule_file_changed_since_the_decision_is_marked_stale(bench: Bench) -> None:
    """After the rules changed (another digest), the rule is marked stale and its lines
    are the file's as it is now."""
    proposal_id = bench.propose("deploy-web")
    bench.edit('    service: "web",', '    service: "www",')
    bench.load()
    rule = bench.service.review(proposal_id)["rule"]
    assert rule["stale"] is True
    assert {"number": 11, "text": '    service: "www",'} in rule["lines"]


def test_the_rule_of_a_decision_made_before_the_rules_moved_is_read_where_they_are(
    bench: Bench, tmp_path: Path
) -> None:
    """The decision's place names the file under the rules directory
    (docs/rules.md#places): after the tree moved elsewhere, the same place shows the
    same lines from the new directory, not stale (the digest names files the same)."""
    proposal_id = bench.propose("deploy-web")
    moved = tmp_path / "elsewhere" / "rules-moved"
    shutil.move(bench.paths.rules.parent, moved)
    bench.paths = Paths(moved / "loops", moved / "registry", moved / "no-config")
    bench.load()
    rule = bench.service.review(proposal_id)["rule"]
    assert (rule["at"], rule["stale"], rule["problem"]) == ("loops/review.rules:8:6", False, None)
    assert rule["lines"][-1]["text"] == "  shadow false"


def test_an_absolute_place_an_older_engine_recorded_still_shows_its_lines(bench: Bench) -> None:
    """A decision an older engine recorded with the file's absolute path shows that
    place as it was recorded, and its lines read from there."""
    proposal_id = bench.propose("deploy-web")
    with bench.service.rt.store.read() as tx:
        proposal = tx.get_proposal(proposal_id)
        assert proposal is not None
        decision = tx.get_decision(proposal.event_id)
    assert decision is not None
    old = dataclasses.replace(decision, rule=f"{bench.rules_file.resolve()}:8:6")
    rule = review.rule(bench.service.rt, old)
    assert rule is not None and rule["at"] == f"{bench.rules_file.resolve()}:8:6"
    assert [line["number"] for line in rule["lines"]] == list(range(7, 17))


def test_a_rule_file_gone_since_the_decision_says_so(bench: Bench) -> None:
    """A rule file that cannot be read any more gives no lines and says why."""
    proposal_id = bench.propose("deploy-web")
    bench.rules_file.unlink()
    rule = bench.service.review(proposal_id)["rule"]
    assert rule["lines"] == []
    assert "cannot read review.rules" in rule["problem"]


def test_last_runs_are_the_loops_newest_first(bench: Bench) -> None:
    """The loop's last runs, newest first, with state, outcome and approver; another
    loop's runs are not among them and `last_runs` bounds how many."""
    first = bench.approve_and_finish(bench.propose("deploy-web"), "OK")
    bench.approve_and_finish(bench.propose("deploy-api"), "OK")
    second = bench.approve_and_finish(bench.propose("deploy-web"), "FAILED")
    third = bench.approve_and_finish(bench.propose("deploy-web"), None)
    proposal_id = bench.propose("deploy-web")
    runs = bench.service.review(proposal_id)["lastRuns"]
    assert [(r["runId"], r["state"], r["outcome"]) for r in runs] == [
        (third, "cancelled", None),
        (second, "failed", "FAILED"),
        (first, "succeeded", "OK"),
    ]
    assert {r["approvedBy"] for r in runs} == {"operator:bob"}
    assert runs[1]["finishedAt"] is not None
    assert [r["runId"] for r in bench.service.review(proposal_id, 1)["lastRuns"]] == [third]


def test_a_loop_without_shadow_history_has_no_shadow_evidence(bench: Bench) -> None:
    """A loop that never ran in shadow shows no shadow report."""
    assert bench.service.review(bench.propose("deploy-web"))["shadow"] is None


def test_a_loop_graduated_from_shadow_shows_what_shadow_would_have_dispatched(
    bench: Bench,
) -> None:
    """A loop that ran in shadow before `shadow false` shows its shadow report: the
    windows shadow mode recorded, with what it would have dispatched."""
    bench.edit(
        "  enabled true\n  shadow false\n\nloop deploy-api", "  enabled true\n\nloop deploy-api"
    )
    bench.load()
    shadowed = bench.service.trigger("deploy-web", "operator:alice")
    bench.service.pump()
    bench.edit(
        "  enabled true\n\nloop deploy-api", "  enabled true\n  shadow false\n\nloop deploy-api"
    )
    bench.load()
    shadow = bench.service.review(bench.propose("deploy-web"))["shadow"]
    assert shadow is not None
    assert (shadow["loop"], shadow["shadow"], shadow["wouldDispatch"]) == ("deploy-web", False, 1)
    assert [w["occurrence"] for w in shadow["windows"] if w["wouldDispatch"]] == [shadowed.eventId]


def test_the_review_holds_the_proposal_its_event_and_its_causal_chain(bench: Bench) -> None:
    """The proposal record, the event with its full payload and the explanation `engine
    explain` gives of the event come with the review."""
    proposal_id = bench.propose("deploy-web")
    review = bench.service.review(proposal_id)
    assert review["proposal"]["proposalId"] == proposal_id
    assert (review["proposal"]["state"], review["proposal"]["mutating"]) == ("open", True)
    assert review["event"]["payload"]["service"] == "web"
    assert review["event"]["payload"]["ref"] == "abc1234"
    assert review["explain"] == bench.service.explain(review["event"]["eventId"])
    assert [p["proposalId"] for p in review["explain"]["proposals"]] == [proposal_id]


def test_an_unknown_proposal_is_not_found(bench: Bench) -> None:
    """A proposal id nobody knows is NotFound (404), and nothing is read further."""
    with pytest.raises(NotFound, match="no proposal 'prop-nope'"):
        bench.service.review("prop-nope")


def test_last_runs_out_of_bounds_is_a_bad_request(bench: Bench) -> None:
    """Asking for a negative or huge number of last runs is a BadRequest (400)."""
    proposal_id = bench.propose("deploy-web")
    for wrong in (-1, 101):
        with pytest.raises(BadRequest):
            bench.service.review(proposal_id, wrong)
